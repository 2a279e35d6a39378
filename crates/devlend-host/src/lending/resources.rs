//! Acquiring and releasing the held resources of Device Lending (see the module docs of
//! `lending`): adapter IOMMU domains, requester-ID LUT entries, BARs mapped through NTB windows,
//! IOMMU mappings (acquired by `crate::dma::map_held`); shared ones are reference counted and
//! undone with their last reference.

use super::windows::{self, Windows};
use super::{atomically, map_held, AdapterDomain, Held, LendState, RidRef, Shared};
use crate::alloc::RangeAlloc;
use crate::error::{HResult, HostError, InvalidRequest};
use crate::kernel::iova_space;
use devlend_fabric::model::FuncId;
use devlend_fabric::Fabric;
use devlend_wire::Bdf;
use std::collections::BTreeMap;

impl LendState {
    /// Take a reference to the domain of adapter `ntb`, creating and attaching it on first use.
    pub fn acquire_domain(&mut self, f: &mut Fabric, ntb: u32) -> HResult<Held> {
        if let Some(d) = self.domains.get_mut(&ntb) {
            d.refs += 1;
            return Ok(Held::AdapterDomain(ntb));
        }
        let (host, func) = (f.ntb(ntb).host, f.ntb(ntb).func);
        let name = format!("dl:{}", f.ntb(ntb).name);
        let domain = crate::localdma::domain(f, host, &name)?;
        f.iommu_attach(host, domain, func)?;
        let iova = RangeAlloc::new(&iova_space(f.host(host)));
        self.domains.insert(ntb, AdapterDomain { host, domain, refs: 1, iova });
        Ok(Held::AdapterDomain(ntb))
    }

    /// Take a reference to a requester-ID LUT entry, adding it on first use.
    pub fn acquire_rid(&mut self, f: &mut Fabric, ntb: u32, rid: Bdf) -> HResult<Held> {
        if let Some(r) = self.rids.get_mut(&(ntb, rid)) {
            r.refs += 1;
            return Ok(Held::Rid(ntb, rid));
        }
        let owned = f.ntb(ntb).rid_lut_index(rid).is_none();
        if owned {
            f.rid_lut_add(ntb, rid)?;
        }
        self.rids.insert((ntb, rid), RidRef { refs: 1, owned });
        Ok(Held::Rid(ntb, rid))
    }

    /// Take a reference to BAR `bar` of `func` mapped through the windows of adapter `out`.
    pub fn acquire_bar_win(&mut self, f: &mut Fabric, out: u32, func: FuncId, bar: u8) -> HResult<Held> {
        if let Some(s) = self.bar_wins.get_mut(&(out, func, bar)) {
            s.refs += 1;
            return Ok(Held::BarWin(out, func, bar));
        }
        let (addr, inner) = atomically!(self, f, held, self.open_bar_win(f, out, func, bar, &mut held))?;
        self.bar_wins.insert((out, func, bar), Shared { addr, refs: 1, inner });
        Ok(Held::BarWin(out, func, bar))
    }

    /// Where adapter `out`'s host reaches a BAR mapped by `acquire_bar_win`.
    pub fn bar_win_addr(&self, out: u32, func: FuncId, bar: u8) -> Option<u64> {
        self.bar_wins.get(&(out, func, bar)).map(|s| s.addr)
    }

    fn open_bar_win(&mut self, f: &mut Fabric, out: u32, func: FuncId, bar: u8, held: &mut Vec<Held>) -> HResult<u64> {
        let peer = windows::peer_in(f, out, f.func_host(func))?;
        let in_host = f.ntb(peer).host;
        let b = *f
            .func(func)
            .bars
            .iter()
            .find(|b| b.index == bar)
            .ok_or_else(|| HostError::from(InvalidRequest::NoBar { device: f.func(func).name.clone(), bar }))?;
        let len = crate::alloc::align_up(b.size, crate::kernel::PAGE).unwrap_or(b.size);
        if f.host(in_host).iommu {
            held.push(self.acquire_domain(f, peer)?);
            let d = self.domains[&peer].domain;
            held.push(map_held(f, in_host, d, b.addr, b.addr, len, true)?);
        }
        let what = format!("{} BAR{bar}", f.func(func).name);
        let m = self.windows.map_range(f, out, peer, b.addr, b.size, &what)?;
        held.push(Held::Win(m));
        Windows::addr(f, &m)
    }

    pub fn release_all(&mut self, f: &mut Fabric, held: Vec<Held>) {
        for h in held.into_iter().rev() {
            self.release(f, h);
        }
    }

    pub(crate) fn note<T, E: std::fmt::Display>(&mut self, what: &str, r: Result<T, E>) {
        if let Err(e) = r {
            self.anomalies.push(format!("{what}: {e}"));
        }
    }

    fn release(&mut self, f: &mut Fabric, h: Held) {
        match h {
            Held::AdapterDomain(n) => self.release_domain(f, n),
            Held::DomainIova { ntb, iova } => {
                let freed = self.domains.get_mut(&ntb).and_then(|d| d.iova.free(iova));
                self.note("free adapter IOVA", freed.ok_or(format!("{iova:#x}")));
            }
            Held::DmaWindow(la, bb) => {
                if let Some(inner) = drop_ref(&mut self.dma_windows, (la, bb), |w| (&mut w.refs, &mut w.inner)) {
                    self.release_all(f, inner);
                }
            }
            Held::WindowIova { la, bb, iova } => {
                let freed = self.dma_windows.get_mut(&(la, bb)).and_then(|w| w.iova.free(iova));
                self.note("free window IOVA", freed.ok_or(format!("{iova:#x}")));
            }
            Held::Rid(ntb, rid) => self.release_rid(f, ntb, rid),
            Held::BarWin(out, func, bar) => {
                if let Some(inner) = drop_ref(&mut self.bar_wins, (out, func, bar), |s| (&mut s.refs, &mut s.inner)) {
                    self.release_all(f, inner);
                }
            }
            Held::MsiWin(la, bb) => {
                if let Some(inner) = drop_ref(&mut self.msi_wins, (la, bb), |s| (&mut s.refs, &mut s.inner)) {
                    self.release_all(f, inner);
                }
            }
            Held::Win(m) => {
                let r = self.windows.unmap(f, &m);
                self.note("unmap window", r);
            }
            Held::DeviceDomain { host, rid, shared } => {
                let r = f.iommu_attach_rid(host, shared, rid);
                self.note("iommu_attach (back to the adapter domain)", r);
            }
            Held::IommuMap { host, domain, iova, size } => {
                let r = f.iommu_unmap(host, domain, iova, size).map_err(|e| e.to_string()).and_then(|n| {
                    if n == size {
                        Ok(())
                    } else {
                        Err(format!("{n:#x} of {size:#x} bytes at {iova:#x}"))
                    }
                });
                self.note("iommu_unmap", r);
            }
        }
    }

    fn release_domain(&mut self, f: &mut Fabric, ntb: u32) {
        let Some(d) = self.domains.get_mut(&ntb) else { return self.anomalies.push(format!("domain of NTB {ntb} released twice")) };
        d.refs -= 1;
        if d.refs > 0 {
            return;
        }
        let Some(d) = self.domains.remove(&ntb) else { return };
        if d.iova.allocations() != 0 {
            self.anomalies.push(format!("domain of NTB {ntb} detached with IOVAs in use"));
        }
        let r = f.iommu_detach(d.host, f.ntb(ntb).func);
        self.note("iommu_detach", r);
    }

    fn release_rid(&mut self, f: &mut Fabric, ntb: u32, rid: Bdf) {
        let Some(r) = self.rids.get_mut(&(ntb, rid)) else { return self.anomalies.push(format!("RID {rid} on NTB {ntb} released twice")) };
        r.refs -= 1;
        if r.refs == 0 {
            let owned = r.owned;
            self.rids.remove(&(ntb, rid));
            if owned && !f.rid_lut_remove(ntb, rid) {
                self.anomalies.push(format!("RID {rid} was not in the LUT of NTB {ntb}"));
            }
        }
    }

    /// Whether this state holds nothing at all (every borrow returned).
    pub fn idle(&self) -> bool {
        self.lends.is_empty()
            && self.domains.is_empty()
            && self.dma_windows.is_empty()
            && self.bar_wins.is_empty()
            && self.msi_wins.is_empty()
            && self.rids.is_empty()
            && self.local_p2p.is_empty()
            && self.windows.idle()
    }
}

/// Drop one reference to a shared entry; when it was the last, remove it and return what it held.
fn drop_ref<K: Ord + Copy, V>(map: &mut BTreeMap<K, V>, key: K, parts: impl Fn(&mut V) -> (&mut u32, &mut Vec<Held>)) -> Option<Vec<Held>> {
    let v = map.get_mut(&key)?; // absent: released twice; `LendState::idle` checks catch leaks instead
    let (refs, inner) = parts(v);
    *refs -= 1;
    if *refs > 0 {
        return None;
    }
    let inner = std::mem::take(inner);
    map.remove(&key);
    Some(inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lending::LendState;

    #[test]
    fn shared_resources_are_counted_and_preexisting_lut_entries_are_kept() {
        let mut f = devlend_fabric::build_json(&devlend_fabric::fixtures::two_hosts_pxh830("intel-xeon-e5", 4294967296, true, true)).unwrap();
        let na = f.ntb_id("na").unwrap();
        let mut st = LendState::default();
        let root = st.acquire_rid(&mut f, na, Bdf(0)).unwrap();
        let dev = Bdf::new(5, 0, 0);
        let r1 = st.acquire_rid(&mut f, na, dev).unwrap();
        let r2 = st.acquire_rid(&mut f, na, dev).unwrap();
        let d1 = st.acquire_domain(&mut f, na).unwrap();
        let d2 = st.acquire_domain(&mut f, na).unwrap();
        let alias = f.ntb_dma_aliases(na)[0];
        assert!(f.iommus()[0].context.contains_key(&alias), "the adapter's DMA aliases are attached");
        st.release_all(&mut f, vec![r1, d1]);
        assert!(f.ntb(na).rid_lut_index(dev).is_some() && f.iommus()[0].context.contains_key(&alias), "still referenced");
        st.release_all(&mut f, vec![r2, d2, root]);
        assert_eq!(f.ntb(na).rid_lut_index(dev), None);
        assert_eq!(f.ntb(na).rid_lut_index(Bdf(0)), Some(0), "the root complex's entry from probe stays");
        assert!(f.iommus()[0].context.is_empty());
        assert!(st.idle() && st.anomalies.is_empty());
    }

    #[test]
    fn a_dma_window_is_opened_once_and_closed_with_its_last_user() {
        let mut f = devlend_fabric::build_json(&devlend_fabric::fixtures::two_hosts_pxh830("intel-xeon-e5", 4294967296, true, true)).unwrap();
        let (na, nb) = (f.ntb_id("na").unwrap(), f.ntb_id("nb").unwrap());
        let mut st = LendState::default();
        let w1 = st.acquire_dma_window(&mut f, na, nb, Some(1 << 20)).unwrap();
        let w2 = st.acquire_dma_window(&mut f, na, nb, None).unwrap();
        assert!(matches!(st.acquire_dma_window(&mut f, na, nb, Some(2 << 20)), Err(HostError::WindowTooSmall(_))));
        let w = &st.dma_windows[&(na, nb)];
        assert_eq!((w.size, w.iova_base), (1 << 20, 1 << 32));
        assert_eq!(w.lender_addr, f.resolve_expr("na.mw1").unwrap(), "the direct window is the DMA window");
        st.release_all(&mut f, vec![w1]);
        assert!(!st.dma_windows.is_empty());
        st.release_all(&mut f, vec![w2]);
        assert!(st.idle() && st.anomalies.is_empty());
        assert!(f.ntb(nb).inbound.iter().flatten().all(|i| *i == devlend_fabric::ntb::Inbound::Unset));
    }
}
