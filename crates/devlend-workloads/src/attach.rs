//! A workload's device made ready for its runner: a host's own device, one borrowed through
//! Device Lending (as the paper workloads do, `gpu_run::attach`), or a device of a VM's
//! description (passed through or mediated, `devlend_vm::describe`), with the host layer's
//! errors made typed. A runner is a host or a VM: [`Runner`], with [`with_os!`] for its kernel.

use crate::error::{Missing, SetupCause, Unreached, WResult, WorkloadError};
use devlend_drivers::registry::{self, Serves};
use devlend_fabric::model::FuncId;
use devlend_host::{Cluster, DevId, HostError, InUse, InVm, NoSuch};
use devlend_vm::GuestKernel;
use devlend_vm::{VmId, Vmm};
use std::cell::RefCell;
use std::rc::Rc;

/// The scenario's VMs (from the topology's `vms` section) and their hypervisor.
#[derive(Clone, Default)]
pub(crate) struct Guests {
    pub vmm: Rc<RefCell<Vmm>>,
    pub names: Vec<(String, VmId)>,
}

impl Guests {
    fn find(&self, name: &str) -> Option<GuestKernel> {
        self.names.iter().find(|(n, _)| n == name).map(|&(_, vm)| GuestKernel { vmm: self.vmm.clone(), vm })
    }
}

/// Whose kernel runs a workload.
#[derive(Clone)]
pub(crate) enum Runner {
    Host(u16),
    Vm(GuestKernel),
}

/// `$body` with `$os` the runner's kernel (`HostOs` or `GuestOs`), timeless; an `HResult`.
macro_rules! with_os {
    ($runner:expr, $c:expr, |$os:ident| $body:expr) => {
        match $runner {
            $crate::attach::Runner::Host(h) => $c.os(*h).and_then(|mut o| {
                let $os = &mut o;
                $body
            }),
            $crate::attach::Runner::Vm(g) => {
                let mut v = g.vmm.borrow_mut();
                v.guest(&mut $c, g.vm).and_then(|mut o| {
                    let $os = &mut o;
                    $body
                })
            }
        }
    };
}
pub(crate) use with_os;

/// What `attach` found: the runner, the device's function and the runner's handle of it.
pub(crate) struct Attached {
    pub runner: Runner,
    pub func: FuncId,
    pub dev: DevId,
}

pub(crate) fn host_error(w: &str, device: &str, e: HostError) -> WorkloadError {
    let workload = w.to_string();
    match e {
        HostError::AlreadyLent(_) | HostError::Busy(_) => WorkloadError::AlreadyBorrowed { workload, device: device.into(), error: e },
        HostError::Unreachable(_) | HostError::WindowTooSmall(_) => {
            WorkloadError::Unreachable { workload, target: Box::new(Unreached::Device { device: device.into(), error: e }) }
        }
        HostError::NoDevice(_) => WorkloadError::NoSuch { workload, what: "device".into(), missing: Box::new(Missing::Host(e)) },
        error => WorkloadError::Setup { workload, cause: SetupCause::Host { step: "attaching the device", error } },
    }
}

/// Host or VM `runner`.
pub(crate) fn runner(c: &Cluster, guests: &Guests, w: &str, runner: &str) -> WResult<Runner> {
    if let Some(g) = guests.find(runner) {
        return Ok(Runner::Vm(g));
    }
    c.fabric.host_id(runner).map(Runner::Host).map_err(|e| {
        let vms: Vec<String> = guests.names.iter().map(|n| n.0.clone()).collect();
        let missing = if vms.is_empty() { Missing::Fabric(e) } else { Missing::NorVm { error: e, vms } };
        WorkloadError::no_such(w, "host", missing)
    })
}

/// `device` exists and is of a kind that serves `s` (`devlend_drivers::registry`; checked before
/// anything about it is looked up or changed, so that a wrong device is that error and not a
/// missing parameter of its profile).
pub(crate) fn check_kind(c: &Cluster, w: &str, device: &str, s: Serves) -> WResult<FuncId> {
    let func = c.fabric.func_id(device).map_err(|e| WorkloadError::no_such(w, "device", Missing::Fabric(e)))?;
    registry::check(&c.fabric, device, s).map_err(|kind| {
        let found = kind.map_or_else(|| "an NTB adapter".into(), |k| format!("its kind is {k}"));
        WorkloadError::WrongKind { workload: w.into(), device: device.into(), expected: registry::serving(s), found }
    })?;
    Ok(func)
}

/// Make `device` (of a kind that serves `s`) ready for `runner`: a host borrows it when it sits
/// elsewhere (or takes its handle when it holds it borrowed already, `Scenario::borrow`); a VM
/// has it from its description.
pub(crate) fn attach(c: &mut Cluster, guests: &Guests, w: &str, runner_name: &str, device: &str, s: Serves) -> WResult<Attached> {
    let runner = runner(c, guests, w, runner_name)?;
    let func = check_kind(c, w, device, s)?;
    let dev = match &runner {
        Runner::Host(host) if c.fabric.func_host(func) == *host => c.kernel(*host).and_then(|k| {
            let d = k.find(device)?;
            match k.device(d)?.lent_to {
                Some(to) => Err(InUse::LentTo { device: device.into(), borrower: c.fabric.host(to).name.clone() }.into()),
                None => Ok(d),
            }
        }),
        Runner::Host(host) => c.kernel(*host).and_then(|k| k.find(device)).or_else(|_| c.borrow(*host, device)),
        Runner::Vm(g) => {
            let vmm = g.vmm.borrow();
            let v = vmm.vm(g.vm).map_err(|e| host_error(w, device, e))?;
            let mine = v.devices.values().find(|d| d.name == device).map(|d| d.id);
            mine.ok_or_else(|| HostError::NoDevice(NoSuch::Vm(InVm::NotDescribed { vm: runner_name.to_string(), device: device.into() })))
        }
    };
    let dev = dev.map_err(|e| host_error(w, device, e))?;
    Ok(Attached { runner, func, dev })
}
