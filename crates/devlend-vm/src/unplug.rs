//! A removal forwarded into a guest. A device passed to a VM (VFIO or the mediated parent) is
//! driven in its host by the hypervisor's driver; when its removal reaches that host (pciehp on
//! the device's own host, or Device Lending's notice and hot-remove on the borrower of a mediated
//! device, `devlend_host::fault`), that driver's `remove` hands the removal on to the VM (vfio's
//! request interrupt, `VFIO_PCI_REQ_IRQ`, to the VMM), which hot-unplugs the device from the
//! guest's virtual slot: an interrupt into the guest and the guest's pciehp removing the device,
//! which runs the guest driver's `remove`. From then the guest's waits for the device end with
//! "no such device" (`GuestThreadOs`), as a bare-metal driver's do.
//!
//! Its cost ([`forward_ps`]) is assumed to be the steps the model already times elsewhere:
//! eventfd and KVM's irqfd (`[vm] eventfd_irqfd_ps`), VM entry with the interrupt
//! (`guest_irq_entry_ps`) and the guest's pciehp removal (`timing.hotplug_remove_ps`, the host's
//! own). A surprise removal is taken (presence detect changed): the attention button's 5 s wait of
//! an orderly unplug (Linux pciehp) is not on the path.

use crate::vm::VmId;
use crate::vmm::Vmm;
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::Fabric;

impl Vmm {
    /// The VM in host `host` that was given `func` (either path), if any.
    pub fn guest_with(&self, host: HostId, func: FuncId) -> Option<VmId> {
        let (vm, _) = self.assigned.get(&func)?;
        self.vms.get(vm).filter(|v| v.host == host).map(|v| v.id)
    }

    /// The guest driver of `func` in VM `vm` has been told that the device is gone (at `at` ps).
    pub fn guest_removed(&mut self, vm: VmId, func: FuncId, at: u64) {
        self.removals.push((vm, func, at));
    }

    /// When the guest driver of `func` in VM `vm` was told that the device is gone, if it was.
    pub fn guest_removed_at(&self, vm: VmId, func: FuncId) -> Option<u64> {
        self.removals.iter().rev().find(|(v, f, _)| (*v, *f) == (vm, func)).map(|(_, _, at)| *at)
    }
}

/// From the host driver's `remove` to the guest driver's (see the module docs).
pub fn forward_ps(f: &Fabric) -> u64 {
    let p = crate::params::params();
    p.eventfd_irqfd_ps + p.guest_irq_entry_ps + f.tuning().timing.hotplug_remove_ps
}
