//! A half-duplex bus (PCI-X) as a link kind of the engine: its two directions share one
//! serialiser, so transfers in opposite directions take the sum of their times, where a PCIe
//! link (full duplex) takes the longer of the two.

use devlend_engine::params::timing;
use devlend_engine::path::{Limits, Path, Stage};
use devlend_engine::sim::{FlowKind, Sim};
use std::sync::Arc;

const BYTES: u64 = 256 << 10;
/// 64-bit 133 MHz: 8 bytes per 7.5 ns clock, in the engine's fixed point (ps per byte << 16).
const FP: u64 = (7500 << 16) / 8;
const TXN_PS: u64 = 4 * 7500;

fn path(port: u32) -> Path {
    let stage = Stage { port, latency: 0, cut_through: false, iommu: None, resplit: None, root: None };
    let limits = Limits { max_payload: 128, max_read_request: 512, read_tags: 32, completion_bytes: 128, root_tags: 0, iotlb_hit_ps: 0, ram_write: None };
    Path { stages: vec![stage], origin_latency: 0, target_latency: 0, target_is_ram: true, limits }
}

/// Writes of `BYTES` on direction 0 and (when `both`) direction 1 at once: when each ends.
fn writes(half_duplex: bool, both: bool) -> (u64, Option<u64>) {
    let mut sim = Sim::tuned(vec![(FP, 1000); 2], vec![64; 2], Arc::new(timing().clone()));
    if half_duplex {
        sim.set_half_duplex(0, TXN_PS);
    }
    let (there, back) = (sim.add_path(path(0)), sim.add_path(path(1)));
    let a = sim.add_flow(FlowKind::Write, there, None, BYTES, 0);
    let b = both.then(|| sim.add_flow(FlowKind::Write, back, None, BYTES, 0));
    sim.run();
    (sim.flow_time(a).unwrap(), b.map(|b| sim.flow_time(b).unwrap()))
}

#[test]
fn opposite_flows_on_a_bus_take_the_sum_and_on_a_link_the_max() {
    let (alone, _) = writes(true, false);
    let (a, b) = writes(true, true);
    let both = a.max(b.unwrap());
    let sum = 2 * alone;
    assert!(both.abs_diff(sum) * 100 < sum, "half duplex: {both} ps against the sum {sum} ps");
    let (alone_fd, _) = writes(false, false);
    let (a, b) = writes(false, true);
    let both = a.max(b.unwrap());
    assert!(both.abs_diff(alone_fd) * 100 < alone_fd, "full duplex: {both} ps against one alone {alone_fd} ps");
}

#[test]
fn a_bus_transaction_costs_its_phases_and_its_payload() {
    let (alone, _) = writes(true, false);
    let per_txn = TXN_PS + 128 * 7500 / 8;
    let expected = BYTES / 128 * per_txn;
    assert!(alone.abs_diff(expected) < per_txn, "{alone} ps, {expected} ps expected");
}

/// A topology's link of kind `pcix` is timed as the bus: a long DMA write from the card runs at
/// the PCI-X rate (8 bytes per 7.5 ns clock, less the transactions' phases), not the Gen1 x8
/// slot's the card is enumerated behind.
#[test]
fn a_pcix_link_of_a_topology_runs_at_the_bus_rate() {
    let rate = |kind: &str| {
        let json = format!(
            r#"{{"name":"t","hosts":[{{"name":"h","cpu":"generic-x86","ram":1073741824,"iommu":false,"root_ports":1}}],"devices":[{{"name":"hca","profile":"mhxl-cf128-t"}}],"links":[{{"a":"h.rp0","b":"hca","gen":1,"width":8,"kind":"{kind}"}}],"setup":[{{"op":"bus_master","device":"hca","enable":true}}]}}"#
        );
        let mut f = devlend_fabric::build_json(&json).unwrap();
        let dev = f.requester("hca").unwrap();
        let mem = f.resolve_expr("h.ram").unwrap() + (1 << 20);
        devlend_engine::dma(&mut f, dev, mem, 1 << 20, devlend_wire::Access::Write, false).unwrap().bandwidth()
    };
    let (bus, slot) = (rate("pcix"), rate("slot"));
    let peak = 8.0 / 7.5e-9;
    assert!(bus < peak && bus > 0.7 * peak, "{bus} B/s on the bus, peak {peak}");
    assert!(slot > 1.5 * bus, "the Gen1 x8 slot {slot} B/s against the bus {bus} B/s");
}
