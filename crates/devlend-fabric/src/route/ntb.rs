//! An NTB (non-transparent bridge; 000 §2.1, §6): a request to one of the adapter's memory
//! windows is forwarded into the peer's domain through the peer's inbound translation, its
//! requester ID rewritten through the adapter's requester-ID LUT (no entry: rejected). With
//! several peers (`cluster`), the segment the address falls in names the peer; through a
//! cluster switch the TLP crosses the adapter's cable, the switch and the peer's cable. A
//! completion comes back through the reverse LUT to the original requester ID. The Linux face of
//! the adapter (the `ntb_*` calls) is `crate::ntb_api`, its state `crate::ntb`; the translations
//! a crossing reads (`NtbState::inbound_translate_from`, `out_pidx`, `rid_lut_index`,
//! `alias_entry`, and `Fabric::ntb_alias_from`, the far-side requester ID) are here.

use super::walk::{fail, IdStep, Next, Step, Walk};
use super::{Failure, HopKind};
use crate::fabric::Fabric;
use crate::model::HostId;
use crate::ntb::{Inbound, NtbState};
use crate::params::WindowParam;
use devlend_wire::Bdf;
use std::ops::ControlFlow::Continue;

impl Fabric {
    /// A request out through `window` of adapter `ntb`, at `offset` into the window: across the
    /// cable into the peer's domain, then up from the peer adapter.
    #[inline(always)]
    pub(super) fn ntb_request(&self, w: &mut Walk, ntb: u32, window: u8, offset: u64) -> Next<Step> {
        let s = &self.ntbs[ntb as usize];
        if !self.ntb_link_is_up(ntb) {
            return fail(Failure::NtbLinkDown { ntb });
        }
        let pidx = s.out_pidx(window as usize, offset);
        let link = pidx.map(|i| s.peers[i]);
        if link.is_some_and(|l| !self.ntb_link_is_up(l.ntb)) {
            return fail(Failure::NtbLinkDown { ntb });
        }
        if let Err(f) = w.cross(ntb, window) {
            return fail(f);
        }
        let Some(idx) = s.rid_lut_index(w.tlp.requester) else { return fail(Failure::RidLutMiss { ntb, rid: w.tlp.requester }) };
        let found = link.and_then(|l| {
            let p = &self.ntbs[l.ntb as usize];
            let from = p.peer_idx(ntb)?;
            Some((l, from, p.inbound_translate_from(from, window as usize, offset, &s.windows[window as usize])?))
        });
        let Some((l, from, addr)) = found else { return fail(Failure::NtbUnmapped { ntb, window, offset }) };
        let p = &self.ntbs[l.ntb as usize];
        w.push(HopKind::Ntb, s.node, window as u64);
        self.cross_cable(w, l, p.host);
        w.tlp.addr = addr;
        w.tlp.requester = self.ntb_alias_from(l.ntb, from, idx);
        w.push(HopKind::Link, p.node, l.via.map_or(l.cable, |v| v.far_cable) as u64);
        if !self.config[p.func as usize].bus_master() {
            return fail(Failure::BusMasterOff { func: p.func });
        }
        Continue(Step::Up(p.node))
    }

    /// A completion at adapter `ntb` for one of the aliases its LUT gave a peer's requester:
    /// back across the cable with the original requester ID, then up from the peer adapter.
    #[inline(always)]
    pub(super) fn ntb_completion(&self, w: &mut Walk, ntb: u32) -> Next<IdStep> {
        let s = &self.ntbs[ntb as usize];
        let own = self.funcs[s.func as usize].bdf;
        if !self.ntb_link_is_up(ntb) {
            return fail(Failure::NtbLinkDown { ntb });
        }
        if let Err(f) = w.cross(ntb, u8::MAX) {
            return fail(f);
        }
        let entry = (w.tlp.requester.bus() == own.bus())
            .then(|| s.alias_entry(w.tlp.requester.devfn(), |p| self.ntbs[s.peers[p].ntb as usize].rid_lut.len()))
            .flatten();
        let Some((pidx, idx)) = entry else { return fail(Failure::RidLutMiss { ntb, rid: w.tlp.requester }) };
        let l = s.peers[pidx];
        if !self.ntb_link_is_up(l.ntb) {
            return fail(Failure::NtbLinkDown { ntb });
        }
        let p = &self.ntbs[l.ntb as usize];
        let Some(orig) = p.rid_lut[idx] else { return fail(Failure::RidLutMiss { ntb, rid: w.tlp.requester }) };
        w.push(HopKind::Ntb, s.node, 0);
        self.cross_cable(w, l, p.host);
        w.tlp.requester = orig;
        w.push(HopKind::Link, p.node, l.via.map_or(l.cable, |v| v.far_cable) as u64);
        Continue(IdStep::Up(p.node))
    }

    /// The requester ID on `far`'s side of LUT entry `idx` of its peer `pidx`.
    pub fn ntb_alias_from(&self, far: u32, pidx: usize, idx: usize) -> Bdf {
        let s = &self.ntbs[far as usize];
        let bdf = self.funcs[s.func as usize].bdf;
        let base = s.alias_base.get(pidx).copied().unwrap_or(0) as usize;
        Bdf::from_bus_devfn(bdf.bus(), (base + idx + 1) as u8)
    }

    /// From an adapter to its peer `l` in `host`: through a cluster switch, the cable to the
    /// switch and the switch's forwarding; then the walk is in the peer's host.
    #[inline(always)]
    fn cross_cable(&self, w: &mut Walk, l: crate::ntb::NtbPeer, host: HostId) {
        if let Some(v) = l.via {
            w.push(HopKind::Link, v.ingress, l.cable as u64);
            w.push(HopKind::Forward, v.egress, 0);
        }
        w.host = host;
    }
}

/// The adapter's translations a crossing reads: the window's inbound translation (direct or per
/// LUT segment) and the peer it leads to, and the requester-ID LUT both ways.
impl NtbState {
    /// Translate an offset into window `widx` of peer 0 (as its BAR sees it) into this host's address.
    pub fn inbound_translate(&self, widx: usize, offset: u64, window: &WindowParam) -> Option<u64> {
        self.inbound_translate_from(0, widx, offset, window)
    }

    /// Translate an offset into window `widx` of peer `pidx` into this host's address.
    pub fn inbound_translate_from(&self, pidx: usize, widx: usize, offset: u64, window: &WindowParam) -> Option<u64> {
        match self.inbound.get(pidx)?.get(widx)? {
            Inbound::Unset => None,
            Inbound::Direct { addr, size } => (offset < *size).then(|| addr + offset),
            Inbound::Lut(segs) => {
                let seg_size = window.size / window.lut_segments as u64;
                let seg = (offset / seg_size) as usize;
                segs.get(seg).copied().flatten().map(|base| base + offset % seg_size)
            }
        }
    }

    /// The peer index of adapter `ntb`, if this adapter reaches it.
    pub fn peer_idx(&self, ntb: u32) -> Option<usize> {
        self.peers.iter().position(|p| p.ntb == ntb)
    }

    /// The segment of own window `widx` that `offset` falls in (0 for a direct window).
    pub fn segment_of(&self, widx: usize, offset: u64) -> usize {
        let w = &self.windows[widx];
        if w.lut_segments == 0 {
            0
        } else {
            (offset / (w.size / w.lut_segments as u64)) as usize
        }
    }

    /// The peer index an access at `offset` of own window `widx` goes to: the one its segment
    /// leads to, or with a single peer that peer.
    pub fn out_pidx(&self, widx: usize, offset: u64) -> Option<usize> {
        let seg = self.segment_of(widx, offset);
        match self.out_peer.get(widx).and_then(|v| v.get(seg)).copied().flatten() {
            Some(p) => Some(p as usize),
            None => (self.peers.len() == 1).then_some(0),
        }
    }

    /// (peer index, LUT entry) of far-side alias devfn `devfn` on this adapter's bus.
    pub fn alias_entry(&self, devfn: u8, peer_lut_len: impl Fn(usize) -> usize) -> Option<(usize, usize)> {
        let k = (devfn as usize).checked_sub(1)?;
        (0..self.peers.len()).find_map(|p| {
            let base = self.alias_base[p] as usize;
            (k >= base && k < base + peer_lut_len(p)).then(|| (p, k - base))
        })
    }

    pub fn rid_lut_index(&self, rid: Bdf) -> Option<usize> {
        self.rid_lut.iter().position(|e| *e == Some(rid))
    }
}
