//! CPU stores through an NTB BAR: the "memcpy" of 003 §3, Fig 8, as a mechanism.
//!
//! 003 measured memcpy into the BAR saturating near 150 MB/s. devlend does not type that number in:
//! a memcpy of N bytes is `ceil(N / store_bytes)` CPU stores; through an uncached (UC) mapping each
//! store leaves the core as one posted TLP of the store's width and the core issues the next UC
//! store only after the previous one was accepted (`uc_store_ps`), so the issue rate, not the
//! link, limits it. Through a write-combining (WC) mapping, stores fill line-sized WC buffers;
//! each flush is one posted TLP and up to `wc_buffers` flushes are in flight. Either way the rate
//! is also capped by the slowest link on the route for TLPs of that size (header, framing and DLLP
//! overhead from `[timing]`), and the last store still has to land (the engine's one-way time).
//! Parameters and sources: `params/hardware.toml [cpu_store]`.

use crate::params::params;
use devlend_engine::params::timing;
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_wire::{Access, Generation, TlpKind};

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

/// The breakdown of one timed PIO copy.
#[derive(Clone, Copy, Debug)]
pub struct PioTiming {
    pub tlps: u64,
    pub issue_ps_per_tlp: f64,
    pub link_ps_per_tlp: f64,
    pub land_ps: u64,
    pub total_ps: u64,
}

/// Time for CPU `host` to store `len` bytes at `addr` (the NTB BAR) with `mapping`.
pub fn pio_time(f: &mut Fabric, host: u16, addr: u64, len: u64, mapping: Mapping) -> Result<PioTiming, String> {
    let who = Requester::Cpu(host);
    let plan = devlend_engine::plan(f, who, addr, Access::Write).map_err(|e| f.failure_json(&e)["message"].to_string())?;
    let (unit, issue) = mapping.unit();
    let t = timing();
    let wire = t.overheads().wire_bytes(TlpKind::MemWrite, unit.min(len.max(1))) as f64;
    let slowest = plan
        .request
        .stages
        .iter()
        .map(|s| {
            let l = &f.links[(s.port / 2) as usize];
            Generation(l.gen).lane_bytes_per_s() * l.width as f64
        })
        .fold(f64::INFINITY, f64::min);
    let link = if slowest.is_finite() { wire / slowest * 1e12 } else { 0.0 };
    let tlps = len.div_ceil(unit).max(1);
    let land = devlend_engine::time_plan(f, &plan, unit.min(len.max(1)), Access::Write, true).time_ps;
    let per = issue.max(link);
    let total = params().cpu_store.call_ps + ((tlps - 1) as f64 * per) as u64 + land;
    Ok(PioTiming { tlps, issue_ps_per_tlp: issue, link_ps_per_tlp: link, land_ps: land, total_ps: total })
}
