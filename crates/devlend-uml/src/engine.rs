//! The run's one engine: devlend's machine for the topology, shared by every guest and every
//! device of the run (a drive, an NTB endpoint), with the faults injected on it and the fabric
//! events it logs, handed out to the devices whose interrupts they are.

use crate::error::UmlResult;
use crate::pcidev::model;
use devlend_devices::ntb_xeon::{Unimplemented, XeonNtb, LINK_SIGNAL};
use devlend_engine::machine::{Effects, Later, Machine};
use devlend_fabric::events::Event;
use devlend_fabric::model::{FuncId, HostId};
use devlend_host::{BadLend, Cluster, FaultKind, HostError};
use std::cell::RefCell;
use std::rc::Rc;

/// The fault kind that is the lender taking its device back ([`Engine::revoke_at`]).
pub const REVOKE: &str = "revoke";

/// When hosts were told that a device is gone: (device, host, at ps), as the faults' follow-ups
/// on the engine record it.
type Told = Rc<RefCell<Vec<(FuncId, HostId, u64)>>>;

/// A follow-up on the engine: `host` is told that `func` is gone (now).
fn tell(told: &Told, func: FuncId, host: HostId) -> Later<Cluster> {
    let told = told.clone();
    Box::new(move |_: &mut Cluster, now| {
        told.borrow_mut().push((func, host, now));
        Effects::default()
    })
}

/// A fault that struck: its kind, target, and whether the host layer could not apply it then.
#[derive(Clone, Debug)]
pub struct Struck {
    pub kind: &'static str,
    pub target: String,
    pub failed: bool,
}

pub struct Engine {
    pub machine: Machine<Cluster>,
    struck: Rc<RefCell<Vec<Struck>>>,
    /// The Xeon NTB faces on the machine (one per cabled pair).
    faces: Vec<Rc<RefCell<XeonNtb>>>,
    /// Fabric events that were no device's interrupt (faults, failed accesses), as logged.
    pub other_events: Vec<String>,
    /// Hosts told that a device is gone, for the devices' hot-unplug ([`Engine::told_gone`]).
    told: Told,
}

impl Engine {
    pub fn new(machine: Machine<Cluster>) -> Engine {
        Engine { machine, struck: Rc::default(), faces: Vec::new(), other_events: Vec::new(), told: Rc::default() }
    }

    /// The engine of a topology (JSON, as `devlend.Topology.to_json` gives it).
    pub fn from_json(topology_json: &str) -> UmlResult<Engine> {
        let c = Cluster::from_json(topology_json).map_err(model("the topology"))?;
        Ok(Engine::new(Machine::new(c)))
    }

    /// The Xeon face of NTB adapter `ntb`'s pair, put on the machine the first time.
    pub(crate) fn xeon_face(&mut self, ntb: &str) -> UmlResult<Rc<RefCell<XeonNtb>>> {
        let id = self.machine.world().fabric.ntb_id(ntb).map_err(model("the NTB"))?;
        if let Some(f) = self.faces.iter().find(|f| f.borrow().ntbs().contains(&id)) {
            return Ok(f.clone());
        }
        let face = XeonNtb::new(&mut self.machine.world().fabric, id).map_err(model("the NTB's cable"))?;
        let face = face.add_to(&mut self.machine);
        self.faces.push(face.clone());
        Ok(face)
    }

    /// Registers of the NTB faces that guests touched and the model does not implement.
    pub fn unimplemented(&self) -> Vec<Unimplemented> {
        self.faces.iter().flat_map(|f| f.borrow().unimplemented().to_vec()).collect()
    }

    /// Inject fault `kind` (devlend_host::fault's names: surprise-removal, link-down, ...) at
    /// `target` at time `at` (ps), on the engine: the fabric and the device change then, and the
    /// guest's kernel finds out as real hardware would let it (stores dropped, loads reading all
    /// ones, no completions). When the fault ends a device's lend or removes it, each host
    /// learns so at the first hot-plug step devlend's host layer gives it (`devlend_host::fault`:
    /// Device Lending's notice to a borrower, a slot's hot-plug interrupt to the owner), recorded
    /// for [`Engine::told_gone`]: a guest's device then ends its connection, UML's hot-unplug
    /// (`Conn::hot_unplug`).
    /// Besides devlend's fault kinds, [`REVOKE`]: see [`Engine::revoke_at`].
    pub fn fault_at(&mut self, at: u64, kind: &str, target: &str) -> UmlResult<()> {
        if kind == REVOKE {
            return self.revoke_at(at, target);
        }
        let k = FaultKind::parse(kind).map_err(model("the fault's kind"))?;
        self.machine.world().fault_target(k, target).map_err(model("the fault's target"))?;
        let (t, log) = (target.to_string(), self.struck.clone());
        let (name, told) = (k.name(), self.told.clone());
        self.machine.inject(at, move |c: &mut Cluster| match c.inject(k, &t) {
            Ok(r) => {
                log.borrow_mut().push(Struck { kind: name, target: t, failed: false });
                // Each host at its first step of each notice.
                let mut later = Vec::new();
                for n in &r.notices {
                    let mut hosts: Vec<HostId> = Vec::new();
                    for &(delay, host, _) in &n.steps {
                        if !hosts.contains(&host) {
                            hosts.push(host);
                            later.push((delay, tell(&told, n.func, host)));
                        }
                    }
                }
                Effects { halted: r.halted, crashed: r.crashed, links_down: r.links_down, later }
            }
            Err(_) => {
                log.borrow_mut().push(Struck { kind: name, target: t, failed: true });
                Effects::default()
            }
        });
        // An NTB face reports a change of its cable's state (a doorbell bit) just after.
        for f in self.faces.iter().map(|f| f.borrow().funcs()[0]).collect::<Vec<_>>() {
            self.machine.signal(f, at + 1, LINK_SIGNAL);
        }
        Ok(())
    }

    /// The lender takes the borrowed device `target` back at `at` (ps) whatever the borrower
    /// still holds (`Cluster::return_device_force`: the lend's mappings, window and interrupts
    /// undone, the device's bus mastering and MSI-X off); the borrower learns it with Device
    /// Lending's notice (`timing.dl_notice_ps` later, 000 §4) and its guest hot-unplugs it.
    /// `target` must be lent now.
    pub fn revoke_at(&mut self, at: u64, target: &str) -> UmlResult<()> {
        let (func, borrower, dev) = {
            let w = self.machine.world();
            let func = w.fabric.func_id(target).map_err(model("the revoke's target"))?;
            let lend = w.lends().into_iter().find(|l| l.device == target);
            let Some(l) = lend else {
                let e = HostError::from(BadLend::NotRevocable { target: target.into() });
                return Err(model("the revoke's target")(e));
            };
            (func, w.fabric.host_id(&l.borrower).map_err(model("the revoke's borrower"))?, l.dev)
        };
        let (log, told, t) = (self.struck.clone(), self.told.clone(), target.to_string());
        self.machine.inject(at, move |c: &mut Cluster| {
            let taken = c.return_device_force(borrower, dev).is_ok();
            log.borrow_mut().push(Struck { kind: REVOKE, target: t, failed: !taken });
            let notice = c.fabric.tuning().timing.dl_notice_ps;
            Effects { later: if taken { vec![(notice, tell(&told, func, borrower))] } else { Vec::new() }, ..Effects::default() }
        });
        Ok(())
    }

    /// When `host` was told that device `func` is gone (ps), if it was.
    pub fn told_gone(&self, func: FuncId, host: HostId) -> Option<u64> {
        self.told.borrow().iter().find(|&&(f, h, _)| f == func && h == host).map(|&(_, _, at)| at)
    }

    /// The faults that have struck so far.
    pub fn struck(&self) -> Vec<Struck> {
        self.struck.borrow().clone()
    }

    /// When the machine's next event is due (ps), if anything is left to happen.
    pub fn next_event(&self) -> Option<u64> {
        self.machine.next_event_at()
    }

    /// Run the machine up to `until` (ps), stopping early after the event that records
    /// something in the fabric's log (an interrupt, a fault) or tells a host that a device is
    /// gone. True when it stopped early.
    pub fn advance(&mut self, until: u64) -> UmlResult<bool> {
        let before = self.machine.world().fabric.events().total();
        let (told, known) = (self.told.clone(), self.told.borrow().len());
        self.machine
            .run_until_or(until, move |w: &mut Cluster| w.fabric.events().total() != before || told.borrow().len() != known)
            .map_err(model("the engine"))
    }

    /// The fabric's events since the last call (taken out of its log); those that are not MSIs
    /// are also kept in `other_events`.
    pub fn take_events(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        self.machine.world().fabric.retain_events(|e| {
            events.push(*e);
            false
        });
        self.other_events.extend(events.iter().filter(|e| !matches!(e, Event::Msi { .. })).map(|e| format!("{e:?}")));
        events
    }
}

impl From<Machine<Cluster>> for Engine {
    fn from(m: Machine<Cluster>) -> Engine {
        Engine::new(m)
    }
}
