//! The hyper-tenant NIC on the shared machine (topology nic-lending: nic0 in the tenants' host,
//! nic1 in the lender behind a Gen4 x16 NTB): its round trip is the engine's on its route, under
//! the load of the run, and the HyperTRIO pipeline last ran with what the requests saw.

use devlend_host::Cluster;
use devlend_workloads::*;

const NIC: &str = include_str!("../nic-lending.json");
const US: u64 = 1_000_000;

fn spec(config: &str) -> NicSpec {
    NicSpec { packets_per_tenant: Some(100), ..NicSpec::new(config, 64, 60 * US) }
}

/// The NIC `nic` alone, or next to the borrower's CPU reading the lent NIC's BAR 0 (its
/// completions cross the NTB in the direction of the NIC's packets).
fn run(nic: &str, config: &str, load: bool) -> WorkloadResult {
    let mut s = Scenario::new(Cluster::from_json(NIC).unwrap());
    s.add_nic("nic", "borrower", nic, &spec(config), 0).unwrap();
    if load {
        let bar0 = s.cluster().lends().iter().find(|l| l.device == nic).map(|l| l.bars[0].cpu_addr).unwrap();
        s.add_stream("load", "borrower:cpu", bar0, 8 << 20, Access::Read, 0).unwrap();
    }
    let r = s.run().unwrap();
    r.workloads.into_iter().find(|w| w.name == "nic").unwrap()
}

#[test]
fn the_pipeline_last_ran_with_the_round_trip_the_requests_saw() {
    let w = run("nic0", "base", false);
    let n = w.nic.as_ref().unwrap();
    assert!(n.packets > 0 && n.translations > 0 && n.iterations >= 1, "{n:?}");
    assert!(n.converged_at.is_some(), "a NIC alone on its own slot settles: {n:?}");
    let last = n.epochs.iter().rev().find_map(|e| e.round_trip_ps).unwrap();
    assert!((last - n.model_round_trip_ps as f64).abs() < 0.02 * n.model_round_trip_ps as f64, "{n:?}");
    assert_eq!(w.bytes, n.packets * 1542);
}

#[test]
fn lent_through_the_ntb_the_round_trip_grows_and_base_slows() {
    let (local, lent) = (run("nic0", "base", false), run("nic1", "base", false));
    let (l, t) = (local.nic.as_ref().unwrap(), lent.nic.as_ref().unwrap());
    assert!(t.round_trip_ps > l.round_trip_ps + 100_000.0, "{l:?} {t:?}");
    assert!(t.model_gbps < l.model_gbps);
    assert!(lent.bandwidth().unwrap() < local.bandwidth().unwrap());
}

#[test]
fn load_on_the_ntb_lengthens_the_lent_nics_round_trip() {
    let (alone, loaded) = (run("nic1", "hypertrio", false), run("nic1", "hypertrio", true));
    assert!(loaded.nic.unwrap().round_trip_ps > alone.nic.unwrap().round_trip_ps);
}

#[test]
fn bad_nic_workloads_are_typed_errors() {
    let mut s = Scenario::new(Cluster::from_json(NIC).unwrap());
    let e = s.add_nic("n", "borrower", "nic0", &spec("fast"), 0).unwrap_err();
    assert_eq!(e.kind(), "invalid", "{e}");
    let e = s.add_nic("n", "borrower", "gpu0", &spec("base"), 0).unwrap_err();
    assert!(matches!(e, WorkloadError::WrongKind { .. }), "{e}");
    let e = s.add_nic("n", "borrower", "nic0", &NicSpec { epoch: 0, ..spec("base") }, 0).unwrap_err();
    assert_eq!(e.kind(), "invalid", "{e}");
}
