//! The runner's errors: typed, each naming the workload and what it concerns.

use devlend_engine::queue::Ps;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkloadError {
    /// Two workloads with one name.
    DuplicateName { workload: String },
    /// A start time before the machine's clock (the scenario has already run past it).
    StartInPast { workload: String, at: Ps, now: Ps },
    /// A host, device or requester the topology does not have.
    NoSuch { workload: String, what: String, message: String },
    /// The device is not of the kind the workload drives (a GPU, an NVMe drive).
    WrongKind { workload: String, device: String, expected: &'static str, found: String },
    /// The device is lent to (borrowed by) another host already.
    AlreadyBorrowed { workload: String, device: String, message: String },
    /// Another workload of this scenario drives the device.
    InUse { workload: String, device: String, by: String },
    /// No NT adapter of `runner` has its peer in host `peer`.
    NoNtb { workload: String, runner: String, peer: String },
    /// The device, or the stream's address, cannot be reached from the runner.
    Unreachable { workload: String, what: String, message: String },
    /// A description the runner cannot run (zero bytes, zero depth, too large for the device).
    Invalid { workload: String, why: String },
    /// Setting the workload up failed otherwise (a driver's probe, the host kernel).
    Setup { workload: String, message: String },
    /// The workload failed while running (a driver error, data that did not arrive).
    Failed { workload: String, message: String },
    /// The machine could not run (a thread stuck with nothing left to happen).
    Machine { message: String },
    /// A return at `at` while workload `workload` still drives the device.
    ReturnInUse { device: String, workload: String, at: Ps },
}

impl WorkloadError {
    /// A short kind, for bindings: "duplicate-name", "start-in-past", ...
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadError::DuplicateName { .. } => "duplicate-name",
            WorkloadError::StartInPast { .. } => "start-in-past",
            WorkloadError::NoSuch { .. } => "no-such",
            WorkloadError::WrongKind { .. } => "wrong-kind",
            WorkloadError::AlreadyBorrowed { .. } => "already-borrowed",
            WorkloadError::InUse { .. } => "in-use",
            WorkloadError::NoNtb { .. } => "no-ntb",
            WorkloadError::Unreachable { .. } => "unreachable",
            WorkloadError::Invalid { .. } => "invalid",
            WorkloadError::Setup { .. } => "setup",
            WorkloadError::Failed { .. } => "failed",
            WorkloadError::Machine { .. } => "machine",
            WorkloadError::ReturnInUse { .. } => "return-in-use",
        }
    }
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkloadError::DuplicateName { workload } => write!(f, "workload {workload}: another workload has this name"),
            WorkloadError::StartInPast { workload, at, now } => {
                write!(f, "workload {workload}: start at {:.3} ns is in the past (the scenario is at {:.3} ns)", *at as f64 / 1e3, *now as f64 / 1e3)
            }
            WorkloadError::NoSuch { workload, what, message } => write!(f, "workload {workload}: no such {what}: {message}"),
            WorkloadError::WrongKind { workload, device, expected, found } => write!(f, "workload {workload}: {device} is not a {expected} device ({found})"),
            WorkloadError::AlreadyBorrowed { workload, device, message } => write!(f, "workload {workload}: {device} is already borrowed: {message}"),
            WorkloadError::InUse { workload, device, by } => write!(f, "workload {workload}: {device} is already driven by workload {by}"),
            WorkloadError::NoNtb { workload, runner, peer } => write!(f, "workload {workload}: no NTB joins host {runner} to host {peer}"),
            WorkloadError::Unreachable { workload, what, message } => write!(f, "workload {workload}: {what} cannot be reached: {message}"),
            WorkloadError::Invalid { workload, why } => write!(f, "workload {workload}: {why}"),
            WorkloadError::Setup { workload, message } => write!(f, "workload {workload}: set-up failed: {message}"),
            WorkloadError::Failed { workload, message } => write!(f, "workload {workload} failed: {message}"),
            WorkloadError::Machine { message } => write!(f, "the scenario could not run: {message}"),
            WorkloadError::ReturnInUse { device, workload, at } => write!(
                f,
                "cannot return {device} at {:.3} ns: workload {workload} still drives it (a device in use cannot be returned: return it after its workloads end)",
                *at as f64 / 1e3
            ),
        }
    }
}

impl std::error::Error for WorkloadError {}

pub type WResult<T> = Result<T, WorkloadError>;
