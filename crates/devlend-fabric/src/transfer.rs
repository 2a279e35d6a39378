//! Checking a whole transfer, not just its first address: a DMA of many bytes crosses IOMMU
//! pages, NTB windows and LUT segments, and each may route differently or not at all.
//!
//! Granularity: the transfer is routed at its first address, then again wherever any decision on
//! that route can change: the end of the IOMMU page it was translated by (4 KiB or 2 MiB), of the
//! NTB window or LUT segment it crossed (and of the window's programmed translation), and of the
//! BAR, RAM region or MSI range it was delivered to. Between those points every decision is the
//! same (switch windows contain the BARs below them; translations are linear), so a 1 GiB DMA
//! into RAM behind 2 MiB IOMMU pages takes 512 routings, not 262,144.

use crate::error::DmaFault;
use crate::fabric::Fabric;
use crate::model::NodeKind;
use crate::ntb::Inbound;
use crate::route::{HopKind, Outcome, Requester, Route, Target};
use devlend_wire::Access;

impl Fabric {
    /// Bytes from the route's first address over which it stays the same (at least 1).
    pub fn route_extent(&self, r: &Route) -> u64 {
        let mut extent = u64::MAX;
        for h in &r.hops {
            let left = match h.kind {
                HopKind::Iommu => h.aux - h.addr % h.aux,
                HopKind::Ntb => self.window_left(h.node, h.aux as usize, h.addr),
                _ => u64::MAX,
            };
            extent = extent.min(left);
        }
        extent.min(self.target_left(r.outcome)).max(1)
    }

    /// Bytes left in NTB window `widx` of the adapter at `node` from `addr`, and in its translation.
    fn window_left(&self, node: u32, widx: usize, addr: u64) -> u64 {
        let NodeKind::Ntb { ntb } = self.nodes[node as usize].kind else { return 1 };
        let Ok((base, size)) = self.peer_mw_get_addr(ntb, widx) else { return 1 };
        let off = addr - base;
        let s = &self.ntbs[ntb as usize];
        let far = s.out_pidx(widx, off).map(|p| s.peers[p].ntb);
        let from = far.and_then(|p| self.ntbs[p as usize].peer_idx(ntb));
        let trans = match far.zip(from).map(|(p, q)| &self.ntbs[p as usize].inbound[q][widx]) {
            Some(Inbound::Direct { size: t, .. }) => t.saturating_sub(off),
            Some(Inbound::Lut(_)) => {
                let seg = s.windows[widx].size / s.windows[widx].lut_segments as u64;
                seg - off % seg
            }
            _ => 1,
        };
        (size - off).min(trans)
    }

    fn target_left(&self, o: Outcome) -> u64 {
        match o {
            Outcome::Delivered(Target::Bar { func, bar, offset }) => {
                self.funcs[func as usize].bars.iter().find(|b| b.index == bar).map_or(1, |b| b.size - offset)
            }
            Outcome::Delivered(Target::Ram { host, addr }) => {
                self.hosts[host as usize].ram_regions.iter().find(|r| r.contains(addr)).map_or(1, |r| r.end - addr)
            }
            Outcome::Delivered(Target::Msi { host, addr }) => self.hosts[host as usize].msi.end - addr,
            _ => 1,
        }
    }

    /// Route every part of a transfer of `bytes` at `addr` (see the module docs for the
    /// granularity); the first part that cannot be delivered, or whose completion cannot come
    /// back, stops it. Nothing is recorded or changed: the caller records what it carries out.
    pub fn check_transfer(&self, req: Requester, addr: u64, bytes: u64, access: Access) -> Result<(), DmaFault> {
        let mut done = 0u64;
        while done < bytes {
            let a = addr.wrapping_add(done);
            let r = self.route_uncached(req, a, access);
            let failed = match (r.outcome, r.completion.as_ref().map(|c| c.outcome)) {
                (Outcome::Failed(f), _) | (_, Some(Outcome::Failed(f))) => Some(f),
                _ => None,
            };
            if let Some(failure) = failed {
                return Err(DmaFault { addr: a, delivered: done, failure });
            }
            let extent = self.route_extent(&r);
            if a.checked_add(extent.min(bytes - done) - 1).is_none() {
                let failure = crate::route::Failure::Unsupported {
                    node: r.hops[0].node,
                    host: r.hops[0].host,
                    addr: a,
                    why: "transfer runs past the end of the 64-bit address space",
                };
                return Err(DmaFault { addr: a, delivered: done, failure });
            }
            done += extent.min(bytes - done);
        }
        Ok(())
    }
}
