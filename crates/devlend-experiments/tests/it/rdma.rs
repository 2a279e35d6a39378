//! The 003 figures' procedures on the testbed (pex8749-rdma.json is the shipped YAML with its
//! setup dropped): R1/R2's sweep, ntb_perf and ntb_pingpong.

use devlend_experiments::rdma::{self as bench, testbed, PerfSpec};
use devlend_fabric::FabricError;
use devlend_rdma::error::ToolError;
use devlend_rdma::node::link_down;
use devlend_rdma::RdmaError;

const J: &str = include_str!("../../../devlend-rdma/tests/pex8749-rdma.json");

#[test]
fn r1_r2_relations_hold_in_the_rust_model() {
    let sizes = [1024, 2048, 4096, 1 << 20];
    let rows = bench::sweep(J, &["memcpy", "block", "sg8", "sg256"], &sizes, None).unwrap();
    let mbps = |m: &str, s: u64| rows.iter().find(|r| r.0 == m && r.1 == s).map(|r| s as f64 / (r.2.total_ps as f64 * 1e-12) / 1e6).unwrap();
    assert!(mbps("memcpy", 1024) > mbps("block", 1024));
    assert!(mbps("block", 4096) > mbps("memcpy", 4096));
    assert!((130.0..=175.0).contains(&mbps("memcpy", 1 << 20)));
    // 003's "~500 MB/s" within 15%, the tolerance tests/test_rdma.py states (561.6 MB/s since the
    // NTB latency is fitted to the PXH830 paths, 201 ns: params/measurements.yaml)
    assert!((425.0..=575.0).contains(&mbps("block", 1 << 20)));
    assert!(mbps("sg256", 4096) < mbps("sg8", 4096));
}

/// ntb_perf's knobs from host B into host A: `chunk` and `total` as orders, DMA channels.
fn perf(chunk_order: u32, total_order: u32, use_dma: bool, threads_count: u32, channels: Option<u32>) -> Result<bench::perf::Perf, RdmaError> {
    let s = PerfSpec { use_dma, threads_count, chunk_order, total_order, max_mw_size: None, channels, outstanding_reads: None };
    bench::ntb_perf(J, "host-b", "host-a", &s)
}

#[test]
fn ntb_perf_cpu_and_dma_land_in_the_peer_and_report_mbps() {
    let cpu = perf(16, 22, false, 1, None).unwrap();
    let dma = perf(16, 22, true, 1, None).unwrap();
    for r in [&cpu, &dma] {
        assert_eq!(r.copied, 4 << 20);
        assert!(r.total_ps >= r.link_ps && r.mbytes_per_s() > 0.0);
    }
    // Four passes over the 1 MiB window, every chunk on the machine, take four times one pass
    // (to within the start and the end of the run).
    let one = perf(16, 20, true, 1, None).unwrap();
    let ratio = dma.total_ps as f64 / one.total_ps as f64;
    assert!((3.96..4.04).contains(&ratio), "four passes take {ratio:.3}x one");
    // Two threads on two channels: each copies `total`, together faster than one thread alone.
    let two = perf(16, 20, true, 2, Some(2)).unwrap();
    assert_eq!(two.copied, 2 << 20);
    assert!(two.mbytes_per_s() > 1.5 * one.mbytes_per_s());
}

#[test]
fn ntb_perf_bad_parameters_are_clear_errors() {
    // chunk over the 1 MiB window, chunk over Linux's 1 MiB limit, total under a chunk, 0 and 33
    // threads, two threads' parts smaller than a chunk.
    // Each names the value given and what is accepted.
    let orders = |chunk_order, total_order| ToolError::Orders { chunk_order, total_order, max_chunk: 20, max_total: 40 };
    let half = ToolError::Chunk { chunk: 1 << 20, part: 1 << 19, window: 1 << 20, threads: 2 };
    let bad = [
        ((20, 22, 2), half.clone()),
        ((21, 22, 1), orders(21, 22)),
        ((12, 10, 1), orders(12, 10)),
        ((12, 20, 0), ToolError::Threads { threads: 0, max: 32 }),
        ((12, 20, 33), ToolError::Threads { threads: 33, max: 32 }),
        ((20, 20, 2), half),
    ];
    for ((chunk, total, threads), want) in bad {
        let e = perf(chunk, total, false, threads, None).unwrap_err();
        assert_eq!(e, RdmaError::Tool(want), "{e}");
    }
    let e = perf(12, 20, true, 2, None).unwrap_err();
    assert!(matches!(e, RdmaError::Tool(ToolError::TooFewChannels { threads: 2, channels: 1, .. })) && e.to_string().contains("DMA channel"), "{e}");
    let e = bench::ntb_perf(
        J,
        "host-b",
        "host-c",
        &PerfSpec { use_dma: false, threads_count: 1, chunk_order: 12, total_order: 20, max_mw_size: None, channels: None, outstanding_reads: None },
    )
    .unwrap_err();
    assert!(matches!(&e, RdmaError::Fabric(FabricError::UnknownName(_))) && e.to_string().contains("host-c"), "{e}");
}

#[test]
fn ntb_pingpong_bounces_the_counter_and_shifts_the_doorbell() {
    let r = bench::ntb_pingpong(J, "host-a", "host-b", 40, 1, 0).unwrap();
    assert_eq!(r.counter, 40);
    assert_eq!(&r.bits[..3], &[1, 2, 4]);
    assert_eq!(r.bits[16], 1, "starts again after the 16 valid bits");
    assert!(r.round_trip_ps > 0 && r.total_ps == 20 * r.round_trip_ps, "on an idle machine every round trip is the first");
    let slow = bench::ntb_pingpong(J, "host-a", "host-b", 2, 1, 1_000_000).unwrap();
    assert_eq!(slow.round_trip_ps, r.round_trip_ps + 2_000_000);
    for (pings, init) in [(0, 1), (4, 0), (4, 1 << 16)] {
        let e = bench::ntb_pingpong(J, "host-a", "host-b", pings, init, 0).unwrap_err();
        let want = if pings == 0 { ToolError::NoPings } else { ToolError::InitDb { init_db: init, valid_bits: 16, valid: 0xffff } };
        assert_eq!(e, RdmaError::Tool(want), "{e}");
    }
}

#[test]
fn ntb_pingpong_over_a_link_that_is_down_fails_cleanly() {
    let (mut s, p) = testbed(J).unwrap();
    link_down(&mut s.fabric(), "nt-link").unwrap();
    let e = devlend_experiments::rdma::pingpong::run(&mut s, &p.a.node, &p.b.node, 4, 1, 0).unwrap_err();
    assert_eq!(e, RdmaError::LinkDown { ntb: "nt-virtual".into(), cabled: true, ping: None }, "refused before the first ping: {e}");
}
