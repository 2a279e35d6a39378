//! The Linux NTB API on `Fabric` (include/linux/ntb.h). The `ntb_`-prefixed calls are Linux's
//! multi-port forms with a peer index `pidx` (`ntb_peer_port_count`, `ntb_mw_set_trans(ntb,
//! pidx, widx, ...)`); the unprefixed ones are their single-peer forms, peer index 0, which an
//! adapter with one peer uses (see `ntb` and `cluster`).

use crate::error::{BadNtb, FResult, FabricError};
use crate::fabric::Fabric;
use crate::ntb::{check_trans, Inbound};
use devlend_wire::Bdf;

impl Fabric {
    /// The adapter at peer index `pidx` of `ntb`, link up or not: programming an adapter's own
    /// translation and LUT registers is local (its host's CPU writes its BAR 0), so it works with
    /// the link down, and teardown can complete on each side.
    fn paired_at(&self, ntb: u32, pidx: usize) -> FResult<u32> {
        let s = &self.ntbs[ntb as usize];
        if s.peers.is_empty() {
            return Err(FabricError::LinkDown { ntb: s.name.clone(), cabled: false });
        }
        s.peers.get(pidx).map(|p| p.ntb).ok_or_else(|| BadNtb::NoPeerIndex { ntb: s.name.clone(), pidx, peers: s.peers.len() }.into())
    }

    /// The peer at `pidx` for an access that crosses the link (doorbells, scratchpads and
    /// messages of the peer): refused while either adapter's link is down.
    fn peer_at(&self, ntb: u32, pidx: usize) -> FResult<u32> {
        let p = self.paired_at(ntb, pidx)?;
        if !self.ntb_link_is_up(ntb) || !self.ntb_link_is_up(p) {
            return Err(FabricError::LinkDown { ntb: self.ntbs[ntb as usize].name.clone(), cabled: true });
        }
        Ok(p)
    }

    /// ntb_peer_port_count: how many adapters `ntb` reaches.
    pub fn peer_port_count(&self, ntb: u32) -> usize {
        self.ntbs[ntb as usize].peers.len()
    }

    /// ntb_peer_port_number: the adapter at peer index `pidx` (devlend numbers ports by adapter).
    pub fn peer_port_number(&self, ntb: u32, pidx: usize) -> FResult<u32> {
        self.paired_at(ntb, pidx)
    }

    /// ntb_peer_port_idx: the peer index of adapter `port`.
    pub fn peer_port_idx(&self, ntb: u32, port: u32) -> FResult<usize> {
        let s = &self.ntbs[ntb as usize];
        s.peer_idx(port).ok_or_else(|| BadNtb::NotPeer { ntb: s.name.clone(), port: self.ntbs.get(port as usize).map(|p| p.name.clone()) }.into())
    }

    /// ntb_mw_count: inbound windows from peer `pidx` (its BARs that lead into this host).
    pub fn ntb_mw_count(&self, ntb: u32, pidx: usize) -> FResult<usize> {
        Ok(self.ntbs[self.paired_at(ntb, pidx)? as usize].windows.len())
    }

    pub fn mw_count(&self, ntb: u32) -> FResult<usize> {
        self.ntb_mw_count(ntb, 0)
    }

    /// ntb_peer_mw_count: this adapter's own window BARs, which lead into its peers.
    pub fn peer_mw_count(&self, ntb: u32) -> usize {
        self.ntbs[ntb as usize].windows.len()
    }

    /// ntb_mw_get_align: (address alignment, size alignment, maximum size) of inbound window
    /// `widx` from peer `pidx`.
    pub fn ntb_mw_get_align(&self, ntb: u32, pidx: usize, widx: usize) -> FResult<(u64, u64, u64)> {
        let p = self.paired_at(ntb, pidx)?;
        let w =
            self.ntbs[p as usize].windows.get(widx).ok_or_else(|| FabricError::from(BadNtb::NoWindow { ntb: self.ntbs[ntb as usize].name.clone(), widx }))?;
        Ok((crate::ntb::TRANS_ALIGN, crate::ntb::TRANS_ALIGN, w.size))
    }

    pub fn mw_get_align(&self, ntb: u32, widx: usize) -> FResult<(u64, u64, u64)> {
        self.ntb_mw_get_align(ntb, 0, widx)
    }

    /// ntb_mw_set_trans: accesses from peer `pidx` through its window `widx` land at
    /// [addr, addr+size) of this host. For a window split in LUT segments, consecutive segments
    /// are programmed to cover the range; the segments (or the direct window) then lead to this
    /// adapter, and are refused while they lead to another peer of the source.
    pub fn ntb_mw_set_trans(&mut self, ntb: u32, pidx: usize, widx: usize, addr: u64, size: u64) -> FResult<()> {
        let (_, _, max) = self.ntb_mw_get_align(ntb, pidx, widx)?;
        let s = &self.ntbs[ntb as usize];
        let host = &self.hosts[s.host as usize];
        if size > max {
            return Err(BadNtb::TransTooLarge { ntb: s.name.clone(), size, widx, max }.into());
        }
        check_trans(&s.name, addr, size, host.phys_limit(), &host.name)?;
        let src = self.paired_at(ntb, pidx)?;
        let w = self.ntbs[src as usize].windows[widx];
        let (inbound, segs) = if w.lut_segments == 0 {
            (Inbound::Direct { addr, size }, vec![0])
        } else {
            let seg = w.size / w.lut_segments as u64;
            let segs: Vec<usize> = (0..w.lut_segments as usize).filter(|i| (*i as u64) * seg < size).collect();
            (Inbound::Lut((0..w.lut_segments as u64).map(|i| (i * seg < size).then_some(addr + i * seg)).collect()), segs)
        };
        self.claim_segments(ntb, src, widx, &segs, true)?;
        self.ntbs[ntb as usize].inbound[pidx][widx] = inbound;
        self.invalidate_routes();
        Ok(())
    }

    pub fn mw_set_trans(&mut self, ntb: u32, widx: usize, addr: u64, size: u64) -> FResult<()> {
        self.ntb_mw_set_trans(ntb, 0, widx, addr, size)
    }

    /// Program one LUT segment of inbound window `widx` from peer `pidx`.
    pub fn ntb_lut_set_trans(&mut self, ntb: u32, pidx: usize, widx: usize, segment: usize, addr: u64) -> FResult<()> {
        self.ntb_mw_get_align(ntb, pidx, widx)?;
        let src = self.paired_at(ntb, pidx)?;
        let w = self.ntbs[src as usize].windows[widx];
        let s = &self.ntbs[ntb as usize];
        if w.lut_segments == 0 {
            return Err(BadNtb::NoLutSegments { ntb: s.name.clone(), widx }.into());
        }
        if segment >= w.lut_segments as usize {
            return Err(BadNtb::Segment { ntb: s.name.clone(), segment, widx, has: w.lut_segments }.into());
        }
        let seg = w.size / w.lut_segments as u64;
        let host = &self.hosts[s.host as usize];
        check_trans(&s.name, addr, seg, host.phys_limit(), &host.name)?;
        self.claim_segments(ntb, src, widx, &[segment], false)?;
        let n = w.lut_segments as usize;
        let st = &mut self.ntbs[ntb as usize].inbound[pidx][widx];
        if !matches!(st, Inbound::Lut(_)) {
            *st = Inbound::Lut(vec![None; n]);
        }
        if let Inbound::Lut(v) = st {
            v[segment] = Some(addr);
        }
        self.invalidate_routes();
        Ok(())
    }

    pub fn lut_set_trans(&mut self, ntb: u32, widx: usize, segment: usize, addr: u64) -> FResult<()> {
        self.ntb_lut_set_trans(ntb, 0, widx, segment, addr)
    }

    /// ntb_mw_clear_trans: nothing from peer `pidx`'s window `widx` lands here any more.
    pub fn ntb_mw_clear_trans(&mut self, ntb: u32, pidx: usize, widx: usize) -> FResult<()> {
        self.ntb_mw_get_align(ntb, pidx, widx)?;
        let src = self.paired_at(ntb, pidx)?;
        self.claim_segments(ntb, src, widx, &[], true)?;
        self.ntbs[ntb as usize].inbound[pidx][widx] = Inbound::Unset;
        self.invalidate_routes();
        Ok(())
    }

    pub fn mw_clear_trans(&mut self, ntb: u32, widx: usize) -> FResult<()> {
        self.ntb_mw_clear_trans(ntb, 0, widx)
    }

    /// Point `segs` of window `widx` of `src` at its peer `to`; with `replace`, the segments that
    /// led to `to` before and are not in `segs` lead nowhere. Refused (nothing changed) when a
    /// segment leads to another peer.
    fn claim_segments(&mut self, to: u32, src: u32, widx: usize, segs: &[usize], replace: bool) -> FResult<()> {
        let s = &self.ntbs[src as usize];
        let q = s.peer_idx(to).expect("peers are symmetric") as u8;
        let owned = &s.out_peer[widx];
        if let Some((k, o)) = segs.iter().find_map(|&k| owned[k].filter(|o| *o != q).map(|o| (k, o))) {
            let segment = (s.windows[widx].lut_segments != 0).then_some(k);
            let (ntb, other) = (self.ntbs[to as usize].name.clone(), self.ntbs[s.peers[o as usize].ntb as usize].name.clone());
            return Err(BadNtb::Claimed { ntb, src: s.name.clone(), widx, segment, other }.into());
        }
        let v = &mut self.ntbs[src as usize].out_peer[widx];
        if replace {
            v.iter_mut().filter(|e| **e == Some(q)).for_each(|e| *e = None);
        }
        for &k in segs {
            v[k] = Some(q);
        }
        Ok(())
    }

    /// ntb_peer_mw_get_addr: (physical address in this host, size) of outbound window `widx`.
    pub fn peer_mw_get_addr(&self, ntb: u32, widx: usize) -> FResult<(u64, u64)> {
        let s = &self.ntbs[ntb as usize];
        let bar = *s.window_bars.get(widx).ok_or_else(|| FabricError::from(BadNtb::NoOutWindow { ntb: s.name.clone(), widx, has: s.window_bars.len() }))?;
        let b = self.funcs[s.func as usize].bars.iter().find(|b| b.index == bar).unwrap();
        Ok((b.addr, b.size))
    }

    /// Add a requester of this adapter's host to its requester-ID LUT; returns the entry index.
    pub fn rid_lut_add(&mut self, ntb: u32, rid: Bdf) -> FResult<usize> {
        let r = self.ntbs[ntb as usize].rid_lut_add(rid);
        self.invalidate_routes();
        r
    }

    pub fn rid_lut_remove(&mut self, ntb: u32, rid: Bdf) -> bool {
        let s = &mut self.ntbs[ntb as usize];
        let found = s.rid_lut_index(rid).map(|i| s.rid_lut[i] = None).is_some();
        self.invalidate_routes();
        found
    }

    /// The requester IDs under which this adapter forwards inbound TLPs (its DMA aliases), for
    /// every peer.
    pub fn ntb_dma_aliases(&self, ntb: u32) -> Vec<Bdf> {
        let s = &self.ntbs[ntb as usize];
        s.peers.iter().enumerate().flat_map(|(p, peer)| (0..self.ntbs[peer.ntb as usize].rid_lut.len()).map(move |i| self.ntb_alias_from(ntb, p, i))).collect()
    }

    /// The far-side requester ID of LUT entry `idx` of the adapter paired with `far` (peer 0).
    pub fn ntb_alias(&self, far: u32, idx: usize) -> Bdf {
        self.ntb_alias_from(far, 0, idx)
    }

    /// The requester ID on `far`'s side of LUT entry `idx` of its peer adapter `src`.
    pub fn ntb_alias_of(&self, far: u32, src: u32, idx: usize) -> Bdf {
        self.ntb_alias_from(far, self.ntbs[far as usize].peer_idx(src).unwrap_or(0), idx)
    }

    /// ntb_peer_db_set: ring doorbell bits on the peer; returns whether its interrupt fired.
    pub fn peer_db_set(&mut self, ntb: u32, bits: u64) -> FResult<bool> {
        let p = self.peer_at(ntb, 0)?;
        self.ntbs[p as usize].ring(bits)
    }

    pub fn db_read(&self, ntb: u32) -> u64 {
        self.ntbs[ntb as usize].doorbell
    }

    pub fn db_clear(&mut self, ntb: u32, bits: u64) {
        self.ntbs[ntb as usize].doorbell &= !bits;
    }

    pub fn db_set_mask(&mut self, ntb: u32, mask: u64) {
        self.ntbs[ntb as usize].doorbell_mask = mask;
    }

    pub fn spad_read(&self, ntb: u32, idx: usize) -> FResult<u32> {
        self.ntbs[ntb as usize].check_spad(idx)?;
        Ok(self.ntbs[ntb as usize].spads[idx])
    }

    pub fn spad_write(&mut self, ntb: u32, idx: usize, val: u32) -> FResult<()> {
        self.ntbs[ntb as usize].check_spad(idx)?;
        self.ntbs[ntb as usize].spads[idx] = val;
        Ok(())
    }

    /// ntb_peer_spad_write: scratchpad `idx` of peer `pidx`.
    pub fn ntb_peer_spad_write(&mut self, ntb: u32, pidx: usize, idx: usize, val: u32) -> FResult<()> {
        let p = self.peer_at(ntb, pidx)?;
        self.spad_write(p, idx, val)
    }

    pub fn peer_spad_write(&mut self, ntb: u32, idx: usize, val: u32) -> FResult<()> {
        self.ntb_peer_spad_write(ntb, 0, idx, val)
    }

    /// ntb_peer_spad_read: scratchpad `idx` of peer `pidx`.
    pub fn ntb_peer_spad_read(&self, ntb: u32, pidx: usize, idx: usize) -> FResult<u32> {
        let p = self.peer_at(ntb, pidx)?;
        self.spad_read(p, idx)
    }

    pub fn peer_spad_read(&self, ntb: u32, idx: usize) -> FResult<u32> {
        self.ntb_peer_spad_read(ntb, 0, idx)
    }

    /// ntb_peer_msg_write: post a message to inbound message register `idx` of peer `pidx`.
    pub fn ntb_peer_msg_write(&mut self, ntb: u32, pidx: usize, idx: usize, msg: u32) -> FResult<()> {
        let p = self.peer_at(ntb, pidx)?;
        let s = &mut self.ntbs[p as usize];
        s.check_msg(idx)?;
        if s.msgs[idx].is_some() {
            return Err(BadNtb::UnreadMessage { ntb: s.name.clone(), idx }.into());
        }
        s.msgs[idx] = Some(msg);
        Ok(())
    }

    pub fn peer_msg_write(&mut self, ntb: u32, idx: usize, msg: u32) -> FResult<()> {
        self.ntb_peer_msg_write(ntb, 0, idx, msg)
    }

    /// ntb_msg_read: take the message in inbound register `idx`, if any.
    pub fn msg_read(&mut self, ntb: u32, idx: usize) -> FResult<Option<u32>> {
        let s = &mut self.ntbs[ntb as usize];
        s.check_msg(idx)?;
        Ok(s.msgs[idx].take())
    }
}
