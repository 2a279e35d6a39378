//! The DMA API for a device in its own host (Linux `dma-iommu` and `dma-direct`): with the host's
//! IOMMU on, each device has its own domain (`dma:DEVICE`) and an IOVA allocator, and a mapping
//! is an IOVA range mapped onto the buffer's pages; with it off, the bus address is the physical
//! address. Device Lending replaces these operations for borrowed devices (see `lending`).

use crate::alloc::{align_up, RangeAlloc};
use crate::error::{BadAccess, BadDma, HResult, HostError, OutOf};
use crate::kernel::{iova_space, PAGE};
use devlend_fabric::iommu::DomainId;
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::Fabric;

const BIG: u64 = 0x20_0000;

#[derive(Clone, Debug)]
struct LocalMap {
    dma: u64,
    size: u64,
    /// The IOVA pages (start, length) when translated by the IOMMU.
    iova: Option<(u64, u64)>,
}

pub(crate) struct LocalDma {
    pub domain: Option<DomainId>,
    iova: RangeAlloc,
    maps: Vec<LocalMap>,
}

/// The page range [start, end) covering [addr, addr+size).
pub(crate) fn pages(addr: u64, size: u64) -> HResult<(u64, u64)> {
    let end = addr.checked_add(size).and_then(|e| align_up(e, PAGE)).ok_or_else(|| HostError::from(BadAccess::RangeOverflow { addr, size }))?;
    Ok((addr & !(PAGE - 1), end))
}

/// IOVA alignment: 2 MiB for large mappings (so the IOMMU can use 2 MiB pages), else a page.
pub(crate) fn iova_align(len: u64) -> u64 {
    if len >= BIG {
        BIG
    } else {
        PAGE
    }
}

/// Find or create an IOMMU domain by name.
pub(crate) fn domain(f: &mut Fabric, host: HostId, name: &str) -> HResult<DomainId> {
    match f.iommu_domain(host, name) {
        Ok(d) => Ok(d),
        Err(_) => Ok(f.iommu_domain_alloc(host, name)?),
    }
}

impl LocalDma {
    pub fn boot(f: &mut Fabric, host: HostId, func: FuncId) -> HResult<LocalDma> {
        let h = f.host(host);
        let iova = RangeAlloc::new(&iova_space(h));
        if !h.iommu {
            return Ok(LocalDma { domain: None, iova, maps: Vec::new() });
        }
        let name = format!("dma:{}", f.func(func).name);
        let d = domain(f, host, &name)?;
        f.iommu_attach(host, d, func)?;
        Ok(LocalDma { domain: Some(d), iova, maps: Vec::new() })
    }

    /// Bytes this device's driver has mapped in its IOMMU domain (whole pages).
    pub fn iommu_bytes(&self) -> u64 {
        self.maps.iter().filter_map(|m| m.iova.map(|(_, n)| n)).sum()
    }

    /// Live mappings (a device with live mappings cannot be lent).
    pub fn live(&self) -> usize {
        self.maps.len()
    }

    /// Map [phys, phys+size) for the device; returns the bus address the device must use.
    pub fn map(&mut self, f: &mut Fabric, host: HostId, phys: u64, len: u64, write: bool) -> HResult<u64> {
        let (start, end) = pages(phys, len)?;
        let iova = match self.domain {
            None => None,
            Some(d) => {
                let n = end - start;
                let Some(iova) = self.iova.alloc(n, iova_align(n)) else {
                    return Err(OutOf::Iova { len: n }.into());
                };
                if let Err(e) = f.iommu_map(host, d, iova, start, n, write) {
                    self.iova.free(iova);
                    return Err(e.into());
                }
                Some((iova, n))
            }
        };
        let dma = iova.map_or(phys, |(i, _)| i + (phys - start));
        self.maps.push(LocalMap { dma, size: len, iova });
        Ok(dma)
    }

    /// Undo the mapping handed out as `dma` (the size must match, as Linux requires).
    pub fn unmap(&mut self, f: &mut Fabric, host: HostId, dma: u64, len: u64) -> HResult<()> {
        let Some(i) = self.maps.iter().position(|m| m.dma == dma) else {
            return Err(BadDma::NoMapping { dma }.into());
        };
        if self.maps[i].size != len {
            return Err(BadDma::UnmapSize { dma, mapped: self.maps[i].size, len }.into());
        }
        let m = self.maps.remove(i);
        if let (Some((iova, n)), Some(d)) = (m.iova, self.domain) {
            f.iommu_unmap(host, d, iova, n)?;
            self.iova.free(iova);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fabric(iommu: bool) -> Fabric {
        devlend_fabric::build_json(&format!(
            r#"{{"name":"one","hosts":[{{"name":"h","cpu":"intel-xeon-e5","ram":4294967296,"iommu":{iommu},"root_ports":1}}],
          "devices":[{{"name":"nic0","profile":"optane-900p"}}],"links":[{{"a":"h.rp0","b":"nic0","gen":3,"width":4}}]}}"#
        ))
        .unwrap()
    }

    #[test]
    fn iommu_on_maps_iovas_off_returns_physical_addresses() {
        for iommu in [false, true] {
            let mut f = fabric(iommu);
            let dev = f.func_id("nic0").unwrap();
            let mut d = LocalDma::boot(&mut f, 0, dev).unwrap();
            let a = d.map(&mut f, 0, 0x100_0123, 0x2000, true).unwrap();
            let b = d.map(&mut f, 0, 0x100_0123, 0x10, false).unwrap();
            assert_eq!(a == 0x100_0123, !iommu);
            if iommu {
                assert_eq!((a & 0xfff, a >> 32 > 0, b - a), (0x123, true, 0x3000), "IOVAs above 4 GiB keep the page offset");
                assert_eq!(f.iommus()[0].domains[d.domain.unwrap() as usize].mapped_bytes, 0x4000);
            }
            assert!(d.unmap(&mut f, 0, a, 0x1000).is_err(), "size mismatch");
            d.unmap(&mut f, 0, a, 0x2000).unwrap();
            d.unmap(&mut f, 0, b, 0x10).unwrap();
            assert!(d.unmap(&mut f, 0, b, 0x10).is_err());
            assert_eq!(d.live(), 0);
        }
    }
}
