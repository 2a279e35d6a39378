//! The hypervisor's typed errors: each names what it concerns (scenario, device, VM, address,
//! field), and the error underneath stays reachable as its `source`.

use devlend_engine::machine::MachineError;
use devlend_fabric::spec::VmPathSpec;
use devlend_host::{Cluster, EptFault, HostError, Os};
use devlend_vm::describe::{add_device, VmSpecFault};
use devlend_vm::fixtures::{self, Scenario};
use devlend_vm::timed::on_machine;
use devlend_vm::{RunError, SetupError, Vmm};
use std::error::Error;

const JSON: &str = include_str!("../expansion-chassis-vm.json");

#[test]
fn an_unknown_scenario_names_what_was_given() {
    let e = Scenario::parse("VMNope").unwrap_err();
    assert!(matches!(&e, SetupError::UnknownScenario { given } if given == "VMNope"), "{e}");
    assert_eq!(e.to_string(), "unknown VM scenario 'VMNope' (VMLoc or VMRem)");
}

#[test]
fn a_testbed_without_its_second_gpu_names_the_device_and_the_step() {
    let json = JSON.replace("\"gpu1\"", "\"gpux\"");
    let e = fixtures::testbed(&json, Scenario::VmLoc).err().unwrap();
    let SetupError::Host { step, device, error } = &e else { panic!("{e:?}") };
    assert_eq!((*step, device.as_str()), ("passing through with VFIO", "gpu1"));
    assert!(matches!(error, HostError::NoDevice(_)), "{error}");
    assert!(e.source().is_some(), "the host layer's error is the source");
}

#[test]
fn a_device_on_the_wrong_path_names_both_hosts_and_the_path() {
    let mut c = Cluster::from_json(JSON).unwrap();
    let mut vmm = Vmm::default();
    let vm = vmm.create_vm(&mut c, "remote", "v", fixtures::GUEST_RAM).unwrap();
    let e = add_device(&mut c, &mut vmm, vm, "gpu0", Some(VmPathSpec::Vfio)).unwrap_err();
    let want = VmSpecFault::Path { device: "gpu0".into(), device_host: "lender".into(), vm: "v".into(), vm_host: "remote".into(), given: VmPathSpec::Vfio };
    assert_eq!((&e, e.field()), (&want, "path"));
    let e = add_device(&mut c, &mut vmm, vm, "gpu9", None).unwrap_err();
    assert!(matches!(&e, VmSpecFault::NoDevice { device, .. } if device == "gpu9"), "{e}");
    assert_eq!(e.field(), "device");
    vmm.shutdown(&mut c, vm).unwrap();
}

#[test]
fn guest_accesses_the_ept_does_not_map_name_the_vm_and_address() {
    let mut c = Cluster::from_json(JSON).unwrap();
    let mut vmm = Vmm::default();
    let vm = vmm.create_vm(&mut c, "remote", "v", fixtures::GUEST_RAM).unwrap();
    vmm.register_mdev(&c, "gpu0").unwrap();
    let dev = vmm.assign_mdev(&mut c, vm, "gpu0").unwrap();
    let mut os = vmm.guest(&mut c, vm).unwrap();
    let hole = 3 << 30;
    assert_eq!(os.read(hole, 4), Err(HostError::Ept(EptFault::Violation { vm: "v".into(), gpa: hole, len: 4 })));
    // The mediated device is attached when the guest enables bus mastering: before that, its
    // BARs have guest addresses but no host BAR behind them.
    let bar0 = os.pci_iomap(dev, 0).unwrap();
    let e = os.read(bar0, 4).unwrap_err();
    assert!(matches!(&e, HostError::Ept(EptFault::BarNotBacked { vm, device, bar: 0, gpa }) if vm == "v" && device == "gpu0" && *gpa == bar0), "{e}");
}

#[test]
fn a_guest_body_that_fails_stops_the_machine_with_its_thread_named() {
    let t = fixtures::testbed(JSON, Scenario::VmLoc).unwrap();
    let e = on_machine(t.c, t.vmm, t.vm, Vec::new(), |os| os.read(3 << 30, 4).map(|_| ())).err().unwrap();
    let RunError::Machine(MachineError::Thread { thread, .. }) = &e else { panic!("{e}") };
    assert_eq!(thread, "guest");
    assert!(e.to_string().contains("EPT violation in VM guest"), "{e}");
}
