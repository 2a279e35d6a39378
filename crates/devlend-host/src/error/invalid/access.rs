//! CPU and memory accesses that make no sense, and kernel allocation calls on what was never
//! allocated.

use crate::os::MAX_CPU_ACCESS;
use devlend_engine::machine::RunFailure;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadAccess {
    /// A driver polls `len` bytes at `addr`, which are not one piece of RAM.
    PollNotRam { addr: u64, len: usize },
    /// The machine refused thread `thread`'s CPU access before it reached the fabric (more bytes
    /// than one call moves), or its host crashed: `failure` (never an access the fabric failed,
    /// which is a `HostError::Fault`).
    Thread { thread: String, failure: RunFailure },
    /// A thread's body's own error: only its message is kept, as the engine's error is a trait
    /// object (a CPU access of a thread never returns one).
    ThreadBody { message: String },
    /// `addr`+`size` overflows the address space.
    RangeOverflow { addr: u64, size: u64 },
    /// A CPU access of `len` bytes at `addr`, more than one access moves (`MAX_CPU_ACCESS`).
    CpuTooLong { addr: u64, len: usize },
    /// A CPU access of `len` bytes at `addr` runs past the end of the address space.
    CpuWraps { addr: u64, len: usize },
    /// Host `host`'s kfree of `phys`, which is not the start of an allocation.
    Kfree { host: String, phys: u64 },
    /// A guest kernel's kfree of `phys`, which is not the start of an allocation.
    GuestKfree { phys: u64 },
}

impl fmt::Display for BadAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadAccess::PollNotRam { addr, len } => write!(f, "poll of {len} bytes at {addr:#x}: not one piece of RAM"),
            BadAccess::Thread { thread, failure } => write!(f, "thread {thread}: {failure}"),
            BadAccess::ThreadBody { message } => f.write_str(message),
            BadAccess::RangeOverflow { addr, size } => write!(f, "range {addr:#x}+{size:#x} overflows"),
            BadAccess::CpuTooLong { addr, len } => {
                write!(f, "a CPU access of {len} bytes at {addr:#x}: at most {MAX_CPU_ACCESS} bytes at a time")
            }
            BadAccess::CpuWraps { addr, len } => write!(f, "a CPU access of {len} bytes at {addr:#x} runs past the end of the address space"),
            BadAccess::Kfree { host, phys } => write!(f, "host {host}: kfree of {phys:#x}, which is not the start of an allocation"),
            BadAccess::GuestKfree { phys } => write!(f, "guest kfree of {phys:#x}, which is not the start of an allocation"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostError;
    use devlend_engine::machine::ThreadError;

    /// The messages are the ones the host layer printed when `Invalid` held a `String`; a
    /// thread's refusal the engine's own `ThreadError` text.
    #[test]
    fn each_access_renders_the_host_layer_s_message() {
        let large = ThreadError::TooLarge { thread: "t".into(), addr: 0x1000, len: 1 << 31 };
        let crashed = ThreadError::HostCrashed { thread: "t".into(), host: "h".into(), at: 3_000_000 };
        let cases = [
            (BadAccess::PollNotRam { addr: 0x1000, len: 8 }, "poll of 8 bytes at 0x1000: not one piece of RAM".to_string()),
            (BadAccess::Thread { thread: "t".into(), failure: RunFailure::TooLarge { addr: 0x1000, len: 1 << 31 } }, large.to_string()),
            (BadAccess::Thread { thread: "t".into(), failure: RunFailure::HostCrashed { host: "h".into(), at: 3_000_000 } }, crashed.to_string()),
            (BadAccess::ThreadBody { message: "body failed".into() }, "body failed".into()),
            (BadAccess::RangeOverflow { addr: u64::MAX, size: 0x10 }, "range 0xffffffffffffffff+0x10 overflows".into()),
            (BadAccess::CpuTooLong { addr: 0x10, len: 1 << 31 }, "a CPU access of 2147483648 bytes at 0x10: at most 1073741824 bytes at a time".into()),
            (BadAccess::CpuWraps { addr: u64::MAX, len: 2 }, "a CPU access of 2 bytes at 0xffffffffffffffff runs past the end of the address space".into()),
            (BadAccess::Kfree { host: "a".into(), phys: 0x2000 }, "host a: kfree of 0x2000, which is not the start of an allocation".into()),
            (BadAccess::GuestKfree { phys: 0x2000 }, "guest kfree of 0x2000, which is not the start of an allocation".into()),
        ];
        assert_eq!(large.to_string(), "thread t: a CPU access of 2147483648 bytes at 0x1000 is larger than the machine moves in one call");
        for (access, text) in cases {
            assert_eq!(HostError::from(access).to_string(), text);
        }
    }
}
