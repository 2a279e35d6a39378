//! The host's part of a driver's data path: the kernel interface a software thread calls on the
//! one clock ([`devlend_engine::machine`]), and the DMA API those calls reach.
//!
//! It is the host's part of the README's walk of one borrowed GPU's host-to-device copy, in two
//! sections, in the order a driver's call takes them:
//!
//! 1. [`ThreadOs`]: the timed `Os` a driver's thread calls; its CPU loads and stores become TLPs
//!    on the machine (`write`, `read`, `poll_until`), its control-plane calls go to the kernel's
//!    timeless ones (`with`);
//! 2. [the DMA API](#the-dma-api) those calls reach on a host's kernel (`HostOs::dma_map_single`
//!    and the rest), and the borrower agent's side of it for a borrowed device
//!    (`LendState::borrowed_map`, `map_into_window`, `map_held`), down to the fabric's IOMMU API.
//!
//! # `ThreadOs`
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
//!
//! # The DMA API
//!
//! The Linux DMA API of one host's kernel (`dma_map_single`, `dma_map_sg`, `dma_alloc_coherent`,
//! `dma_map_resource` and their unmaps), for a local device and for a borrowed one, as Linux's
//! `kernel/dma/mapping.c` hands each device's mappings to its own operations:
//!
//! - a local device's buffer maps through its own IOMMU domain, or is its physical address with
//!   the IOMMU off (`localdma`, Linux `dma-iommu` and `dma-direct`);
//! - a borrowed device's goes to Device Lending's borrower agent (000 §4): "When the device driver
//!   calls the Linux DMA API in order to create DMA buffers, the borrower intercepts these calls.
//!   The borrower injects the I/O address of the DMA window prepared by the lender and sets up a
//!   local IOMMU mapping to the DMA buffer. The driver then passes the injected address to the
//!   device, completely unaware that the address is actually a far-side address." A mapping takes
//!   a page range inside the DMA window (`map_into_window`), maps it through the borrower's IOMMU
//!   (domain of the borrower's adapter, or the device's own) onto the buffer's pages, and hands
//!   out the lender-side address of that range. Under Rem-IOMMU the lender also maps that address
//!   one-to-one in the device's domain (see the module docs of `lending`). Each IOMMU mapping is a
//!   held resource (`map_held`), undone with the driver's unmap or the device's return;
//! - a peer-to-peer mapping (`dma_map_resource`) of a borrowed device, or of a local one onto a
//!   borrowed target, goes to Device Lending's resolution of 000 §6 (`lending::p2p`), which maps a
//!   target BAR into the DMA window as this module maps a buffer.
//!
//! Directions matter: a `ToDevice` mapping is read-only for the device.

use crate::api::Os;
use crate::cluster::Cluster;
use crate::error::{BadAccess, BadDma, BadLend, HResult, HostError, InvalidRequest, NoRoom, NoSuch, NtbUse};
use crate::kernel::{DevId, Origin};
use crate::lending::p2p::Target;
use crate::lending::{atomically, BorrowedMap, DevDomain, Held, LendState};
use crate::localdma::{iova_align, pages};
use crate::os::{check_cpu_range, DmaDir, HostOs};
use devlend_engine::machine::{RunFailure, Thread, ThreadError, Watch, World};
use devlend_fabric::iommu::DomainId;
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

// ---- The DMA API (see the module docs) ----

impl HostOs<'_> {
    /// Map a buffer at `phys` for the device; returns the bus address to program into it.
    pub fn dma_map_single(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64> {
        self.check_ram(phys, len, "dma_map_single")?;
        self.map(dev, phys, len, dir.device_writes())
    }

    pub fn dma_unmap_single(&mut self, dev: DevId, dma: u64, len: u64, _dir: DmaDir) -> HResult<()> {
        self.unmap(dev, dma, len)
    }

    /// Map a scatter list of (phys, len); one bus address per entry. Nothing stays mapped on error.
    pub fn dma_map_sg(&mut self, dev: DevId, sg: &[(u64, u64)], dir: DmaDir) -> HResult<Vec<u64>> {
        let mut out = Vec::with_capacity(sg.len());
        for &(phys, len) in sg {
            let r = self.check_ram(phys, len, "dma_map_sg").and_then(|_| self.map(dev, phys, len, dir.device_writes()));
            match r {
                Ok(a) => out.push(a),
                Err(e) => {
                    for (a, &(_, l)) in out.iter().zip(sg) {
                        let _ = self.unmap(dev, *a, l);
                    }
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Unmap what `dma_map_sg` returned for the same list.
    pub fn dma_unmap_sg(&mut self, dev: DevId, sg: &[(u64, u64)], dma: &[u64], _dir: DmaDir) -> HResult<()> {
        if sg.len() != dma.len() {
            return Err(BadDma::SgCount { entries: sg.len(), addrs: dma.len() }.into());
        }
        for (&(_, len), &a) in sg.iter().zip(dma) {
            self.unmap(dev, a, len)?;
        }
        Ok(())
    }

    /// Allocate memory in this host and map it for the device: (cpu address, bus address).
    pub fn dma_alloc_coherent(&mut self, dev: DevId, len: u64) -> HResult<(u64, u64)> {
        self.dma_dev(dev)?;
        let cpu = self.kmalloc(len)?;
        match self.map(dev, cpu, len, true) {
            Ok(dma) => Ok((cpu, dma)),
            Err(e) => {
                let _ = self.kfree(cpu);
                Err(e)
            }
        }
    }

    pub fn dma_free_coherent(&mut self, dev: DevId, len: u64, cpu: u64, dma: u64) -> HResult<()> {
        if self.kernel().allocation(cpu).is_none_or(|(s, _)| s != cpu) {
            return Err(BadDma::NotCoherent { cpu }.into());
        }
        self.unmap(dev, dma, len)?;
        self.kfree(cpu)
    }

    /// Map `len` bytes at `phys`, inside a BAR of another device this host sees, for `dev`
    /// (peer-to-peer, Linux 4.9+ `dma_map_resource`).
    pub fn dma_map_resource(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64> {
        let (src, origin) = self.dma_dev(dev)?;
        if len == 0 {
            return Err(BadDma::ZeroResource.into());
        }
        let t = self.target(phys, len)?;
        match origin {
            Origin::Local => {
                let dma = self.map(dev, phys, len, dir.device_writes())?;
                if let Origin::Borrowed { .. } = t.origin {
                    let Cluster { fabric, lending, .. } = &mut *self.c;
                    if let Err(e) = lending.local_p2p_acquire(fabric, src, t.func, dma) {
                        let _ = self.unmap(dev, dma, len);
                        return Err(e);
                    }
                }
                Ok(dma)
            }
            Origin::Borrowed { .. } => {
                let Cluster { fabric, lending, .. } = &mut *self.c;
                lending.p2p_map(fabric, src, t, len)
            }
        }
    }

    pub fn dma_unmap_resource(&mut self, dev: DevId, dma: u64, len: u64, _dir: DmaDir) -> HResult<()> {
        let (src, origin) = self.dma_dev(dev)?;
        match origin {
            Origin::Local => self.unmap(dev, dma, len),
            Origin::Borrowed { .. } => {
                let Cluster { fabric, lending, .. } = &mut *self.c;
                lending.p2p_unmap(fabric, src, dma, len)
            }
        }
    }

    fn map(&mut self, dev: DevId, phys: u64, len: u64, write: bool) -> HResult<u64> {
        let (func, origin) = self.dma_dev(dev)?;
        if len == 0 {
            return Err(BadDma::ZeroMapping.into());
        }
        let Cluster { fabric, kernels, lending, .. } = &mut *self.c;
        match origin {
            Origin::Local => {
                let k = &mut kernels[self.host as usize];
                let d = k.dma.get_mut(&dev).ok_or_else(|| HostError::from(BadDma::NoDmaState { dev }))?;
                d.map(fabric, self.host, phys, len, write)
            }
            Origin::Borrowed { .. } => lending.borrowed_map(fabric, func, phys, len, write),
        }
    }

    fn unmap(&mut self, dev: DevId, dma: u64, len: u64) -> HResult<()> {
        let (func, origin) = self.dma_dev(dev)?;
        let Cluster { fabric, kernels, lending, .. } = &mut *self.c;
        match origin {
            Origin::Local => {
                let d = kernels[self.host as usize].dma.get_mut(&dev).ok_or_else(|| HostError::from(BadDma::NoDmaState { dev }))?;
                d.unmap(fabric, self.host, dma, len)?;
                lending.local_p2p_release(fabric, func, dma);
                Ok(())
            }
            Origin::Borrowed { .. } => lending.borrowed_unmap(fabric, func, dma, len),
        }
    }

    /// A device whose DMA the drivers manage: (function, origin).
    fn dma_dev(&self, dev: DevId) -> HResult<(FuncId, Origin)> {
        let d = self.usable(dev)?;
        if d.is_ntb {
            return Err(InvalidRequest::NtbAdapter { device: d.name.clone(), refused: NtbUse::Dma }.into());
        }
        Ok((d.func, d.origin))
    }

    fn check_ram(&self, phys: u64, len: u64, call: &'static str) -> HResult<()> {
        if !self.kernel().is_ram(phys, len) {
            return Err(BadDma::NotRam { call, phys, len, host: self.kernel().name.clone() }.into());
        }
        Ok(())
    }

    /// Resolve an address of this host into the device BAR that holds it.
    fn target(&self, phys: u64, len: u64) -> HResult<Target> {
        let k = self.kernel();
        let (tdev, bar, offset) = k.resolve_bar(phys, len).ok_or_else(|| HostError::from(BadDma::NotInBar { phys, len, host: k.name.clone() }))?;
        let t = self.usable(tdev)?;
        let view = t.bar(bar)?.cpu_addr;
        Ok(Target { func: t.func, bar, origin: t.origin, view, offset })
    }
}

/// The borrower agent's side of the DMA API (see the module docs).
impl LendState {
    /// dma_map_single/dma_map_sg/dma_alloc_coherent for a borrowed device.
    pub fn borrowed_map(&mut self, f: &mut Fabric, func: FuncId, phys: u64, len: u64, write: bool) -> HResult<u64> {
        let (la, bb, dev_domain) = self.lend_of(f, func)?;
        let own = self.lends.get(&func).and_then(|l| l.own_domain);
        let (start, end) = pages(phys, len)?;
        let (lender_page, held) = atomically!(self, f, held, self.map_into_window(f, la, bb, start, end - start, write, dev_domain, own, &mut held))?;
        let dma = lender_page + (phys - start);
        if let Some(l) = self.lends.get_mut(&func) {
            l.maps.push(BorrowedMap { dma, size: len, held });
        }
        Ok(dma)
    }

    pub fn borrowed_unmap(&mut self, f: &mut Fabric, func: FuncId, dma: u64, len: u64) -> HResult<()> {
        let l = self.lends.get_mut(&func).ok_or_else(|| HostError::from(BadLend::NotBorrowed { device: f.func(func).name.clone() }))?;
        let Some(i) = l.maps.iter().position(|m| m.dma == dma) else {
            return Err(BadDma::NoDeviceMapping { device: f.func(func).name.clone(), dma }.into());
        };
        if l.maps[i].size != len {
            return Err(BadDma::UnmapSize { dma, mapped: l.maps[i].size, len }.into());
        }
        let m = l.maps.remove(i);
        self.release_all(f, m.held);
        Ok(())
    }

    /// (lender adapter, borrower adapter, the device's lender domain) of a borrowed device.
    fn lend_of(&self, f: &Fabric, func: FuncId) -> HResult<(u32, u32, DevDomain)> {
        let l = self.lends.get(&func).ok_or_else(|| HostError::from(BadLend::NotBorrowed { device: f.func(func).name.clone() }))?;
        Ok((l.la, l.bb, l.dev_domain))
    }

    /// Map `len` bytes of borrower address `target` (page aligned) into the DMA window of the
    /// pair (la, bb); returns the lender-side address. Under Rem-IOMMU, `dev_domain` also gets
    /// the one-to-one mapping of that address. `own`: the device's own borrower domain, which
    /// takes the mapping instead of the window's.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn map_into_window(
        &mut self,
        f: &mut Fabric,
        la: u32,
        bb: u32,
        target: u64,
        len: u64,
        write: bool,
        dev_domain: DevDomain,
        own: Option<DomainId>,
        held: &mut Vec<Held>,
    ) -> HResult<u64> {
        let w = self.dma_windows.get_mut(&(la, bb)).ok_or_else(|| HostError::from(BadDma::NoWindow { la, bb }))?;
        let Some(iova) = w.iova.alloc(len, iova_align(len)) else {
            let (used, total) = (w.iova.in_use(), w.size);
            let (ntb, into) = (f.ntb(la).name.clone(), f.ntb(bb).name.clone());
            return Err(NoRoom::DmaWindowFull { ntb, into, len, used, total }.into());
        };
        held.push(Held::WindowIova { la, bb, iova });
        let (domain, lender_addr) = (own.unwrap_or(w.domain), w.lender_addr + (iova - w.iova_base));
        held.push(map_held(f, f.ntb(bb).host, domain, iova, target, len, write)?);
        if let Some((host, d)) = dev_domain {
            held.push(map_held(f, host, d, lender_addr, lender_addr, len, write)?);
        }
        Ok(lender_addr)
    }
}

/// An IOMMU mapping, held for undo (`Held::IommuMap`).
pub(crate) fn map_held(f: &mut Fabric, host: HostId, domain: DomainId, iova: u64, paddr: u64, size: u64, write: bool) -> HResult<Held> {
    f.iommu_map(host, domain, iova, paddr, size, write)?;
    Ok(Held::IommuMap { host, domain, iova, size })
}
