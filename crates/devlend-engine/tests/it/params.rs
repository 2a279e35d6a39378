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
    let mut spec: TopologySpec = serde_json::from_str(include_str!("../pxh830.json")).unwrap();
    spec.params = Some(serde_json::from_value::<ParamsSpec>(params).unwrap());
    spec
}

fn testbed(params: serde_json::Value) -> Fabric {
    let mut f = devlend_fabric::build(&spec(params)).unwrap();
    devlend_fabric::fixtures::lend_gpu0_dma(&mut f);
    f
}

/// (bytes/s of a 16 MiB write stream by the GPU, the analytic estimate, the path's MPS), with the
/// links bounding it: the borrower root's intake of writes to RAM (`ram_write_line_ps`) is off
/// unless `params` sets the CPU profile's own (`root_intake_bounds_a_write_stream_to_ram`).
fn gpu_writes(mut params: serde_json::Value) -> (f64, f64, u32) {
    if params.get("cpus").is_none() {
        params["cpus"] = json!({"intel-xeon-e5": {"ram_write_line_ps": 0}});
    }
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
    // and the link-layer share of the narrowest link (gpu0's Gen2 x16), whose AckNak period
    // follows its MPS (issue 27; re-baselined from framing alone).
    let t = devlend_engine::params::timing();
    let keep = |mps: u32| 1.0 - devlend_engine::path::link_layer_share(t, 2, 16, mps);
    let expected = eff(128) / eff(256) * keep(128) / keep(256);
    assert!(((bw128 / bw256) / expected - 1.0).abs() < 0.01, "ratio {} vs {expected}", bw128 / bw256);
    assert!((bw128 / analytic128 - 1.0).abs() < 0.05);
}

#[test]
fn a_per_link_or_per_device_mps_limits_the_whole_path() {
    let (global, _, _) = gpu_writes(json!({"timing": {"max_payload": 128}}));
    // The path's TLPs are 128 bytes either way; a link set alone keeps the other links' share at
    // MPS 256 (each link's AckNak period follows its own MPS, §3.5.3.1), so setting the cable
    // alone is faster than MPS 128 everywhere. The device's MPS sets the path's TLPs; the Gen3 x8
    // links then bound the stream (their DLLPs striped over 8 lanes, at their own MPS 256).
    let (cable, _, mps) = gpu_writes(json!({"links": {"ntb-b.cable": {"max_payload": 128}}}));
    assert_eq!(mps, 128);
    assert!(cable > global && cable < gpu_writes(json!({})).0);
    let (dev, _, mps) = gpu_writes(json!({"devices": {"gpu0": {"max_payload": "128 B"}}}));
    assert_eq!(mps, 128);
    assert!(dev >= global && dev / global - 1.0 < 0.005, "{dev} vs {global}");
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
    assert_eq!((e.path.as_str(), e.fault.to_string().contains("intel-xeon-e5")), ("/params/cpus/pentium", true), "{e}");
    let e = error(json!({"cpus": {"intel-xeon-e5": {"read_tags": 1}}}));
    assert!(e.fault.to_string().contains("cpus.intel-xeon-e5 may set root_latency_ps"), "{e}");
}

fn error(params: serde_json::Value) -> SpecError {
    devlend_fabric::build(&spec(params)).err().expect("the override is refused")
}

#[test]
fn bad_overrides_name_the_field() {
    let e = error(json!({"timing": {"max_payload_size": 128}}));
    assert_eq!(e.path, "/params/timing/max_payload_size");
    assert!(e.fault.to_string().contains("unknown constant") && e.fault.to_string().contains("max_payload, max_read_request"), "{e}");
    let e = error(json!({"timing": {"max_payload": 100}}));
    assert_eq!(e.path, "/params/timing/max_payload");
    assert!(e.fault.to_string().contains("128, 256, 512"), "{e}");
    let e = error(json!({"timing": {"ntb_latency_ps": "350 KiB"}}));
    assert!(e.fault.to_string().contains("unit 'KiB' does not fit"), "{e}");
    let e = error(json!({"hosts": {"nobody": {"read_tags": 8}}}));
    assert_eq!((e.path.as_str(), e.fault.to_string().contains("borrower, lender")), ("/params/hosts/nobody", true), "{e}");
    let e = error(json!({"hosts": {"lender": {"ntb_latency_ps": 1}}}));
    assert_eq!(e.path, "/params/hosts/lender/ntb_latency_ps");
    let e = error(json!({"links": {"gpu9": {"max_payload": 128}}}));
    assert_eq!(e.path, "/params/links/gpu9");
    let e = error(json!({"timing": {"request_overhead_bytes": 20}}));
    assert!(e.fault.to_string().contains("fixed by the PCIe specification"), "{e}");
}

#[test]
fn the_link_layer_share_is_the_spec_formula_with_dllps_striped_over_the_lanes() {
    use devlend_engine::params::timing;
    use devlend_engine::path::link_layer_share;
    // Gen3 x8, MPS 256: one Ack and one UpdateFC of 8 bytes, striped over 8 lanes (one symbol
    // time each), per 203-symbol AckNak period (§3.5.3.1 Table 3-9), and a SKP block per 375.
    let t = timing();
    assert!((link_layer_share(t, 3, 8, 256) - (2.0 / 203.0 + 1.0 / 376.0)).abs() < 1e-12);
    // Gen2 x16, MPS 256: half a symbol time each per 123-symbol period; SKP 4 symbols per 1538.
    assert!((link_layer_share(t, 2, 16, 256) - (1.0 / 123.0 + 4.0 / 1542.0)).abs() < 1e-12);
    // On the testbed (its narrowest link the K420's Gen2 x16), a one-way GPU write stream keeps
    // what the narrowest link's share leaves, and the analytic model agrees.
    let (bw, analytic, _) = gpu_writes(json!({}));
    assert!((bw / analytic - 1.0).abs() < 0.03, "the analytic model uses the same rates: {bw} vs {analytic}");
}

#[test]
fn root_intake_bounds_a_write_stream_to_ram() {
    // The borrower's Xeon E5 takes writes to RAM in at ram_write_line_ps per 64-byte line, one
    // after another: a write stream faster on the links is held to 64 bytes per line time (its
    // per-TLP part, ram_write_tlp_ps, off here: root_intake_takes_a_time_per_tlp_besides_its_lines).
    let (free, _, _) = gpu_writes(json!({}));
    let line = 12_000; // ps: 5.3 GB/s, below what the links carry
    let (held, analytic, _) = gpu_writes(json!({"cpus": {"intel-xeon-e5": {"ram_write_line_ps": line, "ram_write_tlp_ps": 0}}}));
    let bound = 64.0 / line as f64 * 1e12;
    assert!(free > bound * 1.02, "the links alone carry more: {free} vs {bound}");
    assert!(held <= bound * 1.001 && held > bound * 0.97, "{held} vs {bound}");
    assert!((held / analytic - 1.0).abs() < 0.03, "{held} vs analytic {analytic}");
    // Twice the line time halves it; a per-host setting reaches the same root.
    let (slow, _, _) = gpu_writes(json!({"cpus": {"intel-xeon-e5": {"ram_write_line_ps": 2 * line, "ram_write_tlp_ps": 0}}}));
    assert!((slow / held - 0.5).abs() < 0.01, "{slow} vs {held}");
    let (host, _, _) = gpu_writes(json!({"cpus": {}, "hosts": {"borrower": {"ram_write_line_ps": line, "ram_write_tlp_ps": 0}}}));
    assert!((host / held - 1.0).abs() < 1e-6, "{host} vs {held}");
}

#[test]
fn root_intake_takes_a_time_per_tlp_besides_its_lines() {
    // ram_write_tlp_ps: the intake's time per posted write TLP, added to its lines' time; the
    // GPU's 256-byte write TLPs (MPS 256) of 4 lines at 12 ns a line and 12 ns a TLP take 60 ns
    // where the lines alone take 48: the stream keeps 4/5 of what the lines alone allow, and the
    // analytic model agrees. With the line time 0 the intake is off, its per-TLP part too.
    let line = 12_000;
    let (held, _, _) = gpu_writes(json!({"cpus": {"intel-xeon-e5": {"ram_write_line_ps": line, "ram_write_tlp_ps": 0}}}));
    let (both, analytic, _) = gpu_writes(json!({"cpus": {"intel-xeon-e5": {"ram_write_line_ps": line, "ram_write_tlp_ps": line}}}));
    assert!((both / held - 0.8).abs() < 0.01, "{both} vs {held}");
    assert!((both / analytic - 1.0).abs() < 0.03, "{both} vs analytic {analytic}");
    let (off, _, _) = gpu_writes(json!({"cpus": {"intel-xeon-e5": {"ram_write_line_ps": 0, "ram_write_tlp_ps": line}}}));
    let (free, _, _) = gpu_writes(json!({"cpus": {"intel-xeon-e5": {"ram_write_line_ps": 0}}}));
    assert!((off / free - 1.0).abs() < 1e-6, "{off} vs {free}");
}
