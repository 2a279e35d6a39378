//! The kernel interface for a software thread on the one clock ([`devlend_engine::machine`]).
//!
//! [`ThreadOs`] is `Os` for a thread of a `Machine<Cluster>`: control-plane calls (PCI lookups,
//! the DMA API, interrupts' set-up, allocation) are the host kernel's own (`HostOs`) and take no
//! simulated time here; CPU loads and stores are TLPs on the machine, so a register read blocks
//! the thread for its round trip and a store for its issue; waiting for an interrupt or polling
//! memory suspends the thread until the landing that satisfies it. Drivers written against `Os`
//! run here unchanged.
//!
//! A thread with a `ThreadOs` runs on that host (`Thread::runs_on`): the host's crash stops it.
//! The device a thread drives is the first whose BAR it loads from or stores to (a doorbell, a
//! register), or that it maps, masters or takes interrupts of; when that
//! device's removal reaches this host's driver (`Cluster::driver_removed`, the hot-plug steps of
//! `crate::fault`), a wait of the thread for it ends at once with "no such device" (Linux's
//! ENODEV from a removed device's driver), whatever its timeout.
//!
//! An interrupt a driver sleeps for wakes it only after the host's interrupt entry (its
//! `irq_entry_ps`, the same cost the VM interrupt path charges at every host it crosses): the
//! MSI's landing starts the entry, the driver runs when it is over.

use crate::api::Os;
use crate::cluster::Cluster;
use crate::error::{HResult, HostError, NoSuch};
use crate::kernel::DevId;
use crate::os::{check_cpu_range, DmaDir, HostOs};
use devlend_engine::machine::{Thread, ThreadError, Watch, World};
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::route::Failure;
use devlend_fabric::Fabric;
use std::cell::Cell;

impl World for Cluster {
    fn fabric(&mut self) -> &mut Fabric {
        &mut self.fabric
    }
}

/// Whose kernel a machine thread runs: a host's ([`ThreadOs`], for a `HostId`), or another
/// kernel with the same interface (a VM's guest kernel, devlend-vm). Workloads written against
/// it (fio's threads) run in either.
pub trait ThreadKernel: Clone + 'static {
    type Os<'t, 'y: 't>: Os;
    /// The kernel's `Os` for thread `t`.
    fn on<'t, 'y: 't>(&self, t: &'t Thread<'y, Cluster>) -> HResult<Self::Os<'t, 'y>>;
}

impl ThreadKernel for HostId {
    type Os<'t, 'y: 't> = ThreadOs<'t, 'y>;
    fn on<'t, 'y: 't>(&self, t: &'t Thread<'y, Cluster>) -> HResult<ThreadOs<'t, 'y>> {
        Ok(ThreadOs::new(t, *self))
    }
}

/// `Os` for host `host`, acting through machine thread `t`.
pub struct ThreadOs<'t, 'y> {
    t: &'t Thread<'y, Cluster>,
    host: HostId,
    /// The device this thread drives, and since when.
    drives: Cell<Option<(FuncId, u64)>>,
}

impl<'t, 'y> ThreadOs<'t, 'y> {
    pub fn new(t: &'t Thread<'y, Cluster>, host: HostId) -> ThreadOs<'t, 'y> {
        t.runs_on(host);
        ThreadOs { t, host, drives: Cell::new(None) }
    }

    /// The thread drives `dev` from now on (the first device it touches).
    fn drive(&self, dev: DevId) {
        if self.drives.get().is_none() {
            let func = self.t.world().kernels[self.host as usize].device(dev).map(|d| d.func);
            if let Ok(func) = func {
                self.drives.set(Some((func, self.t.now())));
            }
        }
    }

    /// The thread drives the device whose BAR (as this host sees it) holds `addr`, if any and if
    /// it drives none yet.
    fn drive_at(&self, addr: u64) {
        if self.drives.get().is_some() {
            return;
        }
        let c = self.t.world();
        let hit = c.kernels[self.host as usize]
            .devices()
            .find(|d| !d.is_ntb && d.bars.iter().any(|b| addr >= b.cpu_addr && addr - b.cpu_addr < b.size))
            .map(|d| d.func);
        if let Some(func) = hit {
            self.drives.set(Some((func, self.t.now())));
        }
    }

    /// A predicate that also holds once the driven device's removal has reached this host.
    fn or_removed(&self, mut pred: impl FnMut(&mut Cluster) -> bool + 'static) -> impl FnMut(&mut Cluster) -> bool + 'static {
        let (host, drives) = (self.host, self.drives.get());
        move |c: &mut Cluster| pred(c) || drives.is_some_and(|(func, since)| c.removed_at(host, func).is_some_and(|at| at >= since))
    }

    /// "No such device" if the driven device's removal has reached this host.
    fn check_removed(&self) -> HResult<()> {
        let Some((func, since)) = self.drives.get() else { return Ok(()) };
        let c = self.t.world();
        match c.removed_at(self.host, func) {
            Some(at) if at >= since => {
                Err(HostError::NoDevice(NoSuch::Removed { device: c.fabric.func(func).name.clone(), host: c.fabric.host(self.host).name.clone(), at }))
            }
            _ => Ok(()),
        }
    }

    /// The host kernel, for a timeless call.
    fn with<R>(&self, f: impl FnOnce(&mut HostOs<'_>) -> R) -> R {
        let mut w = self.t.world();
        let mut os = HostOs { c: &mut w, host: self.host };
        f(&mut os)
    }
}

/// Failures a posted write meets without anyone telling the CPU.
fn dropped_posted(f: &Failure) -> bool {
    matches!(
        f,
        Failure::NtbLinkDown { .. } | Failure::PortDown { .. } | Failure::Unresponsive { .. } | Failure::Unsupported { .. } | Failure::NtbUnmapped { .. }
    )
}

fn fault(e: ThreadError) -> HostError {
    match e {
        ThreadError::Access { addr, failure, .. } => HostError::Fault { addr, failure, during: None },
        // Not a data-path fault: the machine refused the access before it reached the fabric
        // (more bytes than one call moves); the thread's own message says so.
        other => HostError::Invalid(other.to_string()),
    }
}

impl Os for ThreadOs<'_, '_> {
    fn host(&self) -> HostId {
        self.host
    }
    fn run_hardware<R>(&mut self, hw: impl FnOnce(&mut Fabric) -> R) -> R {
        hw(&mut self.t.world().fabric)
    }
    fn find(&self, name: &str) -> HResult<DevId> {
        self.with(|os| os.find(name))
    }
    fn pci_iomap(&self, dev: DevId, bar: u8) -> HResult<u64> {
        self.drive(dev);
        self.with(|os| os.pci_iomap(dev, bar))
    }
    fn pci_resource_len(&self, dev: DevId, bar: u8) -> HResult<u64> {
        self.with(|os| os.pci_resource_len(dev, bar))
    }
    fn pci_set_master(&mut self, dev: DevId) -> HResult<()> {
        self.drive(dev);
        self.with(|os| os.pci_set_master(dev))
    }
    fn pci_clear_master(&mut self, dev: DevId) -> HResult<()> {
        self.with(|os| os.pci_clear_master(dev))
    }
    fn pci_read_config(&self, dev: DevId, off: usize, len: usize) -> HResult<u32> {
        self.with(|os| os.pci_read_config(dev, off, len))
    }
    fn kmalloc(&mut self, size: u64) -> HResult<u64> {
        self.with(|os| os.kmalloc(size))
    }
    fn kfree(&mut self, phys: u64) -> HResult<()> {
        self.with(|os| os.kfree(phys))
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> HResult<()> {
        check_cpu_range(addr, data.len())?;
        self.drive_at(addr);
        match self.t.cpu_write(self.host, addr, data) {
            // A posted write to a target that is gone is dropped on the way (PCIe Base 4.0
            // §2.9.1: a port whose link is down, or the NTB whose link is, discards it; §2.8: a
            // hung completer swallows it; an Unsupported Request for a posted write gets no
            // completion, §2.3.1): the store returns, the fabric has recorded the failure, and
            // the driver learns of it from a later read (all ones) or its own timeout.
            Err(ThreadError::Access { failure, .. }) if dropped_posted(&failure.failure) => Ok(()),
            r => r.map_err(fault),
        }
    }
    fn read(&mut self, addr: u64, len: usize) -> HResult<Vec<u8>> {
        check_cpu_range(addr, len)?;
        self.drive_at(addr);
        self.t.cpu_read(self.host, addr, len).map_err(fault)
    }
    fn dma_map_single(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64> {
        self.with(|os| os.dma_map_single(dev, phys, len, dir))
    }
    fn dma_unmap_single(&mut self, dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()> {
        self.with(|os| os.dma_unmap_single(dev, dma, len, dir))
    }
    fn dma_alloc_coherent(&mut self, dev: DevId, len: u64) -> HResult<(u64, u64)> {
        self.with(|os| os.dma_alloc_coherent(dev, len))
    }
    fn dma_free_coherent(&mut self, dev: DevId, len: u64, cpu: u64, dma: u64) -> HResult<()> {
        self.with(|os| os.dma_free_coherent(dev, len, cpu, dma))
    }
    fn dma_map_resource(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64> {
        self.with(|os| os.dma_map_resource(dev, phys, len, dir))
    }
    fn dma_unmap_resource(&mut self, dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()> {
        self.with(|os| os.dma_unmap_resource(dev, dma, len, dir))
    }
    fn request_irq(&mut self, dev: DevId, entry: u16, handler: u32) -> HResult<u8> {
        self.drive(dev);
        self.with(|os| os.request_irq(dev, entry, handler))
    }
    fn free_irq(&mut self, dev: DevId, entry: u16) -> HResult<()> {
        self.with(|os| os.free_irq(dev, entry))
    }
    fn irq_count(&mut self, vector: u8) -> u64 {
        self.with(|os| os.irq_count(vector))
    }
    fn wait_irq(&mut self, vector: u8, seen: u64) -> HResult<u64> {
        let host = self.host;
        let what = format!("interrupt vector {vector} of host {} (seen {seen})", self.with(|os| os.c.fabric.host(host).name.clone()));
        let arrived = move |c: &mut Cluster| HostOs { c, host }.irq_count(vector) > seen;
        let pending = arrived(&mut self.t.world());
        if !pending {
            self.t.wait_for(what, Watch::Msi { host }, self.or_removed(arrived));
            self.check_removed()?;
            // Asleep when it came: the interrupt entry runs before the driver does. One that came
            // while the driver ran was entered then, off the driver's path.
            let entry = self.t.world().fabric.tuning().host(host).irq_entry_ps;
            self.t.sleep(entry);
        }
        Ok(self.irq_count(vector))
    }
    fn wait_irq_for(&mut self, vector: u8, seen: u64, timeout_ps: u64) -> HResult<Option<u64>> {
        let host = self.host;
        let arrived = move |c: &mut Cluster| HostOs { c, host }.irq_count(vector) > seen;
        if !arrived(&mut self.t.world()) {
            let what = format!("interrupt vector {vector} of host {host} (seen {seen}, timeout {timeout_ps} ps)");
            let deadline = self.t.now().saturating_add(timeout_ps);
            let held = self.t.wait_for_until(what, Watch::Msi { host }, deadline, self.or_removed(arrived));
            self.check_removed()?;
            if !held {
                return Ok(None);
            }
            let entry = self.t.world().fabric.tuning().host(host).irq_entry_ps;
            self.t.sleep(entry);
        }
        Ok(Some(self.irq_count(vector)))
    }
    fn poll_for(&mut self, addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool, timeout_ps: u64) -> HResult<Option<Vec<u8>>> {
        check_cpu_range(addr, len)?;
        let host = self.host;
        let watch = Watch::Ram { host, addr, len: len as u64 };
        let deadline = self.t.now().saturating_add(timeout_ps);
        let holds = move |c: &mut Cluster| done(&c.fabric.read(devlend_fabric::Requester::Cpu(host), addr, len).0);
        let held = self.t.wait_for_until(format!("{what} at {addr:#x}"), watch, deadline, self.or_removed(holds));
        self.check_removed()?;
        if !held {
            return Ok(None);
        }
        self.read(addr, len).map(Some)
    }
    fn spend(&mut self, ps: u64) {
        self.t.sleep(ps);
    }
    fn poll(&mut self, addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool) -> HResult<Vec<u8>> {
        check_cpu_range(addr, len)?;
        let host = self.host;
        let what = format!("{what} at {addr:#x}");
        // A word the CPU reads in its own RAM: watch the landings there (with an IOMMU off the
        // bus address is the physical one; `addr` is physical here).
        let watch = Watch::Ram { host, addr, len: len as u64 };
        self.t.wait_for(what, watch, self.or_removed(move |c: &mut Cluster| done(&c.fabric.read(devlend_fabric::Requester::Cpu(host), addr, len).0)));
        self.check_removed()?;
        // The poll that sees it: one load.
        self.read(addr, len)
    }
}
