//! D6's VM data movements on the expansion-chassis testbed (000 §7.5).

use devlend_experiments::vm::d6::memcpy_htod;
use devlend_vm::fixtures::Scenario;

const JSON: &str = include_str!("../../devlend-vm/tests/expansion-chassis-vm.json");

#[test]
fn both_vm_paths_copy_the_batch_and_the_remote_one_is_slower() {
    let loc = memcpy_htod(JSON, Scenario::VmLoc, 1 << 20).unwrap();
    let rem = memcpy_htod(JSON, Scenario::VmRem, 1 << 20).unwrap();
    assert!(rem.total_ps > loc.total_ps, "the remote VM's GPU reads guest RAM across the NTB: {} vs {}", rem.total_ps, loc.total_ps);
}

#[test]
fn a_copy_the_guest_cannot_hold_is_refused() {
    assert!(memcpy_htod(JSON, Scenario::VmLoc, 1 << 30).is_err());
    assert!(memcpy_htod(JSON, Scenario::VmLoc, 0).is_err());
}
