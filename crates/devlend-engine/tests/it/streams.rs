//! The event-driven engine against the analytic model, on the PXH830 two-host testbed (000 Fig 9),
//! and the engine's own promises: determinism, and flat memory as transfers grow.

use devlend_engine::analytic::{read_bandwidth, write_bandwidth};
use devlend_engine::path::{port_id, propagation, ps_per_byte_fp};
use devlend_engine::{dma, latency, plan};
use devlend_fabric::route::Requester;
use devlend_fabric::spec::TopologySpec;
use devlend_fabric::Fabric;
use devlend_wire::Access;

const MIB: u64 = 1 << 20;

fn testbed(lender_iommu: bool) -> Fabric {
    let mut spec: TopologySpec = serde_json::from_str(include_str!("../pxh830.json")).unwrap();
    spec.hosts[1].iommu = lender_iommu;
    let mut f = devlend_fabric::build(&spec).unwrap();
    devlend_fabric::fixtures::lend_gpu0_dma(&mut f);
    if lender_iommu {
        let l = f.host_id("lender").unwrap();
        let d = f.iommu_domain_alloc(l, "lend").unwrap();
        f.iommu_attach(l, d, f.func_id("gpu0").unwrap()).unwrap();
        let (w, _) = f.peer_mw_get_addr(f.ntb_id("ntb-l").unwrap(), 1).unwrap();
        f.iommu_map(l, d, 0x1000_0000, w, 256 * MIB, true).unwrap();
    }
    f
}

fn target(f: &Fabric, lender_iommu: bool) -> u64 {
    if lender_iommu {
        0x1000_0000
    } else {
        f.peer_mw_get_addr(f.ntb_id("ntb-l").unwrap(), 1).unwrap().0
    }
}

fn port_table(f: &Fabric) -> Vec<(u64, u64)> {
    let mut v = vec![(0, 0); f.links().len() * 2];
    for (i, l) in f.links().iter().enumerate() {
        for d in [true, false] {
            v[port_id(i as u32, d) as usize] = (ps_per_byte_fp(l.gen, l.width), propagation(l.kind));
        }
    }
    v
}

fn agree(event: f64, analytic: f64, tol: f64) {
    let err = (event - analytic).abs() / analytic;
    assert!(err < tol, "event-driven {:.3} GB/s vs analytic {:.3} GB/s ({:.1}% apart)", event / 1e9, analytic / 1e9, err * 100.0);
}

#[test]
fn saturated_streams_agree_with_the_analytic_model() {
    for iommu in [false, true] {
        let mut f = testbed(iommu);
        let gpu = Requester::Func(f.func_id("gpu0").unwrap());
        let addr = target(&f, iommu);
        let ports = port_table(&f);
        for access in [Access::Write, Access::Read] {
            let p = plan(&mut f, gpu, addr, access).unwrap();
            let a = if access == Access::Write { write_bandwidth(&p, &ports) } else { read_bandwidth(&p, &ports) };
            let t = dma(&mut f, gpu, addr, 16 * MIB, access, false).unwrap();
            agree(t.bandwidth(), a, 0.05);
        }
    }
}

#[test]
fn reads_through_a_resplitting_root_lose_much_more_than_writes() {
    // 000 §7.1: with the lender's IOMMU on, TLPs turn at the lender's root, which re-issues each
    // 256 B read as 4 x 64 B; reads drop much more than writes.
    let bw = |iommu: bool, access| {
        let mut f = testbed(iommu);
        let gpu = Requester::Func(f.func_id("gpu0").unwrap());
        let a = target(&f, iommu);
        dma(&mut f, gpu, a, 8 * MIB, access, false).unwrap().bandwidth()
    };
    let (w_sw, w_io) = (bw(false, Access::Write), bw(true, Access::Write));
    let (r_sw, r_io) = (bw(false, Access::Read), bw(true, Access::Read));
    assert!(r_io < 0.6 * r_sw, "reads {r_sw:.3e} -> {r_io:.3e}");
    assert!(w_io <= w_sw);
    assert!(w_io / w_sw > r_io / r_sw, "writes must suffer less than reads");
}

#[test]
fn same_inputs_give_bit_identical_results() {
    let run = || {
        let mut f = testbed(true);
        let gpu = Requester::Func(f.func_id("gpu0").unwrap());
        let t = dma(&mut f, gpu, 0x1000_0000, 3 * MIB + 123, Access::Read, false).unwrap();
        (t.time_ps, t.stats.events, t.stats.tlp_hops)
    };
    assert_eq!(run(), run());
}

#[test]
fn engine_memory_does_not_grow_with_transfer_size() {
    let mut f = testbed(false);
    let gpu = Requester::Func(f.func_id("gpu0").unwrap());
    let a = target(&f, false);
    let small = dma(&mut f, gpu, a, MIB, Access::Write, false).unwrap();
    let big = dma(&mut f, gpu, a, 64 * MIB, Access::Write, false).unwrap();
    assert_eq!(big.stats.peak_tlps, small.stats.peak_tlps);
    assert!(big.stats.peak_tlps < 1000);
}

#[test]
fn a_small_write_crosses_the_ntb_in_the_stated_latency_budget() {
    let mut f = testbed(false);
    let gpu = Requester::Func(f.func_id("gpu0").unwrap());
    let a = target(&f, false);
    let one_way = latency(&mut f, gpu, a, Access::Write).unwrap();
    // Two switch-free slot links, the NTB, the cable, the borrower's root: between 0.5 and 1.5 us.
    assert!((500_000..1_500_000).contains(&one_way), "{one_way} ps");
}
