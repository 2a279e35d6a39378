//! Non-transparent bridges, programmed through the Linux NTB API (include/linux/ntb.h).
//!
//! What devlend takes from the papers:
//! - 000 §2.3: an NTB appears as an endpoint in each host; accesses to its memory-window BARs are
//!   forwarded into the other host's address space with a hardware address translation; a window
//!   may be split into segments (LUT entries), each mapped anywhere in the remote address space.
//! - 003 §2.2, Figs 3-4: base-replacing translation of the address; requester IDs of TLPs that cross
//!   are rewritten through a requester-ID lookup table (a TLP whose requester has no entry is
//!   rejected); scratchpad and doorbell registers are reachable from both sides.
//!
//! Naming follows Linux: memory window `widx` of an NTB is the *inbound* window, programmed with
//! `mw_set_trans` on the host where the accesses land; the other host reaches it through its own
//! BAR, whose address it gets from `peer_mw_get_addr`.
//!
//! Requester IDs: an outbound requester with LUT entry `i` appears on the far side as
//! `far_bus:devfn (i + 1)` (devfn 0 is the adapter's own function). Those IDs are the adapter's
//! DMA aliases, which the far host's IOMMU must attach (Linux `pci_add_dma_alias`). Entry 0 holds
//! the host's root complex (00:00.0) from probe on, as Linux NTB drivers do
//! (ntb_hw_switchtec: `switchtec_ntb_init_req_id_table`).
//!
//! Several peers (Linux's multi-port API since 4.13: `ntb_peer_port_count`, and a peer index
//! `pidx` in `ntb_mw_set_trans(ntb, pidx, widx, ...)` and the peer register calls): an adapter
//! behind a cluster switch (`cluster`), or one with several cable ports, has one peer per adapter
//! it reaches. Its windows are shared between them: each LUT segment (and a direct window as a
//! whole) leads to one peer at a time (`out_peer`), set when that peer programs the translation
//! for it; the receiving adapter keeps one inbound translation per (source adapter, window)
//! (`inbound[pidx][widx]`). The requester-ID LUT is the source host's and serves every peer; on
//! the far side entry `i` from peer `pidx` appears as devfn `alias_base[pidx] + i + 1`, so that
//! completions find their way back to the right peer. An adapter with one peer is exactly the
//! single-peer model: peer index 0, `alias_base` 0.

use crate::error::{BadNtb, FResult};
use crate::model::{FuncId, HostId, LinkId, NodeId};
use crate::params::WindowParam;
use devlend_wire::Bdf;

/// Where inbound accesses through one memory window land in this host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inbound {
    Unset,
    Direct {
        addr: u64,
        size: u64,
    },
    /// One optional translation per segment.
    Lut(Vec<Option<u64>>),
}

pub const TRANS_ALIGN: u64 = 0x1000;

/// One adapter this adapter reaches, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NtbPeer {
    pub ntb: u32,
    /// The cable leaving this adapter towards it (to the peer itself, or to a cluster switch).
    pub cable: LinkId,
    /// Through a cluster switch: the switch port this adapter is cabled to, the port the peer is
    /// cabled to, and the peer's cable.
    pub via: Option<Via>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Via {
    pub ingress: NodeId,
    pub egress: NodeId,
    pub far_cable: LinkId,
}

#[derive(Clone)]
pub struct NtbState {
    pub name: String,
    pub node: NodeId,
    pub func: FuncId,
    pub host: HostId,
    /// Peer index 0 and its cable: the single-peer view most code uses.
    pub peer: Option<u32>,
    pub cable: Option<LinkId>,
    /// Every peer, by peer index (Linux `pidx`).
    pub peers: Vec<NtbPeer>,
    /// Per own window, per segment (one entry for a direct window): the peer index it leads to.
    pub out_peer: Vec<Vec<Option<u8>>>,
    /// Per peer index: the first far-side alias of that peer's requester-ID LUT entries.
    pub alias_base: Vec<u16>,
    /// This adapter's outbound windows (its BARs 2, 4, ...): accesses there go to the peer.
    pub windows: Vec<WindowParam>,
    pub window_bars: Vec<u8>,
    /// Translations for each peer's windows: `inbound[pidx][widx]`.
    pub inbound: Vec<Vec<Inbound>>,
    pub rid_lut: Vec<Option<Bdf>>,
    pub doorbell: u64,
    pub doorbell_mask: u64,
    pub doorbell_bits: u8,
    pub doorbell_irqs: u64,
    pub spads: Vec<u32>,
    pub msgs: Vec<Option<u32>>,
}

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

    pub fn rid_lut_add(&mut self, rid: Bdf) -> FResult<usize> {
        if let Some(i) = self.rid_lut_index(rid) {
            return Ok(i);
        }
        match self.rid_lut.iter().position(|e| e.is_none()) {
            Some(i) => {
                self.rid_lut[i] = Some(rid);
                Ok(i)
            }
            None => Err(BadNtb::LutFull { ntb: self.name.clone(), entries: self.rid_lut.len(), rid }.into()),
        }
    }

    pub fn check_spad(&self, idx: usize) -> FResult<()> {
        if idx >= self.spads.len() {
            return Err(BadNtb::Scratchpad { ntb: self.name.clone(), idx, has: self.spads.len() }.into());
        }
        Ok(())
    }

    pub fn check_msg(&self, idx: usize) -> FResult<()> {
        if idx >= self.msgs.len() {
            return Err(BadNtb::MessageRegister { ntb: self.name.clone(), idx, has: self.msgs.len() }.into());
        }
        Ok(())
    }

    /// Ring doorbell bits on this side; returns whether an interrupt fires (some rung bit unmasked).
    pub fn ring(&mut self, bits: u64) -> FResult<bool> {
        let valid = if self.doorbell_bits >= 64 { u64::MAX } else { (1u64 << self.doorbell_bits) - 1 };
        if bits & !valid != 0 {
            return Err(BadNtb::DoorbellBits { ntb: self.name.clone(), bits, valid: self.doorbell_bits }.into());
        }
        self.doorbell |= bits;
        let fires = bits & !self.doorbell_mask != 0;
        if fires {
            self.doorbell_irqs += 1;
        }
        Ok(fires)
    }
}

/// Validate a translation target: aligned, non-empty, inside the host's physical address space.
pub fn check_trans(ntb: &str, addr: u64, size: u64, phys_limit: u64, host: &str) -> FResult<()> {
    if !addr.is_multiple_of(TRANS_ALIGN) {
        return Err(BadNtb::TransAddrAlign { ntb: ntb.into(), addr }.into());
    }
    if size == 0 {
        return Err(BadNtb::TransZero { ntb: ntb.into() }.into());
    }
    // Sizes are page-granular too (ntb_mw_get_align's size alignment): routes are cached per 4 KiB page.
    if !size.is_multiple_of(TRANS_ALIGN) {
        return Err(BadNtb::TransSizeAlign { ntb: ntb.into(), size }.into());
    }
    match addr.checked_add(size) {
        Some(end) if end <= phys_limit => Ok(()),
        _ => Err(BadNtb::TransPastLimit { ntb: ntb.into(), addr, size, host: host.into(), phys_limit }.into()),
    }
}
