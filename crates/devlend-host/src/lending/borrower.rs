//! The borrower agent's side of the DMA API (000 §4): "When the device driver calls the Linux DMA
//! API in order to create DMA buffers, the borrower intercepts these calls. The borrower injects
//! the I/O address of the DMA window prepared by the lender and sets up a local IOMMU mapping to
//! the DMA buffer. The driver then passes the injected address to the device, completely unaware
//! that the address is actually a far-side address."
//!
//! A mapping takes a page range inside the DMA window, maps it through the borrower's IOMMU
//! (domain of the borrower's adapter) onto the buffer's pages, and hands out the lender-side
//! address of that range. Under Rem-IOMMU the lender also maps that address one-to-one in the
//! device's domain (see the module docs of `lending`).

use super::{atomically, map_held, BorrowedMap, DevDomain, Held, LendState};
use crate::error::{invalid, size, HResult, HostError};
use crate::localdma::{iova_align, pages};
use devlend_fabric::iommu::DomainId;
use devlend_fabric::model::FuncId;
use devlend_fabric::Fabric;

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
        let l = self.lends.get_mut(&func).ok_or_else(|| HostError::Invalid(format!("{} is not borrowed", f.func(func).name)))?;
        let Some(i) = l.maps.iter().position(|m| m.dma == dma) else {
            return invalid(format!("dma_unmap: {} has no mapping at bus address {dma:#x}", f.func(func).name));
        };
        if l.maps[i].size != len {
            return invalid(format!("dma_unmap: mapping at {dma:#x} is {} bytes, not {len}", l.maps[i].size));
        }
        let m = l.maps.remove(i);
        self.release_all(f, m.held);
        Ok(())
    }

    /// (lender adapter, borrower adapter, the device's lender domain) of a borrowed device.
    pub(crate) fn lend_of(&self, f: &Fabric, func: FuncId) -> HResult<(u32, u32, DevDomain)> {
        let l = self.lends.get(&func).ok_or_else(|| HostError::Invalid(format!("{} is not borrowed", f.func(func).name)))?;
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
        let w = self.dma_windows.get_mut(&(la, bb)).ok_or_else(|| HostError::Invalid("no DMA window is open".into()))?;
        let Some(iova) = w.iova.alloc(len, iova_align(len)) else {
            let (used, total) = (w.iova.in_use(), w.size);
            return Err(HostError::WindowTooSmall(format!(
                "the DMA window of {} into {} cannot map {} more: {} of its {} are in use",
                f.ntb(la).name,
                f.ntb(bb).name,
                size(len),
                size(used),
                size(total)
            )));
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
