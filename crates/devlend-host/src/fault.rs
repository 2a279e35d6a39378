//! Faults injected into a cluster, and what the hosts and Device Lending do about each (the
//! behaviour, with its source; the timing is the machine's, `devlend_engine::machine::fault`):
//!
//! - `link-down`/`link-up` (an NTB cable pulled and put back): nothing crosses; the borrower's
//!   loads through the lent BARs read all ones and fail, the device's DMA towards the borrower
//!   stops at the adapter (`devlend_fabric::link`). The lend stays, and works again when the link
//!   returns (assumed: the SmartIO documentation found (docs.dolphinics.com, SmartIO glossary and
//!   concepts) does not say what a lend does while its cable is out); a return while down
//!   completes locally on each side (`Teardown`).
//! - `host-crash` (a lender or a borrower going down): every NTB link of the host goes down
//!   (its adapters lose their host) and its devices stop. A lend whose borrower crashed is
//!   reclaimed by the lender's agent: its half undone locally, the device to be reset before
//!   anyone borrows it again. A lend whose lender crashed is lost to the borrower: the borrower
//!   hot-removes the device as after a surprise removal (Linux pciehp: the driver's `remove` runs
//!   and later accesses fail) and must borrow it again once the lender is back (000 §4: a lend
//!   is an agreement between the two agents, so nothing of it survives the lender's reboot;
//!   that the borrower's agent ends it at the crash rather than at the reboot is assumed).
//! - `host-reboot`: the host's links come back and its devices are reset by the boot (a
//!   conventional reset clears a hung or poisoned function); no lend of it survives.
//! - `surprise-removal` of a device: the link of its slot goes down (PCIe Base 4.0 §6.2: a Surprise
//!   Down error; §6.7: hot-plug), the device stops, and its lend ends (the lender's pciehp removes it, its
//!   agent tells the borrower, which hot-removes it). It stays gone until `port-up` of its slot.
//! - `port-down`/`port-up` of a switch port or slot: what is below is unreachable both ways
//!   (§2.9.1); the lend stays, as for a cable.
//! - `completion-timeout` of a device (a completer that never answers): loads of its BARs fail
//!   when the requester's completion timeout expires (§2.8; Linux returns all ones), posted
//!   writes to it are lost, and it issues nothing. An FLR cannot reach it, so it is refused to
//!   the next borrower (`Pool`).
//! - `poisoned` (PCIe Base 3.0 §2.7.2.2, data poisoning; `devlend_fabric::link`): of a device,
//!   every read completion to it and from it carries poisoned data (an error in its own data
//!   path); of a page of a host's RAM (`HOST.ram+OFFSET`, an uncorrectable memory error), every
//!   device read of that 4 KiB page completes poisoned. The receiver discards the data and
//!   reports Poisoned TLP Received through AER (§6.2): a CPU's load fails (the driver gets an
//!   error, never the data); a device stops that DMA and says so as its interface does (the
//!   GPU's copy engine fails the copy, `STATUS_POISONED`; an NVMe controller completes the
//!   command with Data Transfer Error, or, when the poisoned read was the command's own fetch,
//!   cannot name the command and sets CSTS.CFS, found by the host's I/O timeout). An FLR clears
//!   a device's poisoning, a reboot its host's RAM's.
//!
//! Every lend a fault touches is marked: its device is reset (FLR) before its next borrower gets it.
//!
//! What running software learns, and when (each step an event on the machine's clock, built by
//! the workloads layer from [`FaultReport::notices`]; the costs are `timing.hotplug_*_ps` and
//! `timing.dl_notice_ps`, stated in params/hardware.toml):
//! - a surprise removal: the slot's downstream port raises its hot-plug interrupt (Data Link
//!   Layer State Changed, PCIe Base 4.0 §6.7.3.3, Slot Status §7.8.11) once the link is found
//!   down; pciehp removes the device (`pci_stop_and_remove_bus_device`), which runs the driver's
//!   `remove` on the host that owns it. For a lent device that driver is Device Lending's on the
//!   lender: its agent tells the borrower's (000 §4), which hot-removes the device there and runs
//!   the borrower driver's `remove`. A driver waiting for the device then gets "no such device"
//!   (`ThreadOs`), not its own timeout, and the downstream port reports a Surprise Down through
//!   AER (`devlend_fabric::aer`).
//! - a lender crash: the borrower's NTB adapter raises its link-down interrupt; its agent ends
//!   the lends over it and hot-removes their devices (the lender cannot tell it anything).
//! - a host crash: the host's own threads stop at once ([`FaultReport::crashed`]).
//!
//! The lend's programming is undone at the fault itself (what teardown could not reach on the
//! far side is what the fabric drops anyway); only what the software learns is delayed. A
//! limitation that follows: the borrower's handle of the device goes at the fault too, so a
//! driver that calls into the kernel for it in between (a `dma_map_single` per request) gets
//! "no device" at once rather than at its `remove`.

use crate::cluster::Cluster;
use crate::error::{HResult, HostError, InvalidRequest, NoSuch, NtbUse};
use devlend_fabric::aer::HotplugStep;
use devlend_fabric::model::{FuncId, HostId, NodeId, NodeKind};
use devlend_fabric::route::Failure;

/// The kinds of fault, by the names the CLI, Python and scenario files use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    LinkDown,
    LinkUp,
    HostCrash,
    HostReboot,
    SurpriseRemoval,
    PortDown,
    PortUp,
    CompletionTimeout,
    Poisoned,
}

pub const FAULT_KINDS: [(&str, FaultKind, &str); 9] = [
    ("link-down", FaultKind::LinkDown, "an NTB adapter"),
    ("link-up", FaultKind::LinkUp, "an NTB adapter"),
    ("host-crash", FaultKind::HostCrash, "a host"),
    ("host-reboot", FaultKind::HostReboot, "a host"),
    ("surprise-removal", FaultKind::SurpriseRemoval, "a device"),
    ("port-down", FaultKind::PortDown, "a device (its slot), a root port HOST.rpN or a switch port COMPONENT.PORT"),
    ("port-up", FaultKind::PortUp, "a device (its slot), a root port HOST.rpN or a switch port COMPONENT.PORT"),
    ("completion-timeout", FaultKind::CompletionTimeout, "a device"),
    ("poisoned", FaultKind::Poisoned, "a device, or a 4 KiB page of a host's RAM HOST.ram+OFFSET"),
];

impl FaultKind {
    pub fn parse(name: &str) -> HResult<FaultKind> {
        FAULT_KINDS
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, k, _)| *k)
            .ok_or_else(|| HostError::from(InvalidRequest::UnknownFaultKind { name: name.into() }))
    }

    pub fn name(self) -> &'static str {
        FAULT_KINDS.iter().find(|(_, k, _)| *k == self).map_or("", |(n, _, _)| n)
    }
}

/// A lend a fault ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndedLend {
    pub device: String,
    pub lender: String,
    pub borrower: String,
    pub why: EndReason,
}

/// Why a fault ended a lend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The device was surprise-removed (pciehp on the lender).
    Removed,
    /// Its borrower `host` crashed: the lender's agent reclaimed it.
    BorrowerCrashed { host: String },
    /// Its lender `host` crashed: the borrower hot-removed it.
    LenderCrashed { host: String },
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndReason::Removed => write!(f, "the device was surprise-removed (pciehp on the lender)"),
            EndReason::BorrowerCrashed { host } => write!(f, "its borrower {host} crashed: the lender's agent reclaimed it"),
            EndReason::LenderCrashed { host } => write!(f, "its lender {host} crashed: the borrower hot-removed it"),
        }
    }
}

/// What a fault did: the functions that stopped (for the machine), the lends it ended, and the
/// devices it touched (to be reset before their next borrower).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultReport {
    pub halted: Vec<(FuncId, Failure)>,
    pub ended: Vec<EndedLend>,
    pub touched: Vec<FuncId>,
    /// Devices made unreachable until their slot comes back (surprise removal).
    pub removed: Vec<FuncId>,
    /// Hosts that crashed: their threads stop.
    pub crashed: Vec<HostId>,
    /// Nodes whose link went down (their downstream port reports a Surprise Down).
    pub links_down: Vec<NodeId>,
    /// How each device's removal reaches its driver, step by step.
    pub notices: Vec<Notice>,
}

/// The steps by which a device's removal reaches the driver that uses it: (delay after the
/// fault in ps, the host the step runs on, the step). The last is the driver's `remove`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub func: FuncId,
    pub steps: Vec<(u64, HostId, HotplugStep)>,
}

impl Cluster {
    /// Inject fault `kind` at `target` (see the module docs for what each does).
    pub fn inject(&mut self, kind: FaultKind, target: &str) -> HResult<FaultReport> {
        let mut r = FaultReport::default();
        match kind {
            FaultKind::LinkDown | FaultKind::LinkUp => {
                let n = self.fabric.ntb_id(target)?;
                if kind == FaultKind::LinkDown {
                    self.fabric.ntb_link_disable(n)?;
                    r.touched = self.lends_where(|l| l.la == n || l.bb == n);
                } else {
                    self.fabric.ntb_link_enable(n)?;
                }
            }
            FaultKind::HostCrash => self.crash(self.fabric.host_id(target)?, &mut r)?,
            FaultKind::HostReboot => self.reboot(self.fabric.host_id(target)?)?,
            FaultKind::SurpriseRemoval => {
                let func = self.fault_device(target)?;
                let slot = self.fabric.slot_of(func);
                r.notices.push(self.removal_notice(func));
                self.fabric.port_disable(slot)?;
                r.links_down.push(slot);
                r.halted.push((func, Failure::PortDown { node: slot }));
                r.removed.push(func);
                r.touched.push(func);
                self.end_lends(&[func], EndReason::Removed, &mut r)?;
            }
            FaultKind::PortDown | FaultKind::PortUp => {
                let node = self.fault_port(target)?;
                if kind == FaultKind::PortDown {
                    self.fabric.port_disable(node)?;
                    r.links_down.push(node);
                    let below = self.funcs_below(node);
                    r.touched = self.lends_where(|l| below.contains(&l.func));
                } else {
                    self.fabric.port_enable(node)?;
                }
            }
            FaultKind::CompletionTimeout => {
                let func = self.fault_device(target)?;
                self.fabric.func_hang(func);
                r.halted.push((func, Failure::Unresponsive { func }));
                r.touched.push(func);
            }
            FaultKind::Poisoned => match self.fault_ram(target)? {
                Some((host, addr)) => self.fabric.ram_poison(host, addr),
                None => {
                    let func = self.fault_device(target)?;
                    self.fabric.func_poison(func);
                    r.touched.push(func);
                }
            },
        }
        Ok(r)
    }

    /// Whether `inject(kind, target)` can name its target, without injecting anything.
    pub fn fault_target(&self, kind: FaultKind, target: &str) -> HResult<()> {
        match kind {
            FaultKind::LinkDown | FaultKind::LinkUp => {
                let n = self.fabric.ntb_id(target)?;
                if self.fabric.ntb(n).peer.is_none() {
                    return Err(InvalidRequest::NoCable { ntb: target.into() }.into());
                }
            }
            FaultKind::HostCrash | FaultKind::HostReboot => {
                self.fabric.host_id(target)?;
            }
            FaultKind::PortDown | FaultKind::PortUp => {
                self.fault_port(target)?;
            }
            FaultKind::Poisoned => {
                if self.fault_ram(target)?.is_none() {
                    self.fault_device(target)?;
                }
            }
            FaultKind::SurpriseRemoval | FaultKind::CompletionTimeout => {
                self.fault_device(target)?;
            }
        }
        Ok(())
    }

    /// A page of host RAM named `HOST.ram` or `HOST.ram+OFFSET` (byte offset into the host's RAM,
    /// skipping the 32-bit hole): its host and physical address; None for any other name.
    fn fault_ram(&self, name: &str) -> HResult<Option<(HostId, u64)>> {
        let Some((host, rest)) = name.trim().split_once(".ram") else { return Ok(None) };
        if !(rest.is_empty() || rest.trim_start().starts_with('+')) {
            return Ok(None);
        }
        let h = self.fabric.host_id(host.trim())?;
        Ok(Some((h, self.fabric.resolve_expr(name)?)))
    }

    /// A device that can be faulted: a function of the fabric that is not an NTB adapter.
    fn fault_device(&self, name: &str) -> HResult<FuncId> {
        let func = self.fabric.func_id(name)?;
        if matches!(self.fabric.node(self.fabric.func(func).node).kind, NodeKind::Ntb { .. }) {
            return Err(InvalidRequest::NtbAdapter { device: name.into(), refused: NtbUse::DeviceFault }.into());
        }
        Ok(func)
    }

    /// The node below the link a port fault takes down: a device's slot, or the link below a
    /// switch downstream port named COMPONENT.PORT (or the link above any other port so named).
    fn fault_port(&self, name: &str) -> HResult<NodeId> {
        if let Ok(func) = self.fabric.func_id(name) {
            return Ok(self.fabric.slot_of(func));
        }
        let f = &self.fabric;
        let node = f
            .nodes()
            .iter()
            .position(|n| n.parent.is_some() && format!("{}.{}", n.component, n.port) == name)
            .ok_or_else(|| HostError::NoDevice(NoSuch::Port(name.into())))?;
        match f.nodes()[node].kind {
            // A downstream port's link is the one to the component below it (its uplink).
            NodeKind::SwitchDown { .. } | NodeKind::RootPort { .. } => {
                f.nodes()[node].children.first().copied().ok_or_else(|| InvalidRequest::NothingBelow { port: name.into() }.into())
            }
            _ => Ok(node as NodeId),
        }
    }

    /// Every function at or below `node`.
    fn funcs_below(&self, node: NodeId) -> Vec<FuncId> {
        let f = &self.fabric;
        let mut out = Vec::new();
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            out.extend(f.node(n).functions.iter().copied());
            stack.extend(f.node(n).children.iter().copied());
        }
        out
    }

    fn lends_where(&self, pred: impl Fn(&LendView) -> bool) -> Vec<FuncId> {
        self.lending
            .lends
            .iter()
            .map(|(&func, l)| LendView { func, lender: l.lender, borrower: l.borrower, la: l.la, bb: l.bb })
            .filter(|v| pred(v))
            .map(|v| v.func)
            .collect()
    }

    /// End the lends of `funcs` on both sides, whatever the links do (`return_device_force`).
    fn end_lends(&mut self, funcs: &[FuncId], why: EndReason, r: &mut FaultReport) -> HResult<()> {
        for &func in funcs {
            let Some((b, dev)) = self.lending.lends.get(&func).map(|l| (l.borrower, l.dev)) else { continue };
            let lend = self.lending.lends.get(&func).map(|l| l.lender).unwrap_or(b);
            self.return_device_force(b, dev)?;
            let name = |h: HostId| self.fabric.host(h).name.clone();
            r.ended.push(EndedLend { device: self.fabric.func(func).name.clone(), lender: name(lend), borrower: name(b), why: why.clone() });
            if !r.touched.contains(&func) {
                r.touched.push(func);
            }
        }
        Ok(())
    }

    fn crash(&mut self, h: HostId, r: &mut FaultReport) -> HResult<()> {
        let ntbs: Vec<u32> = (0..self.fabric.ntbs().len() as u32).filter(|&n| self.fabric.ntb(n).host == h && self.fabric.ntb(n).peer.is_some()).collect();
        for n in ntbs {
            self.fabric.ntb_link_disable(n)?;
        }
        let own: Vec<FuncId> = (0..self.fabric.funcs().len() as FuncId).filter(|&f| self.fabric.func_host(f) == h).collect();
        for &func in &own {
            let slot = self.fabric.slot_of(func);
            if self.fabric.node(slot).parent.is_some() && !matches!(self.fabric.node(slot).kind, NodeKind::Ntb { .. }) {
                r.halted.push((func, Failure::PortDown { node: slot }));
            }
        }
        let host = self.fabric.host(h).name.clone();
        r.crashed.push(h);
        self.hygiene.crashed.insert(h);
        let t = self.fabric.tuning().timing.clone();
        for (func, b) in self.lending.lends.iter().filter(|(_, l)| l.lender == h).map(|(f, l)| (*f, l.borrower)) {
            let steps = vec![
                (t.hotplug_detect_ps, b, HotplugStep::Interrupt),
                (t.hotplug_detect_ps + t.dl_notice_ps, b, HotplugStep::Notified),
                (t.hotplug_detect_ps + t.dl_notice_ps + t.hotplug_remove_ps, b, HotplugStep::DriverRemoved),
            ];
            r.notices.push(Notice { func, steps });
        }
        let borrowed = self.lends_where(|l| l.borrower == h);
        self.end_lends(&borrowed, EndReason::BorrowerCrashed { host: host.clone() }, r)?;
        let lent = self.lends_where(|l| l.lender == h);
        self.end_lends(&lent, EndReason::LenderCrashed { host }, r)?;
        let devices: Vec<FuncId> = r.halted.iter().map(|(f, _)| *f).filter(|f| !r.touched.contains(f)).collect();
        r.touched.extend(devices);
        Ok(())
    }

    /// How a surprise removal of `func` reaches its driver: pciehp on the device's host, and for
    /// a lent device Device Lending's notice and the borrower's hot-remove.
    fn removal_notice(&self, func: FuncId) -> Notice {
        let t = &self.fabric.tuning().timing;
        let home = self.fabric.func_host(func);
        let (irq, gone) = (t.hotplug_detect_ps, t.hotplug_detect_ps + t.hotplug_remove_ps);
        let mut steps = vec![(irq, home, HotplugStep::Interrupt)];
        match self.lending.lends.get(&func).map(|l| l.borrower) {
            Some(b) => steps.extend([
                (gone, home, HotplugStep::Removed),
                (gone + t.dl_notice_ps, b, HotplugStep::Notified),
                (gone + t.dl_notice_ps + t.hotplug_remove_ps, b, HotplugStep::DriverRemoved),
            ]),
            None => steps.push((gone, home, HotplugStep::DriverRemoved)),
        }
        Notice { func, steps }
    }

    /// The driver of `func` on `host` has been told that the device is gone (its `remove` ran
    /// at `at` ps): its waits end with "no such device" (`ThreadOs`).
    pub fn driver_removed(&mut self, host: HostId, func: FuncId, at: u64) {
        self.kernels[host as usize].removals.push((func, at));
    }

    /// When the driver of `func` on `host` was told that the device is gone, if it was.
    pub fn removed_at(&self, host: HostId, func: FuncId) -> Option<u64> {
        self.kernels[host as usize].removals.iter().rev().find(|(f, _)| *f == func).map(|(_, at)| *at)
    }

    fn reboot(&mut self, h: HostId) -> HResult<()> {
        self.hygiene.crashed.remove(&h);
        self.fabric.ram_unpoison(h);
        let ntbs: Vec<u32> = (0..self.fabric.ntbs().len() as u32).filter(|&n| self.fabric.ntb(n).host == h && self.fabric.ntb(n).peer.is_some()).collect();
        for n in ntbs {
            self.fabric.ntb_link_enable(n)?;
        }
        let f = &self.fabric;
        let devices: Vec<FuncId> =
            (0..f.funcs().len() as FuncId).filter(|&x| f.func_host(x) == h && !matches!(f.node(f.slot_of(x)).kind, NodeKind::Ntb { .. })).collect();
        for func in devices {
            self.fabric.power_on_reset(func);
        }
        Ok(())
    }
}

struct LendView {
    func: FuncId,
    lender: HostId,
    borrower: HostId,
    la: u32,
    bb: u32,
}
