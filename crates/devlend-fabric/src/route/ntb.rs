//! An NTB (non-transparent bridge; 000 §2.1, §6): a request to one of the adapter's memory
//! windows is forwarded into the peer's domain through the peer's inbound translation, its
//! requester ID rewritten through the adapter's requester-ID LUT (no entry: rejected). With
//! several peers (`cluster`), the segment the address falls in names the peer; through a
//! cluster switch the TLP crosses the adapter's cable, the switch and the peer's cable. A
//! completion comes back through the reverse LUT to the original requester ID. The Linux face of
//! the adapter (the `ntb_*` calls) is `crate::ntb_api`.

use super::walk::{fail, IdStep, Next, Step, Walk};
use super::{Failure, HopKind};
use crate::fabric::Fabric;
use crate::model::HostId;
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
