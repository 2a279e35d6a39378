//! Errors of the RDMA library: every bad input of issue 6 is one of these, never a panic.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RdmaError {
    /// The peer has not published a buffer, or the address is outside the one it published.
    NotPublished {
        addr: u64,
        len: u64,
        published: Option<(u64, u64)>,
    },
    /// The access runs past the peer's window (its published buffer or the NTB BAR, the smaller).
    ExceedsWindow {
        offset: u64,
        len: u64,
        window: u64,
    },
    /// A descriptor points outside registered memory (local buffer or the peer's window).
    OutsideRegistered {
        descriptor: usize,
        addr: u64,
        len: u64,
    },
    /// The NTB link is down: no doorbell, scratchpad or window reaches the peer.
    LinkDown(String),
    /// The DMA channel stopped with an error status; `bytes_done` landed before it stopped.
    Dma {
        descriptor: usize,
        bytes_done: u64,
        message: String,
    },
    /// A CPU access failed on the fabric (recorded there as an event).
    Fabric(String),
    NoDmaEngine(String),
    /// A DMA engine asked for with `channels` channels, where the engine has 1 to `max`.
    DmaChannels {
        channels: u32,
        max: u32,
    },
    /// A DMA channel asked to keep no read in flight.
    NoOutstandingReads,
    Invalid(String),
}

impl fmt::Display for RdmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RdmaError::NotPublished { addr, len, published: None } => write!(f, "address {addr:#x}+{len:#x}: the peer has not published a buffer"),
            RdmaError::NotPublished { addr, len, published: Some((a, s)) } => {
                write!(f, "address {addr:#x}+{len:#x} is outside the buffer the peer published ({a:#x}+{s:#x})")
            }
            RdmaError::ExceedsWindow { offset, len, window } => write!(f, "{len} bytes at offset {offset:#x} run past the peer's window of {window} bytes"),
            RdmaError::OutsideRegistered { descriptor, addr, len } => {
                write!(f, "descriptor {descriptor} ({addr:#x}+{len:#x}) points outside registered memory")
            }
            RdmaError::LinkDown(m) => write!(f, "NTB link is down: {m}"),
            RdmaError::Dma { descriptor, bytes_done, message } => write!(f, "DMA channel error at descriptor {descriptor} after {bytes_done} bytes: {message}"),
            RdmaError::DmaChannels { channels, max } => write!(f, "{channels} DMA channels: the engine has 1 to {max}"),
            RdmaError::NoOutstandingReads => write!(f, "outstanding_reads must be at least 1"),
            RdmaError::Fabric(m) | RdmaError::NoDmaEngine(m) | RdmaError::Invalid(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for RdmaError {}

pub type RResult<T> = Result<T, RdmaError>;
