//! The machine's errors: typed, with the thread, address and component they concern.

use crate::queue::Ps;
use devlend_fabric::report::FailureReport;
use std::fmt;

/// Something a thread's body reports (its own failure, or an access that failed).
#[derive(Debug)]
pub enum ThreadError {
    /// A CPU access failed on the fabric (all-ones read, unsupported request, IOMMU fault...):
    /// `failure` is the fabric's record, with the names of what it refers to (boxed: it is large,
    /// and every access returns this type).
    Access {
        thread: String,
        addr: u64,
        failure: Box<FailureReport>,
    },
    TooLarge {
        thread: String,
        addr: u64,
        len: u64,
    },
    /// The thread's host crashed at `at`: the thread stopped there, issuing nothing more.
    HostCrashed {
        thread: String,
        host: String,
        at: Ps,
    },
    /// The body's own error (a driver's, a benchmark's check).
    Other(Box<dyn std::error::Error>),
}

impl fmt::Display for ThreadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThreadError::Access { thread, addr, failure } => write!(f, "thread {thread}: access at {addr:#x} failed: {failure}"),
            ThreadError::TooLarge { thread, addr, len } => {
                write!(f, "thread {thread}: a CPU access of {len} bytes at {addr:#x} is larger than the machine moves in one call")
            }
            ThreadError::HostCrashed { thread, host, at } => {
                write!(f, "thread {thread}: host {host} crashed at {:.3} us; the thread stopped there", *at as f64 / 1e6)
            }
            ThreadError::Other(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ThreadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ThreadError::Access { failure, .. } => Some(failure.as_ref()),
            _ => None,
        }
    }
}

impl ThreadError {
    pub fn other<E: std::error::Error + 'static>(e: E) -> ThreadError {
        ThreadError::Other(Box::new(e))
    }
}

#[derive(Debug)]
pub enum MachineError {
    /// Nothing is left to happen, and a thread still waits.
    Stuck { thread: String, waiting_for: String, at: Ps },
    /// A thread's body ended with an error.
    Thread { thread: String, error: Box<ThreadError> },
    /// A workload's first access cannot be routed: `failure` is where the fabric refused `addr`.
    Unreachable { workload: String, addr: u64, failure: Box<FailureReport> },
    /// A workload asked for something the machine cannot do.
    Invalid { workload: String, why: Unrunnable },
}

/// What a workload asked of the machine that it cannot do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unrunnable {
    /// A stream of zero bytes.
    ZeroBytes,
    /// A stream to `addr`, the requester's own memory: it crosses no link.
    OwnMemory { addr: u64 },
}

impl fmt::Display for Unrunnable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unrunnable::ZeroBytes => write!(f, "a stream of zero bytes"),
            Unrunnable::OwnMemory { addr } => write!(f, "{addr:#x} is the requester's own memory: the stream crosses no link"),
        }
    }
}

impl fmt::Display for MachineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MachineError::Stuck { thread, waiting_for, at } => {
                write!(f, "nothing left to happen at {:.3} us: thread {thread} waits for {waiting_for}", *at as f64 / 1e6)
            }
            MachineError::Thread { thread, error } => write!(f, "thread {thread} failed: {error}"),
            MachineError::Unreachable { workload, addr, failure } => write!(f, "workload {workload}: {addr:#x} cannot be reached: {failure}"),
            MachineError::Invalid { workload, why } => write!(f, "workload {workload}: {why}"),
        }
    }
}

impl std::error::Error for MachineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MachineError::Thread { error, .. } => Some(error.as_ref()),
            MachineError::Unreachable { failure, .. } => Some(failure.as_ref()),
            _ => None,
        }
    }
}

/// `Machine::into_world` while a device model (or a thread's handle) still holds the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorldHeld;

impl fmt::Display for WorldHeld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a device model still holds the machine's world")
    }
}

impl std::error::Error for WorldHeld {}
