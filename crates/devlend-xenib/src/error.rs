//! Errors of the Xen-IB testbed and its benchmarks, as values with context (the model is
//! devlend-rdma's `RdmaError`): what was being built or run, and what refused it. A verb's own
//! return code stays the errno-style [`Status`] the Gen2 verbs return; a benchmark that meets
//! one reports it as [`XenIbError::Verb`] with the configuration and the step.

use crate::types::{Status, Wc};
pub use devlend_engine::machine::RunFailure;
use devlend_fabric::error::{FabricError, SpecError};
use devlend_fabric::report::FailureReport;
use devlend_host::HostError;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XenIbError {
    /// The testbed description does not build.
    Topology(SpecError),
    /// Something the testbed needs is not on the fabric (`what`: an HCA, a host's CPU, the UAR BAR).
    Fabric { what: String, error: FabricError },
    /// The host software that programs the fabric (a VM, a lend) refused a step.
    Host { what: &'static str, error: HostError },
    /// A route the HCA uses cannot be timed: `failure` is where the fabric refused `addr`, with
    /// the names of what it refers to (boxed: it is large).
    Route { what: &'static str, addr: u64, failure: Box<FailureReport> },
    /// Guest domains were asked for with native Linux on server A.
    GuestsNeedXen { guests: usize },
    /// A host's RAM has no room for another domain at the fixed slots.
    RamTooSmall { host: String, domain: String },
    /// Guest-physical memory of a VM that no host memory backs.
    Unbacked { gpa: u64 },
    /// A lend that gives the borrower no HCR BAR (BAR 0) or no UAR BAR (BAR 2) of the HCA.
    NoUarBar { device: String },
    /// A domain the configuration needs does not exist.
    NoDomain { name: String },
    /// A configuration, mode or access path name that is not one of `expected`.
    UnknownName { kind: &'static str, name: String, expected: String },
    /// A message size outside 1 byte to 16 MiB.
    BadSize { size: u64 },
    /// A count (iterations, depth, pages, repetitions) that must be at least 1.
    ZeroCount { what: &'static str },
    /// A verb returned an error: which configuration, which step of the benchmark, and its status.
    Verb { config: String, step: &'static str, status: Status },
    /// A work request completed with an error status.
    Completion { config: String, wc: Wc },
    /// The run on the engine failed: thread `thread` ended it for `failure`, one of the engine's
    /// own reasons (a thread waiting for what never comes, an access the fabric refused...).
    Run { config: String, thread: String, failure: RunFailure },
    /// The `thread` thread (the benchmark's, the set-up) ended without handing back its result.
    NotEnded { config: String, thread: &'static str },
}

impl fmt::Display for XenIbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XenIbError::Topology(e) => write!(f, "the testbed does not build: {e}"),
            XenIbError::Fabric { what, error } => write!(f, "{what}: {error}"),
            XenIbError::Host { what, error } => write!(f, "{what}: {error}"),
            XenIbError::Route { what, addr, failure } => write!(f, "{what}: {addr:#x} cannot be reached: {failure}"),
            XenIbError::GuestsNeedXen { guests } => write!(f, "{guests} guest domain(s) need Xen on server A"),
            XenIbError::RamTooSmall { host, domain } => write!(f, "{host}: RAM too small for domain {domain}"),
            XenIbError::Unbacked { gpa } => write!(f, "guest-physical {gpa:#x} has no backing"),
            XenIbError::NoUarBar { device } => write!(f, "the lend of {device} lacks its HCR or UAR BAR (BAR 0, BAR 2)"),
            XenIbError::NoDomain { name } => write!(f, "no domain {name}"),
            XenIbError::UnknownName { kind, name, expected } => write!(f, "{kind} '{name}': expected {expected}"),
            XenIbError::BadSize { size } => write!(f, "message size {size}: expected 1 byte to 16 MiB"),
            XenIbError::ZeroCount { what } => write!(f, "{what} must be at least 1"),
            XenIbError::Verb { config, step, status } => write!(f, "{config}: {step} failed: {status}"),
            XenIbError::Completion { config, wc } => write!(f, "{config}: work request {} completed with {:?}", wc.wr_id, wc.status),
            XenIbError::Run { config, thread, failure: RunFailure::Stuck { waiting_for, at } } => {
                write!(f, "{config}: nothing left to happen at {:.3} us: thread {thread} waits for {waiting_for}", *at as f64 / 1e6)
            }
            XenIbError::Run { config, thread, failure } => write!(f, "{config}: thread {thread} failed: thread {thread}: {failure}"),
            XenIbError::NotEnded { config, thread } => write!(f, "{config}: the {thread} thread did not end"),
        }
    }
}

impl std::error::Error for XenIbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            XenIbError::Route { failure, .. } => Some(failure.as_ref()),
            XenIbError::Run { failure, .. } => Some(failure),
            _ => None,
        }
    }
}

impl XenIbError {
    /// A short name of the variant, for bindings that hand the kind on (Python's `XenIbError.kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            XenIbError::Topology(_) => "topology",
            XenIbError::Fabric { .. } => "fabric",
            XenIbError::Host { .. } => "host",
            XenIbError::Route { .. } => "route",
            XenIbError::GuestsNeedXen { .. } => "guests_need_xen",
            XenIbError::RamTooSmall { .. } => "ram_too_small",
            XenIbError::Unbacked { .. } => "unbacked",
            XenIbError::NoUarBar { .. } => "no_uar_bar",
            XenIbError::NoDomain { .. } => "no_domain",
            XenIbError::UnknownName { .. } => "unknown_name",
            XenIbError::BadSize { .. } => "bad_size",
            XenIbError::ZeroCount { .. } => "zero_count",
            XenIbError::Verb { .. } => "verb",
            XenIbError::Completion { .. } => "completion",
            XenIbError::Run { .. } | XenIbError::NotEnded { .. } => "run",
        }
    }

    /// The errno-style status of a failed verb, if this is one.
    pub fn status(&self) -> Option<Status> {
        match self {
            XenIbError::Verb { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// `kind 'name': expected one of a, b, c`.
    pub fn unknown(kind: &'static str, name: &str, expected: &[&str]) -> XenIbError {
        XenIbError::UnknownName { kind, name: name.into(), expected: format!("one of {}", expected.join(", ")) }
    }

    /// A map from a verb's status to this error, for `map_err` in a benchmark's `step`.
    pub fn verb<'a>(config: &'a str, step: &'static str) -> impl Fn(Status) -> XenIbError + 'a {
        move |status| XenIbError::Verb { config: config.into(), step, status }
    }
}

pub type XResult<T> = Result<T, XenIbError>;

#[cfg(test)]
mod tests {
    use super::*;
    use devlend_engine::machine::{MachineError, ThreadError};
    use devlend_fabric::route::Failure;

    #[test]
    fn a_run_failure_reads_as_the_engine_error_it_was_taken_from() {
        let thread = |error| MachineError::Thread { thread: "bench".into(), error: Box::new(error) };
        let route = FailureReport { failure: Failure::NtbLinkDown { ntb: 0 }, host: None, ntb: Some("nt0".into()), function: None, port: None };
        let errors = [
            MachineError::Stuck { thread: "bench".into(), waiting_for: "a completion".into(), at: 1_500_000 },
            thread(ThreadError::Access { thread: "bench".into(), addr: 0x1000, failure: Box::new(route.clone()) }),
            thread(ThreadError::TooLarge { thread: "bench".into(), addr: 0x2000, len: 1 << 20 }),
            thread(ThreadError::HostCrashed { thread: "bench".into(), host: "server-a".into(), at: 2_000_000 }),
        ];
        for e in errors {
            let text = e.to_string();
            let (thread, failure) = e.into_run_failure().unwrap();
            let run = XenIbError::Run { config: "native".into(), thread, failure };
            assert_eq!(run.to_string(), format!("native: {text}"));
        }
        let reached = XenIbError::Route { what: "doorbell", addr: 0x3000, failure: Box::new(route) };
        assert_eq!(reached.to_string(), "doorbell: 0x3000 cannot be reached: nt0: NTB link is down");
        assert!(std::error::Error::source(&reached).is_some(), "the route failure is the source");
    }
}
