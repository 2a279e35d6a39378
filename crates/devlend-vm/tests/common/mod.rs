//! What the tests compare before and after a failed step.

use devlend_fabric::ntb::Inbound;
use devlend_fabric::Fabric;
use devlend_wire::Bdf;

/// Everything the hypervisor and Device Lending program: NTB translations, requester-ID LUTs,
/// IOMMU context entries and bytes mapped per domain, Bus Master and MSI-X control per function.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot(Vec<Vec<Inbound>>, Vec<Vec<Option<Bdf>>>, Vec<Vec<(Bdf, String)>>, Vec<Vec<(String, u64)>>, Vec<(bool, u16)>);

pub fn snapshot(f: &Fabric) -> Snapshot {
    let contexts = f.iommus.iter().map(|m| {
        let mut v: Vec<_> = m.context.iter().map(|(r, d)| (*r, m.domains[*d as usize].name.clone())).collect();
        v.sort();
        v
    }).collect();
    let mapped = f.iommus.iter().map(|m| m.domains.iter().filter(|d| d.mapped_bytes > 0).map(|d| (d.name.clone(), d.mapped_bytes)).collect()).collect();
    Snapshot(f.ntbs.iter().map(|n| n.inbound.clone()).collect(), f.ntbs.iter().map(|n| n.rid_lut.clone()).collect(), contexts, mapped, f.config.iter().map(|c| (c.bus_master(), c.msix_control)).collect())
}

