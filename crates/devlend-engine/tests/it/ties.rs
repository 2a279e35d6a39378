//! The tie rule of the engine's clock: at each picosecond a port decides what to transmit after
//! every other event of that picosecond (arrivals, issues), so its decision sees every TLP that
//! is ready then, whenever its wake-up was scheduled.

use devlend_engine::params::timing;
use devlend_engine::path::{ps_per_byte_fp, Limits, Path, Stage};
use devlend_engine::sim::{FlowKind, Sim};
use std::sync::Arc;

fn path(ports: &[u32], origin_latency: u64) -> Path {
    let stages = ports.iter().map(|&port| Stage { port, latency: 0, cut_through: false, iommu: None, resplit: None, root: None }).collect();
    let limits = Limits { max_payload: 256, max_read_request: 512, read_tags: 32, completion_bytes: 256, root_tags: 0, iotlb_hit_ps: 0, ram_write: None };
    Path { stages, origin_latency, target_latency: 0, target_is_ram: true, limits }
}

/// Two Gen3 x8 links: ports 0 and 1 are the directions of one, 2 and 3 of the other.
fn sim() -> Sim {
    Sim::tuned(vec![(ps_per_byte_fp(3, 8), 1000); 4], vec![32; 4], Arc::new(timing().clone()))
}

/// A 256-byte write crossing port 2 then port 0; with `read`, a read request becomes ready at
/// port 0 at the very picosecond the write arrives there (its wake-up scheduled first).
fn write_end(read: bool) -> u64 {
    let mut s = sim();
    let first = s.add_path(path(&[2], 0));
    let w = s.add_flow(FlowKind::Write, first, None, 256, 0);
    s.run();
    let at = s.flow_end(w).unwrap();
    let mut s = sim();
    let write = s.add_path(path(&[2, 0], 0));
    let request = s.add_path(path(&[0], at));
    let completion = s.add_path(path(&[1], 0));
    if read {
        s.add_flow(FlowKind::Read, request, Some(completion), 64, 0);
    }
    let w = s.add_flow(FlowKind::Write, write, None, 256, 0);
    s.run();
    s.flow_end(w).unwrap()
}

#[test]
fn a_decision_sees_a_tlp_that_arrives_at_its_picosecond() {
    // Both heads are ready at the same picosecond; the posted class goes first on a tie, so the
    // write is not delayed by the read request, although the port's wake-up for the request was
    // scheduled before the write's arrival.
    assert_eq!(write_end(true), write_end(false));
}
