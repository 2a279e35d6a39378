//! # devlend-engine: how long does it take?
//!
//! The engine layer of devlend, above the fabric and the wire (see the README's architecture
//! section). The functional router (devlend-fabric) says where a TLP goes; this crate
//! moves the same TLPs along the same routes in a deterministic discrete-event simulation with
//! integer picoseconds (see `sim` for the mechanisms and `params` for every constant), and gives
//! an analytic estimate per route (`analytic`) as a cross-check and a quick answer. On a
//! machine a flow's route is found once, when the flow is issued, built into its timed paths
//! ([`plan_route`]) and carried to where its TLPs land (`machine`'s `core`: routed again only for
//! another 4 KiB page or after the fabric's routes changed).
//!
//! One access's way through this crate is two files, each in the order the access meets it with
//! a table of contents in its module docs: `machine/mod.rs` (a thread's CPU access or a device's
//! DMA issued as a flow with its route, each TLP landing or served along that route) and
//! `sim.rs` (the route planned into timed paths and loaded once, the TLPs simulated along them).
//! What is off that way (DLLPs, statistics, re-splitting roots, timers, streams, faults, set-up)
//! is in their sibling modules.
//!
//! Entry points:
//! - [`machine::Machine`], the one clock every run of devlend lives on: devices are actors
//!   (`add_device`), software runs as threads (`spawn`) whose CPU loads and stores and whose
//!   devices' DMA are TLPs on this simulation, timing-only streams and faults at a simulated time
//!   share it; the outer crates (host, devices, RDMA, VMs, Xen-IB, workloads) all run on it.
//! - On an idle fabric, without a machine: [`dma`] times a DMA stream of N bytes by one requester
//!   (a device's DMA engine or a CPU), [`latency`] the one-way (write) or round-trip (read) time
//!   of a single small access.
//!
//! ```
//! use devlend_wire::Access;
//!
//! let json = devlend_fabric::fixtures::two_hosts_pxh830("amd-epyc", 1 << 30, false, false);
//! let mut f = devlend_fabric::build_json(&json)?;
//! // NT adapter `na` (a function in host a) reads host a's RAM over its link to the root port
//! let na = f.requester("na")?;
//! let ram = f.resolve_expr("a.ram")?;
//! let mib = devlend_engine::dma(&mut f, na, ram, 1 << 20, Access::Read, true).expect("RAM is reachable");
//! let kib = devlend_engine::dma(&mut f, na, ram, 4 << 10, Access::Read, true).expect("RAM is reachable");
//! assert_eq!(mib.bytes, 1 << 20);
//! assert!(mib.time_ps > kib.time_ps && mib.bandwidth() > 0.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod analytic;
pub mod iotlb;
pub mod machine;
pub mod params;
pub mod path;
pub mod queue;
pub mod sim;

use devlend_fabric::error::DmaFault;
use devlend_fabric::route::{Failure, Requester};
use devlend_fabric::spec::LinkKind;
use devlend_fabric::Fabric;
use devlend_wire::Access;
use path::port_id;
use queue::Ps;
pub use sim::{plan, plan_route, Plan};
use sim::{FlowKind, FlowOpts, Sim, Stats};

/// The result of a timed transfer.
#[derive(Clone, Debug)]
pub struct Transfer {
    pub bytes: u64,
    pub time_ps: Ps,
    pub stats: Stats,
}

impl Transfer {
    /// Bytes per second.
    pub fn bandwidth(&self) -> f64 {
        self.bytes as f64 / (self.time_ps as f64 * 1e-12)
    }
}

/// Per link direction (indexed by `path::port_id`): (fixed-point ps per byte, propagation), the
/// table `analytic` reads.
pub fn port_table(f: &Fabric) -> Vec<(u64, Ps)> {
    ports(f)
}

pub(crate) fn ports(f: &Fabric) -> Vec<(u64, Ps)> {
    let t = &f.tuning();
    let mut v = vec![(0, 0); f.links().len() * 2];
    for (i, l) in f.links().iter().enumerate() {
        let prop = path::link_propagation(&t.timing, l.kind, t.link(i as u32).cable_length_m);
        let fp = if l.kind == LinkKind::Pcix {
            path::pcix_ps_per_byte_fp(t.timing.as_ref())
        } else {
            path::link_ps_per_byte_fp(&t.timing, l.gen, l.width, t.link(i as u32).max_payload)
        };
        for down in [true, false] {
            v[port_id(i as u32, down) as usize] = (fp, prop);
        }
    }
    v
}

/// A simulation of `f`'s links with the fabric's own parameters (`Fabric::tuning`).
pub(crate) fn sim_for(f: &Fabric) -> Sim {
    let t = &f.tuning();
    let mut credits = vec![0; f.links().len() * 2];
    let mut periods = vec![0; f.links().len() * 2];
    for (i, l) in f.links().iter().enumerate() {
        let lt = t.link(i as u32);
        for down in [true, false] {
            credits[port_id(i as u32, down) as usize] = lt.rx_buffer_tlps;
            // A PCI-X bus has no data link layer: no DLLPs.
            periods[port_id(i as u32, down) as usize] =
                if l.kind == LinkKind::Pcix { 0 } else { path::dllp_period_ps(&t.timing, l.gen, l.width, lt.max_payload) };
        }
    }
    let mut sim = Sim::tuned(ports(f), credits, t.timing.clone());
    sim.set_dllp_periods(&periods);
    for (i, l) in f.links().iter().enumerate() {
        if l.kind == LinkKind::Pcix {
            sim.set_half_duplex(port_id(i as u32, true), t.timing.pcix_overhead_clocks * t.timing.pcix_clock_ps);
        }
    }
    sim
}

/// Time a DMA stream: `bytes` written to (or read from) `addr` by `req`, in max-payload writes or
/// max-read-request reads, on an idle fabric. With `warm`, the same stream runs once before the
/// timed one (caches such as the IOTLB are then warm, as in a benchmark's steady state).
///
/// Every part of the transfer must route (`Fabric::check_transfer`: per IOMMU page, NTB window or
/// segment, and target); the first that does not is the error, with the transfer's address there.
/// The stream is timed along the route of its first address.
pub fn dma(f: &mut Fabric, req: Requester, addr: u64, bytes: u64, access: Access, warm: bool) -> Result<Transfer, DmaFault> {
    dma_transfers(f, req, addr, bytes, access, warm, 0)
}

/// [`dma`] as back-to-back transfers of `transfer` bytes each (a device's DMA descriptors, as
/// pcie-bench's BW_DMA tests issue them): no TLP crosses a transfer's boundary. 0: one transfer.
pub fn dma_transfers(f: &mut Fabric, req: Requester, addr: u64, bytes: u64, access: Access, warm: bool, transfer: u64) -> Result<Transfer, DmaFault> {
    f.check_transfer(req, addr, bytes, access)?;
    let plan = plan(f, req, addr, access).map_err(|failure| DmaFault { addr, delivered: 0, failure })?;
    let interval = match req {
        Requester::Func(func) if transfer > 0 => {
            let d = devlend_fabric::tuning::of_func(f, func);
            if access == Access::Read {
                d.dma_read_interval_ps
            } else {
                d.dma_write_interval_ps
            }
        }
        _ => 0,
    };
    Ok(time_transfers(f, &plan, bytes, access, warm, FlowOpts { transfer, interval, ..FlowOpts::default() }))
}

/// Time a stream of `bytes` along a plan made earlier (see [`dma`]).
pub fn time_plan(f: &Fabric, plan: &Plan, bytes: u64, access: Access, warm: bool) -> Transfer {
    time_transfers(f, plan, bytes, access, warm, FlowOpts::default())
}

fn time_transfers(f: &Fabric, plan: &Plan, bytes: u64, access: Access, warm: bool, opts: FlowOpts) -> Transfer {
    if plan.request.stages.is_empty() {
        // No link to cross (a CPU touching its own RAM): only the root complex and the memory.
        let mem = if access == Access::Read { plan.request.target_latency } else { 0 };
        return Transfer { bytes, time_ps: plan.request.origin_latency + mem, stats: Stats::default() };
    }
    let mut sim = sim_for(f);
    let (p, c) = sim::load(&mut sim, plan);
    let kind = if access == Access::Read { FlowKind::Read } else { FlowKind::Write };
    if warm {
        sim.add_flow_with(kind, p, c, bytes, 0, opts);
        sim.run();
    }
    let start = if warm { sim.now() + 1_000_000 } else { 0 };
    let flow = sim.add_flow_with(kind, p, c, bytes, start, opts);
    sim.run();
    let time_ps = sim.flow_time(flow).expect("a delivered route completes");
    Transfer { bytes, time_ps, stats: sim.stats.clone() }
}

/// One small access on an otherwise idle fabric, caches warm: a 4-byte posted write's one-way
/// time, or a 4-byte read's round trip.
pub fn latency(f: &mut Fabric, req: Requester, addr: u64, access: Access) -> Result<Ps, Failure> {
    Ok(dma(f, req, addr, 4, access, true).map_err(|e| e.failure)?.time_ps)
}
