//! The runner's errors: typed, each naming the workload and what it concerns.

use crate::fio_job::FioError;
use crate::nic::NicFault;
use devlend_devices::error::ModelError;
use devlend_drivers::error::DeviceError;
use devlend_drivers::gpu_driver::GpuError;
use devlend_drivers::service::copy::Dir;
use devlend_engine::machine::MachineError;
use devlend_engine::queue::Ps;
use devlend_fabric::FabricError;
use devlend_host::HostError;
use devlend_rdma::RdmaError;
use std::error::Error;
use std::fmt;

mod input;
pub use input::{BadSpec, Missing, Unreached};

/// Why a workload that ran failed.
#[derive(Debug)]
pub enum FailCause {
    /// The runner's kernel refused `step` (reading the destination back).
    Host { step: &'static str, error: HostError },
    /// A device model: a GPU kernel that did not finish, its memory.
    Device(Box<DeviceError>),
    /// The destination of a `dir` copy of `len` bytes differs from its source.
    Mismatch { dir: Dir, len: u64 },
    /// ntb_perf thread `thread`'s chunk `chunk` did not land in the peer.
    NotLanded { thread: u64, chunk: u64 },
    /// ntb_perf thread `thread`'s DMA channel stopped.
    Channel { thread: usize, error: RdmaError },
    /// The NIC stopped (`nic::NicFault`).
    Nic(NicFault),
    /// The NIC never started: its doorbell or probe read did not complete.
    NicNotStarted,
    /// The fio jobs failed.
    Fio(Box<FioError>),
    /// A thread of the workload failed or waited for ever.
    Machine(Box<MachineError>),
    /// It never ended: what it waited for never came (after a fault, with no watchdog to fire).
    NeverEnded,
}

impl fmt::Display for FailCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailCause::Host { error, .. } => write!(f, "{error}"),
            FailCause::Device(e) => write!(f, "{e}"),
            FailCause::Mismatch { dir, len } => write!(f, "{dir:?} copy of {len} bytes: the destination differs from the source"),
            FailCause::NotLanded { thread, chunk } => write!(f, "thread {thread}: chunk {chunk} did not land in the peer"),
            FailCause::Channel { thread, error } => write!(f, "thread {thread}: {error}"),
            FailCause::Nic(e) => write!(f, "{e}"),
            FailCause::NicNotStarted => write!(f, "the NIC never started (its doorbell or probe read did not complete)"),
            FailCause::Fio(e) => write!(f, "{e}"),
            FailCause::Machine(e) => write!(f, "{e}"),
            FailCause::NeverEnded => write!(f, "it never ended: what it waited for never came"),
        }
    }
}

impl FailCause {
    fn error(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            FailCause::Host { error, .. } => Some(error),
            FailCause::Device(e) => Some(e.as_ref()),
            FailCause::Channel { error, .. } => Some(error),
            FailCause::Nic(e) => Some(e),
            FailCause::Fio(e) => Some(e.as_ref()),
            FailCause::Machine(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

/// What refused a workload's set-up.
#[derive(Debug)]
pub enum SetupCause {
    /// The runner's kernel or the lending agents refused `step`.
    Host { step: &'static str, error: HostError },
    /// A device model (the GPU's, the drive's media) or a call made through its driver (boxed:
    /// a device model's error is large).
    Device(Box<DeviceError>),
    /// The GPU driver's probe.
    Gpu(GpuError),
    /// The fabric refused (an NT adapter's window).
    Fabric(FabricError),
    /// The RDMA library (ntb_perf's two ends).
    Rdma(RdmaError),
    /// No direct memory window of NT adapter `ntb` is free.
    NoFreeWindow { ntb: String },
    /// The peer did not publish its buffer in the handshake.
    NotPublished,
    /// The kernel gave the channels of DMA engine `device` vectors that do not follow one another.
    Vectors { device: String, vectors: Vec<u8> },
}

impl fmt::Display for SetupCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupCause::Host { step, error } => write!(f, "{step}: {error}"),
            SetupCause::Device(e) => write!(f, "{e}"),
            SetupCause::Gpu(e) => write!(f, "{e}"),
            SetupCause::Fabric(e) => write!(f, "{e}"),
            SetupCause::Rdma(e) => write!(f, "{e}"),
            SetupCause::NoFreeWindow { ntb } => write!(f, "no direct memory window of {ntb} is free"),
            SetupCause::NotPublished => write!(f, "the peer's buffer was not published"),
            SetupCause::Vectors { device, vectors } => write!(f, "the kernel gave {device}'s channels the vectors {vectors:?}, not consecutive ones"),
        }
    }
}

impl SetupCause {
    fn error(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            SetupCause::Host { error, .. } => Some(error),
            SetupCause::Device(e) => Some(e.as_ref()),
            SetupCause::Gpu(e) => Some(e),
            SetupCause::Fabric(e) => Some(e),
            SetupCause::Rdma(e) => Some(e),
            _ => None,
        }
    }
}

impl From<DeviceError> for SetupCause {
    fn from(e: DeviceError) -> Self {
        SetupCause::Device(Box::new(e))
    }
}

impl From<DeviceError> for FailCause {
    fn from(e: DeviceError) -> Self {
        FailCause::Device(Box::new(e))
    }
}

/// A device model's error is a device error (what a driver-side run would report).
impl From<ModelError> for SetupCause {
    fn from(e: ModelError) -> Self {
        DeviceError::Model(e).into()
    }
}

impl From<ModelError> for FailCause {
    fn from(e: ModelError) -> Self {
        DeviceError::Model(e).into()
    }
}

impl From<FioError> for FailCause {
    fn from(e: FioError) -> Self {
        FailCause::Fio(Box::new(e))
    }
}

impl From<MachineError> for FailCause {
    fn from(e: MachineError) -> Self {
        FailCause::Machine(Box::new(e))
    }
}

impl From<NicFault> for FailCause {
    fn from(e: NicFault) -> Self {
        FailCause::Nic(e)
    }
}

impl From<GpuError> for SetupCause {
    fn from(e: GpuError) -> Self {
        SetupCause::Gpu(e)
    }
}

impl From<FabricError> for SetupCause {
    fn from(e: FabricError) -> Self {
        SetupCause::Fabric(e)
    }
}

impl From<RdmaError> for SetupCause {
    fn from(e: RdmaError) -> Self {
        SetupCause::Rdma(e)
    }
}

#[derive(Debug)]
pub enum WorkloadError {
    /// Two workloads with one name.
    DuplicateName { workload: String },
    /// A start time before the machine's clock (the scenario has already run past it).
    StartInPast { workload: String, at: Ps, now: Ps },
    /// A host, device or requester the topology does not have.
    /// Boxed (as `target` and `why` are): the lower layers' errors inside are large, and every
    /// `WResult` would carry them.
    NoSuch { workload: String, what: String, missing: Box<Missing> },
    /// The device is not of the kind the workload drives (a GPU, an NVMe drive).
    WrongKind { workload: String, device: String, expected: String, found: String },
    /// The device is lent to (borrowed by) another host already.
    AlreadyBorrowed { workload: String, device: String, error: HostError },
    /// Another workload of this scenario drives the device.
    InUse { workload: String, device: String, by: String },
    /// No NT adapter of `runner` has its peer in host `peer`.
    NoNtb { workload: String, runner: String, peer: String },
    /// The device, or the stream's address, cannot be reached from the runner.
    Unreachable { workload: String, target: Box<Unreached> },
    /// A description the runner cannot run (zero bytes, zero depth, too large for the device).
    Invalid { workload: String, why: Box<BadSpec> },
    /// Setting the workload up failed otherwise (a driver's probe, the host kernel).
    Setup { workload: String, cause: SetupCause },
    /// The workload failed while running (a driver error, data that did not arrive).
    Failed { workload: String, cause: FailCause },
    /// The machine could not run (a thread stuck with nothing left to happen).
    Machine(Box<MachineError>),
    /// The scenario's cluster refused `step` (building it from the topology, ending its lends).
    Cluster { step: &'static str, error: HostError },
    /// A return at `at` while workload `workload` still drives the device.
    ReturnInUse { device: String, workload: String, at: Ps },
    /// A borrow at `at` while the lender still scrubs `device` after its last lend (until `until`).
    Scrubbing { device: String, at: Ps, until: Ps, how: devlend_host::ScrubHow },
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
            WorkloadError::Machine(_) => "machine",
            WorkloadError::Cluster { .. } => "cluster",
            WorkloadError::ReturnInUse { .. } => "return-in-use",
            WorkloadError::Scrubbing { .. } => "scrubbing",
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
            WorkloadError::NoSuch { workload, what, missing } => write!(f, "workload {workload}: no such {what}: {missing}"),
            WorkloadError::WrongKind { workload, device, expected, found } => write!(f, "workload {workload}: {device} is not a {expected} device ({found})"),
            WorkloadError::AlreadyBorrowed { workload, device, error } => write!(f, "workload {workload}: {device} is already borrowed: {error}"),
            WorkloadError::InUse { workload, device, by } => write!(f, "workload {workload}: {device} is already driven by workload {by}"),
            WorkloadError::NoNtb { workload, runner, peer } => write!(f, "workload {workload}: no NTB joins host {runner} to host {peer}"),
            WorkloadError::Unreachable { workload, target } => write!(f, "workload {workload}: {target}"),
            WorkloadError::Invalid { workload, why } => write!(f, "workload {workload}: {why}"),
            WorkloadError::Setup { workload, cause } => write!(f, "workload {workload}: set-up failed: {cause}"),
            WorkloadError::Failed { workload, cause } => write!(f, "workload {workload} failed: {cause}"),
            WorkloadError::Machine(e) => write!(f, "the scenario could not run: {e}"),
            WorkloadError::Cluster { step, error } => write!(f, "the scenario's cluster, {step}: {error}"),
            WorkloadError::ReturnInUse { device, workload, at } => write!(
                f,
                "cannot return {device} at {:.3} ns: workload {workload} still drives it (a device in use cannot be returned: return it after its workloads end)",
                *at as f64 / 1e3
            ),
            WorkloadError::Scrubbing { device, at, until, how } => {
                let how = match how {
                    devlend_host::ScrubHow::Fill { bytes, bytes_per_s } => {
                        format!("its copy engine fills its {bytes} bytes of device memory at {:.1} GB/s", *bytes_per_s as f64 / 1e9)
                    }
                    devlend_host::ScrubHow::Reset => "a Function Level Reset and its 100 ms wait (timing.flr_wait_ps)".to_string(),
                };
                write!(
                    f,
                    "cannot borrow {device} at {:.3} ns: its lender is scrubbing it after its last lend until {:.3} ns ({how}; hygiene policy scrub): borrow it then",
                    *at as f64 / 1e3,
                    *until as f64 / 1e3
                )
            }
        }
    }
}

impl Error for WorkloadError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            WorkloadError::Setup { cause, .. } => cause.error(),
            WorkloadError::Failed { cause, .. } => cause.error(),
            WorkloadError::Machine(e) => Some(e.as_ref()),
            WorkloadError::Cluster { error, .. } | WorkloadError::AlreadyBorrowed { error, .. } => Some(error),
            WorkloadError::NoSuch { missing, .. } => missing.error(),
            WorkloadError::Unreachable { target, .. } => target.error(),
            WorkloadError::Invalid { why, .. } => why.error(),
            _ => None,
        }
    }
}

impl WorkloadError {
    /// Workload `w`'s set-up, refused by `cause`.
    pub fn setup<C: Into<SetupCause>>(w: &str) -> impl Fn(C) -> WorkloadError + '_ {
        move |cause| WorkloadError::Setup { workload: w.into(), cause: cause.into() }
    }

    /// Workload `w`, failed for `cause`.
    pub fn failed<C: Into<FailCause>>(w: &str) -> impl Fn(C) -> WorkloadError + '_ {
        move |cause| WorkloadError::Failed { workload: w.into(), cause: cause.into() }
    }

    /// Workload `w`, whose description the runner cannot run (`why`).
    pub fn invalid(w: &str, why: BadSpec) -> WorkloadError {
        WorkloadError::Invalid { workload: w.into(), why: Box::new(why) }
    }

    /// Workload `w`'s `what` (a host, a device, ...), not there (`missing`).
    pub fn no_such(w: &str, what: &str, missing: Missing) -> WorkloadError {
        WorkloadError::NoSuch { workload: w.into(), what: what.into(), missing: Box::new(missing) }
    }

    /// Workload `w`'s set-up step `step`, refused by the runner's kernel.
    pub fn host_setup<'a>(w: &'a str, step: &'static str) -> impl Fn(HostError) -> WorkloadError + 'a {
        move |error| WorkloadError::Setup { workload: w.into(), cause: SetupCause::Host { step, error } }
    }
}

pub type WResult<T> = Result<T, WorkloadError>;
