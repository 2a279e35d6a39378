//! Device Lending requests that make no sense: borrowing one's own device, returning what was
//! not borrowed, unmapping an NTB window that was not mapped; and the records a lending step
//! expects an earlier one to have left (their messages name nothing; the values name the
//! function or adapters whose record is missing).

use devlend_fabric::model::FuncId;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadLend {
    /// `device` is installed in `host`, the host that asked to borrow it.
    OwnDevice { device: String, host: String },
    /// Borrower `host` has its IOMMU disabled.
    NoIommu { host: String },
    /// `device` is not borrowed by `host`.
    NotBorrowedBy { device: String, host: String },
    /// `device` is not borrowed.
    NotBorrowed { device: String },
    /// `device` is not lent.
    NotLent { device: String },
    /// A borrowed source `func`'s lend went while its peer-to-peer mapping was made.
    SourceVanished { func: FuncId },
    /// The peer-to-peer source `func` is not borrowed.
    SourceNotBorrowed { func: FuncId },
    /// The peer-to-peer target `func` is not borrowed.
    TargetNotBorrowed { func: FuncId },
    /// Function `func` has no BAR `bar` to map peer-to-peer.
    NoSuchBar { func: FuncId, bar: u8 },
    /// The MSI window lender adapter `la` opened for borrower adapter `bb` (NTB ids) is gone.
    MsiWindowVanished { la: u32, bb: u32 },
    /// Borrower adapter `ntb`'s (NTB id) IOMMU domain is gone.
    AdapterDomainVanished { ntb: u32 },
    /// Segment `segment` of NTB memory window `window` was not allocated.
    SegmentNotAllocated { window: usize, segment: u64 },
    /// NTB memory window `window` of `ntb` is not mapped as the undo expects.
    WindowNotMapped { window: usize, ntb: String },
    /// BAR `bar` of `device` has no address in the borrower's window.
    BarNoWindow { device: String, bar: u8 },
    /// `device` has no entry in the requester-ID LUT of its lender's adapter (`lender_side`:
    /// the message names the adapter).
    NoLutEntry { device: String, lender_side: bool },
    /// `target` of a revoke is not a borrowed device.
    NotRevocable { target: String },
}

impl fmt::Display for BadLend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadLend::OwnDevice { device, host } => {
                write!(f, "{device} is installed in {host} itself; only another host's device can be borrowed")
            }
            BadLend::NoIommu { host } => {
                write!(f, "host {host} has its IOMMU disabled: a borrower maps DMA buffers through its IOMMU into the lender's DMA window (000 §4)")
            }
            BadLend::NotBorrowedBy { device, host } => write!(f, "{device} is not borrowed by {host}"),
            BadLend::NotBorrowed { device } => write!(f, "{device} is not borrowed"),
            BadLend::NotLent { device } => write!(f, "{device} is not lent"),
            BadLend::SourceVanished { .. } => f.write_str("source vanished"),
            BadLend::SourceNotBorrowed { .. } => f.write_str("source is not borrowed"),
            BadLend::TargetNotBorrowed { .. } => f.write_str("target is not borrowed"),
            BadLend::NoSuchBar { .. } => f.write_str("no such BAR"),
            BadLend::MsiWindowVanished { .. } => f.write_str("MSI window vanished"),
            BadLend::AdapterDomainVanished { .. } => f.write_str("adapter domain vanished"),
            BadLend::SegmentNotAllocated { window, segment } => write!(f, "window {window} segment {segment} was not allocated"),
            BadLend::WindowNotMapped { window, ntb } => write!(f, "window {window} of {ntb} is not mapped that way"),
            BadLend::BarNoWindow { device, bar } => write!(f, "BAR {bar} of {device} has no window address"),
            BadLend::NoLutEntry { device, lender_side: false } => write!(f, "{device} has no LUT entry"),
            BadLend::NoLutEntry { device, lender_side: true } => write!(f, "{device} has no LUT entry on its lender's adapter"),
            BadLend::NotRevocable { target } => write!(f, "{target} is not a borrowed device: only a lend can be revoked"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostError;

    /// The messages are the ones the host layer printed when `Invalid` held a `String`.
    #[test]
    fn each_lending_request_renders_the_host_layer_s_message() {
        let cases = [
            (BadLend::OwnDevice { device: "gpu0".into(), host: "a".into() }, "gpu0 is installed in a itself; only another host's device can be borrowed"),
            (
                BadLend::NoIommu { host: "b".into() },
                "host b has its IOMMU disabled: a borrower maps DMA buffers through its IOMMU into the lender's DMA window (000 §4)",
            ),
            (BadLend::NotBorrowedBy { device: "gpu0".into(), host: "b".into() }, "gpu0 is not borrowed by b"),
            (BadLend::NotBorrowed { device: "gpu0".into() }, "gpu0 is not borrowed"),
            (BadLend::NotLent { device: "gpu0".into() }, "gpu0 is not lent"),
            (BadLend::SourceVanished { func: 1 }, "source vanished"),
            (BadLend::SourceNotBorrowed { func: 1 }, "source is not borrowed"),
            (BadLend::TargetNotBorrowed { func: 2 }, "target is not borrowed"),
            (BadLend::NoSuchBar { func: 2, bar: 4 }, "no such BAR"),
            (BadLend::MsiWindowVanished { la: 0, bb: 1 }, "MSI window vanished"),
            (BadLend::AdapterDomainVanished { ntb: 1 }, "adapter domain vanished"),
            (BadLend::SegmentNotAllocated { window: 1, segment: 7 }, "window 1 segment 7 was not allocated"),
            (BadLend::WindowNotMapped { window: 0, ntb: "ntb-a".into() }, "window 0 of ntb-a is not mapped that way"),
            (BadLend::BarNoWindow { device: "gpu0".into(), bar: 1 }, "BAR 1 of gpu0 has no window address"),
            (BadLend::NoLutEntry { device: "gpu0".into(), lender_side: false }, "gpu0 has no LUT entry"),
            (BadLend::NoLutEntry { device: "gpu0".into(), lender_side: true }, "gpu0 has no LUT entry on its lender's adapter"),
            (BadLend::NotRevocable { target: "gpu0".into() }, "gpu0 is not a borrowed device: only a lend can be revoked"),
        ];
        for (request, text) in cases {
            assert_eq!(HostError::from(request).to_string(), text);
        }
    }
}
