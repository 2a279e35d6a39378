//! `HostOs`: the kernel interface a driver is written against, for one host. The same driver
//! code runs on a local device and on a borrowed one; only the implementation behind these calls
//! differs (000 §4: Device Lending "does not require any modifications to device drivers").
//!
//! - PCI: `find`, `pci_iomap`, `pci_resource_len`, `pci_set_master`, `pci_read_config`;
//!   config accesses to a borrowed device are forwarded to the device in the lender.
//! - Memory: `kmalloc`/`kfree` (page granular), CPU `write`/`read` (memcpy, writel, readl).
//! - DMA API: `dma_map_single`, `dma_map_sg`, `dma_alloc_coherent`, `dma_map_resource` and their
//!   unmaps. Directions matter: a `ToDevice` mapping is read-only for the device.

use crate::cluster::Cluster;
use crate::error::{invalid, HResult, HostError};
use crate::kernel::{DevId, Kernel, Origin, PciDevice};
use crate::lending::p2p::Target;
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::Requester;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaDir {
    /// The device reads the buffer.
    ToDevice,
    /// The device writes the buffer.
    FromDevice,
    Bidirectional,
}

impl DmaDir {
    pub fn device_writes(self) -> bool {
        !matches!(self, DmaDir::ToDevice)
    }
}

pub struct HostOs<'a> {
    pub(crate) c: &'a mut Cluster,
    pub(crate) host: HostId,
}

impl HostOs<'_> {
    pub fn host(&self) -> HostId {
        self.host
    }

    /// Let the hardware run: device models (firmware loops polling their doorbells) act on the
    /// fabric here. Drivers never touch the fabric directly; they only call this to wait.
    pub fn run_hardware<R>(&mut self, hw: impl FnOnce(&mut devlend_fabric::Fabric) -> R) -> R {
        hw(&mut self.c.fabric)
    }

    pub fn kernel(&self) -> &Kernel {
        &self.c.kernels[self.host as usize]
    }

    fn kernel_mut(&mut self) -> &mut Kernel {
        &mut self.c.kernels[self.host as usize]
    }

    pub fn find(&self, name: &str) -> HResult<DevId> {
        self.kernel().find(name)
    }

    pub fn device(&self, dev: DevId) -> HResult<&PciDevice> {
        self.kernel().device(dev)
    }

    /// The device, if this host may drive it (not lent away to another host).
    fn usable(&self, dev: DevId) -> HResult<&PciDevice> {
        let d = self.kernel().device(dev)?;
        if let Some(to) = d.lent_to {
            return Err(HostError::Busy(format!("{} is lent to host {}", d.name, self.c.fabric.hosts[to as usize].name)));
        }
        Ok(d)
    }

    /// A device whose DMA the drivers manage: (function, origin).
    fn dma_dev(&self, dev: DevId) -> HResult<(FuncId, Origin)> {
        let d = self.usable(dev)?;
        if d.is_ntb {
            return invalid(format!("{} is an NTB adapter; its DMA belongs to the NTB driver and Device Lending", d.name));
        }
        Ok((d.func, d.origin))
    }

    // ----- PCI ------------------------------------------------------------------------------

    /// The CPU address of a BAR in this host (the BAR, or the NTB window onto it).
    pub fn pci_iomap(&self, dev: DevId, bar: u8) -> HResult<u64> {
        Ok(self.usable(dev)?.bar(bar)?.cpu_addr)
    }

    pub fn pci_resource_len(&self, dev: DevId, bar: u8) -> HResult<u64> {
        Ok(self.usable(dev)?.bar(bar)?.size)
    }

    pub fn pci_set_master(&mut self, dev: DevId) -> HResult<()> {
        let f = self.usable(dev)?.func;
        self.c.fabric.set_bus_master(f, true);
        Ok(())
    }

    pub fn pci_clear_master(&mut self, dev: DevId) -> HResult<()> {
        let f = self.usable(dev)?.func;
        self.c.fabric.set_bus_master(f, false);
        Ok(())
    }

    pub fn pci_read_config(&self, dev: DevId, off: usize, len: usize) -> HResult<u32> {
        let f = self.usable(dev)?.func;
        Ok(self.c.fabric.config_read(f, off, len)?)
    }

    // ----- memory -----------------------------------------------------------------------------

    pub fn kmalloc(&mut self, size: u64) -> HResult<u64> {
        self.kernel_mut().alloc_pages(size)
    }

    pub fn kfree(&mut self, phys: u64) -> HResult<()> {
        self.kernel_mut().free_pages(phys)
    }

    /// A CPU store of `data` at `addr` (RAM, or MMIO through `pci_iomap`).
    pub fn write(&mut self, addr: u64, data: &[u8]) -> HResult<()> {
        let (_, fail) = self.c.fabric.write(Requester::Cpu(self.host), addr, data);
        self.check(fail)
    }

    /// A CPU load of `len` bytes at `addr`.
    pub fn read(&mut self, addr: u64, len: usize) -> HResult<Vec<u8>> {
        let (out, fail) = self.c.fabric.read(Requester::Cpu(self.host), addr, len);
        self.check(fail).map(|_| out)
    }

    fn check(&self, fail: Option<devlend_fabric::route::Failure>) -> HResult<()> {
        match fail {
            None => Ok(()),
            Some(f) => {
                let j = self.c.fabric.failure_json(&f);
                Err(HostError::Fault(j.get("message").and_then(|m| m.as_str()).unwrap_or("access failed").to_string()))
            }
        }
    }

    // ----- DMA API ------------------------------------------------------------------------------

    fn map(&mut self, dev: DevId, phys: u64, len: u64, write: bool) -> HResult<u64> {
        let (func, origin) = self.dma_dev(dev)?;
        if len == 0 {
            return invalid("DMA mapping of 0 bytes");
        }
        let Cluster { fabric, kernels, lending } = &mut *self.c;
        match origin {
            Origin::Local => {
                let k = &mut kernels[self.host as usize];
                let d = k.dma.get_mut(&dev).ok_or_else(|| HostError::Invalid("device has no DMA state".into()))?;
                d.map(fabric, self.host, phys, len, write)
            }
            Origin::Borrowed { .. } => lending.borrowed_map(fabric, func, phys, len, write),
        }
    }

    fn unmap(&mut self, dev: DevId, dma: u64, len: u64) -> HResult<()> {
        let (func, origin) = self.dma_dev(dev)?;
        let Cluster { fabric, kernels, lending } = &mut *self.c;
        match origin {
            Origin::Local => {
                let d = kernels[self.host as usize].dma.get_mut(&dev).ok_or_else(|| HostError::Invalid("device has no DMA state".into()))?;
                d.unmap(fabric, self.host, dma, len)?;
                lending.local_p2p_release(fabric, func, dma);
                Ok(())
            }
            Origin::Borrowed { .. } => lending.borrowed_unmap(fabric, func, dma, len),
        }
    }

    fn check_ram(&self, phys: u64, len: u64, what: &str) -> HResult<()> {
        if !self.kernel().is_ram(phys, len) {
            return invalid(format!("{what}: {phys:#x}+{len:#x} is not RAM of host {} (device memory is mapped with dma_map_resource)", self.kernel().name));
        }
        Ok(())
    }

    /// Map a buffer at `phys` for the device; returns the bus address to program into it.
    pub fn dma_map_single(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64> {
        self.check_ram(phys, len, "dma_map_single")?;
        self.map(dev, phys, len, dir.device_writes())
    }

    pub fn dma_unmap_single(&mut self, dev: DevId, dma: u64, len: u64, _dir: DmaDir) -> HResult<()> {
        self.unmap(dev, dma, len)
    }

    /// Map a scatter list of (phys, len); one bus address per entry. Nothing stays mapped on error.
    pub fn dma_map_sg(&mut self, dev: DevId, sg: &[(u64, u64)], dir: DmaDir) -> HResult<Vec<u64>> {
        let mut out = Vec::with_capacity(sg.len());
        for &(phys, len) in sg {
            let r = self.check_ram(phys, len, "dma_map_sg").and_then(|_| self.map(dev, phys, len, dir.device_writes()));
            match r {
                Ok(a) => out.push(a),
                Err(e) => {
                    for (a, &(_, l)) in out.iter().zip(sg) {
                        let _ = self.unmap(dev, *a, l);
                    }
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Unmap what `dma_map_sg` returned for the same list.
    pub fn dma_unmap_sg(&mut self, dev: DevId, sg: &[(u64, u64)], dma: &[u64], _dir: DmaDir) -> HResult<()> {
        if sg.len() != dma.len() {
            return invalid(format!("dma_unmap_sg: {} entries but {} bus addresses", sg.len(), dma.len()));
        }
        for (&(_, len), &a) in sg.iter().zip(dma) {
            self.unmap(dev, a, len)?;
        }
        Ok(())
    }

    /// Allocate memory in this host and map it for the device: (cpu address, bus address).
    pub fn dma_alloc_coherent(&mut self, dev: DevId, len: u64) -> HResult<(u64, u64)> {
        self.dma_dev(dev)?;
        let cpu = self.kmalloc(len)?;
        match self.map(dev, cpu, len, true) {
            Ok(dma) => Ok((cpu, dma)),
            Err(e) => {
                let _ = self.kfree(cpu);
                Err(e)
            }
        }
    }

    pub fn dma_free_coherent(&mut self, dev: DevId, len: u64, cpu: u64, dma: u64) -> HResult<()> {
        if self.kernel().allocation(cpu).is_none_or(|(s, _)| s != cpu) {
            return invalid(format!("dma_free_coherent: {cpu:#x} was not allocated by dma_alloc_coherent"));
        }
        self.unmap(dev, dma, len)?;
        self.kfree(cpu)
    }

    /// Map `len` bytes at `phys`, inside a BAR of another device this host sees, for `dev`
    /// (peer-to-peer, Linux 4.9+ `dma_map_resource`).
    pub fn dma_map_resource(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64> {
        let (src, origin) = self.dma_dev(dev)?;
        if len == 0 {
            return invalid("dma_map_resource of 0 bytes");
        }
        let t = self.target(phys, len)?;
        match origin {
            Origin::Local => {
                let dma = self.map(dev, phys, len, dir.device_writes())?;
                if let Origin::Borrowed { .. } = t.origin {
                    let Cluster { fabric, lending, .. } = &mut *self.c;
                    if let Err(e) = lending.local_p2p_acquire(fabric, src, t.func, dma) {
                        let _ = self.unmap(dev, dma, len);
                        return Err(e);
                    }
                }
                Ok(dma)
            }
            Origin::Borrowed { .. } => {
                let Cluster { fabric, lending, .. } = &mut *self.c;
                lending.p2p_map(fabric, src, t, len)
            }
        }
    }

    pub fn dma_unmap_resource(&mut self, dev: DevId, dma: u64, len: u64, _dir: DmaDir) -> HResult<()> {
        let (src, origin) = self.dma_dev(dev)?;
        match origin {
            Origin::Local => self.unmap(dev, dma, len),
            Origin::Borrowed { .. } => {
                let Cluster { fabric, lending, .. } = &mut *self.c;
                lending.p2p_unmap(fabric, src, dma, len)
            }
        }
    }

    /// Resolve an address of this host into the device BAR that holds it.
    fn target(&self, phys: u64, len: u64) -> HResult<Target> {
        let k = self.kernel();
        let (tdev, bar, offset) = k.resolve_bar(phys, len).ok_or_else(|| HostError::Invalid(format!("dma_map_resource: {phys:#x}+{len:#x} is not inside one BAR of a device host {} sees", k.name)))?;
        let t = self.usable(tdev)?;
        let view = t.bar(bar)?.cpu_addr;
        Ok(Target { func: t.func, bar, origin: t.origin, view, offset })
    }
}
