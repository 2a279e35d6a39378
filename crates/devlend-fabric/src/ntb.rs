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
//!
//! This file holds the adapter's state (`NtbState`) and what its set-up checks (the
//! requester-ID LUT's entries, scratchpads, message registers, doorbells, a translation's
//! target); the Linux NTB API on `Fabric` is `ntb_api`. The translation a TLP crossing the
//! adapter reads (a window's inbound translation, the peer a segment leads to, the LUT both
//! ways: `inbound_translate*`, `out_pidx`, `alias_entry`, `rid_lut_index`, ...) is the router's
//! NTB piece in `route`, with the walk that calls it.

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
