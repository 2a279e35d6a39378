//! Errors of the device models and of running them on a machine: typed, each naming the device,
//! address or parameter it concerns (the RDMA crate's `error.rs` is the model).

use crate::gpu_driver::GpuError;
use crate::gpu_kernel::KernelStop;
use crate::nvme_driver::NvmeError;
use devlend_engine::machine::MachineError;
use devlend_fabric::model::FuncId;
use devlend_fabric::report::FailureReport;
use devlend_fabric::FabricError;
use devlend_host::HostError;
use std::fmt;

#[derive(Debug)]
pub enum DeviceError {
    /// The fabric has no such host, device or function (`what`: the name or lookup).
    Fabric { what: String, error: FabricError },
    /// A host-layer call failed: building the cluster, finding or borrowing `device`, the kernel.
    Host { what: &'static str, device: String, error: HostError },
    /// A hardware parameter is missing or unreadable (`field`: its path in params/hardware.toml).
    Params { field: String, problem: ParamsProblem },
    /// The fabric has no function `func`.
    NoFunction { func: FuncId },
    /// Device `device` lacks BAR `bar`, which its model needs.
    NoBar { device: String, bar: u8 },
    /// A load or store by the SMs of GPU `func` at DMA address `addr` that the fabric refused:
    /// `failure` is the fabric's record, with the names of what it refers to (boxed: it is large).
    Dma { func: FuncId, addr: u64, failure: Box<FailureReport> },
    /// An access to the GPU's own memory outside its `size` bytes.
    OutsideMemory { func: FuncId, off: u64, len: u64, size: u64 },
    /// A copy the GPU cannot carry out: zero bytes, or more than its memory holds.
    CopySize { len: u64, mem_size: u64 },
    /// The GPU driver failed.
    Gpu(GpuError),
    /// The NVMe driver failed.
    Nvme(NvmeError),
    /// A ping-pong kernel on GPU `gpu` did not finish its rounds.
    Kernel { gpu: String, stop: KernelStop },
    /// Data that arrived differs from what was sent (`what`: the transfer).
    Mismatch { what: String },
    /// The machine could not run (a thread stuck or failed); `what`: the run.
    Machine { what: String, error: MachineError },
}

/// What is wrong with a hardware parameter of params/hardware.toml.
#[derive(Debug)]
pub enum ParamsProblem {
    /// The file, or the table that should hold the parameter, does not read as what is expected.
    /// Boxed, as `NoMediaTiming`'s: the parser's error is large and every `DResult` would carry it.
    Toml(Box<toml::de::Error>),
    /// The file has no table `[table]`.
    NoTable { table: &'static str },
    /// The file has no `[device.profile]` table.
    NoProfile { profile: String },
    /// Device profile `profile` lacks the media timing fields (`error` names the field).
    NoMediaTiming { profile: String, error: Box<toml::de::Error> },
    /// The parameter is 0, where it must be at least 1.
    Zero,
}

impl fmt::Display for ParamsProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamsProblem::Toml(e) => write!(f, "{e}"),
            ParamsProblem::NoTable { table } => write!(f, "no [{table}] table"),
            ParamsProblem::NoProfile { profile } => write!(f, "no device profile {profile}"),
            ParamsProblem::NoMediaTiming { profile, error } => write!(f, "device profile {profile} lacks media timing: {error}"),
            ParamsProblem::Zero => write!(f, "is 0"),
        }
    }
}

impl DeviceError {
    /// A short kind, for bindings: "fabric", "host", "params", ...
    pub fn kind(&self) -> &'static str {
        match self {
            DeviceError::Fabric { .. } => "fabric",
            DeviceError::Host { .. } => "host",
            DeviceError::Params { .. } => "params",
            DeviceError::NoFunction { .. } => "no-function",
            DeviceError::NoBar { .. } => "no-bar",
            DeviceError::Dma { .. } => "dma",
            DeviceError::OutsideMemory { .. } => "outside-memory",
            DeviceError::CopySize { .. } => "copy-size",
            DeviceError::Gpu(_) => "gpu",
            DeviceError::Nvme(_) => "nvme",
            DeviceError::Kernel { .. } => "kernel",
            DeviceError::Mismatch { .. } => "mismatch",
            DeviceError::Machine { .. } => "machine",
        }
    }

    /// A host-layer error while doing `what` for `device`.
    pub fn host<'a>(what: &'static str, device: &'a str) -> impl FnOnce(HostError) -> DeviceError + 'a {
        move |error| DeviceError::Host { what, device: device.into(), error }
    }

    /// A fabric lookup of `what` that failed.
    pub fn fabric(what: &str) -> impl FnOnce(FabricError) -> DeviceError + '_ {
        move |error| DeviceError::Fabric { what: what.into(), error }
    }
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::Fabric { what, error } => write!(f, "{what}: {error}"),
            DeviceError::Host { what, device, error } => write!(f, "{what} ({device}): {error}"),
            DeviceError::Params { field, problem } => write!(f, "params/hardware.toml {field}: {problem}"),
            DeviceError::NoFunction { func } => write!(f, "no function #{func}"),
            DeviceError::NoBar { device, bar } => write!(f, "{device} has no BAR {bar} to window onto device memory"),
            DeviceError::Dma { addr, failure, .. } => write!(f, "DMA at {addr:#x} failed: {failure}"),
            DeviceError::OutsideMemory { func, off, len, size } => {
                write!(f, "device memory {off:#x}+{len:#x} is outside the GPU's {size:#x} bytes of memory (function #{func})")
            }
            DeviceError::CopySize { len: 0, .. } => write!(f, "a copy of zero bytes"),
            DeviceError::CopySize { len, mem_size } => write!(f, "{len} bytes do not fit the GPU's {mem_size} bytes of memory"),
            DeviceError::Gpu(e) => write!(f, "{e}"),
            DeviceError::Nvme(e) => write!(f, "{e}"),
            DeviceError::Kernel { gpu, stop } => write!(f, "ping-pong: {gpu}'s kernel {stop}"),
            DeviceError::Mismatch { what } => write!(f, "{what}: the destination differs from the source"),
            DeviceError::Machine { what, error } => write!(f, "{what}: {error}"),
        }
    }
}

impl std::error::Error for DeviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DeviceError::Dma { failure, .. } => Some(failure.as_ref()),
            DeviceError::Params { problem: ParamsProblem::Toml(e) | ParamsProblem::NoMediaTiming { error: e, .. }, .. } => Some(e.as_ref()),
            _ => None,
        }
    }
}

impl From<GpuError> for DeviceError {
    fn from(e: GpuError) -> DeviceError {
        DeviceError::Gpu(e)
    }
}

impl From<NvmeError> for DeviceError {
    fn from(e: NvmeError) -> DeviceError {
        DeviceError::Nvme(e)
    }
}

pub type DResult<T> = Result<T, DeviceError>;
