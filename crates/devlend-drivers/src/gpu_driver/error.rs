//! The GPU driver's errors: typed, with the kernel call, memory range, copy engine or status
//! they concern.

use devlend_host::HostError;
use std::fmt;

#[derive(Debug)]
pub enum GpuError {
    /// A kernel call of the driver failed (`what` names it).
    Os { what: &'static str, error: HostError },
    /// BAR 0's ID register reads `id`, config space says `config`: no GPU model answers.
    NoModel { id: Vec<u8>, config: u32 },
    /// A copy of zero bytes.
    Empty,
    /// Device memory `off`+`len` runs past the GPU's `mem_size` bytes.
    PastEnd { off: u64, len: u64, mem_size: u64 },
    /// Peer memory `off`+`len` is not inside the peer's BAR 1 of `size` bytes.
    OutsidePeerBar { off: u64, len: u64, size: u64 },
    /// Copy engine `ce` does not exist: the GPU has `engines`.
    NoEngine { ce: usize, engines: usize },
    /// Copy engine `ce` still runs copy `seq`: it takes one copy at a time.
    EngineBusy { ce: usize, seq: u32 },
    /// Xid 79: copy engine `ce`'s copy did not complete within the watchdog period and BAR 0's
    /// ID register reads all ones (`read` None) or cannot be read (`read`: why).
    FellOffBus { ce: usize, watchdog_ps: u64, read: Option<HostError> },
    /// The copy engine stopped on a DMA fault at bus address `addr`.
    DmaFault { addr: u64 },
    /// Copy engine `ce`'s copy failed: a read came back as a poisoned completion (its error
    /// notifier says so; CUDA reports an uncorrectable error on the copy).
    Poisoned { ce: usize },
    /// The copy engine refused a range outside device memory.
    OutOfRange,
    /// The copy engine refused the command (direction or length).
    Refused,
    /// Copy engine `ce` released nothing and is still busy.
    StillBusy { ce: usize },
    /// Copy `seq` never completed; the engine's status register reads `status`.
    NeverCompleted { seq: u32, status: u32 },
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gpu: ")?;
        match self {
            GpuError::Os { what, error } => write!(f, "{what}: {error}"),
            GpuError::NoModel { id, config } => write!(f, "BAR 0 ID register reads {id:02x?}, config space says {config:#010x}: no GPU model answers"),
            GpuError::Empty => write!(f, "a copy of zero bytes"),
            GpuError::PastEnd { off, len, mem_size } => write!(f, "device memory {off:#x}+{len:#x} is past the end of the GPU's {mem_size:#x} bytes"),
            GpuError::OutsidePeerBar { off, len, size } => write!(f, "peer memory {off:#x}+{len:#x} is not inside the peer's {size:#x}-byte BAR 1"),
            GpuError::NoEngine { ce, engines } => write!(f, "copy engine {ce}: the GPU has {engines}"),
            GpuError::EngineBusy { ce, seq } => write!(f, "copy engine {ce} still runs copy {seq}: sync it before starting another on that engine"),
            GpuError::FellOffBus { ce, watchdog_ps, read } => {
                let s = *watchdog_ps as f64 / 1e12;
                write!(
                    f,
                    "GPU has fallen off the bus (Xid 79): copy engine {ce}'s copy did not complete within {s:.3} s and BAR 0's ID register cannot be read: "
                )?;
                match read {
                    Some(e) => write!(f, "{e}"),
                    None => write!(f, "it reads all ones"),
                }
            }
            GpuError::DmaFault { addr } => {
                write!(f, "copy engine DMA fault at bus address {addr:#x}: not mapped for the GPU, or the GPU may not master the bus")
            }
            GpuError::Poisoned { ce } => {
                write!(f, "copy engine {ce}'s copy failed: a DMA read came back as a poisoned completion (EP), its data discarded and reported through AER")
            }
            GpuError::OutOfRange => write!(f, "copy engine refused a range outside device memory"),
            GpuError::Refused => write!(f, "copy engine refused the command (direction or length)"),
            GpuError::StillBusy { ce } => write!(f, "copy engine {ce} was still busy"),
            GpuError::NeverCompleted { seq, status } => write!(f, "copy {seq} never completed (status {status})"),
        }
    }
}

impl std::error::Error for GpuError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GpuError::Os { error, .. } => Some(error),
            GpuError::FellOffBus { read: Some(e), .. } => Some(e),
            _ => None,
        }
    }
}
