//! The 003 figures' procedures on the testbed (pex8749-rdma.json is the shipped YAML with its
//! setup dropped): R1/R2's sweep, ntb_perf and ntb_pingpong.

use devlend_experiments::rdma::{self as bench, testbed};
use devlend_rdma::node::link_down;
use devlend_rdma::RdmaError;

const J: &str = include_str!("../../devlend-rdma/tests/pex8749-rdma.json");

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

#[test]
fn ntb_perf_cpu_and_dma_land_in_the_peer_and_report_mbps() {
    let kib = 1u64 << 10;
    let cpu = bench::ntb_perf(J, 64 * kib, 4 << 20, false, 1, None, None).unwrap();
    let dma = bench::ntb_perf(J, 64 * kib, 4 << 20, true, 1, None, None).unwrap();
    for r in [&cpu, &dma] {
        assert_eq!(r.copied, 4 << 20);
        assert!(r.total_ps >= r.link_ps && r.mbytes_per_s() > 0.0);
    }
    // Four passes over the 1 MiB window take four times one pass.
    let one = bench::ntb_perf(J, 64 * kib, 1 << 20, true, 1, None, None).unwrap();
    assert_eq!(dma.total_ps, 4 * one.total_ps);
    // Two threads on two channels: each copies `total`, together faster than one thread alone.
    let two = bench::ntb_perf(J, 64 * kib, 1 << 20, true, 2, Some(2), None).unwrap();
    assert_eq!(two.copied, 2 << 20);
    assert!(two.mbytes_per_s() > 1.5 * one.mbytes_per_s());
}


#[test]
fn ntb_perf_bad_parameters_are_clear_errors() {
    let bad = [(0, 1 << 20, false, 1), (2 << 20, 4 << 20, false, 1), (4096, 1024, false, 1), (4096, 1 << 20, false, 0), (4096, 1 << 20, false, 33), (1 << 20, 1 << 20, false, 2)];
    for (chunk, total, dma, threads) in bad {
        let e = bench::ntb_perf(J, chunk, total, dma, threads, None, None).unwrap_err();
        assert!(matches!(e, RdmaError::Invalid(_)), "{e}");
    }
    let e = bench::ntb_perf(J, 4096, 1 << 20, true, 2, None, None).unwrap_err();
    assert!(matches!(e, RdmaError::NoDmaEngine(_)) && e.to_string().contains("DMA channel"), "{e}");
}


#[test]
fn ntb_pingpong_bounces_the_counter_and_shifts_the_doorbell() {
    let r = bench::ntb_pingpong(J, 40, 1, 0).unwrap();
    assert_eq!(r.counter, 40);
    assert_eq!(&r.bits[..3], &[1, 2, 4]);
    assert_eq!(r.bits[16], 1, "starts again after the 16 valid bits");
    assert!(r.round_trip_ps > 0 && r.total_ps == 20 * r.round_trip_ps);
    let slow = bench::ntb_pingpong(J, 2, 1, 1_000_000).unwrap();
    assert_eq!(slow.round_trip_ps, r.round_trip_ps + 2_000_000);
    for (pings, init) in [(0, 1), (4, 0), (4, 1 << 16)] {
        assert!(matches!(bench::ntb_pingpong(J, pings, init, 0), Err(RdmaError::Invalid(_))));
    }
}


#[test]
fn ntb_pingpong_over_a_link_that_is_down_fails_cleanly() {
    let (mut f, p) = testbed(J).unwrap();
    link_down(&mut f, "nt-link").unwrap();
    let e = devlend_experiments::rdma::pingpong::run(&mut f, &p.a.node, &p.b.node, 4, 1, 0).unwrap_err();
    assert!(matches!(e, RdmaError::LinkDown(_)), "{e}");
}
