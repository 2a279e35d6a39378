//! NTB memory windows as a resource (000 §2.3: "some NTBs support dividing their range into
//! segments. A segment can be mapped anywhere into the remote system's address space ... the
//! number of possible mappings to remote systems is limited").
//!
//! Naming follows the Linux NTB API: `out` is the adapter whose window BARs traffic enters (its
//! host's CPUs and devices write there); the translation is programmed on its peer, where the
//! traffic lands. Two kinds of use:
//! - a *whole* window with one translation (`mw_set_trans`): the DMA window a lender opens into
//!   a borrower, or a BAR when no segments are left;
//! - consecutive *LUT segments* of a segmented window, each pointing at the next piece of a
//!   device BAR (`lut_set_trans`), naturally aligned inside the window like a real BAR.
//!
//! The NTB API clears only whole windows (`mw_clear_trans`), so freeing some segments clears the
//! window and reprograms the segments still in use.
//!
//! An adapter with several peers (a cluster switch, several cable ports) shares its windows
//! between them, as the real adapter's prefetch space is "a shared resource for all concurrent
//! use" (`devlend_fabric::cluster`): each mapping names the peer `far` it leads to, segments of
//! one window may lead to different peers, and the translation is programmed on that peer under
//! the peer index it knows `out` by.

use crate::alloc::{align_up, RangeAlloc};
use crate::error::{BadLend, HResult, HostError, MwState, MwUse, NoRoom, Unreachability};
use crate::kernel::PAGE;
use devlend_fabric::model::HostId;
use devlend_fabric::Fabric;
use std::collections::BTreeMap;

/// One mapping through a window of adapter `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WinMap {
    pub out: u32,
    /// The peer adapter the mapping leads to (where its translation is programmed).
    pub far: u32,
    pub widx: usize,
    /// Offset of the mapping inside the window.
    pub offset: u64,
    pub size: u64,
    /// (first segment, count) for a segment mapping; None for a whole window.
    segs: Option<(u64, u64)>,
}

impl WinMap {
    /// The segments it takes, (first, count); None for a whole window.
    pub fn segments(&self) -> Option<(u64, u64)> {
        self.segs
    }
}

enum Win {
    Free,
    Whole,
    /// Per segment: the peer it leads to and where.
    Lut {
        segs: RangeAlloc,
        targets: Vec<Option<(u32, u64)>>,
    },
}

#[derive(Default)]
pub(crate) struct Windows {
    by_ntb: BTreeMap<u32, Vec<Win>>,
}

/// The peer of adapter `out` in `host`.
pub(crate) fn peer_in(f: &Fabric, out: u32, host: HostId) -> HResult<u32> {
    let s = f.ntb(out);
    s.peers
        .iter()
        .map(|p| p.ntb)
        .find(|p| f.ntb(*p).host == host)
        .ok_or_else(|| Unreachability::NoPeer { ntb: s.name.clone(), host: f.host(host).name.clone() }.into())
}

/// The peer index under which `far` knows `out`.
fn pidx(f: &Fabric, far: u32, out: u32) -> HResult<usize> {
    Ok(f.peer_port_idx(far, out)?)
}

impl Windows {
    fn wins(&mut self, f: &Fabric, out: u32) -> &mut Vec<Win> {
        self.by_ntb.entry(out).or_insert_with(|| f.ntb(out).windows.iter().map(|_| Win::Free).collect())
    }

    /// The address of a mapping in the host of `out` (where its CPUs and devices reach it).
    pub fn addr(f: &Fabric, m: &WinMap) -> HResult<u64> {
        Ok(f.peer_mw_get_addr(m.out, m.widx)?.0 + m.offset)
    }

    /// Choose a free window of at least `need` bytes for whole use: direct windows first.
    pub fn pick_whole(&mut self, f: &Fabric, out: u32, need: u64, what: &str) -> HResult<usize> {
        let params = f.ntb(out).windows.clone();
        let wins = self.wins(f, out);
        let mut order: Vec<usize> = (0..params.len()).collect();
        order.sort_by_key(|&i| params[i].lut_segments != 0);
        if let Some(i) = order.into_iter().find(|&i| matches!(wins[i], Win::Free) && params[i].size >= need) {
            return Ok(i);
        }
        let largest = params.iter().map(|w| w.size).max().unwrap_or(0);
        let (what, ntb) = (what.to_string(), f.ntb(out).name.clone());
        Err(match need > largest {
            true => NoRoom::TooLarge { what, need, ntb, largest },
            false => NoRoom::AllTaken { what, need, ntb, windows: self.describe(f, out) },
        }
        .into())
    }

    /// Program window `widx` as one translation onto [target, target+len) of peer `far`.
    pub fn set_whole(&mut self, f: &mut Fabric, out: u32, far: u32, widx: usize, target: u64, len: u64) -> HResult<WinMap> {
        let p = pidx(f, far, out)?;
        f.ntb_mw_set_trans(far, p, widx, target, len)?;
        self.wins(f, out)[widx] = Win::Whole;
        Ok(WinMap { out, far, widx, offset: 0, size: len, segs: None })
    }

    /// Map a contiguous range of peer `far`'s host (a BAR): LUT segments first, else a whole window.
    pub fn map_range(&mut self, f: &mut Fabric, out: u32, far: u32, target: u64, len: u64, what: &str) -> HResult<WinMap> {
        let p = pidx(f, far, out)?;
        if let Some((widx, first, n, seg)) = self.alloc_segments(f, out, far, target, len) {
            let programmed = (0..n).try_for_each(|i| f.ntb_lut_set_trans(far, p, widx, (first + i) as usize, target + i * seg));
            let m = WinMap { out, far, widx, offset: first * seg, size: n * seg, segs: Some((first, n)) };
            if let Err(e) = programmed {
                self.unmap(f, &m)?;
                return Err(e.into());
            }
            return Ok(m);
        }
        let need = align_up(len, PAGE).unwrap_or(u64::MAX);
        let widx = self.pick_whole(f, out, need, what)?;
        self.set_whole(f, out, far, widx, target, need)
    }

    /// Reserve naturally aligned consecutive segments in the first segmented window with room.
    fn alloc_segments(&mut self, f: &Fabric, out: u32, far: u32, target: u64, len: u64) -> Option<(usize, u64, u64, u64)> {
        let params = f.ntb(out).windows.clone();
        let wins = self.wins(f, out);
        for (widx, w) in params.iter().enumerate().filter(|(_, w)| w.lut_segments > 0) {
            let count = w.lut_segments as u64;
            let seg = w.size / count;
            let n = len.div_ceil(seg);
            if n > count {
                continue;
            }
            if matches!(wins[widx], Win::Free) {
                wins[widx] = Win::Lut { segs: RangeAlloc::new(&[(0, count)]), targets: vec![None; count as usize] };
            }
            let Win::Lut { segs, targets } = &mut wins[widx] else { continue };
            if let Some(first) = segs.alloc(n, n.next_power_of_two()) {
                for i in 0..n {
                    targets[(first + i) as usize] = Some((far, target + i * seg));
                }
                return Some((widx, first, n, seg));
            }
            if segs.allocations() == 0 {
                wins[widx] = Win::Free;
            }
        }
        None
    }

    /// Undo a mapping: clear a whole window, or free segments and reprogram the rest.
    /// Only `m.far`'s translation of the window is cleared: segments leading to other peers stay.
    pub fn unmap(&mut self, f: &mut Fabric, m: &WinMap) -> HResult<()> {
        let p = pidx(f, m.far, m.out)?;
        let wins = self.wins(f, m.out);
        let (keep, others): (Vec<(usize, u64)>, bool) = match (&mut wins[m.widx], m.segs) {
            (Win::Lut { segs, targets }, Some((first, n))) => {
                segs.free(first).ok_or_else(|| HostError::from(BadLend::SegmentNotAllocated { window: m.widx, segment: first }))?;
                targets[first as usize..(first + n) as usize].fill(None);
                let others = targets.iter().flatten().any(|(far, _)| *far != m.far);
                (targets.iter().enumerate().filter_map(|(i, t)| t.filter(|(far, _)| *far == m.far).map(|(_, t)| (i, t))).collect(), others)
            }
            (w @ Win::Whole, None) => {
                *w = Win::Free;
                (Vec::new(), false)
            }
            _ => return Err(BadLend::WindowNotMapped { window: m.widx, ntb: f.ntb(m.out).name.clone() }.into()),
        };
        if keep.is_empty() && !others {
            wins[m.widx] = Win::Free;
        }
        f.ntb_mw_clear_trans(m.far, p, m.widx)?;
        for (seg, t) in keep {
            f.ntb_lut_set_trans(m.far, p, m.widx, seg, t)?;
        }
        Ok(())
    }

    /// Each memory window of NTB `out`: its size, segments and use.
    fn describe(&self, f: &Fabric, out: u32) -> Box<[MwUse]> {
        let state = self.by_ntb.get(&out);
        let each = |(i, w): (usize, &devlend_fabric::params::WindowParam)| {
            let state = match state.map(|s| &s[i]) {
                None | Some(Win::Free) => MwState::Free,
                Some(Win::Whole) => MwState::Whole,
                Some(Win::Lut { segs, .. }) => MwState::Segments { free: segs.available() },
            };
            MwUse { size: w.size, segments: w.lut_segments, state }
        };
        f.ntb(out).windows.iter().enumerate().map(each).collect()
    }

    /// Whether nothing is mapped through any window.
    pub fn idle(&self) -> bool {
        self.by_ntb.values().flatten().all(|w| matches!(w, Win::Free))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_aligned_reused_and_reprogrammed_on_free() {
        let mut f = devlend_fabric::build_json(&devlend_fabric::fixtures::two_hosts_pxh830("intel-xeon-e5", 4294967296, true, false)).unwrap();
        let (na, nb) = (f.ntb_id("na").unwrap(), f.ntb_id("nb").unwrap());
        let mut w = Windows::default();
        let seg = 8 << 20;
        let small = w.map_range(&mut f, na, nb, 0x1000_0000, 0x4000, "x").unwrap();
        assert_eq!((small.widx, small.offset, small.size), (0, 0, seg));
        let big = w.map_range(&mut f, na, nb, 0x2000_0000, 256 << 20, "y").unwrap();
        assert_eq!(big.offset, 32 * seg, "a 256 MiB range takes 32 segments aligned to 32");
        let mid = w.map_range(&mut f, na, nb, 0x4000_0000, 16 << 20, "z").unwrap();
        assert_eq!(mid.offset, 2 * seg);
        let spill = w.map_range(&mut f, na, nb, 0x8000_0000, 256 << 20, "w").unwrap();
        assert_eq!((spill.widx, spill.segs), (1, None), "no 32 aligned segments left: the direct window takes it");
        w.unmap(&mut f, &small).unwrap();
        let base = Windows::addr(&f, &mid).unwrap();
        assert_eq!(f.ntb(nb).inbound_translate(0, mid.offset, &f.ntb(na).windows[0]), Some(0x4000_0000), "survivors reprogrammed");
        assert_eq!(f.ntb(nb).inbound_translate(0, 0, &f.ntb(na).windows[0]), None, "freed segment cleared");
        assert!(base > 0);
        for m in [big, mid, spill] {
            w.unmap(&mut f, &m).unwrap();
        }
        assert!(w.idle());
        assert!(f.ntb(nb).inbound.iter().flatten().all(|i| *i == devlend_fabric::ntb::Inbound::Unset));
    }

    #[test]
    fn whole_windows_prefer_direct_and_report_what_does_not_fit() {
        let mut f = devlend_fabric::build_json(&devlend_fabric::fixtures::two_hosts_pxh830("intel-xeon-e5", 4294967296, true, false)).unwrap();
        let (na, nb) = (f.ntb_id("na").unwrap(), f.ntb_id("nb").unwrap());
        let mut w = Windows::default();
        assert_eq!(w.pick_whole(&f, na, 1 << 20, "a DMA window").unwrap(), 1);
        let e = w.pick_whole(&f, na, 1 << 30, "a DMA window").unwrap_err();
        assert!(e.to_string().contains("a DMA window of 1 GiB is larger than the NTB can map"), "{e}");
        let m = w.map_range(&mut f, na, nb, 0x1000_0000, 1 << 30, "gpu BAR1").unwrap_err();
        assert!(matches!(m, HostError::WindowTooSmall(_)), "{m}");
    }
}
