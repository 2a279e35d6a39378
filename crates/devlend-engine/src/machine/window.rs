//! Link statistics over part of a run: the ports' statistics taken at a marked time (an event on
//! the queue, like a fault), so that what the links carried is counted from then on. A scenario
//! marks its first workload's start: set-up before it (borrows, probes of earlier runs) is not
//! counted, and dividing by the workloads' span, not the clock, keeps timers that fire after the
//! work (a driver's watchdog, an I/O timeout's stale deadline) out of the utilisation.

use super::core::Owner;
use super::fault::Pending;
use super::{LinkStat, Machine, World};
use crate::queue::Ps;
use crate::sim::PortStats;

/// The mark: its time, and the ports' statistics once taken.
#[derive(Default)]
pub(super) struct Mark {
    at: Option<Ps>,
    taken: Option<Vec<PortStats>>,
}

impl<W: World> Machine<W> {
    /// Count link statistics from time `at` (not before now) on: the earliest time asked for
    /// wins while it has not come yet; once taken, the mark stays.
    pub fn mark_stats_at(&mut self, at: Ps) {
        let at = at.max(self.now());
        if self.mark.taken.is_some() || self.mark.at.is_some_and(|m| m <= at) {
            return;
        }
        self.mark.at = Some(at);
        let i = self.push_pending(Pending::Mark(at));
        self.core.borrow_mut().set_timer(at, Owner::Machine(i), 0);
    }

    /// The time the statistics are counted from, once it has come.
    pub fn marked_at(&self) -> Option<Ps> {
        self.mark.taken.as_ref().and(self.mark.at)
    }

    pub(super) fn take_mark(&mut self, at: Ps) {
        if self.mark.at == Some(at) && self.mark.taken.is_none() {
            self.mark.taken = Some(self.port_stats());
        }
    }

    /// `link_stats` counted from the mark (from the start when there is none yet).
    pub fn link_stats_since_mark(&self) -> Vec<LinkStat> {
        let now = self.port_stats();
        let stats = match &self.mark.taken {
            Some(then) => now.iter().zip(then).map(|(n, t)| minus(n, t)).collect(),
            None => now,
        };
        self.link_rows(&stats)
    }
}

fn minus(n: &PortStats, t: &PortStats) -> PortStats {
    PortStats {
        tlps: n.tlps - t.tlps,
        wire_bytes: n.wire_bytes - t.wire_bytes,
        payload_bytes: n.payload_bytes - t.payload_bytes,
        busy_ps: n.busy_ps - t.busy_ps,
        queue_ps: n.queue_ps - t.queue_ps,
        credit_stall_ps: n.credit_stall_ps - t.credit_stall_ps,
        dllps: n.dllps - t.dllps,
    }
}
