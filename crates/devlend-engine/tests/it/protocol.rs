//! Protocol settings from the hardware: what a root complex returns for a DMA read of RAM (a
//! CPU-profile property), and what each device may ask for (MPS, MRRS, read tags), negotiated
//! as Linux does, on the PXH830 two-host testbed (000 Fig 9).

use devlend_engine::{dma, plan};
use devlend_fabric::route::Requester;
use devlend_fabric::spec::TopologySpec;
use devlend_fabric::tuning::ParamsSpec;
use devlend_fabric::Fabric;
use devlend_wire::Access;
use serde_json::json;

const MIB: u64 = 1 << 20;

fn testbed(cpu: &str, params: serde_json::Value) -> Fabric {
    let mut spec: TopologySpec = serde_json::from_str(include_str!("../pxh830.json")).unwrap();
    spec.params = Some(serde_json::from_value::<ParamsSpec>(params).unwrap());
    for h in &mut spec.hosts {
        h.cpu = cpu.into();
    }
    let mut f = devlend_fabric::build(&spec).unwrap();
    devlend_fabric::fixtures::lend_gpu0_dma(&mut f);
    f
}

/// The GPU reading the borrower's RAM through the NTB: (completion size, bytes/s of 4 MiB).
fn gpu_reads(cpu: &str, params: serde_json::Value) -> (u32, f64) {
    let mut f = testbed(cpu, params);
    let gpu = Requester::Func(f.func_id("gpu0").unwrap());
    let addr = f.peer_mw_get_addr(f.ntb_id("ntb-l").unwrap(), 1).unwrap().0;
    let p = plan(&mut f, gpu, addr, Access::Read).unwrap();
    let t = dma(&mut f, gpu, addr, 4 * MIB, Access::Read, true).unwrap();
    (p.request.limits.completion_bytes, t.bandwidth())
}

#[test]
fn the_completion_size_of_ram_reads_is_the_cpus() {
    // Xeon E5: 64-byte completions (001 §7.3.1's "a little under 6 GB/s" on this path).
    let (xeon, xeon_bw) = gpu_reads("intel-xeon-e5", json!({}));
    assert_eq!(xeon, 64);
    assert!(xeon_bw < 6.0e9, "{xeon_bw}");
    // A CPU profile's value is what its hosts' paths use: devlend-fabric's tuning tests.
    // Per host, per run; MPS-sized completions move more.
    let (big, big_bw) = gpu_reads("intel-xeon-e5", json!({"hosts": {"borrower": {"ram_completion_bytes": 256}}}));
    assert_eq!(big, 256);
    assert!(big_bw > 1.1 * xeon_bw, "{big_bw} vs {xeon_bw}");
    // The path's MPS caps it.
    assert_eq!(gpu_reads("intel-xeon-e5", json!({"hosts": {"borrower": {"ram_completion_bytes": 256}}, "timing": {"max_payload": 128}})).0, 128);
}
