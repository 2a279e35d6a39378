//! VMs from a topology description (its `vms` section, `devlend_fabric::spec::VmSpec`), on any
//! topology: each VM starts on its host with its RAM, and gets its devices, passed through with
//! VFIO when they sit in its host and through the mediated parent (000 §5: borrowed when the
//! guest enables bus mastering) when they sit in another. A description the hypervisor refuses
//! is a [`VmSpecError`] (the fabric's `SpecError` with this crate's typed [`VmSpecFault`])
//! pointing at the field (`/vms/1/devices/0/path`), and nothing stays started.

use crate::error::Anomaly;
use crate::vm::{Path, VmId};
use crate::vmm::Vmm;
use devlend_fabric::spec::{VmPathSpec, VmSpec};
use devlend_fabric::{FabricError, SpecError};
use devlend_host::{Cluster, HostError};
use std::fmt;

/// Why one VM of the description cannot start; [`VmSpecFault::field`] names the field it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmSpecFault {
    /// A second VM named `name`.
    DuplicateName { name: String },
    /// The VM is named as host `name` is.
    HostName { name: String },
    /// No host `host`; `hosts` are those there are.
    NoHost { host: String, hosts: Vec<String> },
    /// The hypervisor refused to start the VM with its memory.
    Create(HostError),
    /// The fabric has no function `device`.
    NoDevice { device: String, error: FabricError },
    /// The hypervisor refused to pass `device` to the VM.
    Assign { device: String, error: HostError },
    /// Path `given` does not apply to `device` in host `device_host` for VM `vm` on `vm_host`.
    Path { device: String, device_host: String, vm: String, vm_host: String, given: VmPathSpec },
    /// The VMs' interrupt delivery could not be started on the machine (`irq_clock::spawn`,
    /// after every VM started): a fault of the whole `vms` section, reported at `/vms`.
    IrqClock(HostError),
}

/// A fault of the description's `vms` section at a pointer into it.
pub type VmSpecError = SpecError<VmSpecFault>;

impl VmSpecFault {
    /// The field of the VM's description at fault (under `/vms/I/`, or `/vms/I/devices/J/`).
    pub fn field(&self) -> &'static str {
        match self {
            VmSpecFault::DuplicateName { .. } | VmSpecFault::HostName { .. } => "name",
            VmSpecFault::NoHost { .. } => "host",
            VmSpecFault::Create(_) => "memory",
            VmSpecFault::NoDevice { .. } | VmSpecFault::Assign { .. } => "device",
            VmSpecFault::Path { .. } => "path",
            VmSpecFault::IrqClock(_) => "",
        }
    }
}

impl fmt::Display for VmSpecFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmSpecFault::DuplicateName { name } => write!(f, "a second VM named '{name}'"),
            VmSpecFault::HostName { name } => write!(f, "'{name}' is a host's name: a VM runs workloads as a host does, so its name must differ"),
            VmSpecFault::NoHost { host, hosts } => write!(f, "no host '{host}' (hosts: {})", hosts.join(", ")),
            VmSpecFault::Create(e) | VmSpecFault::Assign { error: e, .. } | VmSpecFault::IrqClock(e) => write!(f, "{e}"),
            VmSpecFault::NoDevice { error, .. } => write!(f, "{error}"),
            VmSpecFault::Path { device, device_host, vm, vm_host, given } => {
                let (given, why) = match given {
                    VmPathSpec::Mediated => ("mediated", "the mediated path lends a device of another host; pass a local one through with vfio"),
                    VmPathSpec::Vfio => ("vfio", "VFIO passes through devices of the VM's own host; a device of another host takes the mediated path"),
                };
                write!(f, "{device} sits in {device_host} and VM {vm} runs on {vm_host}: path {given} does not apply ({why}; or leave path out)")
            }
        }
    }
}

impl std::error::Error for VmSpecFault {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            VmSpecFault::Create(e) | VmSpecFault::Assign { error: e, .. } | VmSpecFault::IrqClock(e) => Some(e),
            VmSpecFault::NoDevice { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// The description's error for `fault` of VM `i` (device `j` when it is a device's).
fn spec_error(i: usize, j: Option<usize>, fault: VmSpecFault) -> VmSpecError {
    let at = match j {
        Some(j) => format!("/vms/{i}/devices/{j}/{}", fault.field()),
        None => format!("/vms/{i}/{}", fault.field()),
    };
    SpecError::at(at, fault)
}

/// Start every VM of `specs` with its devices; returns (name, id) in order. On error, the VMs
/// started so far are shut down (nothing stays allocated, mapped or borrowed).
pub fn start(c: &mut Cluster, vmm: &mut Vmm, specs: &[VmSpec]) -> Result<Vec<(String, VmId)>, VmSpecError> {
    let mut out: Vec<(String, VmId)> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let r = check_name(c, &out, spec).map_err(|e| spec_error(i, None, e)).and_then(|_| start_one(c, vmm, i, spec));
        match r {
            Ok(id) => out.push((spec.name.clone(), id)),
            Err(e) => {
                for (_, id) in out {
                    if let Err(x) = vmm.shutdown(c, id) {
                        vmm.anomalies.push(Anomaly::Step { step: "shutting down after a bad description", error: x });
                    }
                }
                return Err(e);
            }
        }
    }
    Ok(out)
}

fn check_name(c: &Cluster, started: &[(String, VmId)], spec: &VmSpec) -> Result<(), VmSpecFault> {
    if started.iter().any(|(n, _)| *n == spec.name) {
        return Err(VmSpecFault::DuplicateName { name: spec.name.clone() });
    }
    if c.fabric.host_id(&spec.name).is_ok() {
        return Err(VmSpecFault::HostName { name: spec.name.clone() });
    }
    Ok(())
}

fn start_one(c: &mut Cluster, vmm: &mut Vmm, i: usize, spec: &VmSpec) -> Result<VmId, VmSpecError> {
    if c.fabric.host_id(&spec.host).is_err() {
        let hosts = c.fabric.hosts().iter().map(|h| h.name.clone()).collect();
        return Err(spec_error(i, None, VmSpecFault::NoHost { host: spec.host.clone(), hosts }));
    }
    let vm = vmm.create_vm(c, &spec.host, &spec.name, spec.memory).map_err(|e| spec_error(i, None, VmSpecFault::Create(e)))?;
    for (j, d) in spec.devices.iter().enumerate() {
        if let Err(e) = add_device(c, vmm, vm, d.device.as_str(), d.path) {
            if let Err(x) = vmm.shutdown(c, vm) {
                vmm.anomalies.push(Anomaly::Step { step: "shutting down after a bad description", error: x });
            }
            return Err(spec_error(i, Some(j), e));
        }
    }
    Ok(vm)
}

/// Pass `device` to `vm` on `path` (or the path its place implies).
pub fn add_device(c: &mut Cluster, vmm: &mut Vmm, vm: VmId, device: &str, path: Option<VmPathSpec>) -> Result<(), VmSpecFault> {
    let func = c.fabric.func_id(device).map_err(|error| VmSpecFault::NoDevice { device: device.to_string(), error })?;
    let assign = |error| VmSpecFault::Assign { device: device.to_string(), error };
    let (vname, vhost) = vmm.vm(vm).map(|v| (v.name.clone(), v.host)).map_err(assign)?;
    let owner = c.fabric.func_host(func);
    let path = match (path, owner == vhost) {
        (None, true) | (Some(VmPathSpec::Vfio), true) => Path::Vfio,
        (None, false) | (Some(VmPathSpec::Mediated), false) => Path::Mdev,
        (Some(given), _) => {
            let (device_host, vm_host) = (c.fabric.host(owner).name.clone(), c.fabric.host(vhost).name.clone());
            return Err(VmSpecFault::Path { device: device.to_string(), device_host, vm: vname, vm_host, given });
        }
    };
    let r = match path {
        Path::Vfio => vmm.assign_vfio(c, vm, device).map(|_| ()),
        Path::Mdev => vmm.register_mdev(c, device).and_then(|_| vmm.assign_mdev(c, vm, device)).map(|_| ()),
    };
    r.map_err(assign)
}

#[cfg(test)]
mod tests {
    use super::*;
    use devlend_fabric::Unknown;

    /// A fault of the irq clock is the host layer's error, typed, at the `vms` section, rendered
    /// as the scenario printed it when it held the error's text.
    #[test]
    fn the_irq_clock_s_fault_keeps_the_host_error() {
        let error = HostError::Fabric(FabricError::from(Unknown::Ntb { name: "x".into() }));
        let e = VmSpecError::at("/vms", VmSpecFault::IrqClock(error.clone()));
        assert_eq!(*e.fault, VmSpecFault::IrqClock(error));
        assert_eq!(e.to_string(), "/vms: no NTB named 'x'");
        assert!(std::error::Error::source(&*e.fault).is_some());
    }
}
