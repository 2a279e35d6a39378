//! Cold migration of a VM to another host, keeping its devices (000 §8, "VM migration": "our
//! KVM implementation makes it possible to shutdown, migrate and restart a VM on a different
//! host in the cluster (cold migration). The guest will retain access to the same physical
//! devices").
//!
//! The guest is stopped; its attached devices are detached from the old host (interrupt routes
//! down, mediated devices returned to their lenders, VFIO devices back in their default
//! domain); its RAM gets chunks of the target host; every device that was attached is attached
//! again from the target (a device in the target itself by VFIO, any other through the mediated
//! parent, which must have it registered); the memory image is copied chunk by chunk and the old
//! chunks are freed. The guest's view does not change: guest-physical addresses, BAR addresses,
//! its virtual config space and MSI-X table, and so its drivers' DMA addresses and interrupt
//! vectors; the devices are not reset, so their own memory is as the guest left it.
//!
//! If a device cannot be attached from the target (no NTB joins the target and its lender, a
//! window too small), every device attached from the target so far is detached again (all their
//! IOMMU, NTB and interrupt mappings undone), the VM is put back on its old host with its devices
//! attached as before, the target's chunks are freed, and the error says why. Nothing of the
//! guest's memory has been copied by then.

use crate::error::Anomaly;
use crate::held::release_all;
use crate::layout::CHUNK;
use crate::vm::{Path, VmId};
use crate::vmm::Vmm;
use devlend_fabric::model::HostId;
use devlend_fabric::Requester;
use devlend_host::{BadVm, Cluster, DevId, HResult, HostError, InVm, Migration, NoSuch, Unreachability};

impl Vmm {
    /// Cold-migrate `vm` to host `target` with its devices (see the module docs).
    pub fn migrate(&mut self, c: &mut Cluster, vm: VmId, target: &str) -> HResult<()> {
        // The VM's devices are returned and borrowed again by the same tenant: nothing to scrub.
        c.same_tenant(|c| self.migrate_devices(c, vm, target))
    }

    fn migrate_devices(&mut self, c: &mut Cluster, vm: VmId, target: &str) -> HResult<()> {
        let t = c.host_id(target)?;
        let v = self.vm(vm)?;
        let (name, from, ram) = (v.name.clone(), v.host, v.layout.ram());
        let from_name = c.fabric.host(from).name.clone();
        if t == from {
            return Err(BadVm::AlreadyOn { vm: name, target: target.into() }.into());
        }
        let mut paths = Vec::new();
        for d in v.devices.values() {
            let local = c.fabric.func_host(d.func) == t;
            if !local && !self.parents.contains(&d.func) {
                return Err(BadVm::MigrateUnregistered { vm: name, target: target.into(), device: d.name.clone() }.into());
            }
            paths.push((d.id, if local { Path::Vfio } else { Path::Mdev }));
        }
        let (chunks, held) = self.back(c, t, &name, ram)?;
        let attached = self.stop(c, vm)?;
        let old = self.vms.get_mut(&vm).map(|v| v.rebase(t, &chunks)).ok_or(HostError::NoDevice(NoSuch::Vm(InVm::Vanished { vm: vm.0 })))?;
        let old_paths = self.set_paths(vm, &paths);
        if let Err((dev, e)) = self.start(c, vm, &attached) {
            if let Some(v) = self.vms.get_mut(&vm) {
                v.restore(old);
            }
            self.set_paths(vm, &old_paths);
            release_all(c, held, &mut self.anomalies);
            if let Err((_, e2)) = self.start(c, vm, &attached) {
                self.anomalies.push(Anomaly::Step { step: "re-attaching the devices on the old host after a failed migration", error: e2 });
            }
            return Err(Unreachability::Migration(Migration { vm: name, target: target.into(), from: from_name, device: dev, error: e }).into());
        }
        let (_, backing) = old;
        for (gpa, src) in backing {
            let dst = self.vm(vm)?.pin(gpa).ok_or_else(|| HostError::from(BadVm::ChunkMissing { gpa }))?;
            copy_chunk(c, (from, src), (t, dst))?;
        }
        let old_pages = self.pages.insert(vm, held).unwrap_or_default();
        release_all(c, old_pages, &mut self.anomalies);
        Ok(())
    }

    fn set_paths(&mut self, vm: VmId, paths: &[(DevId, Path)]) -> Vec<(DevId, Path)> {
        let mut old = Vec::new();
        if let Some(v) = self.vms.get_mut(&vm) {
            for &(id, p) in paths {
                if let Some(d) = v.devices.get_mut(&id) {
                    old.push((id, std::mem::replace(&mut d.path, p)));
                }
            }
        }
        old
    }

    /// Detach every attached device of a VM, the anchors of shared domains last; returns the
    /// devices that were attached, in the order to attach them again (anchors first).
    fn stop(&mut self, c: &mut Cluster, vm: VmId) -> HResult<Vec<DevId>> {
        let mut ids: Vec<(bool, DevId)> = self.vm(vm)?.devices.values().filter(|d| d.attached).map(|d| (self.is_anchor(c, vm, d.func), d.id)).collect();
        ids.sort();
        for &(_, id) in &ids {
            self.detach(c, vm, id)?;
        }
        Ok(ids.into_iter().rev().map(|x| x.1).collect())
    }

    /// Attach the devices again from the VM's (new) host (bus mastering as the guest left it,
    /// see `attach`); on failure detach those attached so far and name the device that failed.
    fn start(&mut self, c: &mut Cluster, vm: VmId, ids: &[DevId]) -> Result<(), (String, HostError)> {
        for (i, &id) in ids.iter().enumerate() {
            if let Err(e) = self.attach(c, vm, id) {
                let name = self.dev(vm, id).map(|d| d.name.clone()).unwrap_or_default();
                for &back in ids[..i].iter().rev() {
                    if let Err(e2) = self.detach(c, vm, back) {
                        self.anomalies.push(Anomaly::Step { step: "undoing a failed attach", error: e2 });
                    }
                }
                return Err((name, e));
            }
        }
        Ok(())
    }
}

/// Move one chunk of the memory image (zero chunks onto zero chunks are skipped).
fn copy_chunk(c: &mut Cluster, (from, src): (HostId, u64), (to, dst): (HostId, u64)) -> HResult<()> {
    let (data, f1) = c.fabric.read(Requester::Cpu(from), src, CHUNK as usize);
    let fail = if let Some(f) = f1 {
        Some((src, f))
    } else if data.iter().all(|&b| b == 0) && c.fabric.read(Requester::Cpu(to), dst, CHUNK as usize).0.iter().all(|&b| b == 0) {
        None
    } else {
        c.fabric.write(Requester::Cpu(to), dst, &data).1.map(|f| (dst, f))
    };
    match fail {
        None => Ok(()),
        Some((addr, failure)) => Err(HostError::Fault { addr, failure: Box::new(c.fabric.failure_report(&failure)), during: Some("copying the memory image") }),
    }
}
