//! The guest kernel on the one clock: [`GuestThreadOs`] is `Os` for a VM's kernel running on a
//! thread of a `Machine<Cluster>` (the vCPU), as `devlend_host::ThreadOs` is for a host's.
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
//! `wait_irq` sleeps until the vCPU thread has injected one more on the vector.
//!
//! The guest kernel runs on the VM's host (`Thread::runs_on`): that host's crash stops it there.
//! As `devlend_host::ThreadOs` does for a host's driver, the device a thread drives is the first
//! whose BAR it loads from or stores to, or that it maps, masters or takes interrupts of; once
//! that device's removal has been forwarded into the guest ([`crate::unplug`]), a wait of the
//! thread for it ends at once with "no such device".

use crate::error::RunError;
use crate::guest::GuestOs;
use crate::vm::VmId;
use crate::vmm::Vmm;
use devlend_engine::machine::{Thread, ThreadError, Watch};
use devlend_fabric::model::FuncId;
use devlend_fabric::model::HostId;
use devlend_fabric::{Fabric, Requester};
use devlend_host::NoSuch;
use devlend_host::{Cluster, DevId, DmaDir, HResult, HostError, Os};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// `Os` for VM `vm`'s kernel, acting through machine thread `t`.
pub struct GuestThreadOs<'t, 'y> {
    t: &'t Thread<'y, Cluster>,
    vmm: Rc<RefCell<Vmm>>,
    vm: VmId,
    host: HostId,
    /// The device this thread drives, and since when.
    drives: Cell<Option<(FuncId, u64)>>,
}

fn fault(e: ThreadError) -> HostError {
    match e {
        ThreadError::Access { addr, failure, .. } => HostError::Fault { addr, failure, during: None },
        // Not a data-path fault: the machine refused the access before it reached the fabric
        // (more bytes than one call moves); the thread's own message says so.
        other => HostError::Invalid(other.to_string()),
    }
}

/// Guest interrupt `vector`'s count, as the vCPU thread has injected them.
fn injected(vmm: &Vmm, vm: VmId, vector: u8) -> u64 {
    vmm.vms.get(&vm).and_then(|v| v.irqs.descs.get(&vector)).map_or(0, |d| d.count)
}

impl<'t, 'y> GuestThreadOs<'t, 'y> {
    pub fn new(t: &'t Thread<'y, Cluster>, vmm: Rc<RefCell<Vmm>>, vm: VmId) -> HResult<GuestThreadOs<'t, 'y>> {
        let host = vmm.borrow().vm(vm)?.host;
        t.runs_on(host);
        Ok(GuestThreadOs { t, vmm, vm, host, drives: Cell::new(None) })
    }

    /// The thread drives guest device `dev` from now on (the first device it touches).
    fn drive(&self, dev: DevId) {
        if self.drives.get().is_none() {
            if let Ok(d) = self.vmm.borrow().dev(self.vm, dev) {
                self.drives.set(Some((d.func, self.t.now())));
            }
        }
    }

    /// The thread drives the guest device whose BAR (at its guest-physical address) holds `gpa`,
    /// if any and if it drives none yet.
    fn drive_at(&self, gpa: u64) {
        if self.drives.get().is_some() {
            return;
        }
        let vmm = self.vmm.borrow();
        let Ok(v) = vmm.vm(self.vm) else { return };
        if let Some(d) = v.devices.values().find(|d| d.bars.iter().any(|b| gpa >= b.gpa && gpa - b.gpa < b.size)) {
            self.drives.set(Some((d.func, self.t.now())));
        }
    }

    /// A predicate that also holds once the driven device's removal has reached the guest.
    fn or_removed(&self, mut pred: impl FnMut(&mut Cluster) -> bool + 'static) -> impl FnMut(&mut Cluster) -> bool + 'static {
        let (vmm, vm, drives) = (self.vmm.clone(), self.vm, self.drives.get());
        move |c: &mut Cluster| pred(c) || drives.is_some_and(|(func, since)| vmm.borrow().guest_removed_at(vm, func).is_some_and(|at| at >= since))
    }

    /// "No such device" if the driven device's removal has reached the guest.
    fn check_removed(&self) -> HResult<()> {
        let Some((func, since)) = self.drives.get() else { return Ok(()) };
        let vmm = self.vmm.borrow();
        match vmm.guest_removed_at(self.vm, func) {
            Some(at) if at >= since => {
                let device = self.t.world().fabric.func(func).name.clone();
                let host = vmm.vm(self.vm).map(|v| format!("VM {}", v.name))?;
                Err(HostError::NoDevice(NoSuch::Removed { device, host, at }))
            }
            _ => Ok(()),
        }
    }

    /// The time now, on the machine.
    pub fn now(&self) -> u64 {
        self.t.now()
    }

    /// The guest kernel, for a timeless call.
    fn with<R>(&self, f: impl FnOnce(&mut GuestOs<'_>) -> R) -> R {
        let mut w = self.t.world();
        let mut vmm = self.vmm.borrow_mut();
        f(&mut GuestOs { c: &mut w, vmm: &mut vmm, vm: self.vm })
    }

    /// Host addresses of a CPU access at `gpa`, or None when it is a trapped MSI-X table access.
    fn ept(&self, gpa: u64, len: usize) -> HResult<Option<Vec<(u64, usize)>>> {
        let vmm = self.vmm.borrow();
        if vmm.msix_trap(self.vm, gpa, len).is_some() {
            return Ok(None);
        }
        vmm.vm(self.vm)?.translate(gpa, len).map(Some).map_err(HostError::Ept)
    }
}

impl Os for GuestThreadOs<'_, '_> {
    fn host(&self) -> HostId {
        self.host
    }
    fn run_hardware<R>(&mut self, hw: impl FnOnce(&mut Fabric) -> R) -> R {
        hw(&mut self.t.world().fabric)
    }
    fn find(&self, name: &str) -> HResult<DevId> {
        self.with(|g| g.find(name))
    }
    fn pci_iomap(&self, dev: DevId, bar: u8) -> HResult<u64> {
        self.drive(dev);
        self.with(|g| g.pci_iomap(dev, bar))
    }
    fn pci_resource_len(&self, dev: DevId, bar: u8) -> HResult<u64> {
        self.with(|g| g.pci_resource_len(dev, bar))
    }
    fn pci_set_master(&mut self, dev: DevId) -> HResult<()> {
        self.drive(dev);
        self.with(|g| g.pci_set_master(dev))
    }
    fn pci_clear_master(&mut self, dev: DevId) -> HResult<()> {
        self.with(|g| g.pci_clear_master(dev))
    }
    fn pci_read_config(&self, dev: DevId, off: usize, len: usize) -> HResult<u32> {
        self.with(|g| g.pci_read_config(dev, off, len))
    }
    fn kmalloc(&mut self, size: u64) -> HResult<u64> {
        self.with(|g| g.kmalloc(size))
    }
    fn kfree(&mut self, phys: u64) -> HResult<()> {
        self.with(|g| g.kfree(phys))
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> HResult<()> {
        self.drive_at(addr);
        let Some(pieces) = self.ept(addr, data.len())? else {
            return self.with(|g| g.write(addr, data));
        };
        let mut at = 0;
        for (hpa, n) in pieces {
            self.t.cpu_write(self.host, hpa, &data[at..at + n]).map_err(fault)?;
            at += n;
        }
        Ok(())
    }
    fn read(&mut self, addr: u64, len: usize) -> HResult<Vec<u8>> {
        self.drive_at(addr);
        let Some(pieces) = self.ept(addr, len)? else {
            return self.with(|g| g.read(addr, len));
        };
        let mut out = Vec::with_capacity(len);
        for (hpa, n) in pieces {
            out.extend(self.t.cpu_read(self.host, hpa, n).map_err(fault)?);
        }
        Ok(out)
    }
    fn dma_map_single(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64> {
        self.with(|g| g.dma_map_single(dev, phys, len, dir))
    }
    fn dma_unmap_single(&mut self, dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()> {
        self.with(|g| g.dma_unmap_single(dev, dma, len, dir))
    }
    fn dma_alloc_coherent(&mut self, dev: DevId, len: u64) -> HResult<(u64, u64)> {
        self.with(|g| g.dma_alloc_coherent(dev, len))
    }
    fn dma_free_coherent(&mut self, dev: DevId, len: u64, cpu: u64, dma: u64) -> HResult<()> {
        self.with(|g| g.dma_free_coherent(dev, len, cpu, dma))
    }
    fn dma_map_resource(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64> {
        self.with(|g| g.dma_map_resource(dev, phys, len, dir))
    }
    fn dma_unmap_resource(&mut self, dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()> {
        self.with(|g| g.dma_unmap_resource(dev, dma, len, dir))
    }
    fn request_irq(&mut self, dev: DevId, entry: u16, handler: u32) -> HResult<u8> {
        self.drive(dev);
        self.with(|g| g.request_irq(dev, entry, handler))
    }
    fn free_irq(&mut self, dev: DevId, entry: u16) -> HResult<()> {
        self.with(|g| g.free_irq(dev, entry))
    }
    fn irq_count(&mut self, vector: u8) -> u64 {
        injected(&self.vmm.borrow(), self.vm, vector)
    }
    fn spend(&mut self, ps: u64) {
        self.t.sleep(ps);
    }
    fn wait_irq(&mut self, vector: u8, seen: u64) -> HResult<u64> {
        let (vmm, vm) = (self.vmm.clone(), self.vm);
        let what = format!("guest interrupt vector {vector:#x} of VM #{} (seen {seen})", vm.0);
        // The vCPU thread injects after a timer of its own: every timer re-checks every wait.
        let came = move |_: &mut Cluster| injected(&vmm.borrow(), vm, vector) > seen;
        self.t.wait_for(what, Watch::Msi { host: self.host }, self.or_removed(came));
        self.check_removed()?;
        Ok(self.irq_count(vector))
    }
    fn wait_irq_for(&mut self, vector: u8, seen: u64, timeout_ps: u64) -> HResult<Option<u64>> {
        let (vmm, vm) = (self.vmm.clone(), self.vm);
        let what = format!("guest interrupt vector {vector:#x} of VM #{} (seen {seen}, timeout {timeout_ps} ps)", vm.0);
        let deadline = self.t.now().saturating_add(timeout_ps);
        let came = move |_: &mut Cluster| injected(&vmm.borrow(), vm, vector) > seen;
        let came = self.t.wait_for_until(what, Watch::Msi { host: self.host }, deadline, self.or_removed(came));
        self.check_removed()?;
        Ok(came.then(|| self.irq_count(vector)))
    }
    fn poll(&mut self, addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool) -> HResult<Vec<u8>> {
        let (host, hpa, n) = self.ram_word(addr, len)?;
        let watch = Watch::Ram { host, addr: hpa, len: n as u64 };
        let holds = move |c: &mut Cluster| done(&c.fabric.read(Requester::Cpu(host), hpa, n).0);
        self.t.wait_for(format!("{what} at guest-physical {addr:#x}"), watch, self.or_removed(holds));
        self.check_removed()?;
        self.read(addr, len)
    }
    fn poll_for(&mut self, addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool, timeout_ps: u64) -> HResult<Option<Vec<u8>>> {
        let (host, hpa, n) = self.ram_word(addr, len)?;
        let watch = Watch::Ram { host, addr: hpa, len: n as u64 };
        let deadline = self.t.now().saturating_add(timeout_ps);
        let what = format!("{what} at guest-physical {addr:#x} (timeout {timeout_ps} ps)");
        let holds = move |c: &mut Cluster| done(&c.fabric.read(Requester::Cpu(host), hpa, n).0);
        let held = self.t.wait_for_until(what, watch, deadline, self.or_removed(holds));
        self.check_removed()?;
        if !held {
            return Ok(None);
        }
        self.read(addr, len).map(Some)
    }
}

impl GuestThreadOs<'_, '_> {
    /// The host RAM behind `len` bytes of guest RAM at `addr` that a driver polls: (host, address, length).
    fn ram_word(&self, addr: u64, len: usize) -> HResult<(HostId, u64, usize)> {
        let pieces = self.ept(addr, len)?.unwrap_or_default();
        let [(hpa, n)] = pieces[..] else {
            return Err(HostError::Invalid(format!("poll of {len} bytes at guest-physical {addr:#x}: not one piece of guest RAM")));
        };
        Ok((self.host, hpa, n))
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
        let mut os = GuestThreadOs::new(t, v, vm).map_err(ThreadError::other)?;
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
    let raiser = Rc::new(RefCell::new(crate::irq_clock::Raiser { entry: 0, sent: Vec::new() }));
    let (m, vmm, _) = on_machine(c, vmm, vm, vec![(func, raiser)], move |os| {
        os.write(bar0 + crate::irq_clock::RAISE, &1u32.to_le_bytes())?;
        os.wait_irq(vector, seen).map(|_| ())
    })?;
    back(m, vmm)
}
