//! Faults in a scenario: a fault (`devlend_host::fault`) injected at a simulated time on the
//! scenario's machine, what each fault did, the bytes a device had moved when each struck, and
//! after the run what Device Lending left programmed once every lend is ended.

use crate::error::{BadSpec, Missing, WResult, WorkloadError};
use crate::scenario::Scenario;
use devlend_engine::machine::{Effects, Later};
use devlend_engine::queue::Ps;
use devlend_fabric::aer::HotplugStep;
use devlend_fabric::events::Event;
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::route::Requester;
use devlend_host::{Cluster, FaultKind, FaultReport, HResult, Notice};
use devlend_vm::{VmId, Vmm};
use std::cell::RefCell;
use std::rc::Rc;

/// One injected fault and, once it has struck, its report.
pub struct FaultEntry {
    pub at: Ps,
    pub kind: FaultKind,
    pub target: String,
    /// The host layer's report, or why the fault could not strike then.
    pub report: Rc<RefCell<Option<HResult<FaultReport>>>>,
}

impl Scenario {
    /// Inject fault `kind` (a `devlend_host::fault` name) at `target` at time `at`.
    pub fn add_fault(&mut self, at: Ps, kind: &str, target: &str) -> WResult<()> {
        let what = format!("fault {kind} at {target}");
        let k = FaultKind::parse(kind).map_err(|e| WorkloadError::invalid(&what, BadSpec::FaultKind(e)))?;
        self.cluster().fault_target(k, target).map_err(|e| WorkloadError::no_such(&what, "fault target", Missing::Host(e)))?;
        if at < self.now() {
            return Err(WorkloadError::StartInPast { workload: what, at, now: self.now() });
        }
        let report = Rc::new(RefCell::new(None));
        let (r, t, vmm) = (report.clone(), target.to_string(), self.guests.vmm.clone());
        self.m.inject(at, move |c: &mut Cluster| {
            let out = c.inject(k, &t);
            let effects = out.as_ref().map(|rep| effects(rep, &vmm)).unwrap_or_default();
            *r.borrow_mut() = Some(out);
            effects
        });
        self.faults.push(FaultEntry { at, kind: k, target: target.into(), report });
        Ok(())
    }

    /// When the last of the scenario's threads ended (`Machine::threads_ended_at`).
    pub fn threads_ended_at(&self) -> Option<Ps> {
        self.m.threads_ended_at()
    }

    pub fn faults(&self) -> &[FaultEntry] {
        &self.faults
    }

    /// Bytes `device` has moved as a requester (landed writes, served reads): in all, and by
    /// the time each fault struck.
    pub fn moved(&self, device: &str) -> WResult<(u64, Vec<(Ps, u64)>)> {
        let func = self.cluster().fabric.func_id(device).map_err(|e| WorkloadError::no_such(device, "device", Missing::Fabric(e)))?;
        let who = Requester::Func(func);
        Ok((self.m.moved(who), self.m.struck(who)))
    }

    /// End every lend still held (a forced return: after a fault the driver may still hold the
    /// device), then count what Device Lending left programmed that no lend owns
    /// (`Cluster::leftovers`: NTB translations, LUT entries, IOMMU context entries and mapped
    /// bytes), and one more if its books are not empty. Must be 0.
    pub fn end_lends_and_count_leftovers(&mut self) -> WResult<usize> {
        let mut c = self.cluster();
        for l in c.lends() {
            c.return_device_force(l.borrower.as_str(), l.dev).map_err(|error| WorkloadError::Cluster { step: "ending the lends", error })?;
        }
        Ok(c.leftovers().len() + usize::from(!c.lending_idle()))
    }
}

/// What the machine does about a fault's report: stop what it stopped, crash its hosts' threads,
/// and run each removal's hot-plug steps at their times (each recorded as an `Event::Hotplug`;
/// the last tells the driver, `Cluster::driver_removed`, and where that driver is the
/// hypervisor's for a VM, one more step tells the guest's, `devlend_vm::unplug`).
fn effects(rep: &FaultReport, vmm: &Rc<RefCell<Vmm>>) -> Effects<Cluster> {
    let later = rep.notices.iter().flat_map(|n| steps(n, vmm)).collect();
    Effects { halted: rep.halted.clone(), crashed: rep.crashed.clone(), links_down: rep.links_down.clone(), later }
}

fn steps(n: &Notice, vmm: &Rc<RefCell<Vmm>>) -> Vec<(Ps, Later<Cluster>)> {
    let func = n.func;
    n.steps
        .iter()
        .map(|&(delay, host, step)| {
            let vmm = vmm.clone();
            let act: Later<Cluster> = Box::new(move |c: &mut Cluster, at: Ps| {
                c.fabric.record_event(Event::Hotplug { at, host, func, step });
                if step != HotplugStep::DriverRemoved {
                    return Effects::default();
                }
                c.driver_removed(host, func, at);
                match vmm.borrow().guest_with(host, func) {
                    Some(vm) => {
                        Effects { later: vec![(devlend_vm::unplug::forward_ps(&c.fabric), guest_told(vmm.clone(), vm, host, func))], ..Effects::default() }
                    }
                    None => Effects::default(),
                }
            });
            (delay, act)
        })
        .collect()
}

/// The removal of `func` forwarded into VM `vm` on `host`: the guest driver's `remove` runs.
fn guest_told(vmm: Rc<RefCell<Vmm>>, vm: VmId, host: HostId, func: FuncId) -> Later<Cluster> {
    Box::new(move |c: &mut Cluster, at: Ps| {
        c.fabric.record_event(Event::Hotplug { at, host, func, step: HotplugStep::GuestRemoved });
        vmm.borrow_mut().guest_removed(vm, func, at);
        Effects::default()
    })
}
