//! A stream made of back-to-back transfers (a device's DMA descriptors, pcie-bench's SZ): no TLP
//! crosses a transfer's end, so small transfers cost a TLP's framing each, whatever MPS and MRRS.

use devlend_engine::params::timing;
use devlend_engine::path::{ps_per_byte_fp, Limits, Path, Stage};
use devlend_engine::sim::{FlowKind, FlowOpts, Sim};
use std::sync::Arc;

fn path(port: u32) -> Path {
    let stage = Stage { port, latency: 0, cut_through: false, iommu: None, resplit: None, root: None };
    let limits = Limits { max_payload: 256, max_read_request: 512, read_tags: 32, completion_bytes: 256, root_tags: 0, iotlb_hit_ps: 0 };
    Path { stages: vec![stage], origin_latency: 0, target_latency: 0, target_is_ram: true, limits }
}

/// (time in ps, TLP-hops) of 64 KiB moved as transfers of `transfer` bytes.
fn run(read: bool, transfer: u64) -> (u64, u64) {
    let fp = ps_per_byte_fp(3, 8);
    let mut sim = Sim::tuned(vec![(fp, 1000); 2], vec![256; 2], Arc::new(timing().clone()));
    let req = sim.add_path(path(0));
    let cpl = sim.add_path(path(1));
    let opts = FlowOpts { transfer, ..FlowOpts::default() };
    let (kind, c) = if read { (FlowKind::Read, Some(cpl)) } else { (FlowKind::Write, None) };
    let f = sim.add_flow_with(kind, req, c, 65536, 0, opts);
    sim.run();
    (sim.flow_time(f).unwrap(), sim.stats.tlp_hops)
}

#[test]
fn writes_are_cut_at_each_transfer() {
    let (whole, whole_tlps) = run(false, 0);
    let (small, small_tlps) = run(false, 64);
    assert_eq!(whole_tlps, 65536 / 256);
    assert_eq!(small_tlps, 65536 / 64);
    assert!(small > whole, "64-byte writes pay a header each: {small} ps vs {whole} ps");
    // a transfer of 320 bytes is a 256-byte TLP and a 64-byte one
    assert_eq!(run(false, 320).1, 2 * (65536 / 320) + 1);
}

#[test]
fn reads_request_at_most_a_transfer() {
    let (_, whole_tlps) = run(true, 0);
    let (_, small_tlps) = run(true, 128);
    // requests of 512 B completed in 256-byte pieces, against requests of 128 B completed whole
    assert_eq!(whole_tlps, 65536 / 512 + 65536 / 256);
    assert_eq!(small_tlps, 2 * (65536 / 128));
}
