//! Calls of the NTB API that cannot be carried out: indices out of range, translations that
//! are misaligned or too large, windows or segments that lead to another peer.

use crate::error::fmt_size;
use crate::ntb::TRANS_ALIGN;
use devlend_wire::Bdf;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadNtb {
    /// The requester-ID LUT of `ntb` has all its `entries` taken; `rid` cannot be added.
    LutFull { ntb: String, entries: usize, rid: Bdf },
    /// Scratchpad `idx` of `ntb`, which has `has`.
    Scratchpad { ntb: String, idx: usize, has: usize },
    /// Message register `idx` of `ntb`, which has `has`.
    MessageRegister { ntb: String, idx: usize, has: usize },
    /// Doorbell bits `bits` rung on `ntb`, which has `valid` doorbell bits.
    DoorbellBits { ntb: String, bits: u64, valid: u8 },
    /// A translation address `addr` of `ntb` not aligned to `TRANS_ALIGN`.
    TransAddrAlign { ntb: String, addr: u64 },
    /// A translation of zero bytes on `ntb`.
    TransZero { ntb: String },
    /// A translation size `size` of `ntb` not a multiple of `TRANS_ALIGN`.
    TransSizeAlign { ntb: String, size: u64 },
    /// A window of `ntb` mapping `addr`+`size`, past host `host`'s physical limit `phys_limit`.
    TransPastLimit { ntb: String, addr: u64, size: u64, host: String, phys_limit: u64 },
    /// A translation of `size` bytes on `ntb`, larger than memory window `widx` (`max` bytes).
    TransTooLarge { ntb: String, size: u64, widx: usize, max: u64 },
    /// Peer index `pidx` of `ntb`, which has `peers` peers.
    NoPeerIndex { ntb: String, pidx: usize, peers: usize },
    /// Adapter `port` (its name, if it exists) is not a peer of `ntb`.
    NotPeer { ntb: String, port: Option<String> },
    /// Memory window `widx` of `ntb`'s peer does not exist.
    NoWindow { ntb: String, widx: usize },
    /// Outbound memory window `widx` of `ntb`, which has `has`.
    NoOutWindow { ntb: String, widx: usize, has: usize },
    /// Memory window `widx` of `ntb` has no LUT segments.
    NoLutSegments { ntb: String, widx: usize },
    /// LUT segment `segment` of window `widx` of `ntb`, which has `has`.
    Segment { ntb: String, segment: usize, widx: usize, has: u32 },
    /// Memory window `widx` of `src` (or its segment `segment`), asked to lead to `ntb`, already
    /// leads to `other`.
    Claimed { ntb: String, src: String, widx: usize, segment: Option<usize>, other: String },
    /// Message register `idx` of `ntb` still holds an unread message.
    UnreadMessage { ntb: String, idx: usize },
    /// A link change on `ntb`, which has no cable to a peer.
    NoCable { ntb: String },
    /// An Intel B2B NTB `ntb` without a cabled peer.
    NoB2bPeer { ntb: String },
    /// `requester` added to the requester-ID LUT of `ntb`, which sits in another host.
    RequesterElsewhere { requester: String, ntb: String },
}

impl fmt::Display for BadNtb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadNtb::LutFull { ntb, entries, rid } => write!(f, "{ntb}: requester-ID LUT is full ({entries} entries); cannot add {rid}"),
            BadNtb::Scratchpad { ntb, idx, has } => write!(f, "{ntb}: scratchpad {idx} out of range (has {has})"),
            BadNtb::MessageRegister { ntb, idx, has } => write!(f, "{ntb}: message register {idx} out of range (has {has})"),
            BadNtb::DoorbellBits { ntb, bits, valid } => write!(f, "{ntb}: doorbell bits {bits:#x} outside the {valid} valid bits"),
            BadNtb::TransAddrAlign { ntb, addr } => {
                write!(f, "{ntb}: translation address {addr:#x} is not aligned to {TRANS_ALIGN:#x} (ntb_mw_get_align)")
            }
            BadNtb::TransZero { ntb } => write!(f, "{ntb}: translation size is zero"),
            BadNtb::TransSizeAlign { ntb, size } => {
                write!(f, "{ntb}: translation size {size:#x} is not a multiple of {TRANS_ALIGN:#x} (ntb_mw_get_align)")
            }
            BadNtb::TransPastLimit { ntb, addr, size, host, phys_limit } => write!(
                f,
                "{ntb}: window maps {addr:#x}+{size:#x}, past the end of host {host}'s {}-bit physical address space ({phys_limit:#x})",
                phys_limit.trailing_zeros()
            ),
            BadNtb::TransTooLarge { ntb, size, widx, max } => {
                write!(f, "{ntb}: translation of {} exceeds memory window {widx} ({})", fmt_size(*size), fmt_size(*max))
            }
            BadNtb::NoPeerIndex { ntb, pidx, peers } => write!(f, "{ntb}: no peer index {pidx} (it has {peers} peers)"),
            BadNtb::NotPeer { ntb, port } => write!(f, "{ntb}: {} is not one of its peers", port.as_deref().unwrap_or("?")),
            BadNtb::NoWindow { ntb, widx } => write!(f, "{ntb}: no memory window {widx}"),
            BadNtb::NoOutWindow { ntb, widx, has } => write!(f, "{ntb}: no memory window {widx} (has {has})"),
            BadNtb::NoLutSegments { ntb, widx } => write!(f, "{ntb}: memory window {widx} has no LUT segments; use mw_set_trans"),
            BadNtb::Segment { ntb, segment, widx, has } => write!(f, "{ntb}: segment {segment} out of range (window {widx} has {has})"),
            BadNtb::Claimed { ntb, src, widx, segment, other } => {
                write!(f, "{ntb}: ")?;
                if let Some(k) = segment {
                    write!(f, "segment {k} of ")?;
                }
                write!(f, "memory window {widx} of {src} already leads to {other}; clear it there first")
            }
            BadNtb::UnreadMessage { ntb, idx } => write!(f, "{ntb}: message register {idx} still holds an unread message"),
            BadNtb::NoCable { ntb } => write!(f, "{ntb}: no cable to a peer; there is no link to change"),
            BadNtb::NoB2bPeer { ntb } => write!(f, "{ntb}: no cabled peer for an Intel B2B NTB"),
            BadNtb::RequesterElsewhere { requester, ntb } => write!(f, "{requester} is not in the host of {ntb}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FabricError;

    /// The messages are the ones the fabric printed when `Invalid` held a `String`.
    #[test]
    fn each_ntb_call_renders_the_fabric_s_message() {
        let n = || "ntb-a".to_string();
        let cases = [
            (BadNtb::LutFull { ntb: n(), entries: 32, rid: Bdf::new(1, 0, 0) }, "ntb-a: requester-ID LUT is full (32 entries); cannot add 01:00.0"),
            (BadNtb::Scratchpad { ntb: n(), idx: 9, has: 8 }, "ntb-a: scratchpad 9 out of range (has 8)"),
            (BadNtb::MessageRegister { ntb: n(), idx: 4, has: 4 }, "ntb-a: message register 4 out of range (has 4)"),
            (BadNtb::DoorbellBits { ntb: n(), bits: 0x10000, valid: 16 }, "ntb-a: doorbell bits 0x10000 outside the 16 valid bits"),
            (BadNtb::TransAddrAlign { ntb: n(), addr: 0x10 }, "ntb-a: translation address 0x10 is not aligned to 0x1000 (ntb_mw_get_align)"),
            (BadNtb::TransZero { ntb: n() }, "ntb-a: translation size is zero"),
            (BadNtb::TransSizeAlign { ntb: n(), size: 0x10 }, "ntb-a: translation size 0x10 is not a multiple of 0x1000 (ntb_mw_get_align)"),
            (
                BadNtb::TransPastLimit { ntb: n(), addr: 1 << 46, size: 1 << 20, host: "a".into(), phys_limit: 1 << 46 },
                "ntb-a: window maps 0x400000000000+0x100000, past the end of host a's 46-bit physical address space (0x400000000000)",
            ),
            (BadNtb::TransTooLarge { ntb: n(), size: 2 << 20, widx: 0, max: 1 << 20 }, "ntb-a: translation of 2 MiB exceeds memory window 0 (1 MiB)"),
            (BadNtb::NoPeerIndex { ntb: n(), pidx: 2, peers: 1 }, "ntb-a: no peer index 2 (it has 1 peers)"),
            (BadNtb::NotPeer { ntb: n(), port: Some("ntb-c".into()) }, "ntb-a: ntb-c is not one of its peers"),
            (BadNtb::NotPeer { ntb: n(), port: None }, "ntb-a: ? is not one of its peers"),
            (BadNtb::NoWindow { ntb: n(), widx: 3 }, "ntb-a: no memory window 3"),
            (BadNtb::NoOutWindow { ntb: n(), widx: 3, has: 2 }, "ntb-a: no memory window 3 (has 2)"),
            (BadNtb::NoLutSegments { ntb: n(), widx: 0 }, "ntb-a: memory window 0 has no LUT segments; use mw_set_trans"),
            (BadNtb::Segment { ntb: n(), segment: 9, widx: 1, has: 8 }, "ntb-a: segment 9 out of range (window 1 has 8)"),
            (
                BadNtb::Claimed { ntb: n(), src: "ntb-b".into(), widx: 1, segment: None, other: "ntb-c".into() },
                "ntb-a: memory window 1 of ntb-b already leads to ntb-c; clear it there first",
            ),
            (
                BadNtb::Claimed { ntb: n(), src: "ntb-b".into(), widx: 1, segment: Some(2), other: "ntb-c".into() },
                "ntb-a: segment 2 of memory window 1 of ntb-b already leads to ntb-c; clear it there first",
            ),
            (BadNtb::UnreadMessage { ntb: n(), idx: 0 }, "ntb-a: message register 0 still holds an unread message"),
            (BadNtb::NoCable { ntb: n() }, "ntb-a: no cable to a peer; there is no link to change"),
            (BadNtb::NoB2bPeer { ntb: n() }, "ntb-a: no cabled peer for an Intel B2B NTB"),
            (BadNtb::RequesterElsewhere { requester: "b:gpu0".into(), ntb: n() }, "b:gpu0 is not in the host of ntb-a"),
        ];
        for (call, text) in cases {
            assert_eq!(FabricError::from(call).to_string(), text);
        }
    }
}
