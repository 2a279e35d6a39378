//! A workload's device made ready for its runner: its own, or borrowed through Device Lending
//! (as the paper workloads do, `gpu_bench::attach`), with the host layer's errors made typed.

use crate::error::{WResult, WorkloadError};
use devlend_fabric::model::{FuncId, HostId};
use devlend_host::{Cluster, DevId, HostError};

/// What `attach` found: the runner, the device's function and the runner's handle of it.
pub(crate) struct Attached {
    pub host: HostId,
    pub func: FuncId,
    pub dev: DevId,
}

/// The kind (`gpu`, `nvme`, ...) of the device profile of `device`, if it has one.
fn kind_of(c: &Cluster, device: &str) -> Option<String> {
    let profile = c.fabric.devices.iter().find(|d| d.name == device).and_then(|d| d.profile.clone()).unwrap_or_default();
    let t: Option<toml::Value> = toml::from_str(devlend_fabric::params::HARDWARE_TOML).ok();
    let kind = t.as_ref().and_then(|t| t.get("device")?.get(&profile)?.get("kind")?.as_str().map(String::from));
    kind
}

pub(crate) fn host_error(w: &str, device: &str, e: HostError) -> WorkloadError {
    let (workload, message) = (w.to_string(), e.to_string());
    match e {
        HostError::AlreadyLent(_) | HostError::Busy(_) => WorkloadError::AlreadyBorrowed { workload, device: device.into(), message },
        HostError::Unreachable(_) | HostError::WindowTooSmall(_) => WorkloadError::Unreachable { workload, what: device.into(), message },
        HostError::NoDevice(_) => WorkloadError::NoSuch { workload, what: "device".into(), message },
        _ => WorkloadError::Setup { workload, message },
    }
}

/// Make `device` (of kind `expected`) ready for host `runner`, borrowing it when it sits elsewhere
/// (or taking the runner's handle when it holds it borrowed already, `Scenario::borrow`).
pub(crate) fn attach(c: &mut Cluster, w: &str, runner: &str, device: &str, expected: &'static str) -> WResult<Attached> {
    let host = c.fabric.host_id(runner).map_err(|e| WorkloadError::NoSuch { workload: w.into(), what: "host".into(), message: e.to_string() })?;
    let func = c.fabric.func_id(device).map_err(|e| WorkloadError::NoSuch { workload: w.into(), what: "device".into(), message: e.to_string() })?;
    let kind = kind_of(c, device);
    if kind.as_deref() != Some(expected) {
        let found = kind.map_or_else(|| "an NTB adapter, or a device without a profile".into(), |k| format!("its kind is {k}"));
        return Err(WorkloadError::WrongKind { workload: w.into(), device: device.into(), expected, found });
    }
    let owner = c.fabric.func_host(func);
    let dev = if owner == host {
        c.kernel(host).and_then(|k| {
            let d = k.find(device)?;
            match k.device(d)?.lent_to {
                Some(to) => Err(HostError::Busy(format!("{device} is lent to host {}", c.fabric.hosts[to as usize].name))),
                None => Ok(d),
            }
        })
    } else {
        c.kernel(host).and_then(|k| k.find(device)).or_else(|_| c.borrow(host, device))
    };
    let dev = dev.map_err(|e| host_error(w, device, e))?;
    Ok(Attached { host, func, dev })
}
