//! The run's one engine: devlend's machine for the topology, shared by every guest and every
//! device of the run (a drive, an NTB endpoint), with the faults injected on it and the fabric
//! events it logs, handed out to the devices whose interrupts they are.

use crate::error::UmlResult;
use crate::pcidev::model;
use devlend_devices::ntb_xeon::{Unimplemented, XeonNtb, LINK_SIGNAL};
use devlend_engine::machine::{Effects, Machine};
use devlend_fabric::events::Event;
use devlend_host::{Cluster, FaultKind};
use std::cell::RefCell;
use std::rc::Rc;

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
}

impl Engine {
    pub fn new(machine: Machine<Cluster>) -> Engine {
        Engine { machine, struck: Rc::default(), faces: Vec::new(), other_events: Vec::new() }
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
    /// ones, no completions). The hot-plug steps devlend's own host layer would run are left
    /// out: the guest's PCI (virt-pci) has no hot-plug controller to report them.
    pub fn fault_at(&mut self, at: u64, kind: &str, target: &str) -> UmlResult<()> {
        let k = FaultKind::parse(kind).map_err(model("the fault's kind"))?;
        self.machine.world().fault_target(k, target).map_err(model("the fault's target"))?;
        let (t, log) = (target.to_string(), self.struck.clone());
        let name = k.name();
        self.machine.inject(at, move |c: &mut Cluster| match c.inject(k, &t) {
            Ok(r) => {
                log.borrow_mut().push(Struck { kind: name, target: t, failed: false });
                Effects { halted: r.halted, crashed: r.crashed, links_down: r.links_down, later: Vec::new() }
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

    /// The faults that have struck so far.
    pub fn struck(&self) -> Vec<Struck> {
        self.struck.borrow().clone()
    }

    /// When the machine's next event is due (ps), if anything is left to happen.
    pub fn next_event(&self) -> Option<u64> {
        self.machine.next_event_at()
    }

    /// Run the machine up to `until` (ps), stopping early after the event that records
    /// something in the fabric's log (an interrupt, a fault). True when it stopped early.
    pub fn advance(&mut self, until: u64) -> UmlResult<bool> {
        let before = self.machine.world().fabric.events().total();
        self.machine.run_until_or(until, move |w: &mut Cluster| w.fabric.events().total() != before).map_err(model("the engine"))
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
