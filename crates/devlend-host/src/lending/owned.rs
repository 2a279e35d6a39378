//! What Device Lending's live state owns in the fabric, collected from every held resource (a
//! lend's own list, its driver's mappings, peer-to-peer entries, MSI reverse mappings, and the
//! shared, reference-counted windows, BARs and domains they point at). `leftover` compares the
//! fabric against it.

use super::windows::WinMap;
use super::{Held, LendState};
use devlend_fabric::iommu::DomainId;
use devlend_fabric::model::HostId;
use devlend_wire::Bdf;
use std::collections::{BTreeMap, BTreeSet};

/// The fabric programming a `LendState` accounts for.
#[derive(Default)]
pub(crate) struct Owned {
    /// Window mappings (each names the adapter `far` its translation is programmed on).
    pub wins: Vec<WinMap>,
    /// Requester-ID LUT entries (adapter, ID) referenced, added by a lend or found there.
    pub rids: BTreeSet<(u32, Bdf)>,
    /// IOMMU domains in use: adapter domains and devices' own borrower domains.
    pub domains: BTreeSet<(HostId, DomainId)>,
    /// Bytes of IOMMU mappings held, per (host, domain).
    pub mapped: BTreeMap<(HostId, DomainId), u64>,
}

impl Owned {
    fn add(&mut self, held: &[Held]) {
        for h in held {
            match *h {
                Held::Win(m) => self.wins.push(m),
                Held::Rid(ntb, rid) => {
                    self.rids.insert((ntb, rid));
                }
                Held::IommuMap { host, domain, size, .. } => *self.mapped.entry((host, domain)).or_default() += size,
                _ => {}
            }
        }
    }
}

impl LendState {
    /// Everything this state holds in the fabric.
    pub(crate) fn owned(&self) -> Owned {
        let mut o = Owned::default();
        for l in self.lends.values() {
            o.add(&l.held);
            l.maps.iter().for_each(|m| o.add(&m.held));
            l.p2p.values().for_each(|p| o.add(&p.held));
            if let Some(msi) = &l.msi {
                o.add(&msi.held);
            }
            if let Some(d) = l.own_domain {
                o.domains.insert((l.borrower, d));
            }
        }
        self.local_p2p.values().for_each(|p| o.add(&p.held));
        self.dma_windows.values().for_each(|w| o.add(&w.inner));
        self.bar_wins.values().chain(self.msi_wins.values()).for_each(|s| o.add(&s.inner));
        for d in self.domains.values() {
            o.domains.insert((d.host, d.domain));
        }
        o.rids.extend(self.rids.keys().copied());
        o
    }
}
