//! The transaction-layer packet as it travels, and its size on the wire.
//!
//! One [`Tlp`] names what a packet is (PCIe Base 3.0 §2.2): a posted memory write, a non-posted
//! memory read request, a completion (with data when it answers a read), or a message (an MSI
//! is a posted write in this model, as on real hardware). The router routes its address, the
//! engine times it, and a device is handed one when it reaches one of its BARs.
//!
//! [`Overheads`] and [`Tlp::wire_bytes`] are the only place where the bytes a TLP occupies on a
//! link are computed: header, sequence number, LCRC and framing per TLP kind; and [`Overheads::dllp`]
//! the bytes of one DLLP, which the receiver sends on the other direction of the link at the
//! rate of `dllp::ack_latency_symbols` (not charged to the TLP's own direction). The numbers themselves are hardware constants and come
//! from `params/hardware.toml` (`[timing]`), so the engine, the analytic model and every crate
//! that estimates link time use the same arithmetic.

use crate::{Access, Bdf};

/// What a TLP is (PCIe Base 3.0 §2.2.1, Table 2-3, reduced to what devlend moves).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlpKind {
    /// MWr: posted, carries its payload.
    MemWrite,
    /// MRd: non-posted, asks for `len` bytes; answered by completions.
    MemRead,
    /// CplD: the answer to a read, carrying up to the read completion boundary's worth of data.
    Completion,
    /// Msg: messages (INTx emulation, PME, ...). Routed by ID or implicitly; posted.
    Message,
}

impl TlpKind {
    /// Whether the receiver's posted, non-posted or completion buffers hold it (§2.6.1).
    pub fn is_posted(self) -> bool {
        matches!(self, TlpKind::MemWrite | TlpKind::Message)
    }

    /// The flow-control type whose credits and receiver buffers it takes (§2.6.1).
    #[inline]
    pub fn fc_class(self) -> FcClass {
        match self {
            TlpKind::MemWrite | TlpKind::Message => FcClass::Posted,
            TlpKind::MemRead => FcClass::NonPosted,
            TlpKind::Completion => FcClass::Completion,
        }
    }
}

/// The flow-control types of PCIe Base 3.0 §2.6.1, each with its own credits and receiver
/// buffers; the discriminants index a port's per-type state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FcClass {
    Posted = 0,
    NonPosted = 1,
    Completion = 2,
}

/// The fixed bytes every TLP of a kind costs on a link besides its payload (from `[timing]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overheads {
    /// A 64-bit memory request: 4 DW header + sequence number + LCRC + framing.
    pub request: u32,
    /// A completion: 3 DW header + sequence number + LCRC + framing.
    pub completion: u32,
    /// One DLLP (Ack, UpdateFC): 6 bytes + framing, sent on the reverse direction.
    pub dllp: u32,
}

impl Overheads {
    /// Bytes a TLP of `kind` with `payload` bytes of data occupies on a link.
    pub fn wire_bytes(&self, kind: TlpKind, payload: u64) -> u64 {
        let header = match kind {
            TlpKind::Completion => self.completion,
            TlpKind::MemWrite | TlpKind::MemRead | TlpKind::Message => self.request,
        };
        payload + header as u64
    }

    /// Bytes a cut-through switch must have received before it forwards a TLP: the request
    /// header with its framing (the longest header, so completions are not favoured).
    pub fn header_bytes(&self) -> u64 {
        self.request as u64
    }
}

/// A TLP's header (PCIe Base 3.0 §2.2.1-§2.2.7, reduced to what devlend moves): kind, requester
/// ID, address, length and tag. Small and `Copy`: the router takes it and hands it back as the
/// path rewrote it (an NTB's address and requester-ID translation, the IOMMU's translation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlpHeader {
    pub kind: TlpKind,
    pub requester: Bdf,
    pub addr: u64,
    /// Bytes written, asked for, or carried.
    pub len: u32,
    /// The requester's tag (non-posted requests and their completions); 0 for posted writes.
    pub tag: u16,
}

impl TlpHeader {
    /// A posted memory write of `len` bytes.
    pub fn write(requester: Bdf, addr: u64, len: u32) -> TlpHeader {
        TlpHeader { kind: TlpKind::MemWrite, requester, addr, len, tag: 0 }
    }

    /// A memory read request for `len` bytes.
    pub fn read(requester: Bdf, addr: u64, len: u32, tag: u16) -> TlpHeader {
        TlpHeader { kind: TlpKind::MemRead, requester, addr, len, tag }
    }

    /// A memory request of `access`: a posted write of `len` bytes or a read request for them
    /// (tag 0).
    pub fn request(requester: Bdf, addr: u64, access: Access, len: u32) -> TlpHeader {
        match access {
            Access::Read => TlpHeader::read(requester, addr, len, 0),
            Access::Write => TlpHeader::write(requester, addr, len),
        }
    }

    /// Whether the router treats it as a read (a request answered by completions) or a write.
    pub fn access(&self) -> Access {
        match self.kind {
            TlpKind::MemRead => Access::Read,
            _ => Access::Write,
        }
    }

    /// Bytes of data this TLP carries on the wire (a read request carries none).
    pub fn data_bytes(&self) -> u64 {
        match self.kind {
            TlpKind::MemRead => 0,
            _ => self.len as u64,
        }
    }

    pub fn wire_bytes(&self, o: &Overheads) -> u64 {
        o.wire_bytes(self.kind, self.data_bytes())
    }
}

/// A TLP: its header and (for writes and completions) its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tlp {
    pub header: TlpHeader,
    pub payload: Vec<u8>,
}

impl Tlp {
    pub fn write(requester: Bdf, addr: u64, payload: Vec<u8>) -> Tlp {
        Tlp { header: TlpHeader::write(requester, addr, payload.len() as u32), payload }
    }

    pub fn read(requester: Bdf, addr: u64, len: u32, tag: u16) -> Tlp {
        Tlp { header: TlpHeader::read(requester, addr, len, tag), payload: Vec::new() }
    }

    pub fn wire_bytes(&self, o: &Overheads) -> u64 {
        self.header.wire_bytes(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const O: Overheads = Overheads { request: 24, completion: 20, dllp: 8 };

    #[test]
    fn wire_bytes_per_kind() {
        let w = Tlp::write(Bdf::new(1, 0, 0), 0x1000, vec![0; 256]);
        assert_eq!(w.wire_bytes(&O), 256 + 24, "DLLPs are not charged to the TLP's direction");
        let r = Tlp::read(Bdf::new(1, 0, 0), 0x1000, 512, 3);
        assert_eq!(r.wire_bytes(&O), 24, "a read request carries no data");
        assert_eq!(O.wire_bytes(TlpKind::Completion, 64), 64 + 20);
        assert!(TlpKind::MemWrite.is_posted() && !TlpKind::MemRead.is_posted());
    }

    #[test]
    fn a_tlp_is_its_copyable_header_and_payload() {
        let w = Tlp::write(Bdf::new(1, 0, 0), 0x1000, vec![0; 64]);
        let h: TlpHeader = w.header;
        assert_eq!((h.kind, h.len, h.tag, h.access()), (TlpKind::MemWrite, 64, 0, Access::Write));
        let r = Tlp::read(Bdf::new(1, 0, 0), 0x1000, 512, 3).header;
        assert_eq!((r.access(), r.data_bytes(), r.tag), (Access::Read, 0, 3));
    }

    #[test]
    fn each_kind_takes_its_flow_control_types_credits() {
        let classes: Vec<FcClass> = [TlpKind::MemWrite, TlpKind::Message, TlpKind::MemRead, TlpKind::Completion].map(TlpKind::fc_class).into();
        assert_eq!(classes, [FcClass::Posted, FcClass::Posted, FcClass::NonPosted, FcClass::Completion]);
        // The discriminants index a port's per-type credits and queues.
        assert_eq!([FcClass::Posted as usize, FcClass::NonPosted as usize, FcClass::Completion as usize], [0, 1, 2]);
    }
}
