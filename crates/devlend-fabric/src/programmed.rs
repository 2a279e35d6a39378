//! What software has programmed into the fabric, as one comparable value: lending agents and the
//! hypervisor must leave it exactly as they found it when a step fails or a device is returned,
//! and tests check that by comparing a [`Programmed`] taken before with one taken after.

use crate::fabric::Fabric;
use crate::ntb::Inbound;
use devlend_wire::Bdf;

/// NTB inbound translations (each adapter's tables for all its peers, one after another), the peer
/// each outbound segment leads to, requester-ID LUTs, IOMMU context entries and bytes mapped per
/// domain (domains without mappings left out: the IOMMU API cannot free a domain), and Bus Master
/// Enable and MSI-X Message Control of every function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Programmed {
    pub inbound: Vec<Vec<Inbound>>,
    pub out_peers: Vec<Vec<Vec<Option<u8>>>>,
    pub rid_luts: Vec<Vec<Option<Bdf>>>,
    pub contexts: Vec<Vec<(Bdf, String)>>,
    pub mapped: Vec<Vec<(String, u64)>>,
    pub bus_master: Vec<bool>,
    pub msix: Vec<u16>,
}

impl Fabric {
    /// Everything software has programmed (see [`Programmed`]).
    pub fn programmed(&self) -> Programmed {
        let contexts = self
            .iommus
            .iter()
            .map(|m| {
                let mut v: Vec<_> = m.context.iter().map(|(r, d)| (*r, m.domains[*d as usize].name.clone())).collect();
                v.sort();
                v
            })
            .collect();
        let mapped = self.iommus.iter().map(|m| m.domains.iter().filter(|d| d.mapped_bytes > 0).map(|d| (d.name.clone(), d.mapped_bytes)).collect()).collect();
        Programmed {
            inbound: self.ntbs.iter().map(|n| n.inbound.concat()).collect(),
            out_peers: self.ntbs.iter().map(|n| n.out_peer.clone()).collect(),
            rid_luts: self.ntbs.iter().map(|n| n.rid_lut.clone()).collect(),
            contexts,
            mapped,
            bus_master: self.config.iter().map(|c| c.bus_master()).collect(),
            msix: self.config.iter().map(|c| c.msix_control).collect(),
        }
    }
}
