//! A stream made of back-to-back transfers (a device's DMA descriptors, pcie-bench's SZ): no TLP
//! crosses a transfer's end, so small transfers cost a TLP's framing each, whatever MPS and MRRS.

use devlend_engine::params::timing;
use devlend_engine::path::{ps_per_byte_fp, Limits, Path, Stage};
use devlend_engine::sim::{FlowKind, FlowOpts, Sim};
use std::sync::Arc;

fn path(port: u32) -> Path {
    let stage = Stage { port, latency: 0, cut_through: false, iommu: None, resplit: None, root: None };
    let limits = Limits { max_payload: 256, max_read_request: 512, read_tags: 32, completion_bytes: 256, root_tags: 0, iotlb_hit_ps: 0, ram_write: None };
    Path { stages: vec![stage], origin_latency: 0, target_latency: 0, target_is_ram: true, limits }
}

/// (time in ps, TLP-hops) of 64 KiB moved as transfers of `transfer` bytes.
fn run(read: bool, transfer: u64) -> (u64, u64) {
    run_paced(read, transfer, 0)
}

/// The same with the engine starting at most one transfer per `interval` ps.
fn run_paced(read: bool, transfer: u64, interval: u64) -> (u64, u64) {
    let fp = ps_per_byte_fp(3, 8);
    let mut sim = Sim::tuned(vec![(fp, 1000); 2], vec![256; 2], Arc::new(timing().clone()));
    let req = sim.add_path(path(0));
    let cpl = sim.add_path(path(1));
    let opts = FlowOpts { transfer, interval, ..FlowOpts::default() };
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

#[test]
fn an_engine_starts_at_most_one_transfer_per_interval() {
    // 1024 writes of 64 B: the link alone moves one in ~11 ns; an engine that starts one per
    // 21.1 ns (the NFP6000's, pcie-bench) sets the pace
    let (free, _) = run(false, 64);
    let (paced, tlps) = run_paced(false, 64, 21_100);
    assert_eq!(tlps, 1024);
    assert!(free < 1023 * 21_100, "the link alone is faster: {free} ps");
    assert!((1023 * 21_100..1023 * 21_100 + 1_000_000).contains(&paced), "{paced} ps");
    // reads alike, and an interval shorter than the link's time per transfer changes nothing
    assert!(run_paced(true, 64, 30_000).0 >= 1023 * 30_000);
    assert_eq!(run_paced(false, 2048, 1_000), run(false, 2048));
}

#[test]
fn a_read_is_taken_in_per_line_after_the_first() {
    use devlend_fabric::tuning::DeviceTuning;
    let t = DeviceTuning { dma_completion_ps: 50_000, dma_read_line_ps: 9_000, ..DeviceTuning::global(timing()) };
    assert_eq!(t.read_done_ps(0), 50_000);
    assert_eq!(t.read_done_ps(64), 50_000);
    assert_eq!(t.read_done_ps(65), 59_000);
    assert_eq!(t.read_done_ps(2048), 50_000 + 31 * 9_000);
    assert_eq!(DeviceTuning::global(timing()).read_done_ps(2048), timing().dma_completion_ps);
}
