//! The hypervisor (KVM with VFIO and Device Lending's mediated-device parent), one registry for
//! the cluster's hosts.
//!
//! - *VFIO pass-through* (VMLoc, 000 §2.2, §5): a device in the VM's own host moves from its
//!   default domain into the VM's IOMMU domain, where guest-physical = IOVA: guest RAM maps onto
//!   the host chunks behind it, and every passed-through device's BARs sit at the guest-physical
//!   addresses the guest sees (so peer-to-peer works with the guest's addresses).
//! - *Mediated devices* (VMRem, 000 §5): `register_mdev` makes a device lendable to VMs without
//!   borrowing it; `assign_mdev` adds it to a VM (at start, or hot-add to a running VM). Only
//!   when the guest enables bus mastering in its config space does the host borrow it (Device
//!   Lending, devlend-host), probe the guest's memory by pinning from the well-known low and high
//!   addresses, map each pinned chunk for the device through its own DMA API (so the borrower's
//!   IOMMU maps the DMA window onto the scattered host chunks) and map the guest-physical
//!   addresses onto those window addresses in a per-VM domain of the *lender's* IOMMU (Fig 7).
//!   The device's BARs are mapped in that domain at the guest's addresses: peer-to-peer between
//!   two devices of one lender in one VM (000 §6, last paragraph).
//! - Hot-remove and shutdown undo everything; the device returns to its lender (and its default
//!   domain) with bus mastering off.
//!
//! Policies (the paper leaves them open): the VM domain is per (VM, lender host) and shared by
//! its devices; its RAM mappings are made through the first attached device (the *anchor*), so
//! the anchor cannot be hot-removed while other devices of the same lender remain in the VM
//! (`Busy`; remove those first). Devices of different lenders in one VM get no P2P mappings.

use crate::held::{release_all, Held};
use crate::layout::{Layout, CHUNK, GUEST_RESERVED};
use crate::vm::{GuestDev, Path, Vm, VmId};
use devlend_fabric::iommu::DomainId;
use devlend_fabric::model::{FuncId, HostId, NodeKind};
use devlend_host::{BadVm, Cluster, DevId, HResult, HostError, InUse, InVm, InvalidRequest, Lent, NoSuch, NtbUse, OutOf};
use std::collections::{BTreeMap, BTreeSet};

/// A VM's IOMMU domain in one host (the VM's own for VFIO, a lender's for mdev).
pub struct VmDomain {
    pub host: HostId,
    pub domain: DomainId,
    pub users: BTreeSet<FuncId>,
    pub(crate) anchor: Option<FuncId>,
    pub(crate) held: Vec<Held>,
}

#[derive(Default)]
pub struct Vmm {
    pub(crate) vms: BTreeMap<VmId, Vm>,
    next: u32,
    pub(crate) pages: BTreeMap<VmId, Vec<Held>>,
    pub(crate) parents: BTreeSet<FuncId>,
    pub(crate) assigned: BTreeMap<FuncId, (VmId, DevId)>,
    pub domains: BTreeMap<(VmId, HostId), VmDomain>,
    pub(crate) dev_held: BTreeMap<(VmId, DevId), (Vec<Held>, Option<Held>)>,
    /// Undo steps the fabric or host refused (empty unless this crate has a bug).
    pub anomalies: Vec<crate::error::Anomaly>,
    /// Live interrupt routes (`irq`).
    pub(crate) routes: Vec<crate::irq::Route>,
    /// Guest accesses the hypervisor refused (`config`).
    pub blocked: Vec<crate::config::Blocked>,
    /// Removals forwarded into guests (`unplug`): (VM, device, when its guest driver was told).
    pub(crate) removals: Vec<(VmId, FuncId, u64)>,
}

impl Vmm {
    /// Start a VM of `ram` bytes on `host`; its RAM is backed by 2 MiB chunks of the host's memory.
    pub fn create_vm(&mut self, c: &mut Cluster, host: &str, name: &str, ram: u64) -> HResult<VmId> {
        if !ram.is_multiple_of(CHUNK) || ram <= GUEST_RESERVED {
            return Err(BadVm::RamSize { vm: name.to_string(), ram, reserved: GUEST_RESERVED }.into());
        }
        let h = c.host_id(host)?;
        let (chunks, held) = self.back(c, h, name, ram)?;
        let id = VmId(self.next);
        self.next += 1;
        self.vms.insert(id, Vm::new(id, name, h, Layout::for_ram(ram), &chunks));
        self.pages.insert(id, held);
        Ok(id)
    }

    /// Host chunks for `ram` bytes of guest RAM in host `h`; nothing stays allocated on error.
    pub(crate) fn back(&mut self, c: &mut Cluster, h: HostId, name: &str, ram: u64) -> HResult<(Vec<u64>, Vec<Held>)> {
        let mut held = Vec::new();
        let mut chunks = Vec::new();
        for _ in 0..ram / CHUNK {
            match c.os(h)?.kmalloc(CHUNK) {
                Ok(p) => {
                    held.push(Held::Pages { host: h, phys: p });
                    chunks.push(p);
                }
                Err(e) => {
                    release_all(c, held, &mut self.anomalies);
                    let host = &c.fabric.host(h).name;
                    return Err(OutOf::GuestRam { vm: name.to_string(), host: host.clone(), ram, cause: Box::new(e) }.into());
                }
            }
        }
        Ok((chunks, held))
    }

    pub fn vm(&self, id: VmId) -> HResult<&Vm> {
        self.vms.get(&id).ok_or(HostError::NoDevice(NoSuch::Vm(InVm::Number { vm: id.0 })))
    }

    fn vm_mut(&mut self, id: VmId) -> HResult<&mut Vm> {
        self.vms.get_mut(&id).ok_or(HostError::NoDevice(NoSuch::Vm(InVm::NumberToChange { vm: id.0 })))
    }

    /// The guest kernel of a VM, for drivers.
    pub fn guest<'a>(&'a mut self, c: &'a mut Cluster, vm: VmId) -> HResult<crate::guest::GuestOs<'a>> {
        self.vm(vm)?;
        Ok(crate::guest::GuestOs { c, vmm: self, vm })
    }

    /// The mediated parent registers a lendable device for VMs, without borrowing it.
    pub fn register_mdev(&mut self, c: &Cluster, device: &str) -> HResult<()> {
        let func = c.fabric.func_id(device)?;
        if matches!(c.fabric.node(c.fabric.func(func).node).kind, NodeKind::Ntb { .. }) {
            return Err(InvalidRequest::NtbAdapter { device: device.into(), refused: NtbUse::PassThrough }.into());
        }
        self.parents.insert(func);
        Ok(())
    }

    /// Check and resolve a device before it is added to a VM.
    fn check_assign(&self, c: &Cluster, vm: VmId, device: &str, path: Path) -> HResult<FuncId> {
        let v = self.vm(vm)?;
        let func = c.fabric.func_id(device)?;
        if matches!(c.fabric.node(c.fabric.func(func).node).kind, NodeKind::Ntb { .. }) {
            return Err(InvalidRequest::NtbAdapter { device: device.into(), refused: NtbUse::PassThroughLent }.into());
        }
        if let Some((other, _)) = self.assigned.get(&func) {
            let o = self.vm(*other).map(|x| x.name.clone()).unwrap_or_default();
            return Err(InUse::PassedThrough { device: device.to_string(), owner: o, vm: v.name.clone() }.into());
        }
        if let Some(l) = c.lends().iter().find(|l| l.device == device) {
            return Err(HostError::AlreadyLent(Lent::PassThrough { device: device.into(), borrower: l.borrower.clone() }));
        }
        let local = c.fabric.func_host(func) == v.host;
        match path {
            Path::Vfio if !local => Err(BadVm::NotLocal { device: device.into(), vm: v.name.clone() }.into()),
            Path::Mdev if local => Err(BadVm::Local { device: device.into(), vm: v.name.clone() }.into()),
            Path::Mdev if !self.parents.contains(&func) => Err(BadVm::NotRegistered { device: device.into() }.into()),
            _ => Ok(func),
        }
    }

    fn add(&mut self, c: &Cluster, vm: VmId, func: FuncId, path: Path) -> HResult<DevId> {
        let f = c.fabric.func(func);
        let bars: Vec<(u8, u64, bool)> = f.bars.iter().map(|b| (b.index, b.size, b.bits == 64)).collect();
        let name = f.name.clone();
        let virt = crate::config::VirtCfg::new(c, func);
        let id = self.vm_mut(vm)?.add_device(&name, func, path, &bars, virt);
        self.assigned.insert(func, (vm, id));
        Ok(id)
    }

    /// VFIO pass-through of a device in the VM's host (VMLoc): attached at once.
    pub fn assign_vfio(&mut self, c: &mut Cluster, vm: VmId, device: &str) -> HResult<DevId> {
        let func = self.check_assign(c, vm, device, Path::Vfio)?;
        let id = self.add(c, vm, func, Path::Vfio)?;
        if let Err(e) = self.attach(c, vm, id) {
            self.forget(vm, id, func);
            return Err(e);
        }
        Ok(id)
    }

    /// Add a registered remote device to a VM (at start or hot-add); nothing is borrowed yet.
    pub fn assign_mdev(&mut self, c: &mut Cluster, vm: VmId, device: &str) -> HResult<DevId> {
        let func = self.check_assign(c, vm, device, Path::Mdev)?;
        self.add(c, vm, func, Path::Mdev)
    }

    fn forget(&mut self, vm: VmId, id: DevId, func: FuncId) {
        self.assigned.remove(&func);
        if let Some(v) = self.vms.get_mut(&vm) {
            v.devices.remove(&id);
        }
    }

    pub(crate) fn dev(&self, vm: VmId, id: DevId) -> HResult<&GuestDev> {
        let v = self.vm(vm)?;
        v.devices.get(&id).ok_or_else(|| HostError::NoDevice(NoSuch::Vm(InVm::Handle { vm: v.name.clone(), dev: id.0 })))
    }

    /// The config write that sets Bus Master Enable, as the hypervisor intercepts it.
    pub(crate) fn set_master(&mut self, c: &mut Cluster, vm: VmId, id: DevId) -> HResult<()> {
        let d = self.dev(vm, id)?;
        if d.attached {
            c.fabric.set_bus_master(d.func, true);
            return Ok(());
        }
        self.attach(c, vm, id)
    }

    /// Hot-remove a device from a running VM: detached, returned to its lender if borrowed.
    pub fn hot_remove(&mut self, c: &mut Cluster, vm: VmId, id: DevId) -> HResult<()> {
        let func = self.dev(vm, id)?.func;
        if self.dev(vm, id)?.attached {
            self.detach(c, vm, id)?;
        }
        self.forget(vm, id, func);
        Ok(())
    }

    /// Shut a VM down: every device removed (and returned), its memory given back to the host.
    pub fn shutdown(&mut self, c: &mut Cluster, vm: VmId) -> HResult<()> {
        let mut ids: Vec<(DevId, bool)> = self.vm(vm)?.devices.values().map(|d| (d.id, self.is_anchor(c, vm, d.func))).collect();
        ids.sort_by_key(|&(id, anchor)| (anchor, id));
        for (id, _) in ids {
            self.hot_remove(c, vm, id)?;
        }
        self.vms.remove(&vm);
        let held = self.pages.remove(&vm).unwrap_or_default();
        release_all(c, held, &mut self.anomalies);
        Ok(())
    }

    pub(crate) fn is_anchor(&self, c: &Cluster, vm: VmId, func: FuncId) -> bool {
        self.domains.get(&(vm, c.fabric.func_host(func))).is_some_and(|d| d.anchor == Some(func))
    }

    /// Whether the hypervisor holds nothing: no VM, no domain mapping, no borrowed device.
    pub fn idle(&self) -> bool {
        self.vms.is_empty() && self.domains.is_empty() && self.dev_held.is_empty() && self.assigned.is_empty()
    }
}
