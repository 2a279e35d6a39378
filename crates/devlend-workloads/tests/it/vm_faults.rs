//! Crashes and removals reach a VM's guest as they reach a host's driver (issue 30, item 3): a
//! VM whose host crashes stops at the crash; a guest with a mediated device is told of its
//! lender's crash through the lending agent and the hot-unplug its hypervisor forwards, in the
//! time a bare-metal borrower is told, not by its driver's watchdog.

use devlend_engine::machine::{MachineError, ThreadError};
use devlend_fabric::spec::{VmDeviceSpec, VmPathSpec, VmSpec};
use devlend_host::Cluster;
use devlend_workloads::*;

const THREE: &str = include_str!("../../../devlend-drivers/tests/three-host-cluster.json");
const MIB: u64 = 1 << 20;

/// A VM on the borrower with lender-a's gpu0 on the mediated path.
fn vm() -> VmSpec {
    VmSpec {
        name: "vm".into(),
        host: "borrower".into(),
        memory: 256 * MIB,
        devices: vec![VmDeviceSpec { device: "gpu0".into(), path: Some(VmPathSpec::Mediated) }],
    }
}

/// A 4 MiB host-to-device copy on gpu0 by `runner` (the VM, or the borrower itself, which then
/// borrows it), with fault `kind` at `target` at `at` (none when `at` is 0); the copy's result.
/// The tests' checks hold at any size (a fault at half the copy's run strikes mid-copy; the notice
/// times come from the hot-plug and lending-agent constants): 4 MiB, a quarter of the 16 MiB they
/// used, passes the same assertions for a quarter of the run.
fn copy(runner: &str, fault: Option<(&str, &str, u64)>) -> (WorkloadResult, Scenario) {
    // The mediated path maps the guest's memory in the lender's IOMMU.
    let three = THREE
        .replace(r#""lender-a","cpu":"intel-xeon-e5","ram":34359738368,"iommu":false"#, r#""lender-a","cpu":"intel-xeon-e5","ram":34359738368,"iommu":true"#);
    let c = Cluster::from_json(&three).unwrap();
    let mut s = if runner == "vm" { Scenario::with_vms(c, &[vm()]).unwrap() } else { Scenario::new(c) };
    s.keep_going(true);
    s.add_gpu_copy("copy", runner, "gpu0", Dir::HtoD, 4 * MIB, 0).unwrap();
    if let Some((kind, target, at)) = fault {
        s.add_fault(at, kind, target).unwrap();
    }
    let r = s.run().unwrap();
    (r.workloads[0].clone(), s)
}

/// Half the copy's run without a fault: when each fault strikes. Run once per test process and
/// shared by the tests (the run is deterministic).
fn half() -> u64 {
    static HALF: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HALF.get_or_init(|| copy("vm", None).0.end.expect("the copy completes without a fault") / 2)
}

#[test]
fn a_vm_whose_host_crashes_stops_at_the_crash_with_that_error() {
    let at = half();
    let (w, s) = copy("vm", Some(("host-crash", "borrower", at)));
    assert_eq!(w.outcome.name(), "cut short", "{:?}", w.outcome);
    assert_eq!(w.outcome.noticed(), Some(at), "the guest stopped at the crash, not at its watchdog");
    let Some(WorkloadError::Failed { cause: FailCause::Machine(m), .. }) = w.outcome.error() else { panic!("{:?}", w.outcome) };
    let MachineError::Thread { error, .. } = m.as_ref() else { panic!("{m}") };
    assert!(matches!(**error, ThreadError::HostCrashed { at: t, ref host, .. } if t == at && host == "borrower"), "{error}");
    // The guest issued nothing after the crash: its GPU moved no byte it asked for later.
    let (_, struck) = s.moved("gpu0").unwrap();
    let (total, _) = s.moved("gpu0").unwrap();
    assert_eq!(struck[0].1, total, "gpu0 moved {} bytes after the crash", total - struck[0].1);
}

#[test]
fn a_mediated_guest_learns_of_its_lenders_crash_as_a_bare_metal_borrower_does() {
    let at = half();
    let (guest, s) = copy("vm", Some(("host-crash", "lender-a", at)));
    let (bare, _) = copy("borrower", Some(("host-crash", "lender-a", at)));
    let t = s.cluster().fabric.tuning().timing.clone();
    let forward = devlend_vm::unplug::forward_ps(&s.cluster().fabric);
    let told = at + t.hotplug_detect_ps + t.dl_notice_ps + t.hotplug_remove_ps;
    for (who, w) in [("guest", &guest), ("bare metal", &bare)] {
        assert_eq!(w.outcome.name(), "failed", "{who}: {:?}", w.outcome);
        let e = w.outcome.error().unwrap().to_string();
        assert!(e.contains("gpu0 was removed (hot-plug)") && e.contains("no such device"), "{who}: {e}");
    }
    let (g, b) = (guest.outcome.noticed().unwrap(), bare.outcome.noticed().unwrap());
    assert!(b >= told && b < told + 1_000_000_000, "bare metal noticed at {b} ps, told at {told}");
    assert!(g >= told + forward && g < told + forward + 1_000_000_000, "the guest noticed at {g} ps, its driver was told at {}", told + forward);
    assert!(guest.outcome.error().unwrap().to_string().contains("on VM vm"), "{:?}", guest.outcome);
    let steps: Vec<String> = s
        .cluster()
        .fabric
        .events()
        .iter()
        .filter_map(|e| match e {
            devlend_fabric::events::Event::Hotplug { step, .. } => Some(step.name().to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(steps, ["slot-interrupt", "lending-notified", "driver-removed", "guest-driver-removed"]);
}
