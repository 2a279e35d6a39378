//! Interrupts of passed-through devices (000 §5, last paragraph; §8 "Interrupt forwarding").
//!
//! The guest programs a virtual MSI-X table and config space (`config`); the hypervisor routes
//! each live source (an unmasked MSI-X entry with MSI-X on, or INTx when MSI-X is off, Interrupt
//! Disable is clear and the guest has a handler on the line) through the host:
//!
//! - VMLoc (VFIO): the physical table entry gets a vector of the VM's host; vfio's handler
//!   signals the VM's eventfd and KVM's irqfd injects the guest's vector.
//! - VMRem (mediated Device Lending): the physical entry gets a vector of the *lender*: "we
//!   intercept calls to the configuration space that enables interrupts and set up an interrupt
//!   handler on the lender-side. Whenever the device triggers an interrupt, the lender-side
//!   request handler is invoked. This handler must then notify the borrower, which in turn
//!   notifies the hypervisor using eventfd" (000 §5). The notification is a store by the
//!   lender's CPU onto the borrower's MSI page through the lender's NTB (the mapping Device
//!   Lending keeps for borrowed devices, `devlend_host::Cluster::msi_forward_acquire`) with a
//!   relay vector of the borrower as data; the borrower's handler signals the eventfd.
//! - INTx: the same two paths, with the handler on the function's INTx line in its own host
//!   (`Cluster::request_intx_line`). This is why a VM gets legacy interrupts although a
//!   bare-metal borrower cannot (000 §5, §8): the line ends at the lender, whose software
//!   forwards it. The line is level-triggered: vfio's handler masks it and it is unmasked when
//!   the guest has taken the interrupt (its EOI, through KVM's resample irqfd), on the clock
//!   (`irq_clock`).
//!
//! Delivery lives on the machine only (`irq_clock`: the device's message on the links, the
//! hypervisor's handlers as threads, the vCPU injecting). Off the machine nothing is delivered:
//! the timeless guest kernel (`GuestOs`) sets routes up and takes them down, and an interrupt a
//! host took meanwhile reaches the guest on the next machine that runs the VM's path.

use crate::config::GUEST_MSI;
use crate::vm::{Path, VmId};
use crate::vmm::Vmm;
use devlend_fabric::config::MSIX_ENABLE;
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::Requester;
use devlend_host::irq::{msix_cap, msix_control, set_msix_control, MSIX_ENTRY_CTRL, MSIX_ENTRY_DATA, MSIX_ENTRY_MASKED, MSIX_ENTRY_SIZE, MSIX_MASKALL};
use devlend_host::{BadIrq, BadVm, Cluster, DevId, HResult, HostError, NoSuch, Unreachability};
use devlend_wire::Access;
use std::collections::BTreeMap;

/// Handler ids the hypervisor registers in host kernels.
pub const VFIO_HANDLER: u32 = 0x7666_0000;
pub const LENDER_HANDLER: u32 = 0x6c64_0000;
pub const RELAY_HANDLER: u32 = 0x7265_0000;

/// A device's interrupt source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Src {
    Msix(u16),
    Intx,
}

/// One line of the guest's /proc/interrupts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestIrq {
    pub vector: u8,
    pub dev: DevId,
    pub src: Src,
    pub handler: u32,
    pub count: u64,
    /// The modelled latency of the last interrupt delivered, device to guest handler (ps).
    pub last_latency_ps: Option<u64>,
}

/// The guest kernel's interrupt vectors.
#[derive(Clone, Debug, Default)]
pub struct GuestIrqs {
    pub descs: BTreeMap<u8, GuestIrq>,
    pub spurious: u64,
}

impl GuestIrqs {
    pub(crate) fn alloc(&self) -> Option<u8> {
        (0x20..0xec).find(|v| !self.descs.contains_key(v))
    }

    pub fn find(&self, dev: DevId, src: Src) -> Option<u8> {
        self.descs.values().find(|d| d.dev == dev && d.src == src).map(|d| d.vector)
    }
}

/// Pieces of a route, each undone on teardown.
#[derive(Clone, Debug)]
enum Piece {
    Vector(HostId, u8),
    /// A physical MSI-X entry programmed by `host`'s CPU at `slot`.
    Entry(HostId, u64),
    Forward(FuncId),
    Intx(FuncId),
}

/// A live interrupt route of one guest device source.
#[derive(Clone, Debug)]
pub struct Route {
    pub vm: VmId,
    pub dev: DevId,
    pub func: FuncId,
    pub src: Src,
    pub guest_vector: u8,
    /// Where the device's interrupt is taken first: (host, MSI vector), or the INTx line.
    pub(crate) first: (HostId, Option<u8>),
    pub(crate) seen: u64,
    /// Mediated path: (VM host, relay vector, lender-side address of its MSI page).
    pub(crate) relay: Option<(HostId, u8, u64)>,
    pub(crate) relay_seen: u64,
    pieces: Vec<Piece>,
    /// Device-to-guest latency, step by step (ps); empty until the first interrupt arrives.
    pub steps: Vec<(String, u64)>,
    /// On the machine: when the last interrupt delivered reached its first host (ps).
    pub landed_ps: Option<u64>,
    /// INTx on the machine: the first host's handler masked the line (vfio_pci_intrs.c
    /// `vfio_intx_handler`) and the guest has not yet taken the interrupt; `pending`: the device
    /// asserted again meanwhile (the level stays high until unmasked).
    pub(crate) intx_masked: bool,
    pub(crate) intx_pending: bool,
}

impl Route {
    pub fn latency_ps(&self) -> u64 {
        self.steps.iter().map(|s| s.1).sum()
    }
}

fn msi_page(c: &Cluster, h: HostId) -> u64 {
    c.fabric.host(h).msi.start
}

/// The physical MSI-X entry `entry` of `func` as its own host's CPU addresses it.
fn slot(c: &Cluster, func: FuncId, entry: u16) -> HResult<u64> {
    let cap = msix_cap(&c.fabric, func)?;
    let bar = c.fabric.func(func).bars.iter().find(|b| b.index == cap.bir).ok_or_else(|| HostError::from(BadIrq::TableBarMissing { func, bar: cap.bir }))?;
    Ok(bar.addr + cap.offset + entry as u64 * MSIX_ENTRY_SIZE)
}

fn cpu_write(c: &mut Cluster, host: HostId, addr: u64, v: u32) -> HResult<()> {
    match c.fabric.write(Requester::Cpu(host), addr, &v.to_le_bytes()).1 {
        None => Ok(()),
        Some(f) => Err(HostError::fault(&c.fabric, addr, f)),
    }
}

/// The requester ID under which a store by `host`'s CPU at `addr` reaches the MSI page at the
/// far end (through the NTB, the alias its LUT gives the CPU's ID): what the relay vector's
/// remapping entry validates.
fn arriving_rid(c: &Cluster, host: HostId, addr: u64) -> HResult<devlend_wire::Bdf> {
    let route = c.fabric.route_uncached(Requester::Cpu(host), addr, Access::Write);
    route.hops.last().map(|h| h.rid).ok_or_else(|| Unreachability::NoRoute { addr }.into())
}

/// What a function's interrupt is now (PCIe Base 3.0 §6.1.4; PCI Local Bus 3.0 §6.8.1).
pub enum Message {
    /// MSI-X is off: the function asserts INTx.
    Intx,
    /// MSI-X entry's message: write `data` at `addr` as the function.
    Msi { addr: u64, data: u32 },
    /// The entry or the function is masked (or the entry has no address): nothing is sent.
    Masked,
}

/// The message `func` sends for MSI-X entry `entry`, read from its table and control.
pub fn message(c: &Cluster, func: FuncId, entry: u16) -> HResult<Message> {
    let control = msix_cap(&c.fabric, func).and_then(|cap| msix_control(&c.fabric, func, &cap)).unwrap_or(0);
    if control & MSIX_ENABLE == 0 {
        return Ok(Message::Intx);
    }
    let at = slot(c, func, entry)?;
    let bar = c.fabric.func(func).bars.iter().find(|b| at >= b.addr && at + 16 <= b.addr + b.size).map(|b| (b.index, at - b.addr));
    let mut e = [0u8; 16];
    match bar.and_then(|(i, off)| c.fabric.bar_mem(func, i).map(|m| (m, off))) {
        Some((m, off)) => m.read(off, &mut e),
        None => return Err(BadIrq::EntryUnreadable { device: c.fabric.func(func).name.clone(), entry }.into()),
    }
    let w = |i: usize| u32::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
    let addr = w(0) as u64 | (w(4) as u64) << 32;
    if control & MSIX_MASKALL != 0 || w(12) & 1 != 0 || addr == 0 {
        return Ok(Message::Masked);
    }
    Ok(Message::Msi { addr, data: w(8) })
}

/// What a function does to interrupt, at once (without a clock): with MSI-X on, write entry
/// `entry`'s message as itself unless the entry or the function is masked; with MSI-X off, assert
/// INTx. Returns whether something was sent. On the machine, [`crate::irq_clock::Raiser`].
pub fn device_interrupt(c: &mut Cluster, device: &str, entry: u16) -> HResult<bool> {
    let func = c.fabric.func_id(device)?;
    match message(c, func, entry)? {
        Message::Intx => {
            c.assert_intx(func);
        }
        Message::Msi { addr, data } => {
            c.fabric.write(Requester::Func(func), addr, &data.to_le_bytes());
        }
        Message::Masked => return Ok(false),
    }
    Ok(true)
}

impl Vmm {
    /// The sources the guest's virtual state makes live for a device: (source, guest vector).
    fn wanted(&self, vm: VmId, dev: DevId) -> Vec<(Src, u8)> {
        let Some(v) = self.vms.get(&vm) else { return Vec::new() };
        let Some(d) = v.devices.get(&dev) else { return Vec::new() };
        if !d.attached {
            return Vec::new();
        }
        if d.virt.msix_on() {
            let ok = |e: &crate::config::MsixEntry| !e.masked && (GUEST_MSI.0..GUEST_MSI.1).contains(&e.addr);
            return d.virt.table.iter().enumerate().filter(|(_, e)| ok(e)).map(|(i, e)| (Src::Msix(i as u16), e.data as u8)).collect();
        }
        let intx_on = d.virt.command & crate::config::CMD_INTX_DISABLE == 0;
        match v.irqs.find(dev, Src::Intx) {
            Some(gv) if intx_on => vec![(Src::Intx, gv)],
            _ => Vec::new(),
        }
    }

    /// Bring the host-side routes of a device in line with the guest's virtual state.
    pub(crate) fn sync_irqs(&mut self, c: &mut Cluster, vm: VmId, dev: DevId) -> HResult<()> {
        let want = self.wanted(vm, dev);
        let stale: Vec<usize> = (0..self.routes.len())
            .rev()
            .filter(|&i| {
                let r = &self.routes[i];
                r.vm == vm && r.dev == dev && !want.contains(&(r.src, r.guest_vector))
            })
            .collect();
        for i in stale {
            let r = self.routes.remove(i);
            self.teardown(c, r);
        }
        for (src, gv) in want {
            if !self.routes.iter().any(|r| r.vm == vm && r.dev == dev && r.src == src) {
                let r = self.setup(c, vm, dev, src, gv)?;
                self.routes.push(r);
            }
        }
        Ok(())
    }

    /// Tear down every route of a device (before it is detached).
    pub(crate) fn drop_irqs(&mut self, c: &mut Cluster, vm: VmId, dev: DevId) {
        let (mine, rest): (Vec<Route>, Vec<Route>) = std::mem::take(&mut self.routes).into_iter().partition(|r| r.vm == vm && r.dev == dev);
        self.routes = rest;
        for r in mine {
            self.teardown(c, r);
        }
    }

    fn setup(&mut self, c: &mut Cluster, vm: VmId, dev: DevId, src: Src, gv: u8) -> HResult<Route> {
        let d = self.dev(vm, dev)?;
        let (func, path, hdev) = (d.func, d.path, d.host_dev.ok_or_else(|| HostError::from(BadVm::NotAttached { device: d.name.clone() }))?);
        let vhost = self.vm(vm)?.host;
        let first_host = c.fabric.func_host(func);
        let mut r = Route {
            vm,
            dev,
            func,
            src,
            guest_vector: gv,
            first: (first_host, None),
            seen: 0,
            relay: None,
            relay_seen: 0,
            pieces: Vec::new(),
            steps: Vec::new(),
            landed_ps: None,
            intx_masked: false,
            intx_pending: false,
        };
        match self.setup_steps(c, &mut r, path, hdev, vhost) {
            Ok(()) => Ok(r),
            Err(e) => {
                self.teardown(c, r);
                Err(e)
            }
        }
    }

    fn setup_steps(&mut self, c: &mut Cluster, r: &mut Route, path: Path, hdev: DevId, vhost: HostId) -> HResult<()> {
        let (func, host) = (r.func, r.first.0);
        let handler = if path == Path::Vfio { VFIO_HANDLER } else { LENDER_HANDLER };
        let page = msi_page(c, host);
        match r.src {
            Src::Msix(entry) => {
                let owner = c.kernel(host)?.by_func(func).ok_or_else(|| HostError::NoDevice(NoSuch::NotInTree(c.fabric.func(func).name.clone())))?;
                // The device sits in `host` in both paths: its messages arrive with its own ID.
                let rid = c.fabric.func(func).bdf;
                let (v, addr) = c.alloc_vector(host, owner, entry, handler, (page, rid))?;
                r.pieces.push(Piece::Vector(host, v));
                let at = slot(c, func, entry)?;
                r.pieces.push(Piece::Entry(host, at));
                cpu_write(c, host, at + MSIX_ENTRY_CTRL, MSIX_ENTRY_MASKED)?;
                cpu_write(c, host, at, addr as u32)?;
                cpu_write(c, host, at + 4, (addr >> 32) as u32)?;
                cpu_write(c, host, at + MSIX_ENTRY_DATA, v as u32)?;
                let cap = msix_cap(&c.fabric, func)?;
                let control = msix_control(&c.fabric, func, &cap)?;
                set_msix_control(&mut c.fabric, func, &cap, (control | MSIX_ENABLE) & !MSIX_MASKALL)?;
                cpu_write(c, host, at + MSIX_ENTRY_CTRL, 0)?;
                r.first.1 = Some(v);
            }
            Src::Intx => {
                c.request_intx_line(func, handler)?;
                r.pieces.push(Piece::Intx(func));
            }
        }
        if path == Path::Mdev {
            let addr = c.msi_forward_acquire(func)?;
            r.pieces.push(Piece::Forward(func));
            let entry = if let Src::Msix(e) = r.src { e } else { 0 };
            let rid = arriving_rid(c, host, addr)?;
            let (rv, addr) = c.alloc_vector(vhost, hdev, entry, RELAY_HANDLER, (addr, rid))?;
            r.pieces.push(Piece::Vector(vhost, rv));
            r.relay = Some((vhost, rv, addr));
        }
        Ok(())
    }

    fn teardown(&mut self, c: &mut Cluster, r: Route) {
        for piece in r.pieces.into_iter().rev() {
            let res = match piece {
                Piece::Vector(h, v) => c.free_vector(h, v),
                Piece::Entry(h, at) => cpu_write(c, h, at + MSIX_ENTRY_CTRL, MSIX_ENTRY_MASKED),
                Piece::Forward(f) => {
                    c.msi_forward_release(f);
                    Ok(())
                }
                Piece::Intx(f) => c.free_intx_line(f),
            };
            if let Err(e) = res {
                self.anomalies.push(crate::error::Anomaly::Step { step: "interrupt route teardown", error: e });
            }
        }
        let more = self.routes.iter().any(|x| x.func == r.func && matches!(x.src, Src::Msix(_)));
        if matches!(r.src, Src::Msix(_)) && !more {
            if let Ok(cap) = msix_cap(&c.fabric, r.func) {
                let control = msix_control(&c.fabric, r.func, &cap).unwrap_or(0);
                let _ = set_msix_control(&mut c.fabric, r.func, &cap, control & !(MSIX_ENABLE | MSIX_MASKALL));
            }
        }
    }

    /// The vCPU injected an interrupt of route (`vm`, `key`) (`irq_clock`) at `now`; it reached
    /// its first host at `landed` and went through `steps`.
    pub(crate) fn inject(&mut self, vm: VmId, key: (DevId, Src), (landed, now): (u64, u64), steps: Vec<(String, u64)>) {
        let latency = now - landed;
        let Some(r) = self.routes.iter_mut().find(|r| r.vm == vm && (r.dev, r.src) == key) else { return };
        r.steps = steps;
        r.landed_ps = Some(landed);
        let gv = r.guest_vector;
        if let Some(v) = self.vms.get_mut(&vm) {
            match v.irqs.descs.get_mut(&gv) {
                Some(d) => {
                    d.count += 1;
                    d.last_latency_ps = Some(latency);
                }
                None => v.irqs.spurious += 1,
            }
        }
    }

    /// The live route of a guest device's source, with its latency steps.
    pub fn irq_route(&self, vm: VmId, dev: DevId, src: Src) -> Option<&Route> {
        self.routes.iter().find(|r| r.vm == vm && r.dev == dev && r.src == src)
    }
}
