//! A BAR of a function's (or its VFs') list that a config space cannot hold: its width, its
//! register index, its size.

use crate::error::fmt_size;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BarFault {
    /// `bits`: a BAR is 32 or 64 bits wide.
    Bits { bits: u8 },
    /// BAR `index` of `bits` bits does not fit registers 0-5 (a 64-bit BAR takes two).
    Index { index: u8, bits: u8 },
    /// BAR `index` takes a register another BAR of the list takes.
    Overlap { index: u8 },
    /// `size` bytes: not a power of two of at least 16 bytes.
    Size { size: u64 },
    /// A 32-bit BAR of `size` bytes, above 2 GiB.
    TooLargeFor32 { size: u64 },
}

impl fmt::Display for BarFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BarFault::Bits { bits } => write!(f, "{bits}: expected 32 or 64"),
            BarFault::Index { index, bits } => write!(f, "BAR index {index} ({bits}-bit): expected 0-5, and a 64-bit BAR also takes the next register"),
            BarFault::Overlap { index } => write!(f, "BAR {index} overlaps another BAR's register"),
            BarFault::Size { size } => write!(f, "BAR size {size:#x}: expected a power of two of at least 16 bytes"),
            BarFault::TooLargeFor32 { size } => write!(f, "a 32-bit BAR cannot be {}; use bits: 64", fmt_size(*size)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SpecFault;

    /// The messages are the ones the loader printed when a `SpecError` held a `String`.
    #[test]
    fn each_bar_fault_renders_the_loader_s_message() {
        let cases = [
            (BarFault::Bits { bits: 16 }, "16: expected 32 or 64"),
            (BarFault::Index { index: 5, bits: 64 }, "BAR index 5 (64-bit): expected 0-5, and a 64-bit BAR also takes the next register"),
            (BarFault::Overlap { index: 1 }, "BAR 1 overlaps another BAR's register"),
            (BarFault::Size { size: 0x18 }, "BAR size 0x18: expected a power of two of at least 16 bytes"),
            (BarFault::TooLargeFor32 { size: 4 << 30 }, "a 32-bit BAR cannot be 4 GiB; use bits: 64"),
        ];
        for (fault, text) in cases {
            assert_eq!(SpecFault::from(fault).to_string(), text);
        }
    }
}
