//! The kernel interface for a software thread on the one clock ([`devlend_engine::machine`]).
//!
//! [`ThreadOs`] is `Os` for a thread of a `Machine<Cluster>`, the one timed kernel interface for
//! every kernel a thread can run ([`ThreadKernel`]: a host's, `HostId`, whose timeless kernel is
//! `HostOs`; a VM's guest kernel, `devlend_vm::GuestKernel`). Control-plane calls (PCI lookups,
//! the DMA API, interrupts' set-up, allocation) are the kernel's own timeless ones and take no
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
use crate::error::{BadAccess, HResult, HostError, NoSuch};
use crate::kernel::DevId;
use crate::os::{check_cpu_range, DmaDir, HostOs};
use devlend_engine::machine::{RunFailure, Thread, ThreadError, Watch, World};
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::route::Failure;
use devlend_fabric::Fabric;
use std::cell::Cell;

impl World for Cluster {
    fn fabric(&mut self) -> &mut Fabric {
        &mut self.fabric
    }
}

/// Whose kernel a machine thread runs: a host's (a `HostId`), or another kernel with the same
/// interface (a VM's guest kernel, `devlend_vm::GuestKernel`). It says what differs between them
/// (which device a handle or an address names, where a CPU access lands, how interrupts are
/// counted and entered); [`ThreadOs`] is the one timed `Os` over any of them, so drivers and
/// workloads written against `Os` (fio's threads) run in either.
pub trait ThreadKernel: Clone + 'static {
    /// The kernel's own `Os`, timeless: its control-plane calls.
    type Timeless<'a>: Os;
    /// The host whose CPUs run the kernel.
    fn cpu_host(&self, c: &Cluster) -> HResult<HostId>;
    /// Run `f` on the kernel's timeless `Os`.
    fn timeless<R>(&self, c: &mut Cluster, f: impl FnOnce(&mut Self::Timeless<'_>) -> R) -> R;
    /// The function behind the kernel's device handle `dev`.
    fn func_of(&self, c: &Cluster, dev: DevId) -> Option<FuncId>;
    /// The device (not an NTB) whose BAR holds CPU address `addr` as this kernel sees it.
    fn func_at(&self, c: &Cluster, addr: u64) -> Option<FuncId>;
    /// When `func`'s removal reached this kernel's driver, if it has.
    fn removed_at(&self, c: &Cluster, func: FuncId) -> Option<u64>;
    /// The kernel as a message names it: a host by its name, a VM as "VM v1".
    fn name(&self, c: &Cluster) -> String;
    /// The host-physical pieces behind a CPU access of `len` bytes at `addr`, or None when the
    /// kernel's own handler takes it (a trapped page): then it is a timeless call.
    fn cpu_pieces(&self, addr: u64, len: usize) -> HResult<Option<Vec<(u64, usize)>>>;
    /// Interrupts counted on `vector` (as the kernel's handler has seen them).
    fn irq_count(&self, c: &mut Cluster, vector: u8) -> u64;
    /// The interrupt entry a driver asleep for an interrupt waits out before it runs (ps); zero
    /// where the delivery already charged it (a VM's vCPU injects after the host's entry).
    fn irq_entry_ps(&self, c: &Cluster) -> u64;

    /// The kernel's `Os` for thread `t`.
    fn on<'t, 'y: 't>(&self, t: &'t Thread<'y, Cluster>) -> HResult<ThreadOs<'t, 'y, Self>> {
        let host = self.cpu_host(&t.world())?;
        Ok(ThreadOs::start(t, self.clone(), host))
    }
}

impl ThreadKernel for HostId {
    type Timeless<'a> = HostOs<'a>;
    fn cpu_host(&self, _: &Cluster) -> HResult<HostId> {
        Ok(*self)
    }
    fn timeless<R>(&self, c: &mut Cluster, f: impl FnOnce(&mut HostOs<'_>) -> R) -> R {
        f(&mut HostOs { c, host: *self })
    }
    fn func_of(&self, c: &Cluster, dev: DevId) -> Option<FuncId> {
        c.kernels[*self as usize].device(dev).ok().map(|d| d.func)
    }
    fn func_at(&self, c: &Cluster, addr: u64) -> Option<FuncId> {
        let mut devices = c.kernels[*self as usize].devices();
        devices.find(|d| !d.is_ntb && d.bars.iter().any(|b| addr >= b.cpu_addr && addr - b.cpu_addr < b.size)).map(|d| d.func)
    }
    fn removed_at(&self, c: &Cluster, func: FuncId) -> Option<u64> {
        c.removed_at(*self, func)
    }
    fn name(&self, c: &Cluster) -> String {
        c.fabric.host(*self).name.clone()
    }
    fn cpu_pieces(&self, addr: u64, len: usize) -> HResult<Option<Vec<(u64, usize)>>> {
        check_cpu_range(addr, len)?;
        Ok(Some(vec![(addr, len)]))
    }
    fn irq_count(&self, c: &mut Cluster, vector: u8) -> u64 {
        HostOs { c, host: *self }.irq_count(vector)
    }
    fn irq_entry_ps(&self, c: &Cluster) -> u64 {
        c.fabric.tuning().host(*self).irq_entry_ps
    }
}

/// `Os` for kernel `K` (a host's: `ThreadOs<'_, '_>`; a VM's: `devlend_vm::GuestThreadOs`),
/// acting through machine thread `t`.
pub struct ThreadOs<'t, 'y, K: ThreadKernel = HostId> {
    t: &'t Thread<'y, Cluster>,
    k: K,
    /// The host whose CPUs run the kernel.
    host: HostId,
    /// The device this thread drives, and since when.
    drives: Cell<Option<(FuncId, u64)>>,
}

impl<'t, 'y> ThreadOs<'t, 'y, HostId> {
    /// Host `host`'s kernel on thread `t`.
    pub fn new(t: &'t Thread<'y, Cluster>, host: HostId) -> ThreadOs<'t, 'y> {
        ThreadOs::start(t, host, host)
    }
}

impl<'t, 'y, K: ThreadKernel> ThreadOs<'t, 'y, K> {
    /// Kernel `k` on thread `t`, whose CPU is one of `host`'s: that host's crash stops it.
    fn start(t: &'t Thread<'y, Cluster>, k: K, host: HostId) -> ThreadOs<'t, 'y, K> {
        t.runs_on(host);
        ThreadOs { t, k, host, drives: Cell::new(None) }
    }

    /// The time now, on the machine.
    pub fn now(&self) -> u64 {
        self.t.now()
    }

    /// Suspend until `pred` holds (or no later than `deadline`): whether it held.
    fn wait(&self, what: String, watch: Watch, deadline: Option<u64>, pred: impl FnMut(&mut Cluster) -> bool + 'static) -> bool {
        match deadline {
            None => {
                self.t.wait_for(what, watch, pred);
                true
            }
            Some(d) => self.t.wait_for_until(what, watch, d, pred),
        }
    }

    /// The thread drives `func` from now on, if it drives none yet (the first device it touches).
    fn drive(&self, func: Option<FuncId>) {
        if let (None, Some(func)) = (self.drives.get(), func) {
            self.drives.set(Some((func, self.t.now())));
        }
    }

    fn drive_dev(&self, dev: DevId) {
        if self.drives.get().is_none() {
            self.drive(self.k.func_of(&self.t.world(), dev));
        }
    }

    /// The thread drives the device whose BAR holds `addr`, if any and if it drives none yet.
    fn drive_at(&self, addr: u64) {
        if self.drives.get().is_none() {
            self.drive(self.k.func_at(&self.t.world(), addr));
        }
    }

    /// A predicate that also holds once the driven device's removal has reached this kernel.
    fn or_removed(&self, mut pred: impl FnMut(&mut Cluster) -> bool + 'static) -> impl FnMut(&mut Cluster) -> bool + 'static {
        let (k, drives) = (self.k.clone(), self.drives.get());
        move |c: &mut Cluster| pred(c) || drives.is_some_and(|(func, since)| k.removed_at(c, func).is_some_and(|at| at >= since))
    }

    /// "No such device" if the driven device's removal has reached this kernel.
    fn check_removed(&self) -> HResult<()> {
        let Some((func, since)) = self.drives.get() else { return Ok(()) };
        let c = self.t.world();
        match self.k.removed_at(&c, func) {
            Some(at) if at >= since => Err(HostError::NoDevice(NoSuch::Removed { device: c.fabric.func(func).name.clone(), host: self.k.name(&c), at })),
            _ => Ok(()),
        }
    }

    /// The kernel, for a timeless call.
    fn with<R>(&self, f: impl FnOnce(&mut K::Timeless<'_>) -> R) -> R {
        self.k.timeless(&mut self.t.world(), f)
    }

    /// Wait (if it has not come) for one more interrupt than `seen` on `vector`, no later than
    /// `deadline`; then the interrupt entry. Whether it came.
    fn wait_irq_until(&mut self, vector: u8, seen: u64, deadline: Option<u64>) -> HResult<bool> {
        if self.k.irq_count(&mut self.t.world(), vector) > seen {
            return Ok(true);
        }
        let k = self.k.clone();
        let arrived = move |c: &mut Cluster| k.irq_count(c, vector) > seen;
        let mut what = format!("interrupt vector {vector} of {} (seen {seen})", self.k.name(&self.t.world()));
        if let Some(d) = deadline {
            what += &format!(", timeout at {d} ps");
        }
        let came = self.wait(what, Watch::Msi { host: self.host }, deadline, self.or_removed(arrived));
        self.check_removed()?;
        if came {
            // Asleep when it came: the interrupt entry runs before the driver does. One that came
            // while the driver ran was entered then, off the driver's path.
            let entry = self.k.irq_entry_ps(&self.t.world());
            self.t.sleep(entry);
        }
        Ok(came)
    }

    /// The host RAM behind `len` bytes at `addr` that a driver polls: (address, length).
    fn ram_word(&self, addr: u64, len: usize) -> HResult<(u64, usize)> {
        match self.k.cpu_pieces(addr, len)?.as_deref() {
            Some(&[piece]) => Ok(piece),
            _ => Err(BadAccess::PollNotRam { addr, len }.into()),
        }
    }

    /// Wait until `done` holds for the RAM word at `addr` (or the driven device is removed), no
    /// later than `deadline`; then the load that sees it.
    fn poll_until(&mut self, addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool, deadline: Option<u64>) -> HResult<Option<Vec<u8>>> {
        let (hpa, n) = self.ram_word(addr, len)?;
        let host = self.host;
        let watch = Watch::Ram { host, addr: hpa, len: n as u64 };
        let holds = move |c: &mut Cluster| done(&c.fabric.read(devlend_fabric::Requester::Cpu(host), hpa, n).0);
        let held = self.wait(format!("{what} at {addr:#x}"), watch, deadline, self.or_removed(holds));
        self.check_removed()?;
        if !held {
            return Ok(None);
        }
        // The poll that sees it: one load.
        self.read(addr, len).map(Some)
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
        ThreadError::TooLarge { thread, addr, len } => BadAccess::Thread { thread, failure: RunFailure::TooLarge { addr, len } }.into(),
        ThreadError::HostCrashed { thread, host, at } => BadAccess::Thread { thread, failure: RunFailure::HostCrashed { host, at } }.into(),
        ThreadError::Other(e) => BadAccess::ThreadBody { message: e.to_string() }.into(),
    }
}

impl<K: ThreadKernel> Os for ThreadOs<'_, '_, K> {
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
        self.drive_dev(dev);
        self.with(|os| os.pci_iomap(dev, bar))
    }
    fn pci_resource_len(&self, dev: DevId, bar: u8) -> HResult<u64> {
        self.with(|os| os.pci_resource_len(dev, bar))
    }
    fn pci_set_master(&mut self, dev: DevId) -> HResult<()> {
        self.drive_dev(dev);
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
        self.drive_at(addr);
        let Some(pieces) = self.k.cpu_pieces(addr, data.len())? else {
            return self.with(|os| os.write(addr, data));
        };
        let mut at = 0;
        for (hpa, n) in pieces {
            match self.t.cpu_write(self.host, hpa, &data[at..at + n]) {
                // A posted write to a target that is gone is dropped on the way (PCIe Base 4.0
                // §2.9.1: a port whose link is down, or the NTB whose link is, discards it; §2.8:
                // a hung completer swallows it; an Unsupported Request for a posted write gets no
                // completion, §2.3.1): the store returns, the fabric has recorded the failure, and
                // the driver learns of it from a later read (all ones) or its own timeout.
                Err(ThreadError::Access { failure, .. }) if dropped_posted(&failure.failure) => {}
                r => r.map_err(fault)?,
            }
            at += n;
        }
        Ok(())
    }
    fn read(&mut self, addr: u64, len: usize) -> HResult<Vec<u8>> {
        self.drive_at(addr);
        let Some(pieces) = self.k.cpu_pieces(addr, len)? else {
            return self.with(|os| os.read(addr, len));
        };
        let mut out = Vec::with_capacity(len);
        for (hpa, n) in pieces {
            out.extend(self.t.cpu_read(self.host, hpa, n).map_err(fault)?);
        }
        Ok(out)
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
        self.drive_dev(dev);
        self.with(|os| os.request_irq(dev, entry, handler))
    }
    fn free_irq(&mut self, dev: DevId, entry: u16) -> HResult<()> {
        self.with(|os| os.free_irq(dev, entry))
    }
    fn irq_count(&mut self, vector: u8) -> u64 {
        self.k.irq_count(&mut self.t.world(), vector)
    }
    fn wait_irq(&mut self, vector: u8, seen: u64) -> HResult<u64> {
        self.wait_irq_until(vector, seen, None)?;
        Ok(self.irq_count(vector))
    }
    fn wait_irq_for(&mut self, vector: u8, seen: u64, timeout_ps: u64) -> HResult<Option<u64>> {
        let deadline = self.t.now().saturating_add(timeout_ps);
        let came = self.wait_irq_until(vector, seen, Some(deadline))?;
        Ok(came.then(|| self.irq_count(vector)))
    }
    fn poll(&mut self, addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool) -> HResult<Vec<u8>> {
        Ok(self.poll_until(addr, len, what, done, None)?.unwrap_or_default())
    }
    fn poll_for(&mut self, addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool, timeout_ps: u64) -> HResult<Option<Vec<u8>>> {
        let deadline = self.t.now().saturating_add(timeout_ps);
        self.poll_until(addr, len, what, done, Some(deadline))
    }
    fn spend(&mut self, ps: u64) {
        self.t.sleep(ps);
    }
}
