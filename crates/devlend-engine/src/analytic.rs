//! Closed-form estimates per route, the cross-check for the event-driven engine and a quick
//! answer for sweeps: saturated throughput (the slowest link after per-TLP overheads, or the
//! outstanding-request limit over the round trip for reads) and unloaded latency. The limits are
//! each path's own (`Path::limits`); the TLP framing overheads are the specification's, not settable.

use crate::params::timing;
use crate::path::Path;
use crate::Plan;
use devlend_wire::TlpKind;

/// Per-port (fixed-point ps per byte, propagation) as the engine uses them.
pub type PortTable = [(u64, u64)];

fn ser(ports: &PortTable, port: u32, bytes: u64) -> f64 {
    (bytes * ports[port as usize].0) as f64 / 65536.0
}

/// Unloaded time for one TLP of `wire` bytes along `stages[from..to]`, in ps (store-and-forward
/// except where a stage is cut-through, as the engine does).
pub fn path_latency(p: &Path, ports: &PortTable, wire: u64, from: usize, to: usize) -> f64 {
    let header = timing().overheads().header_bytes();
    let mut time = if from == 0 { p.origin_latency as f64 } else { 0.0 };
    for s in &p.stages[from..to] {
        let prop = ports[s.port as usize].1 as f64;
        let full = ser(ports, s.port, wire);
        time += if s.cut_through { ser(ports, s.port, header).min(full) } else { full } + prop + s.latency as f64;
        if s.iommu.is_some() {
            time += p.limits.iotlb_hit_ps as f64;
        }
    }
    time
}

fn bottleneck(p: &Path, ports: &PortTable, payload: u64, kind: TlpKind) -> f64 {
    let wire = timing().overheads().wire_bytes(kind, payload);
    p.stages.iter().map(|s| payload as f64 / ser(ports, s.port, wire)).fold(f64::INFINITY, f64::min) * 1e12
}

/// Saturated bandwidth (bytes/s) of a stream of writes along the plan's request path: its
/// slowest link, or the intake of the root complex taking writes to RAM in.
pub fn write_bandwidth(plan: &Plan, ports: &PortTable) -> f64 {
    let lim = plan.request.limits;
    let payload = lim.max_payload as u64;
    let link = bottleneck(&plan.request, ports, payload, TlpKind::MemWrite);
    match lim.ram_write {
        Some((_, line, per_tlp)) => link.min(payload as f64 / (per_tlp + payload.div_ceil(64) * line) as f64 * 1e12),
        None => link,
    }
}

/// The capacity of the plan's bottleneck link for its data (write payloads, or read completions),
/// after per-TLP overheads: what any number of streams sharing that path can move together.
pub fn link_bandwidth(plan: &Plan, ports: &PortTable, access: devlend_wire::Access) -> f64 {
    if access == devlend_wire::Access::Write {
        return write_bandwidth(plan, ports);
    }
    let cpl = plan.completion.as_ref().expect("a read plan has a completion path");
    bottleneck(cpl, ports, plan.request.limits.completion_bytes as u64, TlpKind::Completion)
}

/// Saturated bandwidth of a stream of reads: the smaller of the completion links' capacity and
/// each requester's tags x request size over its round trip (the requester, and a re-splitting root).
pub fn read_bandwidth(plan: &Plan, ports: &PortTable) -> f64 {
    let lim = plan.request.limits;
    let cpl = plan.completion.as_ref().expect("a read plan has a completion path");
    let chunk = lim.completion_bytes as u64;
    let link = bottleneck(cpl, ports, chunk, TlpKind::Completion);
    let o = timing().overheads();
    let (req_wire, cpl_wire) = (o.wire_bytes(TlpKind::MemRead, 0), o.wire_bytes(TlpKind::Completion, chunk));
    let rtt = |size: u64, from: usize| {
        // Request there, target latency, then the completions of `size` bytes back, the last one
        // leaving the bottleneck after all before it.
        let n = size.div_ceil(chunk);
        path_latency(&plan.request, ports, req_wire, from, plan.request.stages.len())
            + plan.request.target_latency as f64
            + path_latency(cpl, ports, cpl_wire, 0, cpl.stages.len())
            + (n - 1) as f64 * (chunk as f64 / link * 1e12)
    };
    let mrrs = lim.max_read_request as u64;
    let mut bw = link.min(lim.read_tags as f64 * mrrs as f64 / rtt(mrrs, 0) * 1e12);
    if let Some((k, s)) = plan.request.stages.iter().enumerate().find(|(_, s)| s.resplit.is_some()) {
        let split = s.resplit.unwrap() as u64;
        // The root's own round trip: from the root to the target and back to the root.
        let j = cpl.stages.iter().position(|c| c.root.is_some() && c.root == s.root).unwrap_or(cpl.stages.len() - 1);
        let n = split.div_ceil(chunk);
        let sub_rtt = path_latency(&plan.request, ports, req_wire, k + 1, plan.request.stages.len())
            + plan.request.target_latency as f64
            + path_latency(cpl, ports, cpl_wire, 0, j + 1)
            + (n - 1) as f64 * (chunk as f64 / link * 1e12);
        bw = bw.min(lim.root_tags as f64 * split as f64 / sub_rtt * 1e12);
    }
    bw
}
