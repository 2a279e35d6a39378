//! Attaching a device to a VM and detaching it (see `vmm` for the two paths and their policies).
//!
//! Attach: (mdev) borrow the device onto the VM's host; get the VM's domain in the device's host,
//! creating it with the guest RAM mapped (VFIO: guest-physical onto the host chunks; mdev: the
//! probed chunks mapped for the borrowed device through Device Lending, which lands them in the
//! NTB window, and guest-physical onto the window addresses); move the device into the domain;
//! map its BARs at their guest-physical addresses; back the guest's BAR addresses in the EPT;
//! (mdev) enable bus mastering, the config write the guest asked for. A failed step undoes the
//! ones before it.

use crate::held::{release_all, Held};
use crate::layout::CHUNK;
use crate::vm::{Path, VmId};
use crate::vmm::{VmDomain, Vmm};
use devlend_fabric::iommu::DomainId;
use devlend_fabric::model::{FuncId, HostId};
use devlend_host::alloc::align_up;
use devlend_host::{Cluster, DevId, DmaDir, HResult, HostError, InUse, InVm, NoRoom, NoSuch};
use std::collections::BTreeSet;

impl Vmm {
    pub(crate) fn attach(&mut self, c: &mut Cluster, vm: VmId, id: DevId) -> HResult<()> {
        let (func, path, name) = {
            let d = self.dev(vm, id)?;
            (d.func, d.path, d.name.clone())
        };
        let vhost = self.vm(vm)?.host;
        let lender = c.fabric.func_host(func);
        let mut borrowed = None;
        let mut held = Vec::new();
        let r = self.attach_steps(c, vm, id, lender, &mut borrowed, &mut held, (func, path, &name, vhost));
        if let Err(e) = r {
            release_all(c, held, &mut self.anomalies);
            self.drop_unused_domain(c, vm, lender);
            release_all(c, borrowed.into_iter().collect(), &mut self.anomalies);
            if let Some(d) = self.vms.get_mut(&vm).and_then(|v| v.devices.get_mut(&id)) {
                d.host_dev = None;
                d.bars.iter_mut().for_each(|b| b.host = None);
            }
            return Err(e);
        }
        self.domains.get_mut(&(vm, lender)).map(|d| d.users.insert(func));
        self.dev_held.insert((vm, id), (held, borrowed));
        if let Some(d) = self.vms.get_mut(&vm).and_then(|v| v.devices.get_mut(&id)) {
            d.attached = true;
        }
        // Interrupts the guest had already set up (a device re-attached after migration).
        if let Err(e) = self.sync_irqs(c, vm, id) {
            self.drop_irqs(c, vm, id);
            self.detach(c, vm, id)?;
            return Err(e);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn attach_steps(
        &mut self,
        c: &mut Cluster,
        vm: VmId,
        id: DevId,
        lender: HostId,
        borrowed: &mut Option<Held>,
        held: &mut Vec<Held>,
        (func, path, name, vhost): (FuncId, Path, &str, HostId),
    ) -> HResult<()> {
        let hdev = match path {
            Path::Vfio => c.os(vhost)?.find(name)?,
            Path::Mdev => {
                let d = c.borrow(vhost, name)?;
                *borrowed = Some(Held::Borrowed { host: vhost, dev: d });
                d
            }
        };
        require_remapping(c, lender)?;
        require_remapping(c, vhost)?;
        let domain = self.ensure_domain(c, vm, lender, func, (path, hdev))?;
        c.fabric.iommu_detach(lender, func)?;
        held.push(Held::Attached { host: lender, func });
        c.fabric.iommu_attach(lender, domain, func)?;
        let bars = self.dev(vm, id)?.bars.clone();
        let views = c.kernel(vhost)?.device(hdev)?.bars.clone();
        for b in &bars {
            let phys = c.fabric.func(func).bars.iter().find(|x| x.index == b.index).map(|x| x.addr).unwrap_or_default();
            let len = align_up(b.size, 4096).unwrap_or(b.size);
            c.fabric.iommu_map(lender, domain, b.gpa, phys, len, true)?;
            held.push(Held::Iommu { host: lender, domain, iova: b.gpa, len });
        }
        let vanished = HostError::NoDevice(NoSuch::Vm(InVm::DeviceVanished { vm: vm.0, dev: id.0 }));
        let dev = self.vms.get_mut(&vm).and_then(|v| v.devices.get_mut(&id)).ok_or(vanished)?;
        dev.host_dev = Some(hdev);
        for b in dev.bars.iter_mut() {
            b.host = views.iter().find(|v| v.index == b.index).map(|v| v.cpu_addr);
        }
        // Mediated: the guest's Bus Master write is what attaches. VFIO: a re-attached device
        // (after migration) gets bus mastering back as the guest left it.
        if path == Path::Mdev || self.dev(vm, id)?.virt.command & devlend_fabric::config::CMD_BUS_MASTER != 0 {
            c.fabric.set_bus_master(func, true);
            held.push(Held::Master { func });
        }
        Ok(())
    }

    /// The VM's domain in `host`, created with the guest RAM mapped if it does not exist yet.
    fn ensure_domain(&mut self, c: &mut Cluster, vm: VmId, host: HostId, func: FuncId, (path, hdev): (Path, DevId)) -> HResult<DomainId> {
        if let Some(d) = self.domains.get(&(vm, host)) {
            return Ok(d.domain);
        }
        let v = self.vm(vm)?;
        let (vname, vhost, chunks) = (v.name.clone(), v.host, v.probe());
        let dname = format!("vm{}:{}", vm.0, vname);
        let domain = match c.fabric.iommu_domain(host, &dname) {
            Ok(d) => d,
            Err(_) => c.fabric.iommu_domain_alloc(host, &dname)?,
        };
        let mut held = Vec::new();
        let r = map_ram(c, &chunks, (host, domain), (path, vhost, hdev), &mut held);
        if let Err(e) = r {
            release_all(c, held, &mut self.anomalies);
            let ram = chunks.len() as u64 * CHUNK;
            return Err(match e {
                e @ (HostError::WindowTooSmall(_) | HostError::NoMemory(_)) => NoRoom::VmMemory { vm: vname, ram, cause: Box::new(e) }.into(),
                e => e,
            });
        }
        let anchor = (path == Path::Mdev).then_some(func);
        self.domains.insert((vm, host), VmDomain { host, domain, users: BTreeSet::new(), anchor, held });
        Ok(domain)
    }

    pub(crate) fn drop_unused_domain(&mut self, c: &mut Cluster, vm: VmId, host: HostId) {
        if self.domains.get(&(vm, host)).is_some_and(|d| d.users.is_empty()) {
            if let Some(d) = self.domains.remove(&(vm, host)) {
                release_all(c, d.held, &mut self.anomalies);
            }
        }
    }

    /// Undo an attach; the anchor of a shared domain goes last (see `vmm`'s policies).
    pub(crate) fn detach(&mut self, c: &mut Cluster, vm: VmId, id: DevId) -> HResult<()> {
        let d = self.dev(vm, id)?;
        let (func, name) = (d.func, d.name.clone());
        let lender = c.fabric.func_host(func);
        if let Some(dom) = self.domains.get(&(vm, lender)) {
            if dom.anchor == Some(func) && dom.users.len() > 1 {
                let others = dom.users.iter().filter(|&&u| u != func).map(|&u| c.fabric.func(u).name.clone()).collect();
                return Err(InUse::Anchor { device: name, others }.into());
            }
        }
        self.drop_irqs(c, vm, id);
        c.fabric.set_bus_master(func, false);
        let (held, borrowed) = self.dev_held.remove(&(vm, id)).unwrap_or_default();
        release_all(c, held, &mut self.anomalies);
        if let Some(dom) = self.domains.get_mut(&(vm, lender)) {
            dom.users.remove(&func);
        }
        self.drop_unused_domain(c, vm, lender);
        release_all(c, borrowed.into_iter().collect(), &mut self.anomalies);
        if let Some(d) = self.vms.get_mut(&vm).and_then(|v| v.devices.get_mut(&id)) {
            d.attached = false;
            d.host_dev = None;
            d.bars.iter_mut().for_each(|b| b.host = None);
        }
        Ok(())
    }
}

/// Interrupt remapping on in `host` (`Cluster::enable_interrupt_remapping`), as VFIO requires of
/// a platform before it passes a device through (vfio_iommu_type1 refuses without it unless
/// `allow_unsafe_interrupts` is set): the device's vectors, and on the mediated path the
/// borrower's relay vectors, get remappable-format entries validating their source ID (`irq`),
/// so a device cannot raise another VM's interrupt. A host without an IOMMU has no remapping to
/// turn on; its vectors stay in compatibility format.
fn require_remapping(c: &mut Cluster, host: HostId) -> HResult<()> {
    if !c.fabric.host(host).iommu || c.fabric.intr_remap_on(host) {
        return Ok(());
    }
    c.enable_interrupt_remapping(host).map_err(|e| match e {
        HostError::Busy(cause) => InUse::RemapForVm(cause).into(),
        e => e,
    })
}

/// Map the guest's RAM chunks in a VM domain: onto the host chunks (VFIO), or onto the DMA
/// window addresses the borrower's DMA API hands out for them (mdev, 000 §5 and Fig 7).
fn map_ram(
    c: &mut Cluster,
    chunks: &[(u64, u64)],
    (host, domain): (HostId, DomainId),
    (path, vhost, hdev): (Path, HostId, DevId),
    held: &mut Vec<Held>,
) -> HResult<()> {
    for &(gpa, hpa) in chunks {
        let target = match path {
            Path::Vfio => hpa,
            Path::Mdev => {
                let dma = c.os(vhost)?.dma_map_single(hdev, hpa, CHUNK, DmaDir::Bidirectional)?;
                held.push(Held::HostDma { host: vhost, dev: hdev, dma, len: CHUNK });
                dma
            }
        };
        c.fabric.iommu_map(host, domain, gpa, target, CHUNK, true)?;
        held.push(Held::Iommu { host, domain, iova: gpa, len: CHUNK });
    }
    Ok(())
}
