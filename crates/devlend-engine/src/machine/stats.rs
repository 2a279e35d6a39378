//! What the links carried, off the walk of one access: per link direction the simulation's port
//! statistics, named by the ports at its two ends ([`LinkStat`], [`Machine::link_stats`]), and
//! the run's totals. Counted from a marked time: `window`.

use super::{Machine, World};
use crate::sim::{PortStats, Stats};

/// One link direction's statistics, with the "component.port" names of its two ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkStat {
    pub link: u32,
    pub towards_down: bool,
    pub from: String,
    pub to: String,
    pub stats: PortStats,
}

impl LinkStat {
    /// Busy time over `elapsed_ps`.
    pub fn utilisation(&self, elapsed_ps: u64) -> f64 {
        if elapsed_ps == 0 {
            0.0
        } else {
            self.stats.busy_ps as f64 / elapsed_ps as f64
        }
    }

    /// Mean queueing delay per TLP, ps.
    pub fn mean_queue_ps(&self) -> f64 {
        self.stats.queue_ps as f64 / self.stats.tlps.max(1) as f64
    }
}

impl<W: World> Machine<W> {
    /// Per link direction (indexed by `path::port_id`): bytes, TLPs, busy and stalled time.
    pub fn port_stats(&self) -> Vec<PortStats> {
        self.core.borrow().sim.port_stats()
    }

    /// Every link direction that carried at least one TLP, named by the ports it leaves and enters.
    pub fn link_stats(&self) -> Vec<LinkStat> {
        self.link_rows(&self.port_stats())
    }

    /// `stats` (indexed by `path::port_id`) of every link direction that carried a TLP, named.
    pub(super) fn link_rows(&self, stats: &[PortStats]) -> Vec<LinkStat> {
        let mut w = self.world.borrow_mut();
        let f = w.fabric();
        let name = |n: u32| format!("{}.{}", f.node(n).component, f.node(n).port);
        let mut rows = Vec::new();
        for (i, l) in f.links().iter().enumerate() {
            for down in [true, false] {
                let s = stats[crate::path::port_id(i as u32, down) as usize];
                if s.tlps > 0 {
                    let (from, to) = if down { (l.up, l.down) } else { (l.down, l.up) };
                    rows.push(LinkStat { link: i as u32, towards_down: down, from: name(from), to: name(to), stats: s });
                }
            }
        }
        rows
    }

    pub fn stats(&self) -> Stats {
        self.core.borrow().sim.stats.clone()
    }
}
