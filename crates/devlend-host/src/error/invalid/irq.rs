//! Interrupt calls that make no sense: an MSI-X entry a device does not have, a vector or
//! handler never requested, INTx where it cannot be delivered.

use devlend_fabric::model::FuncId;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadIrq {
    /// Host `host` frees vector `vector`, which is not allocated.
    VectorNotAllocated { host: String, vector: u8 },
    /// The INTx line of `device` has no handler to free.
    NoIntxHandler { device: String },
    /// `request_intx` on `device`, borrowed from `lender`: its INTx cannot cross the NTB.
    BorrowedIntx { device: String, lender: String },
    /// MSI-X entry `entry` of `device` at `at` lies outside BAR `bar` (`len` bytes).
    EntryOutsideBar { device: String, entry: u16, at: u64, bar: u8, len: u64 },
    /// `request_irq` for entry `entry` of `device`, which has `entries` MSI-X entries.
    NoEntry { device: String, entries: u16, entry: u16 },
    /// `free_irq` of MSI-X entry `entry` of `device`, which has no interrupt.
    NotRequested { device: String, entry: u16 },
    /// A guest's `free_irq` of MSI-X entry `entry` of guest device handle `dev`, which has none.
    GuestNotRequested { dev: u32, entry: u16 },
    /// A guest's `free_intx` of guest device handle `dev`, which has no INTx handler.
    GuestNoIntx { dev: u32 },
    /// `device` has no MSI-X capability (devlend models neither INTx nor plain MSI on a host).
    NoMsix { device: String },
    /// A guest device `device` without an MSI-X capability.
    GuestNoMsix { device: String },
    /// The BAR `bar` that function `func`'s MSI-X capability names is missing.
    TableBarMissing { func: FuncId, bar: u8 },
    /// MSI-X entry `entry` of `device` cannot be read.
    EntryUnreadable { device: String, entry: u16 },
    /// A guest's store of `len` bytes at offset `at` into `device`'s MSI-X table: not whole dwords.
    TableStore { device: String, at: u64, len: usize },
}

impl fmt::Display for BadIrq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadIrq::VectorNotAllocated { host, vector } => write!(f, "host {host}: vector {vector:#x} is not allocated"),
            BadIrq::NoIntxHandler { device } => write!(f, "the INTx line of {device} has no handler"),
            BadIrq::BorrowedIntx { device, lender: l } => write!(
                f,
                "request_intx: {device} is borrowed from {l}; its legacy INTx is a message to the root complex of {l}'s own PCIe tree and cannot be remapped over the NTB \
                 (000 §4, footnote 2): use MSI-X (request_irq). Only a VM borrower gets INTx, through the lender-side handler (000 §5)"
            ),
            BadIrq::EntryOutsideBar { device, entry, at, bar, len } => {
                write!(f, "{device}: MSI-X entry {entry} at {at:#x} lies outside BAR {bar} ({len:#x} bytes)")
            }
            BadIrq::NoEntry { device, entries, entry } => write!(f, "request_irq: {device} has {entries} MSI-X entries; there is no entry {entry}"),
            BadIrq::NotRequested { device, entry } => {
                write!(f, "free_irq: MSI-X entry {entry} of {device} has no interrupt (never requested, or already freed)")
            }
            BadIrq::GuestNotRequested { dev, entry } => write!(f, "free_irq: MSI-X entry {entry} of guest device {dev} has no interrupt"),
            BadIrq::GuestNoIntx { dev } => write!(f, "free_intx: guest device {dev} has no INTx handler"),
            BadIrq::NoMsix { device } => write!(f, "{device} has no MSI-X capability (devlend does not model INTx or plain MSI)"),
            BadIrq::GuestNoMsix { device } => write!(f, "{device} has no MSI-X capability"),
            BadIrq::TableBarMissing { .. } => f.write_str("MSI-X table BAR missing"),
            BadIrq::EntryUnreadable { device, entry } => write!(f, "{device}: MSI-X entry {entry} cannot be read"),
            BadIrq::TableStore { device, at, len } => {
                write!(f, "{device}: MSI-X table stores must be whole dwords (offset {at:#x}, {len} bytes)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostError;

    /// The messages are the ones the host layer printed when `Invalid` held a `String`.
    #[test]
    fn each_interrupt_call_renders_the_host_layer_s_message() {
        let cases = [
            (BadIrq::VectorNotAllocated { host: "a".into(), vector: 0x21 }, "host a: vector 0x21 is not allocated"),
            (BadIrq::NoIntxHandler { device: "nic0".into() }, "the INTx line of nic0 has no handler"),
            (
                BadIrq::BorrowedIntx { device: "gpu0".into(), lender: "l".into() },
                "request_intx: gpu0 is borrowed from l; its legacy INTx is a message to the root complex of l's own PCIe tree and cannot be remapped over the NTB \
                 (000 §4, footnote 2): use MSI-X (request_irq). Only a VM borrower gets INTx, through the lender-side handler (000 §5)",
            ),
            (BadIrq::EntryOutsideBar { device: "gpu0".into(), entry: 9, at: 0x2090, bar: 0, len: 0x2000 }, "gpu0: MSI-X entry 9 at 0x2090 lies outside BAR 0 (0x2000 bytes)"),
            (BadIrq::NoEntry { device: "gpu0".into(), entries: 1, entry: 1 }, "request_irq: gpu0 has 1 MSI-X entries; there is no entry 1"),
            (BadIrq::NotRequested { device: "gpu0".into(), entry: 0 }, "free_irq: MSI-X entry 0 of gpu0 has no interrupt (never requested, or already freed)"),
            (BadIrq::GuestNotRequested { dev: 2, entry: 0 }, "free_irq: MSI-X entry 0 of guest device 2 has no interrupt"),
            (BadIrq::GuestNoIntx { dev: 2 }, "free_intx: guest device 2 has no INTx handler"),
            (BadIrq::NoMsix { device: "nic0".into() }, "nic0 has no MSI-X capability (devlend does not model INTx or plain MSI)"),
            (BadIrq::GuestNoMsix { device: "nic0".into() }, "nic0 has no MSI-X capability"),
            (BadIrq::TableBarMissing { func: 3, bar: 2 }, "MSI-X table BAR missing"),
            (BadIrq::EntryUnreadable { device: "gpu0".into(), entry: 4 }, "gpu0: MSI-X entry 4 cannot be read"),
            (BadIrq::TableStore { device: "gpu0".into(), at: 0x2, len: 3 }, "gpu0: MSI-X table stores must be whole dwords (offset 0x2, 3 bytes)"),
        ];
        for (call, text) in cases {
            assert_eq!(HostError::from(call).to_string(), text);
        }
    }
}
