//! VMs from a topology description (its `vms` section, `devlend_fabric::spec::VmSpec`), on any
//! topology: each VM starts on its host with its RAM, and gets its devices, passed through with
//! VFIO when they sit in its host and through the mediated parent (000 §5: borrowed when the
//! guest enables bus mastering) when they sit in another. A description the hypervisor refuses
//! is a `SpecError` pointing at the field (`/vms/1/devices/0/path`), and nothing stays started.
//!
//! [`GuestKernel`] names a VM's kernel for machine threads (`ThreadKernel`), so a workload written
//! for a host's threads runs in the guest (fio's jobs).

use crate::timed::GuestThreadOs;
use crate::vm::{Path, VmId};
use crate::vmm::Vmm;
use devlend_engine::machine::Thread;
use devlend_fabric::spec::{VmPathSpec, VmSpec};
use devlend_fabric::SpecError;
use devlend_host::{Cluster, HResult, ThreadKernel};
use std::cell::RefCell;
use std::rc::Rc;

/// A VM's guest kernel, for machine threads.
#[derive(Clone)]
pub struct GuestKernel {
    pub vmm: Rc<RefCell<Vmm>>,
    pub vm: VmId,
}

impl ThreadKernel for GuestKernel {
    type Os<'t, 'y: 't> = GuestThreadOs<'t, 'y>;
    fn on<'t, 'y: 't>(&self, t: &'t Thread<'y, Cluster>) -> HResult<GuestThreadOs<'t, 'y>> {
        GuestThreadOs::new(t, self.vmm.clone(), self.vm)
    }
}

fn at(i: usize, rest: &str) -> impl Fn(String) -> SpecError + '_ {
    move |m| SpecError::new(format!("/vms/{i}/{rest}"), m)
}

/// Start every VM of `specs` with its devices; returns (name, id) in order. On error, the VMs
/// started so far are shut down (nothing stays allocated, mapped or borrowed).
pub fn start(c: &mut Cluster, vmm: &mut Vmm, specs: &[VmSpec]) -> Result<Vec<(String, VmId)>, SpecError> {
    let mut out: Vec<(String, VmId)> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let r = check_name(c, &out, spec).map_err(at(i, "name")).and_then(|_| start_one(c, vmm, i, spec));
        match r {
            Ok(id) => out.push((spec.name.clone(), id)),
            Err(e) => {
                for (_, id) in out {
                    if let Err(x) = vmm.shutdown(c, id) {
                        vmm.anomalies.push(format!("shutting down after a bad description: {x}"));
                    }
                }
                return Err(e);
            }
        }
    }
    Ok(out)
}

fn check_name(c: &Cluster, started: &[(String, VmId)], spec: &VmSpec) -> Result<(), String> {
    if started.iter().any(|(n, _)| *n == spec.name) {
        return Err(format!("a second VM named '{}'", spec.name));
    }
    if c.fabric.host_id(&spec.name).is_ok() {
        return Err(format!("'{}' is a host's name: a VM runs workloads as a host does, so its name must differ", spec.name));
    }
    Ok(())
}

fn start_one(c: &mut Cluster, vmm: &mut Vmm, i: usize, spec: &VmSpec) -> Result<VmId, SpecError> {
    if c.fabric.host_id(&spec.host).is_err() {
        let hosts: Vec<&str> = c.fabric.hosts.iter().map(|h| h.name.as_str()).collect();
        return Err(at(i, "host")(format!("no host '{}' (hosts: {})", spec.host, hosts.join(", "))));
    }
    let vm = vmm.create_vm(c, &spec.host, &spec.name, spec.memory).map_err(|e| at(i, "memory")(e.to_string()))?;
    for (j, d) in spec.devices.iter().enumerate() {
        if let Err(e) = add_device(c, vmm, vm, d.device.as_str(), d.path) {
            let field = if e.1 { "path" } else { "device" };
            if let Err(x) = vmm.shutdown(c, vm) {
                vmm.anomalies.push(format!("shutting down after a bad description: {x}"));
            }
            return Err(SpecError::new(format!("/vms/{i}/devices/{j}/{field}"), e.0));
        }
    }
    Ok(vm)
}

/// Pass `device` to `vm` on `path` (or the path its place implies); the error and whether it is
/// the path's.
fn add_device(c: &mut Cluster, vmm: &mut Vmm, vm: VmId, device: &str, path: Option<VmPathSpec>) -> Result<(), (String, bool)> {
    let func = c.fabric.func_id(device).map_err(|e| (e.to_string(), false))?;
    let (vname, vhost) = vmm.vm(vm).map(|v| (v.name.clone(), v.host)).map_err(|e| (e.to_string(), false))?;
    let owner = c.fabric.func_host(func);
    let path = match (path, owner == vhost) {
        (None, true) | (Some(VmPathSpec::Vfio), true) => Path::Vfio,
        (None, false) | (Some(VmPathSpec::Mediated), false) => Path::Mdev,
        (Some(_), local) => {
            let (host, vh) = (&c.fabric.hosts[owner as usize].name, &c.fabric.hosts[vhost as usize].name);
            let why = if local { "the mediated path lends a device of another host; pass a local one through with vfio" } else { "VFIO passes through devices of the VM's own host; a device of another host takes the mediated path" };
            let given = if local { "mediated" } else { "vfio" };
            return Err((format!("{device} sits in {host} and VM {vname} runs on {vh}: path {given} does not apply ({why}; or leave path out)"), true));
        }
    };
    let r = match path {
        Path::Vfio => vmm.assign_vfio(c, vm, device).map(|_| ()),
        Path::Mdev => vmm.register_mdev(c, device).and_then(|_| vmm.assign_mdev(c, vm, device)).map(|_| ()),
    };
    r.map_err(|e| (e.to_string(), false))
}
