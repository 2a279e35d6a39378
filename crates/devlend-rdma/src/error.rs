//! Errors of the RDMA library and of the tools built on it (devlend-experiments' Figs 8-9 sweep,
//! ntb_perf and ntb_pingpong): every bad input of issue 6 is one of these, never a panic. Each
//! carries its context as values (names, addresses, sizes, the value given and what is accepted);
//! a failure of the fabric below is kept as the fabric's own value ([`FabricError`], [`SpecError`],
//! [`FailureReport`]) and is the error's `source`.

use devlend_devices::error::ModelError;
pub use devlend_engine::machine::RunFailure;
use devlend_fabric::report::FailureReport;
use devlend_fabric::{FabricError, SpecError};
use std::fmt;

mod tool;
pub use tool::ToolError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RdmaError {
    /// The peer has not published a buffer, or the address is outside the one it published.
    NotPublished { addr: u64, len: u64, published: Option<(u64, u64)> },
    /// The access runs past the peer's window (its published buffer or the NTB BAR, the smaller).
    ExceedsWindow { offset: u64, len: u64, window: u64 },
    /// A descriptor points outside registered memory (local buffer or the peer's window).
    OutsideRegistered { descriptor: usize, addr: u64, len: u64 },
    /// `len` bytes at `offset` of this host's own buffer of `size` bytes run past its end.
    ExceedsBuffer { offset: u64, len: u64, size: u64 },
    /// The link of NT adapter `ntb` is down: no doorbell, scratchpad or window reaches the peer.
    /// `cabled` false: it has no peer at all; true: its link is disabled (`ntb_link_disable`).
    /// `ping`: the ntb_pingpong ping it stopped.
    LinkDown { ntb: String, cabled: bool, ping: Option<usize> },
    /// The DMA channel stopped with an error status; `bytes_done` landed before it stopped.
    Dma { descriptor: usize, bytes_done: u64, stop: DmaStop },
    /// A call into the fabric failed (an unknown name, a window it refuses).
    Fabric(FabricError),
    /// The topology description does not build.
    Topology(SpecError),
    /// `addr` cannot be reached: `failure` is where the fabric refused it.
    Route { addr: u64, failure: Box<FailureReport> },
    /// A thread of the run on the machine failed, or waited for what never came.
    Run { thread: String, failure: RunFailure },
    /// Operation `operation` of a run never ended.
    NeverEnded { operation: usize },
    /// Host `host` has no DMA channel attached.
    NoDmaEngine { host: u16 },
    /// More transfer queues than the engine has channels.
    TooManyQueues { queues: usize, channels: usize },
    /// A scatter-gather list longer than a channel's slice of the descriptor ring holds (`fit`).
    RingFull { descriptors: usize, fit: u64 },
    /// A block-mode transfer given other than one descriptor.
    BlockDescriptors { descriptors: usize },
    /// Function `function` is not in host `host`, which drives it.
    NotInHost { function: String, host: u16 },
    /// Function `function` has no BAR `bar`.
    NoBar { function: String, bar: u8 },
    /// Host `host` has no RAM at `offset` of its RAM for the `what` (buffer, descriptor ring).
    NoRam { host: String, offset: u64, what: &'static str },
    /// `size` bytes at `offset` of host `host`'s RAM are not one contiguous region.
    NotContiguous { host: String, offset: u64, size: u64 },
    /// A check of one of the tools built on the library.
    Tool(ToolError),
    /// The DMA engine or NT registers refused (`devlend-devices`' PLX models): a channel count
    /// outside the engine's, no read in flight, no control BAR.
    Model(ModelError),
}

/// Why a DMA channel stopped, as far as its caller has looked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DmaStop {
    /// Only the channel's status register has been read.
    Status,
    /// The channel found the descriptor invalid.
    InvalidDescriptor,
    /// A TLP of the transfer was refused on the fabric.
    Route(Box<FailureReport>),
}

impl From<FabricError> for RdmaError {
    /// A link that is down stays a link that is down; any other refusal is the fabric's.
    fn from(e: FabricError) -> RdmaError {
        match e {
            FabricError::LinkDown { ntb, cabled } => RdmaError::LinkDown { ntb, cabled, ping: None },
            e => RdmaError::Fabric(e),
        }
    }
}

impl From<ModelError> for RdmaError {
    /// An NT adapter without a peer is a link that is down, a fabric's refusal is the fabric's
    /// (as if the library had called it); any other refusal is the model's.
    fn from(e: ModelError) -> RdmaError {
        match e {
            ModelError::NoPeer { ntb } => RdmaError::LinkDown { ntb, cabled: false, ping: None },
            ModelError::Fabric(e) => RdmaError::from(e),
            e => RdmaError::Model(e),
        }
    }
}

impl From<ToolError> for RdmaError {
    fn from(e: ToolError) -> RdmaError {
        RdmaError::Tool(e)
    }
}

impl From<SpecError> for RdmaError {
    fn from(e: SpecError) -> RdmaError {
        RdmaError::Topology(e)
    }
}

impl fmt::Display for RdmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use RdmaError::*;
        match self {
            NotPublished { addr, len, published: None } => write!(f, "address {addr:#x}+{len:#x}: the peer has not published a buffer"),
            NotPublished { addr, len, published: Some((a, s)) } => {
                write!(f, "address {addr:#x}+{len:#x} is outside the buffer the peer published ({a:#x}+{s:#x})")
            }
            ExceedsWindow { offset, len, window } => write!(f, "{len} bytes at offset {offset:#x} run past the peer's window of {window} bytes"),
            OutsideRegistered { descriptor, addr, len } => write!(f, "descriptor {descriptor} ({addr:#x}+{len:#x}) points outside registered memory"),
            ExceedsBuffer { offset, len, size } => write!(f, "{len} bytes at offset {offset:#x} run past the local buffer of {size} bytes"),
            LinkDown { ntb, cabled, ping } => link_down(f, ntb, *cabled, *ping),
            Dma { descriptor, bytes_done, stop } => {
                write!(f, "DMA channel error at descriptor {descriptor} after {bytes_done} bytes")?;
                match stop {
                    DmaStop::Status => Ok(()),
                    DmaStop::InvalidDescriptor => write!(f, ": invalid descriptor"),
                    DmaStop::Route(r) => write!(f, ": {r}"),
                }
            }
            Fabric(e) => write!(f, "{e}"),
            Topology(e) => write!(f, "{e}"),
            Route { addr, failure } => write!(f, "{addr:#x} cannot be reached: {failure}"),
            Run { thread, failure } => run_failure(f, thread, failure),
            NeverEnded { operation } => write!(f, "operation {operation} never ended"),
            NoDmaEngine { host } => write!(f, "host {host} has no DMA channel attached"),
            TooManyQueues { queues, channels } => write!(f, "{queues} transfer queues for {channels} DMA channel(s): each channel runs one queue"),
            RingFull { descriptors, fit } => write!(f, "{descriptors} descriptors do not fit the descriptor ring ({fit} per channel)"),
            BlockDescriptors { descriptors } => write!(f, "block mode takes exactly one descriptor, not {descriptors}"),
            NotInHost { function, .. } => write!(f, "{function} is not in this host"),
            NoBar { function, bar } => write!(f, "{function} has no BAR {bar}"),
            NoRam { host, offset, what } => write!(f, "host {host} has no RAM at offset {offset:#x} for the {what}"),
            NotContiguous { host, offset, size } => write!(f, "buffer of {size} bytes at RAM offset {offset:#x} is not contiguous in host {host}"),
            Tool(e) => write!(f, "{e}"),
            Model(e) => write!(f, "{e}"),
        }
    }
}

fn link_down(f: &mut fmt::Formatter<'_>, ntb: &str, cabled: bool, ping: Option<usize>) -> fmt::Result {
    write!(f, "NTB link is down: ")?;
    if let Some(i) = ping {
        write!(f, "ping {i}: ")?;
    }
    if cabled {
        write!(f, "{ntb}: the link is disabled (ntb_link_disable): nothing reaches the other host")
    } else {
        write!(f, "{ntb} has no peer: nothing reaches the other host")
    }
}

fn run_failure(f: &mut fmt::Formatter<'_>, thread: &str, failure: &RunFailure) -> fmt::Result {
    match failure {
        RunFailure::Stuck { waiting_for, .. } => write!(f, "thread {thread} never ended: it waits for {waiting_for}"),
        failure => write!(f, "thread {thread}: {failure}"),
    }
}

impl std::error::Error for RdmaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RdmaError::Fabric(e) => Some(e),
            RdmaError::Topology(e) => Some(e),
            RdmaError::Route { failure, .. } => Some(failure.as_ref()),
            RdmaError::Dma { stop: DmaStop::Route(r), .. } => Some(r.as_ref()),
            RdmaError::Run { failure, .. } => Some(failure),
            RdmaError::Model(e) => Some(e),
            _ => None,
        }
    }
}

pub type RResult<T> = Result<T, RdmaError>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn a_fabric_link_down_stays_a_link_down_and_other_refusals_are_the_fabric_s_source() {
        let down = RdmaError::from(FabricError::LinkDown { ntb: "nt-link".into(), cabled: false });
        assert_eq!(down, RdmaError::LinkDown { ntb: "nt-link".into(), cabled: false, ping: None });
        assert_eq!(down.to_string(), "NTB link is down: nt-link has no peer: nothing reaches the other host");
        let ping = RdmaError::LinkDown { ntb: "nt-link".into(), cabled: true, ping: Some(3) };
        assert_eq!(ping.to_string(), "NTB link is down: ping 3: nt-link: the link is disabled (ntb_link_disable): nothing reaches the other host");
        let unknown = FabricError::from(devlend_fabric::Unknown::Function { name: "x".into() });
        let e = RdmaError::from(unknown.clone());
        assert_eq!(e, RdmaError::Fabric(unknown.clone()));
        assert_eq!(e.source().map(|s| s.to_string()), Some(unknown.to_string()));
        assert!(down.source().is_none());
        let nopeer = RdmaError::from(ModelError::NoPeer { ntb: "nt-link".into() });
        assert_eq!(nopeer.to_string(), down.to_string(), "the NT registers' 'no peer' reads as the link down it is");
        let channels = RdmaError::from(ModelError::DmaChannels { channels: 9, max: 4 });
        assert_eq!(channels.to_string(), "9 DMA channels: the engine has 1 to 4");
        assert!(channels.source().is_some());
    }
}
