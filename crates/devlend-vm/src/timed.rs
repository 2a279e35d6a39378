//! The guest kernel on the one clock: [`GuestThreadOs`] is `Os` for a VM's kernel running on a
//! thread of a `Machine<Cluster>` (the vCPU): the one timed kernel interface,
//! `devlend_host::ThreadOs`, over [`GuestKernel`], which says only what differs from a host's
//! kernel (below).
//!
//! Control-plane calls (PCI lookups, config space, the DMA API, interrupts' set-up, allocation)
//! are the guest kernel's own ([`GuestOs`], trapped by the hypervisor where it traps) and take
//! no simulated time. A CPU load or store of the guest goes through the EPT (`Vm::translate`)
//! and is then the host CPU's access on the machine: a TLP for a BAR (the device's own, or the
//! NTB window onto a borrowed one), the host's RAM for guest RAM. Guest CPU accesses cost what the
//! host CPU's do: no EPT walk or VM exit is modelled on them (stores to BARs of passed-through
//! devices are not trapped once the EPT maps them; 000 §5 passes BARs through). A store to the
//! trapped MSI-X table page goes to the hypervisor, timelessly.
//!
//! Interrupts reach the guest through the hypervisor's handler threads ([`crate::irq_clock`]):
//! `wait_irq` sleeps until the vCPU thread has injected one more on the vector (the host's
//! interrupt entry is already charged on that path, so the guest adds none of its own).
//!
//! The guest kernel runs on the VM's host (`Thread::runs_on`): that host's crash stops it there.
//! As for a host's driver, the device a thread drives is the first whose BAR it loads from or
//! stores to, or that it maps, masters or takes interrupts of; once that device's removal has
//! been forwarded into the guest ([`crate::unplug`]), a wait of the thread for it ends at once
//! with "no such device". A posted store the fabric drops (a link down, an NTB unmapped) returns
//! as a host CPU's does.

use crate::error::RunError;
use crate::guest::GuestOs;
use crate::vm::VmId;
use crate::vmm::Vmm;
use devlend_engine::machine::ThreadError;
use devlend_fabric::model::{FuncId, HostId};
use devlend_host::{Cluster, DevId, HResult, HostError, Os, ThreadKernel, ThreadOs};
use std::cell::RefCell;
use std::rc::Rc;

/// A VM's guest kernel, for machine threads: [`GuestThreadOs`] is the timed `Os` over it.
#[derive(Clone)]
pub struct GuestKernel {
    pub vmm: Rc<RefCell<Vmm>>,
    pub vm: VmId,
}

/// `Os` for a VM's kernel, acting through a machine thread (the vCPU).
pub type GuestThreadOs<'t, 'y> = ThreadOs<'t, 'y, GuestKernel>;

impl ThreadKernel for GuestKernel {
    type Timeless<'a> = GuestOs<'a>;
    fn cpu_host(&self, _: &Cluster) -> HResult<HostId> {
        Ok(self.vmm.borrow().vm(self.vm)?.host)
    }
    fn timeless<R>(&self, c: &mut Cluster, f: impl FnOnce(&mut GuestOs<'_>) -> R) -> R {
        let mut vmm = self.vmm.borrow_mut();
        f(&mut GuestOs { c, vmm: &mut vmm, vm: self.vm })
    }
    fn func_of(&self, _: &Cluster, dev: DevId) -> Option<FuncId> {
        self.vmm.borrow().dev(self.vm, dev).ok().map(|d| d.func)
    }
    /// The guest device whose BAR (at its guest-physical address) holds `gpa`.
    fn func_at(&self, _: &Cluster, gpa: u64) -> Option<FuncId> {
        let vmm = self.vmm.borrow();
        let v = vmm.vm(self.vm).ok()?;
        v.devices.values().find(|d| d.bars.iter().any(|b| gpa >= b.gpa && gpa - b.gpa < b.size)).map(|d| d.func)
    }
    /// Once forwarded into the guest ([`crate::unplug`]).
    fn removed_at(&self, _: &Cluster, func: FuncId) -> Option<u64> {
        self.vmm.borrow().guest_removed_at(self.vm, func)
    }
    fn name(&self, _: &Cluster) -> String {
        self.vmm.borrow().vm(self.vm).map_or_else(|_| format!("VM #{}", self.vm.0), |v| format!("VM {}", v.name))
    }
    /// Through the EPT (`Vm::translate`); the trapped MSI-X table page goes to the hypervisor.
    fn cpu_pieces(&self, gpa: u64, len: usize) -> HResult<Option<Vec<(u64, usize)>>> {
        let vmm = self.vmm.borrow();
        if vmm.msix_trap(self.vm, gpa, len).is_some() {
            return Ok(None);
        }
        vmm.vm(self.vm)?.translate(gpa, len).map(Some).map_err(HostError::Ept)
    }
    /// As the vCPU thread has injected them.
    fn irq_count(&self, _: &mut Cluster, vector: u8) -> u64 {
        let vmm = self.vmm.borrow();
        vmm.vms.get(&self.vm).and_then(|v| v.irqs.descs.get(&vector)).map_or(0, |d| d.count)
    }
    /// The vCPU injects after the host's entry and its own delivery (`crate::irq_clock`).
    fn irq_entry_ps(&self, _: &Cluster) -> u64 {
        0
    }
}

/// A device model for [`on_machine`]: its function and the actor.
pub type Actor = (devlend_fabric::model::FuncId, Rc<RefCell<dyn devlend_engine::machine::Device<Cluster>>>);

/// A machine that has run, the hypervisor beside it, and the time the guest's body ran (ps).
pub type Ran = (devlend_engine::machine::Machine<Cluster>, Rc<RefCell<Vmm>>, u64);

/// VM `vm`'s guest kernel on one machine: `devices` as actors, the VM's interrupt path
/// (`irq_clock`), and a thread of the guest kernel running `body`. Returns the machine, the
/// hypervisor, and the time `body` ran.
pub fn on_machine<E: Into<Box<dyn std::error::Error>>>(
    c: Cluster,
    vmm: Vmm,
    vm: VmId,
    devices: Vec<Actor>,
    body: impl FnOnce(&mut GuestThreadOs) -> Result<(), E> + 'static,
) -> Result<Ran, RunError> {
    let mut m = devlend_engine::machine::Machine::new(c);
    for (func, d) in devices {
        m.add_device(func, d);
    }
    let vmm = Rc::new(RefCell::new(vmm));
    crate::irq_clock::spawn(&mut m, &vmm, vm).map_err(RunError::IrqPath)?;
    let span = Rc::new(std::cell::Cell::new(0));
    let (out, v) = (span.clone(), vmm.clone());
    m.spawn("guest", 0, move |t| {
        let t0 = t.now();
        let mut os = GuestKernel { vmm: v, vm }.on(t).map_err(ThreadError::other)?;
        body(&mut os).map_err(|e| ThreadError::Other(e.into()))?;
        out.set(t.now() - t0);
        Ok(())
    });
    m.run().map_err(RunError::Machine)?;
    Ok((m, vmm, span.get()))
}

/// The cluster and the hypervisor back from a machine that has run, for timeless steps between
/// runs (hot-plug, migration).
pub fn back(m: devlend_engine::machine::Machine<Cluster>, vmm: Rc<RefCell<Vmm>>) -> Result<(Cluster, Vmm), RunError> {
    let c = m.into_world().map_err(|_| RunError::WorldHeld)?;
    let vmm = Rc::try_unwrap(vmm).map_err(|_| RunError::VmmShared)?.into_inner();
    Ok((c, vmm))
}

/// On a machine: guest device `dev` of VM `vm` interrupts once as itself (a
/// [`crate::irq_clock::Raiser`] of MSI-X entry 0, or its INTx line, for the run) and the guest
/// waits on `vector` until the vCPU has injected it. The cluster and the hypervisor back; a wait
/// that never ends is the machine's `Stuck` error.
pub fn raise_once(mut c: Cluster, mut vmm: Vmm, vm: VmId, dev: DevId, vector: u8) -> Result<(Cluster, Vmm), RunError> {
    let guest = |step| move |error| RunError::Guest { step, error };
    let func = vmm.dev(vm, dev).map_err(guest("looking up the guest device"))?.func;
    let os = vmm.guest(&mut c, vm).map_err(guest("entering the guest kernel"))?;
    let (bar0, seen) = (os.pci_iomap(dev, 0).map_err(guest("pci_iomap of BAR 0"))?, os.irq_count(vector));
    let raiser = Rc::new(RefCell::new(crate::irq_clock::Raiser::new(0)));
    let (m, vmm, _) = on_machine(c, vmm, vm, vec![(func, raiser)], move |os| {
        os.write(bar0 + crate::irq_clock::RAISE, &1u32.to_le_bytes())?;
        os.wait_irq(vector, seen).map(|_| ())
    })?;
    back(m, vmm)
}
