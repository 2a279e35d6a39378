//! An NTB memory window, or the DMA window opened in one, that cannot hold what was asked
//! ([`super::HostError::WindowTooSmall`]): the NTB, the sizes and the windows' use as values,
//! rendered to the host layer's messages.

use super::{size, HostError};
use std::fmt;

/// Why no NTB window (or DMA window) can hold what was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoRoom {
    /// `what` needs `need` bytes, more than `largest`, the largest memory window of NTB `ntb`.
    TooLarge { what: String, need: u64, ntb: String, largest: u64 },
    /// No memory window of NTB `ntb` is free and large enough for `what`'s `need` bytes;
    /// `windows`: each window's size and use.
    AllTaken { what: String, need: u64, ntb: String, windows: Box<[MwUse]> },
    /// The DMA window of NTB `ntb` is open with `open` bytes; devices use it, so it cannot grow
    /// to `asked`.
    CannotGrow { ntb: String, open: u64, asked: u64 },
    /// The DMA window of NTB `ntb` into NTB `into` has `used` of its `total` bytes in use and
    /// no room for `len` more.
    DmaWindowFull { ntb: String, into: String, len: u64, used: u64, total: u64 },
    /// VM `vm`'s `ram` bytes of memory cannot all be mapped for a device: `cause`.
    VmMemory { vm: String, ram: u64, cause: Box<HostError> },
}

/// One NTB memory window: its size, its LUT segments (0: a direct window) and its use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MwUse {
    pub size: u64,
    pub segments: u32,
    pub state: MwState,
}

/// What a memory window is used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwState {
    Free,
    /// Programmed as one translation.
    Whole,
    /// Split in LUT segments, `free` of them unused.
    Segments {
        free: u64,
    },
}

impl fmt::Display for MwUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", size(self.size))?;
        if self.segments > 0 {
            write!(f, " in {} segments", self.segments)?;
        }
        match self.state {
            MwState::Free => f.write_str(", free"),
            MwState::Whole => f.write_str(", in use"),
            MwState::Segments { free } => write!(f, ", {free} segments free"),
        }
    }
}

impl fmt::Display for NoRoom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoRoom::TooLarge { what, need, ntb, largest } => {
                write!(f, "{what} of {} is larger than the NTB can map: the largest memory window of {ntb} is {}", size(*need), size(*largest))
            }
            NoRoom::AllTaken { what, need, ntb, windows } => {
                write!(f, "{what} of {}: no free memory window of {ntb} is large enough (", size(*need))?;
                for (i, w) in windows.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "; " };
                    write!(f, "{sep}window {i}: {w}")?;
                }
                f.write_str(")")
            }
            NoRoom::CannotGrow { ntb, open, asked } => {
                write!(f, "the DMA window of {ntb} is already open with {}; it cannot grow to {} while devices use it", size(*open), size(*asked))
            }
            NoRoom::DmaWindowFull { ntb, into, len, used, total } => {
                write!(f, "the DMA window of {ntb} into {into} cannot map {} more: {} of its {} are in use", size(*len), size(*used), size(*total))
            }
            NoRoom::VmMemory { vm, ram, cause } => {
                write!(f, "VM {vm}'s {} of memory (probed from its low and high addresses) cannot all be mapped for the device: {cause}", size(*ram))
            }
        }
    }
}

impl From<NoRoom> for HostError {
    fn from(e: NoRoom) -> Self {
        HostError::WindowTooSmall(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages are the ones the host layer printed when `WindowTooSmall` held a `String`.
    #[test]
    fn each_refusal_renders_the_host_layer_s_message() {
        let windows = [
            MwUse { size: 512 << 20, segments: 64, state: MwState::Segments { free: 26 } },
            MwUse { size: 512 << 20, segments: 0, state: MwState::Whole },
            MwUse { size: 1 << 20, segments: 0, state: MwState::Free },
        ];
        let full = NoRoom::DmaWindowFull { ntb: "ntb-a".into(), into: "ntb-b".into(), len: 64 << 10, used: 48 << 10, total: 64 << 10 };
        let cases = [
            (
                NoRoom::TooLarge { what: "a DMA window".into(), need: 1 << 30, ntb: "ntb-a".into(), largest: 512 << 20 },
                "a DMA window of 1 GiB is larger than the NTB can map: the largest memory window of ntb-a is 512 MiB".to_string(),
            ),
            (
                NoRoom::AllTaken { what: "gpu0's BAR 1".into(), need: 256 << 20, ntb: "ntb-a".into(), windows: windows.into() },
                "gpu0's BAR 1 of 256 MiB: no free memory window of ntb-a is large enough (window 0: 512 MiB in 64 segments, 26 segments free; \
                 window 1: 512 MiB, in use; window 2: 1 MiB, free)"
                    .to_string(),
            ),
            (
                NoRoom::CannotGrow { ntb: "ntb-a".into(), open: 1 << 20, asked: 2 << 20 },
                "the DMA window of ntb-a is already open with 1 MiB; it cannot grow to 2 MiB while devices use it".to_string(),
            ),
            (full.clone(), "the DMA window of ntb-a into ntb-b cannot map 64 KiB more: 48 KiB of its 64 KiB are in use".to_string()),
            (
                NoRoom::VmMemory { vm: "g".into(), ram: 4 << 20, cause: Box::new(full.clone().into()) },
                format!("VM g's 4 MiB of memory (probed from its low and high addresses) cannot all be mapped for the device: {full}"),
            ),
        ];
        for (refusal, text) in cases {
            assert_eq!(HostError::from(refusal).to_string(), text);
        }
    }
}
