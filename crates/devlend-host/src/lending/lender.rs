//! The lender agent (000 §4, Fig 4). To lend a device to a borrower it
//! 1. opens a DMA window through its NTB into the borrower: a whole memory window of its own
//!    adapter, translated by the borrower's adapter onto a range of IOVAs in the borrower
//!    adapter's IOMMU domain ("allowing the lender to set up a single DMA window"); the window is
//!    shared by every device this lender lends to this borrower;
//! 2. adds the device's requester ID to its adapter's requester-ID LUT, so the device's TLPs
//!    may cross;
//! 3. maps each BAR of the device into the borrower's view: segments of the borrower adapter's
//!    windows, translated by its own adapter onto the BAR ("the device's memory regions are
//!    mapped through the NTB"), one-to-one through its adapter's domain when its IOMMU is on;
//!
//! and keeps the device until the borrower returns it, when all of it is undone (`reclaim`).
//!
//! A lender adapter with several peers (a cluster switch) serves several borrowers from one set of
//! windows, so a DMA window there is made of LUT segments, not a whole window: by default a
//! peer's share of the segmented window (its size divided by the peers, down to a power of two),
//! or the size asked; a direct window only when no segments are left. (Assumed policy: Dolphin's
//! adapters map remote segments out of one shared prefetch space, `devlend_fabric::cluster`; with
//! one peer nothing changes.)

use super::windows::Windows;
use super::{atomically, DevDomain, DmaWindow, Held, Lend, LendState};
use crate::alloc::{align_up, RangeAlloc};
use crate::cluster::BorrowOptions;
use crate::error::{BadLend, HResult, HostError, LinkStep, NoRoom, OutOf, Unreachability};
use crate::kernel::{BarView, DevId, PAGE};
use devlend_fabric::iommu::DomainId;
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::Fabric;
use std::collections::BTreeMap;

/// The NTB pair that joins two hosts: (adapter in `from`, its peer in `to`), cabled directly or
/// through a cluster switch.
pub(crate) fn link(f: &Fabric, from: HostId, to: HostId) -> Option<(u32, u32)> {
    f.ntbs().iter().enumerate().filter(|(_, n)| n.host == from).find_map(|(i, n)| n.peers.iter().find(|p| f.ntb(p.ntb).host == to).map(|p| (i as u32, p.ntb)))
}

/// The NTB pair joining two hosts, with its link up (a lend's programming needs the two agents
/// to talk, 000 §4).
pub(crate) fn need_link(f: &Fabric, from: HostId, to: HostId, step: LinkStep) -> HResult<(u32, u32)> {
    let name = |h: HostId| f.host(h).name.clone();
    let Some((la, bb)) = link(f, from, to) else {
        return Err(Unreachability::NoNtb { step, from: name(from), to: name(to) }.into());
    };
    if !f.ntb_link_is_up(la) || !f.ntb_link_is_up(bb) {
        return Err(Unreachability::LinkDown { step, ntb: f.ntb(la).name.clone(), to: name(to) }.into());
    }
    Ok((la, bb))
}

/// The default DMA window of an adapter shared by several peers: the segmented window's size over
/// the peers, down to a power of two (its largest window when none is segmented).
fn peer_share(f: &Fabric, la: u32) -> u64 {
    let s = f.ntb(la);
    match s.windows.iter().filter(|w| w.lut_segments > 0).map(|w| (w.size, w.size / w.lut_segments as u64)).max() {
        Some((size, seg)) => {
            let share = size / s.peers.len() as u64;
            (1u64 << (63 - share.leading_zeros())).max(seg)
        }
        None => s.windows.iter().map(|w| w.size).max().unwrap_or(PAGE),
    }
}

impl LendState {
    /// Lend `func` (in its host) to `borrower`; everything is undone if a step fails.
    pub fn lend(&mut self, f: &mut Fabric, func: FuncId, borrower: HostId, dev_domain: DevDomain, opts: BorrowOptions) -> HResult<Lend> {
        let lender = f.func_host(func);
        let step = LinkStep::Lend { device: f.func(func).name.clone(), borrower: f.host(borrower).name.clone() };
        let (la, bb) = need_link(f, lender, borrower, step)?;
        let ((bars, own_domain), held) = atomically!(self, f, held, self.open_lend(f, func, la, bb, opts, &mut held))?;
        Ok(Lend {
            lender,
            borrower,
            la,
            bb,
            dev: DevId(u32::MAX),
            dev_domain,
            own_domain,
            bars,
            held,
            maps: Vec::new(),
            p2p: BTreeMap::new(),
            resource_maps: Vec::new(),
            msi: None,
        })
    }

    fn open_lend(
        &mut self,
        f: &mut Fabric,
        func: FuncId,
        la: u32,
        bb: u32,
        opts: BorrowOptions,
        held: &mut Vec<Held>,
    ) -> HResult<(Vec<BarView>, Option<DomainId>)> {
        held.push(self.acquire_dma_window(f, la, bb, opts.dma_window)?);
        held.push(self.acquire_rid(f, la, f.func(func).bdf)?);
        let own_domain = match opts.device_domain {
            true => {
                let (h, d) = self.acquire_device_domain(f, la, bb, func)?;
                held.push(h);
                Some(d)
            }
            false => None,
        };
        let mut views = Vec::new();
        for b in f.func(func).bars.clone() {
            held.push(self.acquire_bar_win(f, bb, func, b.index)?);
            let cpu_addr = self
                .bar_win_addr(bb, func, b.index)
                .ok_or_else(|| HostError::from(BadLend::BarNoWindow { device: f.func(func).name.clone(), bar: b.index }))?;
            views.push(BarView { index: b.index, size: b.size, cpu_addr });
        }
        Ok((views, own_domain))
    }

    /// Attach the far-side requester ID of `func` (its LUT entry on `la`, seen through `bb`) to
    /// a borrower domain of its own (`BorrowOptions::device_domain`); released by pointing it
    /// back at the adapter's domain.
    fn acquire_device_domain(&mut self, f: &mut Fabric, la: u32, bb: u32, func: FuncId) -> HResult<(Held, DomainId)> {
        let idx = f
            .ntb(la)
            .rid_lut_index(f.func(func).bdf)
            .ok_or_else(|| HostError::from(BadLend::NoLutEntry { device: f.func(func).name.clone(), lender_side: false }))?;
        let (rid, host) = (f.ntb_alias_of(bb, la, idx), f.ntb(bb).host);
        let shared = self.domains.get(&bb).map(|d| d.domain).ok_or_else(|| HostError::from(BadLend::AdapterDomainVanished { ntb: bb }))?;
        let name = format!("dl:{}:{}", f.ntb(bb).name, f.func(func).name);
        let d = crate::localdma::domain(f, host, &name)?;
        f.iommu_attach_rid(host, d, rid)?;
        Ok((Held::DeviceDomain { host, rid, shared }, d))
    }

    /// Take a reference to the DMA window from `la` (lender) into `bb` (borrower), opening it
    /// on first use with `want` bytes (default: the whole memory window).
    pub fn acquire_dma_window(&mut self, f: &mut Fabric, la: u32, bb: u32, want: Option<u64>) -> HResult<Held> {
        let want = want.map(|w| align_up(w.max(1), PAGE).unwrap_or(u64::MAX));
        if let Some(w) = self.dma_windows.get_mut(&(la, bb)) {
            if want.is_some_and(|n| n > w.size) {
                let n = want.unwrap_or_default();
                return Err(NoRoom::CannotGrow { ntb: f.ntb(la).name.clone(), open: w.size, asked: n }.into());
            }
            w.refs += 1;
            return Ok(Held::DmaWindow(la, bb));
        }
        let (mut w, inner) = atomically!(self, f, held, self.open_dma_window(f, la, bb, want, &mut held))?;
        w.inner = inner;
        self.dma_windows.insert((la, bb), w);
        Ok(Held::DmaWindow(la, bb))
    }

    fn open_dma_window(&mut self, f: &mut Fabric, la: u32, bb: u32, want: Option<u64>, held: &mut Vec<Held>) -> HResult<DmaWindow> {
        let shared = f.peer_port_count(la) > 1;
        let len = match (want, shared) {
            (Some(n), _) => n,
            (None, true) => peer_share(f, la),
            (None, false) => f.ntb(la).windows[self.windows.pick_whole(f, la, PAGE, "a DMA window")?].size,
        };
        held.push(self.acquire_domain(f, bb)?);
        let d = self.domains.get_mut(&bb).ok_or_else(|| HostError::from(BadLend::AdapterDomainVanished { ntb: bb }))?;
        let domain = d.domain;
        let iova_base = d.iova.alloc(len, len.next_power_of_two().min(1 << 30)).ok_or_else(|| HostError::from(OutOf::DmaWindow { len }))?;
        held.push(Held::DomainIova { ntb: bb, iova: iova_base });
        let m = if shared {
            self.windows.map_range(f, la, bb, iova_base, len, "a DMA window")?
        } else {
            let widx = self.windows.pick_whole(f, la, len, "a DMA window")?;
            self.windows.set_whole(f, la, bb, widx, iova_base, len)?
        };
        held.push(Held::Win(m));
        let lender_addr = Windows::addr(f, &m)?;
        let iova = RangeAlloc::new(&[(iova_base, iova_base + len)]);
        Ok(DmaWindow { lender_addr, iova_base, size: len, domain, iova, refs: 1, inner: Vec::new() })
    }

    /// Take a lent device back: undo every mapping the borrower's driver left, every P2P entry
    /// to and from it, and everything the lend programmed.
    pub fn reclaim(&mut self, f: &mut Fabric, func: FuncId) -> HResult<Lend> {
        let mut lend = self.lends.remove(&func).ok_or_else(|| HostError::from(BadLend::NotLent { device: f.func(func).name.clone() }))?;
        self.revoke_target(f, func);
        for m in std::mem::take(&mut lend.maps) {
            self.release_all(f, m.held);
        }
        for (_, e) in std::mem::take(&mut lend.p2p) {
            self.release_all(f, e.held);
        }
        if let Some(m) = lend.msi.take() {
            self.release_all(f, m.held);
        }
        let held = std::mem::take(&mut lend.held);
        self.release_all(f, held);
        Ok(lend)
    }
}
