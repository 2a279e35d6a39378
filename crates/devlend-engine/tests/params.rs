//! Parameters as data: a topology's `params` section changes what the engine charges, with no
//! rebuild, on the PXH830 two-host testbed (000 Fig 9): the GPU writes into the borrower's RAM
//! through the NTB pair.

use devlend_engine::analytic::write_bandwidth;
use devlend_engine::{dma, plan, port_table};
use devlend_fabric::route::Requester;
use devlend_fabric::spec::TopologySpec;
use devlend_fabric::tuning::ParamsSpec;
use devlend_fabric::{Fabric, SpecError};
use devlend_wire::{Access, TlpKind};
use serde_json::json;

const MIB: u64 = 1 << 20;

fn spec(params: serde_json::Value) -> TopologySpec {
    let mut spec: TopologySpec = serde_json::from_str(include_str!("pxh830.json")).unwrap();
    spec.params = Some(serde_json::from_value::<ParamsSpec>(params).unwrap());
    spec
}

fn testbed(params: serde_json::Value) -> Fabric {
    let mut f = devlend_fabric::build(&spec(params)).unwrap();
    devlend_fabric::fixtures::lend_gpu0_dma(&mut f);
    f
}

/// (bytes/s of a 16 MiB write stream by the GPU, the analytic estimate, the path's MPS).
fn gpu_writes(params: serde_json::Value) -> (f64, f64, u32) {
    let mut f = testbed(params);
    let gpu = Requester::Func(f.func_id("gpu0").unwrap());
    let addr = f.peer_mw_get_addr(f.ntb_id("ntb-l").unwrap(), 1).unwrap().0;
    let p = plan(&mut f, gpu, addr, Access::Write).unwrap();
    let t = dma(&mut f, gpu, addr, 16 * MIB, Access::Write, false).unwrap();
    (t.bandwidth(), write_bandwidth(&p, &port_table(&f)), p.request.limits.max_payload)
}

#[test]
fn a_smaller_mps_lowers_write_bandwidth_by_the_framing_ratio() {
    let (bw256, _, mps256) = gpu_writes(json!({}));
    let (bw128, analytic128, mps128) = gpu_writes(json!({"timing": {"max_payload": 128}}));
    assert_eq!((mps256, mps128), (256, 128));
    assert!(bw128 < bw256);
    // Saturated writes: payload over payload plus per-TLP framing (PCIe Base 3.0 §2.2, §3.5).
    let o = devlend_engine::params::timing().overheads();
    let eff = |mps: u64| mps as f64 / o.wire_bytes(TlpKind::MemWrite, mps) as f64;
    let expected = eff(128) / eff(256);
    assert!(((bw128 / bw256) / expected - 1.0).abs() < 0.01, "ratio {} vs {expected}", bw128 / bw256);
    assert!((bw128 / analytic128 - 1.0).abs() < 0.05);
}

#[test]
fn a_per_link_or_per_device_mps_limits_the_whole_path() {
    let (global, _, _) = gpu_writes(json!({"timing": {"max_payload": 128}}));
    for params in [json!({"links": {"ntb-b.cable": {"max_payload": 128}}}), json!({"devices": {"gpu0": {"max_payload": "128 B"}}})] {
        let (bw, _, mps) = gpu_writes(params);
        assert_eq!(mps, 128);
        assert_eq!(bw, global);
    }
    // The GPU's writes cross gpu0's slot, lender-sw.d0 -> ntb-l, the cable and ntb-b's slot, not
    // lender.rp0; a link set above the others does not raise the path's MPS.
    let (off_path, _, mps) = gpu_writes(json!({"links": {"lender.rp0": {"max_payload": 128}, "borrower.rp0": {"max_payload": 512}}}));
    assert_eq!(mps, 256);
    assert!(off_path > global);
    let (_, _, mps) = gpu_writes(json!({"links": {"lender-sw.d0": {"max_payload": 128}}}));
    assert_eq!(mps, 128);
}

#[test]
fn defaults_restated_give_the_same_run() {
    let base = gpu_writes(json!({}));
    let t = devlend_fabric::tuning::default_timing();
    let ntb = format!("{} ns", t.ntb_latency_ps as f64 / 1000.0);
    let root = xeon_root_ps();
    let restated = gpu_writes(json!({"timing": {"max_payload": 256, "ntb_latency_ps": ntb}, "hosts": {"lender": {"root_latency_ps": root}}}));
    assert_eq!(base, restated);
    let slower = gpu_writes(json!({"timing": {"ntb_latency_ps": "5 us"}, "links": {"ntb-b.cable": {"rx_buffer_tlps": 4}}}));
    assert!(slower.0 < base.0);
}

/// The Xeon E5 profile's root-complex latency (its own, else `[timing]`'s).
fn xeon_root_ps() -> u64 {
    let own = devlend_fabric::params::params().cpu["intel-xeon-e5"].root_latency_ps;
    own.unwrap_or(devlend_fabric::tuning::default_timing().root_latency_ps)
}

#[test]
fn a_cpu_profile_sets_its_hosts_root_latency_and_a_host_setting_wins() {
    let root = |f: &Fabric, h: &str| f.tuning().host(f.host_id(h).unwrap()).root_latency_ps;
    let f = testbed(json!({}));
    assert_eq!((root(&f, "borrower"), root(&f, "lender")), (xeon_root_ps(), xeon_root_ps()));
    let f = testbed(json!({"cpus": {"intel-xeon-e5": {"root_latency_ps": "1 us"}}, "hosts": {"lender": {"root_latency_ps": 5000}}}));
    assert_eq!((root(&f, "borrower"), root(&f, "lender")), (1_000_000, 5000));
    assert!(f.tuning().overrides.contains(&("cpus.intel-xeon-e5.root_latency_ps".to_string(), "1000000".to_string())));
    let e = error(json!({"cpus": {"pentium": {"root_latency_ps": 1}}}));
    assert_eq!((e.path.as_str(), e.message.contains("intel-xeon-e5")), ("/params/cpus/pentium", true), "{e}");
    let e = error(json!({"cpus": {"intel-xeon-e5": {"read_tags": 1}}}));
    assert!(e.message.contains("cpus.intel-xeon-e5 may set root_latency_ps"), "{e}");
}

fn error(params: serde_json::Value) -> SpecError {
    devlend_fabric::build(&spec(params)).err().expect("the override is refused")
}

#[test]
fn bad_overrides_name_the_field() {
    let e = error(json!({"timing": {"max_payload_size": 128}}));
    assert_eq!(e.path, "/params/timing/max_payload_size");
    assert!(e.message.contains("unknown constant") && e.message.contains("max_payload, max_read_request"), "{e}");
    let e = error(json!({"timing": {"max_payload": 100}}));
    assert_eq!(e.path, "/params/timing/max_payload");
    assert!(e.message.contains("128, 256, 512"), "{e}");
    let e = error(json!({"timing": {"ntb_latency_ps": "350 KiB"}}));
    assert!(e.message.contains("unit 'KiB' does not fit"), "{e}");
    let e = error(json!({"hosts": {"nobody": {"read_tags": 8}}}));
    assert_eq!((e.path.as_str(), e.message.contains("borrower, lender")), ("/params/hosts/nobody", true), "{e}");
    let e = error(json!({"hosts": {"lender": {"ntb_latency_ps": 1}}}));
    assert_eq!(e.path, "/params/hosts/lender/ntb_latency_ps");
    let e = error(json!({"links": {"gpu9": {"max_payload": 128}}}));
    assert_eq!(e.path, "/params/links/gpu9");
    let e = error(json!({"timing": {"request_overhead_bytes": 20}}));
    assert!(e.message.contains("fixed by the PCIe specification"), "{e}");
}
