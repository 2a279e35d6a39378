//! A port's record lies where the paths first cross its link, not at its PortId (issue 33); the
//! simulated run, and the statistics by PortId, are the same whatever the links' numbers.

use devlend_engine::params::timing;
use devlend_engine::path::{ps_per_byte_fp, Limits, Path, PortId, Stage};
use devlend_engine::queue::Ps;
use devlend_engine::sim::{FlowKind, PortStats, Sim};
use std::sync::Arc;

const LINKS: usize = 4;

/// A path across `ports` of the description, as the simulation numbers them (`id`).
fn path(ports: &[PortId], id: impl Fn(PortId) -> PortId) -> Path {
    let stages = ports.iter().map(|&p| Stage { port: id(p), latency: 300, cut_through: p % 3 == 0, iommu: None, resplit: None, root: None }).collect();
    let limits = Limits { max_payload: 128, max_read_request: 512, read_tags: 4, completion_bytes: 64, root_tags: 0, iotlb_hit_ps: 0, ram_write: None };
    Path { stages, origin_latency: 500, target_latency: 2000, target_is_ram: true, limits }
}

/// Four links of different rates, buffers and DLLP periods, numbered by `link` (link `l` of the
/// description is link `link[l]` of the simulation), one of them a half-duplex bus: writes and
/// a read whose routes cross them in an order unlike their numbers. The flows' ends, and every
/// port's statistics in the description's numbering.
fn run(link: [usize; LINKS]) -> (Vec<Ps>, Vec<PortStats>) {
    let id = |p: PortId| (2 * link[p as usize / 2] + p as usize % 2) as PortId;
    let mut ports = vec![(0, 0); 2 * LINKS];
    let mut credits = vec![0; 2 * LINKS];
    let mut periods = vec![0; 2 * LINKS];
    for p in 0..2 * LINKS as PortId {
        let l = p as u64 / 2;
        ports[id(p) as usize] = (ps_per_byte_fp(1 + (l % 3) as u8, 4 << (l % 2)), 200 + 100 * p as Ps);
        credits[id(p) as usize] = 1 + p % 3;
        periods[id(p) as usize] = if l == 3 { 0 } else { 4_000 + 1_000 * p as Ps };
    }
    let mut sim = Sim::tuned(ports, credits, Arc::new(timing().clone()));
    sim.set_dllp_periods(&periods);
    let add = |sim: &mut Sim, ports: &[PortId]| sim.add_path(path(ports, id));
    let (w1, w2) = (add(&mut sim, &[4, 6, 3]), add(&mut sim, &[0, 3]));
    let (req, cpl) = (add(&mut sim, &[7, 1]), add(&mut sim, &[2, 6]));
    // A bus set once the paths have placed its link's records.
    sim.set_half_duplex(id(6), 20_000);
    let flows = [
        sim.add_flow(FlowKind::Write, w1, None, 5000, 0),
        sim.add_flow(FlowKind::Write, w2, None, 3000, 700),
        sim.add_flow(FlowKind::Read, req, Some(cpl), 2000, 300),
    ];
    sim.run();
    let ends = flows.iter().map(|&f| sim.flow_end(f).expect("every flow ends")).collect();
    let stats = sim.port_stats();
    (ends, (0..2 * LINKS as PortId).map(|p| stats[id(p) as usize]).collect())
}

#[test]
fn a_run_is_the_same_whatever_its_links_numbers() {
    let (ends, stats) = run([0, 1, 2, 3]);
    assert!(stats.iter().filter(|s| s.tlps > 0).count() >= 6 && stats.iter().any(|s| s.dllps > 0), "the run crosses most ports: {stats:?}");
    for link in [[3, 2, 1, 0], [2, 0, 3, 1], [1, 3, 0, 2]] {
        assert_eq!(run(link), (ends.clone(), stats.clone()), "links numbered {link:?}");
    }
}
