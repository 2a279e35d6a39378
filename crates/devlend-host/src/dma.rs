//! The Linux DMA API of one host's kernel (`dma_map_single`, `dma_map_sg`, `dma_alloc_coherent`,
//! `dma_map_resource` and their unmaps), for a local device and for a borrowed one, as Linux's
//! `kernel/dma/mapping.c` hands each device's mappings to its own operations:
//!
//! - a local device's buffer maps through its own IOMMU domain, or is its physical address with
//!   the IOMMU off (`localdma`, Linux `dma-iommu` and `dma-direct`);
//! - a borrowed device's goes to Device Lending's borrower agent (000 §4): "When the device driver
//!   calls the Linux DMA API in order to create DMA buffers, the borrower intercepts these calls.
//!   The borrower injects the I/O address of the DMA window prepared by the lender and sets up a
//!   local IOMMU mapping to the DMA buffer. The driver then passes the injected address to the
//!   device, completely unaware that the address is actually a far-side address." A mapping takes
//!   a page range inside the DMA window (`map_into_window`), maps it through the borrower's IOMMU
//!   (domain of the borrower's adapter, or the device's own) onto the buffer's pages, and hands
//!   out the lender-side address of that range. Under Rem-IOMMU the lender also maps that address
//!   one-to-one in the device's domain (see the module docs of `lending`). Each IOMMU mapping is a
//!   held resource (`map_held`), undone with the driver's unmap or the device's return;
//! - a peer-to-peer mapping (`dma_map_resource`) of a borrowed device, or of a local one onto a
//!   borrowed target, goes to Device Lending's resolution of 000 §6 (`lending::p2p`), which maps a
//!   target BAR into the DMA window as this module maps a buffer.
//!
//! Directions matter: a `ToDevice` mapping is read-only for the device.

use crate::cluster::Cluster;
use crate::error::{BadDma, BadLend, HResult, HostError, InvalidRequest, NoRoom, NtbUse};
use crate::kernel::{DevId, Origin};
use crate::lending::p2p::Target;
use crate::lending::{atomically, BorrowedMap, DevDomain, Held, LendState};
use crate::localdma::{iova_align, pages};
use crate::os::{DmaDir, HostOs};
use devlend_fabric::iommu::DomainId;
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::Fabric;

impl HostOs<'_> {
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
            return Err(BadDma::SgCount { entries: sg.len(), addrs: dma.len() }.into());
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
            return Err(BadDma::NotCoherent { cpu }.into());
        }
        self.unmap(dev, dma, len)?;
        self.kfree(cpu)
    }

    /// Map `len` bytes at `phys`, inside a BAR of another device this host sees, for `dev`
    /// (peer-to-peer, Linux 4.9+ `dma_map_resource`).
    pub fn dma_map_resource(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64> {
        let (src, origin) = self.dma_dev(dev)?;
        if len == 0 {
            return Err(BadDma::ZeroResource.into());
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

    fn map(&mut self, dev: DevId, phys: u64, len: u64, write: bool) -> HResult<u64> {
        let (func, origin) = self.dma_dev(dev)?;
        if len == 0 {
            return Err(BadDma::ZeroMapping.into());
        }
        let Cluster { fabric, kernels, lending, .. } = &mut *self.c;
        match origin {
            Origin::Local => {
                let k = &mut kernels[self.host as usize];
                let d = k.dma.get_mut(&dev).ok_or_else(|| HostError::from(BadDma::NoDmaState { dev }))?;
                d.map(fabric, self.host, phys, len, write)
            }
            Origin::Borrowed { .. } => lending.borrowed_map(fabric, func, phys, len, write),
        }
    }

    fn unmap(&mut self, dev: DevId, dma: u64, len: u64) -> HResult<()> {
        let (func, origin) = self.dma_dev(dev)?;
        let Cluster { fabric, kernels, lending, .. } = &mut *self.c;
        match origin {
            Origin::Local => {
                let d = kernels[self.host as usize].dma.get_mut(&dev).ok_or_else(|| HostError::from(BadDma::NoDmaState { dev }))?;
                d.unmap(fabric, self.host, dma, len)?;
                lending.local_p2p_release(fabric, func, dma);
                Ok(())
            }
            Origin::Borrowed { .. } => lending.borrowed_unmap(fabric, func, dma, len),
        }
    }

    /// A device whose DMA the drivers manage: (function, origin).
    fn dma_dev(&self, dev: DevId) -> HResult<(FuncId, Origin)> {
        let d = self.usable(dev)?;
        if d.is_ntb {
            return Err(InvalidRequest::NtbAdapter { device: d.name.clone(), refused: NtbUse::Dma }.into());
        }
        Ok((d.func, d.origin))
    }

    fn check_ram(&self, phys: u64, len: u64, call: &'static str) -> HResult<()> {
        if !self.kernel().is_ram(phys, len) {
            return Err(BadDma::NotRam { call, phys, len, host: self.kernel().name.clone() }.into());
        }
        Ok(())
    }

    /// Resolve an address of this host into the device BAR that holds it.
    fn target(&self, phys: u64, len: u64) -> HResult<Target> {
        let k = self.kernel();
        let (tdev, bar, offset) = k.resolve_bar(phys, len).ok_or_else(|| HostError::from(BadDma::NotInBar { phys, len, host: k.name.clone() }))?;
        let t = self.usable(tdev)?;
        let view = t.bar(bar)?.cpu_addr;
        Ok(Target { func: t.func, bar, origin: t.origin, view, offset })
    }
}

/// The borrower agent's side of the DMA API (see the module docs).
impl LendState {
    /// dma_map_single/dma_map_sg/dma_alloc_coherent for a borrowed device.
    pub fn borrowed_map(&mut self, f: &mut Fabric, func: FuncId, phys: u64, len: u64, write: bool) -> HResult<u64> {
        let (la, bb, dev_domain) = self.lend_of(f, func)?;
        let own = self.lends.get(&func).and_then(|l| l.own_domain);
        let (start, end) = pages(phys, len)?;
        let (lender_page, held) = atomically!(self, f, held, self.map_into_window(f, la, bb, start, end - start, write, dev_domain, own, &mut held))?;
        let dma = lender_page + (phys - start);
        if let Some(l) = self.lends.get_mut(&func) {
            l.maps.push(BorrowedMap { dma, size: len, held });
        }
        Ok(dma)
    }

    pub fn borrowed_unmap(&mut self, f: &mut Fabric, func: FuncId, dma: u64, len: u64) -> HResult<()> {
        let l = self.lends.get_mut(&func).ok_or_else(|| HostError::from(BadLend::NotBorrowed { device: f.func(func).name.clone() }))?;
        let Some(i) = l.maps.iter().position(|m| m.dma == dma) else {
            return Err(BadDma::NoDeviceMapping { device: f.func(func).name.clone(), dma }.into());
        };
        if l.maps[i].size != len {
            return Err(BadDma::UnmapSize { dma, mapped: l.maps[i].size, len }.into());
        }
        let m = l.maps.remove(i);
        self.release_all(f, m.held);
        Ok(())
    }

    /// (lender adapter, borrower adapter, the device's lender domain) of a borrowed device.
    fn lend_of(&self, f: &Fabric, func: FuncId) -> HResult<(u32, u32, DevDomain)> {
        let l = self.lends.get(&func).ok_or_else(|| HostError::from(BadLend::NotBorrowed { device: f.func(func).name.clone() }))?;
        Ok((l.la, l.bb, l.dev_domain))
    }

    /// Map `len` bytes of borrower address `target` (page aligned) into the DMA window of the
    /// pair (la, bb); returns the lender-side address. Under Rem-IOMMU, `dev_domain` also gets
    /// the one-to-one mapping of that address. `own`: the device's own borrower domain, which
    /// takes the mapping instead of the window's.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn map_into_window(
        &mut self,
        f: &mut Fabric,
        la: u32,
        bb: u32,
        target: u64,
        len: u64,
        write: bool,
        dev_domain: DevDomain,
        own: Option<DomainId>,
        held: &mut Vec<Held>,
    ) -> HResult<u64> {
        let w = self.dma_windows.get_mut(&(la, bb)).ok_or_else(|| HostError::from(BadDma::NoWindow { la, bb }))?;
        let Some(iova) = w.iova.alloc(len, iova_align(len)) else {
            let (used, total) = (w.iova.in_use(), w.size);
            let (ntb, into) = (f.ntb(la).name.clone(), f.ntb(bb).name.clone());
            return Err(NoRoom::DmaWindowFull { ntb, into, len, used, total }.into());
        };
        held.push(Held::WindowIova { la, bb, iova });
        let (domain, lender_addr) = (own.unwrap_or(w.domain), w.lender_addr + (iova - w.iova_base));
        held.push(map_held(f, f.ntb(bb).host, domain, iova, target, len, write)?);
        if let Some((host, d)) = dev_domain {
            held.push(map_held(f, host, d, lender_addr, lender_addr, len, write)?);
        }
        Ok(lender_addr)
    }
}

/// An IOMMU mapping, held for undo (`Held::IommuMap`).
pub(crate) fn map_held(f: &mut Fabric, host: HostId, domain: DomainId, iova: u64, paddr: u64, size: u64, write: bool) -> HResult<Held> {
    f.iommu_map(host, domain, iova, paddr, size, write)?;
    Ok(Held::IommuMap { host, domain, iova, size })
}
