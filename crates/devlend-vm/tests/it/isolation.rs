//! Isolation and bad input for VMs (the VM issue's attack and bad-input lists, first cases):
//! a guest's device DMA outside its memory, into another VM's memory, or to a stale address after
//! hot-remove is blocked by the IOMMU, recorded by the fabric, and changes no memory; a guest that
//! never enables bus mastering, two VMs asking for one device and a VM the window cannot cover
//! get clear errors and leave nothing mapped.

use devlend_devices::error::ModelError;
use devlend_devices::gpu::Gpu;
use devlend_drivers::gpu_driver::Driver;
use devlend_drivers::gpu_run::{on_machine, shared};
use devlend_fabric::fabric::Event;
use devlend_host::{Cluster, HostError, Os};
use devlend_vm::fixtures::{self, Scenario, Testbed};
use devlend_vm::{GuestDev, Vmm};

const JSON: &str = include_str!("../expansion-chassis-vm.json");

fn failures(c: &Cluster) -> usize {
    c.fabric.events().iter().filter(|e| matches!(e, Event::Failed(_))).count()
}

/// A rogue guest kernel makes its GPU store at `addr`: must fail, be recorded, change nothing.
fn assert_blocked(c: &mut Cluster, gpu: &mut Gpu, addr: u64) {
    let (digest, before) = (c.fabric.memory_digest(), failures(c));
    let e = gpu.store(&mut c.fabric, addr, &[0xee; 64]).err().unwrap_or_else(|| panic!("store at {addr:#x} went through"));
    let ModelError::Dma { func, addr: at, failure, .. } = e else { panic!("{e}") };
    assert_eq!((func, at), (gpu.func, addr), "the error names the GPU and the address");
    assert!(matches!(c.fabric.events().last(), Some(Event::Failed(f)) if *f == failure.failure), "the error carries the failure the fabric recorded");
    assert_eq!(failures(c), before + 1, "the blocked store is recorded");
    assert_eq!(c.fabric.memory_digest(), digest, "no memory changed");
}

fn dev<'a>(t: &'a Testbed, name: &str) -> &'a GuestDev {
    t.vmm.vm(t.vm).unwrap().devices.values().find(|d| d.name == name).unwrap()
}

#[test]
fn guest_dma_outside_its_memory_or_to_the_window_itself_is_blocked() {
    for sc in [Scenario::VmLoc, Scenario::VmRem] {
        let mut t = fixtures::testbed(JSON, sc).unwrap();
        assert_blocked(&mut t.c, &mut t.a.gpu, 0x3000_0000);
        if sc == Scenario::VmRem {
            let window = t.c.lends()[0].window_addr;
            assert_blocked(&mut t.c, &mut t.a.gpu, window);
        }
    }
}

#[test]
fn another_vms_memory_is_out_of_reach() {
    let mut c = Cluster::from_json(JSON).unwrap();
    let mut vmm = Vmm::default();
    let a = vmm.create_vm(&mut c, "lender", "a", fixtures::GUEST_RAM).unwrap();
    let b = vmm.create_vm(&mut c, "lender", "b", fixtures::GUEST_RAM).unwrap();
    let da = vmm.assign_vfio(&mut c, a, "gpu0").unwrap();
    vmm.assign_vfio(&mut c, b, "gpu1").unwrap();
    let g0 = c.fabric.func_id("gpu0").unwrap();
    let mut gpu = Gpu::new(&mut c.fabric, g0).unwrap();
    Driver::probe(&mut vmm.guest(&mut c, a).unwrap(), da).unwrap();
    let theirs = vmm.vm(b).unwrap().pin(32 << 20).unwrap();
    assert!(theirs >= fixtures::GUEST_RAM, "b's host page is not also a guest-physical address of a");
    assert_blocked(&mut c, &mut gpu, theirs);
}

#[test]
fn stale_addresses_after_hot_remove_are_blocked_and_everything_is_returned() {
    let mut t = fixtures::testbed(JSON, Scenario::VmRem).unwrap();
    let bar1 = dev(&t, "gpu1").bars.iter().find(|b| b.index == 1).unwrap().gpa;
    let (d0, d1) = (t.a.dev, t.b.dev);
    let e = t.vmm.hot_remove(&mut t.c, t.vm, d0).unwrap_err();
    assert!(matches!(e, HostError::Busy(_)) && e.to_string().contains("hot-remove gpu1 first"), "{e}");
    t.vmm.hot_remove(&mut t.c, t.vm, d1).unwrap();
    assert_eq!(t.c.lends().len(), 1, "gpu1 went back to its lender");
    assert_blocked(&mut t.c, &mut t.a.gpu, bar1);
    t.vmm.hot_remove(&mut t.c, t.vm, d0).unwrap();
    assert_blocked(&mut t.c, &mut t.a.gpu, 32 << 20);
    t.vmm.shutdown(&mut t.c, t.vm).unwrap();
    assert!(t.c.lending_idle() && t.vmm.idle() && t.vmm.anomalies.is_empty() && t.c.anomalies().is_empty());
    // The lender's own driver can use the GPU again (default domain back, nothing left over).
    let mut os = t.c.os("lender").unwrap();
    let g = os.find("gpu0").unwrap();
    let mut drv = Driver::probe(&mut os, g).unwrap();
    let buf = os.kmalloc(4096).unwrap();
    t.a.gpu.mem_write(&mut t.c.fabric, 0, &[0x5a; 4096]).unwrap();
    let lender = t.c.fabric.host_id("lender").unwrap();
    let (m, _) = on_machine(t.c, &[shared(t.a.gpu)], lender, move |os| drv.memcpy_dtoh(os, 0, buf, 4096).map_err(|e| e.to_string())).unwrap();
    assert_eq!(m.world().os("lender").unwrap().read(buf, 4096).unwrap(), [0x5a; 4096]);
}

#[test]
fn a_guest_that_never_enables_bus_mastering_never_borrows() {
    let mut c = Cluster::from_json(JSON).unwrap();
    let mut vmm = Vmm::default();
    let vm = vmm.create_vm(&mut c, "remote", "g", fixtures::GUEST_RAM).unwrap();
    vmm.register_mdev(&c, "gpu0").unwrap();
    let d = vmm.assign_mdev(&mut c, vm, "gpu0").unwrap();
    let mut os = vmm.guest(&mut c, vm).unwrap();
    let bar0 = os.pci_iomap(d, 0).unwrap();
    let e = os.read(bar0, 4).unwrap_err();
    assert!(e.to_string().contains("when the guest enables bus mastering"), "{e}");
    assert!(c.lending_idle() && c.lends().is_empty());
    vmm.shutdown(&mut c, vm).unwrap();
    assert!(vmm.idle() && c.lending_idle());
}

#[test]
fn two_vms_cannot_have_one_device() {
    let mut c = Cluster::from_json(JSON).unwrap();
    let mut vmm = Vmm::default();
    let a = vmm.create_vm(&mut c, "remote", "a", fixtures::GUEST_RAM).unwrap();
    let b = vmm.create_vm(&mut c, "remote", "b", fixtures::GUEST_RAM).unwrap();
    let l = vmm.create_vm(&mut c, "lender", "l", fixtures::GUEST_RAM).unwrap();
    vmm.register_mdev(&c, "gpu0").unwrap();
    let d = vmm.assign_mdev(&mut c, a, "gpu0").unwrap();
    let before = c.fabric.programmed();
    let e = vmm.assign_mdev(&mut c, b, "gpu0").unwrap_err();
    assert_eq!(c.fabric.programmed(), before);
    assert!(matches!(e, HostError::Busy(_)) && e.to_string().contains("already passed through to VM a"), "{e}");
    let g0 = c.fabric.func_id("gpu0").unwrap();
    let _gpu = Gpu::new(&mut c.fabric, g0).unwrap();
    Driver::probe(&mut vmm.guest(&mut c, a).unwrap(), d).unwrap();
    assert_eq!(c.lends().len(), 1, "borrowed on bus-master enable");
    let e = vmm.assign_vfio(&mut c, l, "gpu0").unwrap_err();
    assert!(e.to_string().contains("already passed through"), "{e}");
    assert!(vmm.assign_mdev(&mut c, l, "gpu1").unwrap_err().to_string().contains("VFIO"));
    assert!(vmm.assign_vfio(&mut c, a, "gpu1").unwrap_err().to_string().contains("mediated parent"));
}

#[test]
fn a_vm_the_window_cannot_cover_fails_cleanly() {
    let mut c = Cluster::from_json(JSON).unwrap();
    // The failed attach itself writes no memory; under the default hygiene policy the lender
    // then scrubs the device its undone lend touched (issue 30), which this digest would count.
    c.set_hygiene(devlend_host::Hygiene::None);
    let mut vmm = Vmm::default();
    let vm = vmm.create_vm(&mut c, "remote", "big", 4 << 30).unwrap();
    vmm.register_mdev(&c, "gpu0").unwrap();
    let d = vmm.assign_mdev(&mut c, vm, "gpu0").unwrap();
    let (digest, before) = (c.fabric.memory_digest(), c.fabric.programmed());
    let e = Driver::probe(&mut vmm.guest(&mut c, vm).unwrap(), d).err().unwrap();
    assert_eq!(c.fabric.programmed(), before, "every IOMMU and NTB mapping made for the failed attach is undone");
    assert!(e.to_string().contains("VM big's 4 GiB of memory"), "{e}");
    assert!(c.lending_idle() && c.lends().is_empty() && vmm.domains.is_empty(), "nothing half-mapped");
    let lender = c.fabric.host_id("lender").unwrap() as usize;
    assert!(c.fabric.iommus()[lender].domains.iter().all(|d| d.mapped_bytes == 0 || d.name.starts_with("dl:") || d.name.starts_with("dma:")));
    assert_eq!(c.fabric.memory_digest(), digest);
    vmm.shutdown(&mut c, vm).unwrap();
    assert!(vmm.idle() && vmm.anomalies.is_empty());
}
