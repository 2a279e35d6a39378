//! Peer-to-peer between borrowed devices (000 §6). When the driver of a borrowed source S maps a
//! BAR of a target T (`dma_map_resource`), the borrower resolves the address it uses for T into
//! the address S's lender would use, in the paper's three cases:
//! 1. T is local to the borrower: "the lender simply sets up DMA windows to the individual memory
//!    regions of target, similar to how it already has set up a DMA window to the borrower's
//!    RAM": T's BAR is mapped into the DMA window (borrower IOMMU, like a buffer) and the
//!    lender-side window address is returned. This works for any device of the borrower.
//! 2. T is in the same lender as S: the lender returns T's own BAR address (mapped one-to-one
//!    in S's domain when its IOMMU is on: "sets up a local IOMMU mapping").
//! 3. T is in another lender: S's lender maps T's BAR through the NTB that leads to T's lender
//!    ("this NTB may be different to the one used in order to reach the borrower"), adds S's
//!    requester ID to that NTB's LUT, and returns the window address.
//!
//! "The borrower, after receiving these lender-local I/O addresses, stores them along with its
//! own virtual addresses to the memory regions of target": the entries live in the source's
//! lend record, per (T, BAR), until S or T goes away; each `dma_map_resource` injects the
//! stored lender-local address plus the offset. Whole BARs are mapped, for reads and writes.

use super::lender::need_link;
use super::{atomically, map_held, Held, LendState, LocalP2p, P2pEntry};
use crate::alloc::align_up;
use crate::error::{BadDma, BadLend, HResult, HostError, LinkStep};
use crate::kernel::{Origin, PAGE};
use devlend_fabric::model::FuncId;
use devlend_fabric::Fabric;

/// The target of a resource mapping, as the borrower's device tree describes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    pub func: FuncId,
    pub bar: u8,
    pub origin: Origin,
    /// The borrower's address of the BAR, and the offset of the mapping into it.
    pub view: u64,
    pub offset: u64,
}

impl LendState {
    /// dma_map_resource for a borrowed source: the lender-local address of the target range.
    pub fn p2p_map(&mut self, f: &mut Fabric, src: FuncId, t: Target, len: u64) -> HResult<u64> {
        let have = self.lends.get(&src).is_some_and(|l| l.p2p.contains_key(&(t.func, t.bar)));
        if !have {
            let (lender_addr, held) = atomically!(self, f, held, self.p2p_entry(f, src, t, &mut held))?;
            let size = bar_size(f, t.func, t.bar)?;
            let e = P2pEntry { borrower_addr: t.view, lender_addr, size, held };
            self.lends.get_mut(&src).ok_or_else(|| HostError::from(BadLend::SourceVanished { func: src }))?.p2p.insert((t.func, t.bar), e);
        }
        let l = self.lends.get_mut(&src).ok_or_else(|| HostError::from(BadLend::SourceVanished { func: src }))?;
        let dma = l.p2p[&(t.func, t.bar)].lender_addr + t.offset;
        l.resource_maps.push((dma, len));
        Ok(dma)
    }

    pub fn p2p_unmap(&mut self, f: &Fabric, src: FuncId, dma: u64, len: u64) -> HResult<()> {
        let l = self.lends.get_mut(&src).ok_or_else(|| HostError::from(BadLend::NotBorrowed { device: f.func(src).name.clone() }))?;
        match l.resource_maps.iter().position(|&m| m == (dma, len)) {
            Some(i) => {
                l.resource_maps.remove(i);
                Ok(())
            }
            None => Err(BadDma::NoResourceMapping { device: f.func(src).name.clone(), dma, len }.into()),
        }
    }

    fn p2p_entry(&mut self, f: &mut Fabric, src: FuncId, t: Target, held: &mut Vec<Held>) -> HResult<u64> {
        let l = self.lends.get(&src).ok_or_else(|| HostError::from(BadLend::SourceNotBorrowed { func: src }))?;
        let (lender, la, bb, dev_domain) = (l.lender, l.la, l.bb, l.dev_domain);
        let b = *f.func(t.func).bars.iter().find(|b| b.index == t.bar).ok_or_else(|| HostError::from(BadLend::NoSuchBar { func: t.func, bar: t.bar }))?;
        let len = align_up(b.size, PAGE).unwrap_or(b.size);
        let addr = match t.origin {
            Origin::Local => self.map_into_window(f, la, bb, b.addr, len, true, None, None, held)?,
            Origin::Borrowed { lender: m } if m == lender => b.addr,
            Origin::Borrowed { lender: m } => {
                let step = LinkStep::MapPeer { target: f.func(t.func).name.clone(), source: f.func(src).name.clone() };
                let (lx, _) = need_link(f, lender, m, step)?;
                held.push(self.acquire_rid(f, lx, f.func(src).bdf)?);
                held.push(self.acquire_bar_win(f, lx, t.func, t.bar)?);
                self.bar_win_addr(lx, t.func, t.bar).unwrap_or_default()
            }
        };
        if let Some((host, d)) = dev_domain {
            held.push(map_held(f, host, d, addr, addr, len, true)?);
        }
        Ok(addr)
    }

    /// A local source maps a borrowed target (not in the paper, which covers borrowed sources):
    /// its requester ID must cross the borrower's NTB, so it gets an entry in that NTB's LUT.
    /// When the target is returned the entry goes; the source's own IOMMU mapping stays until its
    /// driver unmaps it, and its TLPs are refused by the NTB meanwhile.
    pub fn local_p2p_acquire(&mut self, f: &mut Fabric, src: FuncId, target: FuncId, dma: u64) -> HResult<()> {
        let bb = self.lends.get(&target).map(|l| l.bb).ok_or_else(|| HostError::from(BadLend::TargetNotBorrowed { func: target }))?;
        let h = self.acquire_rid(f, bb, f.func(src).bdf)?;
        self.local_p2p.insert((src, dma), LocalP2p { target, held: vec![h] });
        Ok(())
    }

    pub fn local_p2p_release(&mut self, f: &mut Fabric, src: FuncId, dma: u64) {
        if let Some(e) = self.local_p2p.remove(&(src, dma)) {
            self.release_all(f, e.held);
        }
    }

    /// T goes away: drop every entry that lets some source reach it.
    pub fn revoke_target(&mut self, f: &mut Fabric, target: FuncId) {
        let mut held = Vec::new();
        for l in self.lends.values_mut() {
            let keys: Vec<_> = l.p2p.keys().copied().filter(|k| k.0 == target).collect();
            for k in keys {
                if let Some(e) = l.p2p.remove(&k) {
                    held.push(e.held);
                }
            }
        }
        for e in self.local_p2p.values_mut().filter(|e| e.target == target) {
            held.push(std::mem::take(&mut e.held));
        }
        for h in held {
            self.release_all(f, h);
        }
    }
}

fn bar_size(f: &Fabric, func: FuncId, bar: u8) -> HResult<u64> {
    f.func(func).bars.iter().find(|b| b.index == bar).map(|b| b.size).ok_or_else(|| BadLend::NoSuchBar { func, bar }.into())
}
