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
            ThreadError::Access { thread, addr, failure } => write!(f, "thread {thread}: {}", Part::Access(*addr, failure)),
            ThreadError::TooLarge { thread, addr, len } => write!(f, "thread {thread}: {}", Part::TooLarge(*addr, *len)),
            ThreadError::HostCrashed { thread, host, at } => write!(f, "thread {thread}: {}", Part::HostCrashed(host, *at)),
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

/// How a thread of a run failed for one of the engine's own reasons (not its body's own error, not
/// a workload's), as a value a layer above can keep in its own error: taken from a [`MachineError`]
/// by [`MachineError::into_run_failure`]. It displays as the part of the engine's message after
/// the thread's name, except `Stuck`, which each layer words itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunFailure {
    /// A CPU access at `addr` failed on the fabric: `route` says where.
    Access { addr: u64, route: Box<FailureReport> },
    /// A CPU access of `len` bytes at `addr`, larger than the machine moves in one call.
    TooLarge { addr: u64, len: u64 },
    /// The thread's host `host` crashed at `at`: the thread stopped there.
    HostCrashed { host: String, at: Ps },
    /// Nothing was left to happen at `at` while the thread waited for `waiting_for`.
    Stuck { waiting_for: String, at: Ps },
}

/// The words of a thread's failure after its name, shared by [`ThreadError`] and [`RunFailure`].
enum Part<'a> {
    Access(u64, &'a FailureReport),
    TooLarge(u64, u64),
    HostCrashed(&'a str, Ps),
}

impl fmt::Display for Part<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Access(addr, failure) => write!(f, "access at {addr:#x} failed: {failure}"),
            Part::TooLarge(addr, len) => write!(f, "a CPU access of {len} bytes at {addr:#x} is larger than the machine moves in one call"),
            Part::HostCrashed(host, at) => write!(f, "host {host} crashed at {:.3} us; the thread stopped there", *at as f64 / 1e6),
        }
    }
}

impl fmt::Display for RunFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunFailure::Access { addr, route } => Part::Access(*addr, route).fmt(f),
            RunFailure::TooLarge { addr, len } => Part::TooLarge(*addr, *len).fmt(f),
            RunFailure::HostCrashed { host, at } => Part::HostCrashed(host, *at).fmt(f),
            RunFailure::Stuck { waiting_for, at } => write!(f, "nothing left to happen at {:.3} us, waiting for {waiting_for}", *at as f64 / 1e6),
        }
    }
}

impl std::error::Error for RunFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunFailure::Access { route, .. } => Some(route.as_ref()),
            _ => None,
        }
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

impl MachineError {
    /// The thread and how it failed, where the engine's own reasons ended the run; `Err(self)` for
    /// a thread body's own error (`ThreadError::Other`) and a workload's.
    pub fn into_run_failure(self) -> Result<(String, RunFailure), MachineError> {
        match self {
            MachineError::Stuck { thread, waiting_for, at } => Ok((thread, RunFailure::Stuck { waiting_for, at })),
            MachineError::Thread { thread, error } => match *error {
                ThreadError::Access { addr, failure, .. } => Ok((thread, RunFailure::Access { addr, route: failure })),
                ThreadError::TooLarge { addr, len, .. } => Ok((thread, RunFailure::TooLarge { addr, len })),
                ThreadError::HostCrashed { host, at, .. } => Ok((thread, RunFailure::HostCrashed { host, at })),
                error @ ThreadError::Other(_) => Err(MachineError::Thread { thread, error: Box::new(error) }),
            },
            e @ (MachineError::Unreachable { .. } | MachineError::Invalid { .. }) => Err(e),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_engines_own_reasons_become_a_run_failure() {
        let crashed = ThreadError::HostCrashed { thread: "t".into(), host: "h".into(), at: 3_000_000 };
        let e = MachineError::Thread { thread: "t".into(), error: Box::new(crashed) };
        let text = e.to_string();
        let (thread, failure) = e.into_run_failure().unwrap();
        assert_eq!(format!("thread {thread} failed: thread {thread}: {failure}"), text);
        assert_eq!(failure, RunFailure::HostCrashed { host: "h".into(), at: 3_000_000 });
        let own = MachineError::Thread { thread: "t".into(), error: Box::new(ThreadError::other(WorldHeld)) };
        assert!(matches!(own.into_run_failure(), Err(MachineError::Thread { error, .. }) if matches!(*error, ThreadError::Other(_))));
        let invalid = MachineError::Invalid { workload: "w".into(), why: Unrunnable::ZeroBytes };
        assert!(matches!(invalid.into_run_failure(), Err(MachineError::Invalid { .. })));
    }
}
