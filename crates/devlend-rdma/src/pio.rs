//! CPU stores through an NTB BAR: the "memcpy" of 003 §3, Fig 8, as a mechanism.
//!
//! 003 measured memcpy into the BAR saturating near 150 MB/s. devlend does not type that number in:
//! a memcpy of N bytes is `ceil(N / store_bytes)` CPU stores; through an uncached (UC) mapping each
//! store leaves the core as one posted TLP of the store's width and the core issues the next UC
//! store only after the previous one was accepted (`uc_store_ps`), so the issue rate, not the
//! link, limits it. Through a write-combining (WC) mapping, stores fill line-sized WC buffers;
//! each flush is one posted TLP and up to `wc_buffers` flushes are in flight. The copy runs as
//! threads on the machine, one per store slot ([`spawn_copy`], [`copy_slot`]): each TLP travels the links (header, framing and credits as the engine charges them) with
//! everything else, so a link slower than the issue rate holds the stores back. Parameters and sources: `params/hardware.toml [cpu_store]`.

use crate::params::params;
use devlend_engine::machine::{Machine, Thread, ThreadError, World};
use devlend_engine::queue::Ps;
use std::rc::Rc;

/// How the BAR is mapped into the CPU's address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    Uncached,
    WriteCombining,
}

impl Mapping {
    pub fn from_params() -> Mapping {
        if params().cpu_store.mapping == "wc" {
            Mapping::WriteCombining
        } else {
            Mapping::Uncached
        }
    }
    /// Stores in flight at once: one for UC, a fill buffer each for WC.
    pub fn slots(self) -> u64 {
        self.lanes().1
    }
    /// (bytes per posted TLP, stores in flight at once, time each holds its slot in ps): a UC
    /// store holds the core; a WC line holds one of the fill buffers until its flush is accepted.
    fn lanes(self) -> (u64, u64, u64) {
        let c = &params().cpu_store;
        match self {
            Mapping::Uncached => (c.store_bytes, 1, c.uc_store_ps),
            Mapping::WriteCombining => (c.wc_line_bytes, c.wc_buffers, c.wc_flush_ps),
        }
    }
}

/// Store slot `lane`'s part of one copy of `data` to `addr`, after the call's entry: its lines
/// (dealt round-robin over the slots), each once the slot's last store has left the CPU and its
/// holding time has passed.
pub fn copy_slot<W: World>(t: &mut Thread<'_, W>, host: u16, addr: u64, data: &[u8], lane: u64, mapping: Mapping) -> Result<(), ThreadError> {
    let (unit, lanes, hold) = mapping.lanes();
    t.sleep(params().cpu_store.call_ps);
    for (i, piece) in data.chunks(unit as usize).enumerate().skip(lane as usize).step_by(lanes as usize) {
        let start = t.now();
        t.cpu_write(host, addr + i as u64 * unit, piece)?;
        t.sleep(hold.saturating_sub(t.now() - start));
    }
    Ok(())
}

/// One uncached store: the core issues the next only `uc_store_ps` after this one.
pub fn uc_store<W: World>(t: &mut Thread<'_, W>, host: u16, addr: u64, v: u32) -> Result<(), ThreadError> {
    let start: Ps = t.now();
    t.cpu_write(host, addr, &v.to_le_bytes())?;
    let spent = t.now() - start;
    t.sleep(params().cpu_store.uc_store_ps.saturating_sub(spent));
    Ok(())
}

/// Spawn CPU `host`'s copies of `data` to `addr` from time `at`, `times` chunks one after another
/// (chunk `j` at `addr + (j % wrap) * data.len()`: `wrap` chunks fill the target, then it starts
/// again), each after a call's entry. One thread per store slot (one for UC, a fill buffer each
/// for WC, lines dealt round-robin): a slot's next store goes out once its last has left the CPU
/// and its holding time has passed. Returns the threads.
#[allow(clippy::too_many_arguments)]
pub fn spawn_copy<W: World>(m: &mut Machine<W>, name: &str, host: u16, addr: u64, data: &[u8], times: u64, wrap: u64, mapping: Mapping, at: Ps) -> Vec<usize> {
    let wrap = wrap.max(1);
    let lanes = mapping.slots();
    let data: Rc<[u8]> = Rc::from(data);
    (0..lanes)
        .map(|lane| {
            let data = data.clone();
            m.spawn(&format!("{name}, store slot {lane}"), at, move |t| {
                for j in 0..times {
                    copy_slot(t, host, addr + (j % wrap) * data.len() as u64, &data, lane, mapping)?;
                }
                Ok(())
            })
        })
        .collect()
}
