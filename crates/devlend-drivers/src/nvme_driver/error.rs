//! The NVMe driver's errors: typed, with the queue, command and status they concern.

use devlend_host::HostError;
use std::fmt;

#[derive(Debug)]
pub enum NvmeError {
    /// A kernel call failed (`what` names it).
    Os { what: &'static str, error: HostError },
    /// The controller did not set CSTS.RDY after CC.EN.
    NotReady,
    /// An admin command completed with a status other than success.
    Admin { opcode: u8, status: u16 },
    /// An I/O command completed with an NVMe status (§4.6.1.2.1), e.g. 0x80 LBA out of range.
    Status { opcode: u8, lba: u64, status: u16 },
    /// The submission queue has `depth - 1` commands in flight.
    QueueFull { qid: u16 },
    /// A completion entry names a command the queue did not have in flight.
    UnknownCommand { qid: u16, cid: u16 },
    /// A command outlived the I/O timeout (`nvme_timeout`); `csts` is what CSTS read then
    /// (all ones: the controller is gone; bit 1, CFS: it failed fatally).
    Timeout { qid: u16, cid: u16, after_ps: u64, csts: u32 },
    /// What the caller asked cannot be done (zero blocks, a queue that is handed out...).
    Invalid { reason: &'static str },
    /// `queues` I/O queues of `depth` entries: the controller takes 1 to `max_queues` queues of
    /// 2 to `max_entries` entries.
    QueueShape { queues: u16, depth: u32, max_queues: usize, max_entries: u32 },
}

impl fmt::Display for NvmeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NvmeError::Os { what, error } => write!(f, "nvme: {what}: {error}"),
            NvmeError::NotReady => write!(f, "nvme: controller did not become ready (CSTS.RDY = 0)"),
            NvmeError::Admin { opcode, status } => write!(f, "nvme: admin command {opcode:#x} failed with status {status:#x}"),
            NvmeError::Status { opcode, lba, status } => write!(f, "nvme: I/O command {opcode:#x} at LBA {lba} failed with status {status:#x}"),
            NvmeError::QueueFull { qid } => write!(f, "nvme: submission queue {qid} is full"),
            NvmeError::UnknownCommand { qid, cid } => write!(f, "nvme: completion on queue {qid} for command {cid}, which is not in flight"),
            NvmeError::Timeout { qid, cid, after_ps, csts } => {
                let state = match *csts {
                    u32::MAX => "CSTS reads all ones: the controller is gone (removed or unreachable)",
                    c if c & 2 != 0 => "CSTS.CFS is set: controller fatal status",
                    _ => "the controller still answers: the command is aborted",
                };
                write!(f, "nvme: I/O timeout: command {cid} on queue {qid} not completed after {:.3} s; {state} (CSTS {csts:#x})", *after_ps as f64 / 1e12)
            }
            NvmeError::Invalid { reason } => write!(f, "nvme: {reason}"),
            NvmeError::QueueShape { queues, depth, .. } => write!(f, "nvme: {queues} I/O queues of {depth} entries"),
        }
    }
}

impl std::error::Error for NvmeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NvmeError::Os { error, .. } => Some(error),
            _ => None,
        }
    }
}
