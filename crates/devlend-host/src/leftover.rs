//! The leftover checker (issue 17): every piece of Device Lending's kind of programming in the
//! fabric that no live lend owns. After a fault, a return or a failed borrow it must be empty.
//!
//! What is looked at, and what owns it (`lending::owned`):
//! - NTB inbound translations (a whole window's, or each LUT segment's): owned by a window
//!   mapping of a lend, or of the DMA windows, BAR and MSI mappings lends share. Every adapter's
//!   translations are checked, so one set by another NTB client (ntb_perf, the RDMA layer) counts
//!   too while it is set.
//! - Requester-ID LUT entries past entry 0 (the root complex's, set at probe): owned while a
//!   lend references the ID.
//! - IOMMU context entries pointing at a Device Lending domain (`dl:` names): owned while the
//!   domain is an adapter domain in use or a lent device's own borrower domain.
//! - Bytes mapped in Device Lending domains (`dl:`) and in devices' DMA domains (`dma:`): owned
//!   by lends' held mappings, and for `dma:` domains by the local driver's own mappings too.

use crate::cluster::Cluster;
use crate::lending::owned::Owned;
use devlend_fabric::model::HostId;
use devlend_fabric::ntb::Inbound;
use devlend_fabric::Fabric;
use devlend_wire::Bdf;
use std::fmt;

/// One piece of programming no live lend owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leftover {
    /// A translation on `ntb` for traffic from its peer `from` through `window` (a LUT
    /// `segment` of it, or the whole window).
    NtbTranslation {
        ntb: String,
        from: String,
        window: usize,
        segment: Option<usize>,
        addr: u64,
    },
    LutEntry {
        ntb: String,
        index: usize,
        rid: Bdf,
    },
    IommuContext {
        host: String,
        rid: Bdf,
        domain: String,
    },
    /// `mapped` bytes in `domain`, of which lends and the local driver account for `owned`.
    IommuBytes {
        host: String,
        domain: String,
        mapped: u64,
        owned: u64,
    },
}

impl fmt::Display for Leftover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Leftover::NtbTranslation { ntb, from, window, segment, addr } => match segment {
                Some(s) => write!(f, "{ntb}: window {window} segment {s} from {from} still translates to {addr:#x}"),
                None => write!(f, "{ntb}: window {window} from {from} still translates to {addr:#x}"),
            },
            Leftover::LutEntry { ntb, index, rid } => write!(f, "{ntb}: requester-ID LUT entry {index} ({rid}) is still set"),
            Leftover::IommuContext { host, rid, domain } => write!(f, "{host}: IOMMU context entry {rid} -> {domain} is still attached"),
            Leftover::IommuBytes { host, domain, mapped, owned } => write!(f, "{host}: IOMMU domain {domain} maps {mapped:#x} bytes, {owned:#x} of them owned"),
        }
    }
}

impl Cluster {
    /// Every piece of programming no live lend owns (see the module docs); empty when all is well.
    pub fn leftovers(&self) -> Vec<Leftover> {
        let owned = self.lending.owned();
        let f = &self.fabric;
        let mut out = ntb_leftovers(f, &owned);
        out.extend(iommu_leftovers(self, &owned));
        out
    }
}

fn ntb_leftovers(f: &Fabric, owned: &Owned) -> Vec<Leftover> {
    let mut out = Vec::new();
    for (n, s) in f.ntbs().iter().enumerate() {
        for (pidx, tables) in s.inbound.iter().enumerate() {
            let Some(from) = s.peers.get(pidx).map(|p| p.ntb) else { continue };
            let maps: Vec<_> = owned.wins.iter().filter(|m| m.far == n as u32 && m.out == from).collect();
            let name = |window, segment, addr| Leftover::NtbTranslation { ntb: s.name.clone(), from: f.ntb(from).name.clone(), window, segment, addr };
            for (widx, t) in tables.iter().enumerate() {
                match t {
                    Inbound::Unset => {}
                    Inbound::Direct { addr, .. } => {
                        if !maps.iter().any(|m| m.widx == widx && m.segments().is_none()) {
                            out.push(name(widx, None, *addr));
                        }
                    }
                    Inbound::Lut(segs) => {
                        for (i, a) in segs.iter().enumerate().filter_map(|(i, a)| a.map(|a| (i, a))) {
                            let covered =
                                maps.iter().any(|m| m.widx == widx && m.segments().is_some_and(|(first, k)| (first..first + k).contains(&(i as u64))));
                            if !covered {
                                out.push(name(widx, Some(i), a));
                            }
                        }
                    }
                }
            }
        }
        for (index, rid) in s.rid_lut.iter().enumerate().skip(1).filter_map(|(i, r)| r.map(|r| (i, r))) {
            if !owned.rids.contains(&(n as u32, rid)) {
                out.push(Leftover::LutEntry { ntb: s.name.clone(), index, rid });
            }
        }
    }
    out
}

fn iommu_leftovers(c: &Cluster, owned: &Owned) -> Vec<Leftover> {
    let f = &c.fabric;
    let mut out = Vec::new();
    for (h, m) in f.iommus().iter().enumerate() {
        let host = f.hosts()[h].name.clone();
        let mut ctx: Vec<_> =
            m.context.iter().filter(|(_, d)| m.domains[**d as usize].name.starts_with("dl:") && !owned.domains.contains(&(h as HostId, **d))).collect();
        ctx.sort();
        for (rid, d) in ctx {
            out.push(Leftover::IommuContext { host: host.clone(), rid: *rid, domain: m.domains[*d as usize].name.clone() });
        }
        for (d, dom) in m.domains.iter().enumerate() {
            let (dl, local) = (dom.name.starts_with("dl:"), dom.name.starts_with("dma:"));
            if dom.mapped_bytes == 0 || !(dl || local) {
                continue;
            }
            let mut mine = owned.mapped.get(&(h as HostId, d as u32)).copied().unwrap_or(0);
            if local {
                mine += c.kernels[h].local_mapped(d as u32);
            }
            if dom.mapped_bytes > mine {
                out.push(Leftover::IommuBytes { host: host.clone(), domain: dom.name.clone(), mapped: dom.mapped_bytes, owned: mine });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::DmaDir;

    /// Lender `a` (its IOMMU on: Rem-IOMMU) with gpu0, borrower `b`, joined by PXH830s na and nb.
    fn cluster() -> Cluster {
        let json = r#"{"name":"t","hosts":[
          {"name":"a","cpu":"intel-xeon-e5","ram":8589934592,"iommu":true,"root_ports":2},
          {"name":"b","cpu":"intel-xeon-e5","ram":8589934592,"iommu":true,"root_ports":1}],
         "devices":[{"name":"gpu0","profile":"quadro-k420"}],
         "ntbs":[{"name":"na","profile":"pxh830"},{"name":"nb","profile":"pxh830"}],
         "links":[{"a":"a.rp0","b":"na","gen":3,"width":8},{"a":"a.rp1","b":"gpu0","gen":2,"width":16},
          {"a":"b.rp0","b":"nb","gen":3,"width":8},{"a":"na.cable","b":"nb.cable","gen":3,"width":8,"kind":"cable"}]}"#;
        Cluster::from_json(json).unwrap()
    }

    #[test]
    fn a_live_lend_owns_all_it_programmed_and_a_return_leaves_nothing() {
        let mut c = cluster();
        let dev = c.borrow("b", "gpu0").unwrap();
        let mut os = c.os("b").unwrap();
        let buf = os.kmalloc(1 << 16).unwrap();
        let dma = os.dma_map_single(dev, buf, 1 << 16, DmaDir::Bidirectional).unwrap();
        os.request_irq(dev, 0, 1).unwrap();
        assert_eq!(c.leftovers(), vec![], "everything programmed belongs to the lend");
        let mut os = c.os("b").unwrap();
        os.free_irq(dev, 0).unwrap();
        os.dma_unmap_single(dev, dma, 1 << 16, DmaDir::Bidirectional).unwrap();
        c.return_device("b", dev).unwrap();
        assert_eq!(c.leftovers(), vec![]);
    }

    #[test]
    fn programming_no_lend_owns_is_listed() {
        let mut c = cluster();
        let dev = c.borrow("b", "gpu0").unwrap();
        let (na, nb) = (c.fabric.ntb_id("na").unwrap(), c.fabric.ntb_id("nb").unwrap());
        let free = (0..c.fabric.ntb(nb).inbound[0].len()).find(|&w| c.fabric.ntb(nb).inbound[0][w] == Inbound::Unset).unwrap();
        c.fabric.ntb_mw_set_trans(nb, 0, free, 0x1000_0000, 0x10_0000).unwrap();
        c.fabric.rid_lut_add(na, Bdf::new(9, 0, 0)).unwrap();
        let host = c.fabric.host_id("b").unwrap();
        let d = c.fabric.iommu_domain(host, "dl:nb").unwrap();
        c.fabric.iommu_map(host, d, 0x7_0000_0000, 0x1000_0000, 0x1000, true).unwrap();
        let got: Vec<String> = c.leftovers().iter().map(|l| l.to_string()).collect();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], "na: requester-ID LUT entry 2 (09:00.0) is still set");
        assert!(got[1].starts_with(&format!("nb: window {free} ")) && got[1].ends_with("from na still translates to 0x10000000"), "{got:?}");
        assert_eq!(got[2], "b: IOMMU domain dl:nb maps 0x1000 bytes, 0x0 of them owned");
        c.return_device_force("b", dev).unwrap();
        let kinds: Vec<_> = c.leftovers().into_iter().map(|l| std::mem::discriminant(&l)).collect();
        assert_eq!(kinds.len(), 3, "the lend's own programming went with it; the three leaks stay");
    }
}
