//! One host's side of the RDMA testbed (003 §2.2, §3): a physically contiguous, page-locked
//! buffer, the scratchpad handshake, the memory window and doorbells.
//!
//! 003 §3: "The actual physical address, the virtual address in kernel, and buffer size are sent
//! and received to each other via scratchpad register"; each host then reaches the other's buffer
//! through its BAR after the base-replacing translation of Fig 4. devlend's handshake, in Linux NTB
//! API terms: each host points its inbound window at its own buffer (`mw_set_trans`), writes
//! (address low, address high, size, READY) into the peer's scratchpads (`peer_spad_write`), and
//! rings doorbell bit 0; it learns the peer's buffer from its own scratchpads (`spad_read`) and
//! sends through `peer_mw_get_addr`'s BAR. Doorbells (003 §2.2, Fig 6) notify the end of a transfer.

use crate::error::{RResult, RdmaError};
use devlend_fabric::Fabric;

pub const SPAD_ADDR_LO: usize = 0;
pub const SPAD_ADDR_HI: usize = 1;
pub const SPAD_SIZE: usize = 2;
pub const SPAD_READY: usize = 3;
pub const READY: u32 = 0x5244_4d41; // "RDMA"
pub const DB_READY: u64 = 1;
pub const DB_DATA: u64 = 2;

/// A physically contiguous, page-locked region of a host's RAM (never moved, never swapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pinned {
    pub phys: u64,
    pub size: u64,
}

impl Pinned {
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.phys && addr.checked_add(len).is_some_and(|e| e <= self.phys + self.size)
    }
}

pub struct Node {
    pub host: u16,
    pub ntb: u32,
    pub buf: Pinned,
    /// Descriptor ring for SG DMA, page-locked too.
    pub ring: Pinned,
    /// The peer's published buffer (physical address in the peer, size), after the handshake.
    pub peer: Option<Pinned>,
    /// This host's outbound window BAR (address, size).
    pub window: (u64, u64),
}

impl Node {
    /// Allocate the buffer and ring at `ram_offset` of the host's RAM (contiguous, pinned) and
    /// point the inbound window at the buffer.
    pub fn open(f: &mut Fabric, ntb: &str, ram_offset: u64, size: u64) -> RResult<Node> {
        let ntb = f.ntb_id(ntb)?;
        let host = f.ntb(ntb).host;
        let h = f.host(host);
        let phys = f.ram_offset_to_phys(h, ram_offset).ok_or_else(|| RdmaError::NoRam { host: h.name.clone(), offset: ram_offset, what: "buffer" })?;
        let ring_phys = f.ram_offset_to_phys(h, ram_offset + size).ok_or_else(|| RdmaError::NoRam {
            host: h.name.clone(),
            offset: ram_offset + size,
            what: "descriptor ring",
        })?;
        if !h.in_ram(phys + size - 1) || !h.in_ram(ring_phys + 0x2000 - 1) {
            return Err(RdmaError::NotContiguous { host: h.name.clone(), offset: ram_offset, size });
        }
        Node::open_at(f, ntb, 0, Pinned { phys, size }, Pinned { phys: ring_phys, size: 0x2000 })
    }

    /// As [`Node::open`] with the buffer and ring already pinned by the caller (the host's
    /// allocator), through memory window `widx` of NT adapter `ntb`.
    pub fn open_at(f: &mut Fabric, ntb: u32, widx: usize, buf: Pinned, ring: Pinned) -> RResult<Node> {
        let host = f.ntb(ntb).host;
        let func = f.ntb(ntb).func;
        f.set_bus_master(func, true);
        f.mw_set_trans(ntb, widx, buf.phys, buf.size)?;
        let window = f.peer_mw_get_addr(ntb, widx)?;
        Ok(Node { host, ntb, buf, ring, peer: None, window })
    }

    /// Publish this host's buffer in the peer's scratchpads and ring its READY doorbell.
    pub fn publish(&self, f: &mut Fabric) -> RResult<()> {
        let vals = [(SPAD_ADDR_LO, self.buf.phys as u32), (SPAD_ADDR_HI, (self.buf.phys >> 32) as u32), (SPAD_SIZE, self.buf.size as u32), (SPAD_READY, READY)];
        for (i, v) in vals {
            f.peer_spad_write(self.ntb, i, v)?;
        }
        self.ring_peer(f, DB_READY)
    }

    /// Read what the peer published; None until it has.
    pub fn learn_peer(&mut self, f: &mut Fabric) -> RResult<Option<Pinned>> {
        if f.spad_read(self.ntb, SPAD_READY)? != READY {
            return Ok(None);
        }
        let lo = f.spad_read(self.ntb, SPAD_ADDR_LO)? as u64;
        let hi = f.spad_read(self.ntb, SPAD_ADDR_HI)? as u64;
        let size = f.spad_read(self.ntb, SPAD_SIZE)? as u64;
        self.peer = Some(Pinned { phys: hi << 32 | lo, size });
        f.db_clear(self.ntb, DB_READY);
        Ok(self.peer)
    }

    /// Usable window: the peer's buffer, but never more than this host's BAR.
    pub fn window_size(&self) -> u64 {
        self.peer.map_or(0, |p| p.size.min(self.window.1))
    }

    /// Translate a peer physical range into an address in this host's window BAR.
    pub fn peer_to_window(&self, addr: u64, len: u64) -> RResult<u64> {
        let p = self.peer.ok_or(RdmaError::NotPublished { addr, len, published: None })?;
        if addr < p.phys || addr >= p.phys + p.size {
            return Err(RdmaError::NotPublished { addr, len, published: Some((p.phys, p.size)) });
        }
        let off = addr - p.phys;
        if off.checked_add(len).is_none_or(|e| e > self.window_size()) {
            return Err(RdmaError::ExceedsWindow { offset: off, len, window: self.window_size() });
        }
        Ok(self.window.0 + off)
    }

    /// Refuse to touch the peer when the NTB link is down (no cable, or `ntb_link_disable`).
    pub fn check_link(&self, f: &Fabric) -> RResult<()> {
        let n = f.ntb(self.ntb);
        if f.ntb_link_is_up(self.ntb) {
            return Ok(());
        }
        Err(RdmaError::LinkDown { ntb: n.name.clone(), cabled: n.peer.is_some(), ping: None })
    }

    /// Ring doorbell bits on the peer, timelessly (the handshake): the CPU's store to the peer's
    /// doorbell register ([`devlend_devices::plx_ntregs`]). Fails cleanly when the link is down.
    pub fn ring_peer(&self, f: &mut Fabric, bits: u64) -> RResult<()> {
        Ok(devlend_devices::plx_ntregs::ring_now(f, self.ntb, bits)?)
    }

    /// Take the doorbell bits that have been rung on this side.
    pub fn take_doorbell(&self, f: &mut Fabric) -> u64 {
        let bits = f.db_read(self.ntb);
        f.db_clear(self.ntb, bits);
        bits
    }
}

/// Take an NTB link down on both sides (cable pulled): routes, doorbells and scratchpads fail.
/// The pairing stays (`ntb_link_disable`), so `ntb_link_enable` brings the same pair back.
pub fn link_down(f: &mut Fabric, ntb: &str) -> RResult<()> {
    let n = f.ntb_id(ntb)?;
    Ok(f.ntb_link_disable(n)?)
}
