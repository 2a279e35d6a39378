//! CPU stores through an NTB BAR: the "memcpy" of 003 §3, Fig 8, as a mechanism.
//!
//! 003 measured memcpy into the BAR saturating near 150 MB/s. devlend does not type that number in:
//! a memcpy of N bytes is `ceil(N / store_bytes)` CPU stores; through an uncached (UC) mapping each
//! store leaves the core as one posted TLP of the store's width and the core issues the next UC
//! store only after the previous one was accepted (`uc_store_ps`), so the issue rate, not the
//! link, limits it. Through a write-combining (WC) mapping, stores fill line-sized WC buffers;
//! each flush is one posted TLP and up to `wc_buffers` flushes are in flight (an issue time of
//! `wc_flush_ps / wc_buffers` per TLP). The copy is a thread on the machine ([`store`]): each TLP
//! travels the links (header, framing and credits as the engine charges them) with everything
//! else, so a link slower than the issue rate holds the stores back; [`put`] ends when the last
//! store has landed. Parameters and sources: `params/hardware.toml [cpu_store]`.

use crate::params::params;
use crate::driver;
use crate::error::RResult;
use devlend_engine::machine::{Thread, ThreadError};
use devlend_fabric::Fabric;

/// How the BAR is mapped into the CPU's address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    Uncached,
    WriteCombining,
}

impl Mapping {
    pub fn from_params() -> Mapping {
        if params().cpu_store.mapping == "wc" { Mapping::WriteCombining } else { Mapping::Uncached }
    }
    /// (bytes per posted TLP, time the core or its buffers need per TLP issued, in ps)
    fn unit(self) -> (u64, f64) {
        let c = &params().cpu_store;
        match self {
            Mapping::Uncached => (c.store_bytes, c.uc_store_ps as f64),
            Mapping::WriteCombining => (c.wc_line_bytes, c.wc_flush_ps as f64 / c.wc_buffers as f64),
        }
    }
}

/// CPU `host` copies `data` to `addr` (the NTB BAR) with `mapping`, on a machine of its own:
/// the time until the last store has landed, in ps.
pub fn put(f: &mut Fabric, host: u16, addr: u64, data: &[u8], mapping: Mapping) -> RResult<u64> {
    let data = data.to_vec();
    driver::on_machine(f, None, |m| {
        m.spawn("memcpy into the BAR", 0, move |t| store(t, host, addr, &data, mapping));
        m.run().map_err(driver::machine_error)?;
        Ok(m.now())
    })
}

/// CPU `host` copies `data` to `addr` as a thread: the call's entry, then one posted store per
/// TLP of the mapping's unit, the next issued no sooner than the core or its WC buffers allow.
pub fn store(t: &mut Thread<'_, Fabric>, host: u16, addr: u64, data: &[u8], mapping: Mapping) -> Result<(), ThreadError> {
    let (unit, issue) = mapping.unit();
    t.sleep(params().cpu_store.call_ps);
    let mut due = t.now() as f64;
    for (i, piece) in data.chunks(unit as usize).enumerate() {
        t.cpu_write(host, addr + i as u64 * unit, piece)?;
        due += issue;
        let now = t.now();
        if (now as f64) < due {
            t.sleep(due as u64 - now);
        }
    }
    Ok(())
}
