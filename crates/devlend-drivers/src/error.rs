//! Errors of the drivers and of running devices with them on a machine: typed, each naming the
//! device, address or parameter it concerns (the RDMA crate's `error.rs` is the model). A device
//! model's own error ([`ModelError`]) is one variant.

use crate::gpu_driver::GpuError;
use crate::nvme_driver::NvmeError;
use devlend_devices::error::ModelError;
use devlend_devices::gpu_kernel::KernelStop;
use devlend_engine::machine::MachineError;
use devlend_fabric::FabricError;
use devlend_host::HostError;
use std::fmt;

#[derive(Debug)]
pub enum DeviceError {
    /// The fabric has no such host, device or function (`what`: the name or lookup).
    Fabric { what: String, error: FabricError },
    /// A host-layer call failed: building the cluster, finding or borrowing `device`, the kernel.
    Host { what: &'static str, device: String, error: HostError },
    /// A device model failed (a missing function or BAR, a refused DMA, a bad parameter).
    Model(ModelError),
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
    /// `device` (of kind `kind`; `None`: no such device, or an NTB adapter) has no driver for a
    /// service, which the kinds `expected` serve (`registry`).
    NotServed { device: String, kind: Option<String>, expected: String },
}

impl DeviceError {
    /// A short kind, for bindings: "fabric", "host", "params", ...
    pub fn kind(&self) -> &'static str {
        match self {
            DeviceError::Fabric { .. } => "fabric",
            DeviceError::Host { .. } => "host",
            DeviceError::Model(e) => e.kind(),
            DeviceError::CopySize { .. } => "copy-size",
            DeviceError::Gpu(_) => "gpu",
            DeviceError::Nvme(_) => "nvme",
            DeviceError::Kernel { .. } => "kernel",
            DeviceError::Mismatch { .. } => "mismatch",
            DeviceError::Machine { .. } => "machine",
            DeviceError::NotServed { .. } => "not-served",
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
            DeviceError::Model(e) => write!(f, "{e}"),
            DeviceError::CopySize { len: 0, .. } => write!(f, "a copy of zero bytes"),
            DeviceError::CopySize { len, mem_size } => write!(f, "{len} bytes do not fit the GPU's {mem_size} bytes of memory"),
            DeviceError::Gpu(e) => write!(f, "{e}"),
            DeviceError::Nvme(e) => write!(f, "{e}"),
            DeviceError::Kernel { gpu, stop } => write!(f, "ping-pong: {gpu}'s kernel {stop}"),
            DeviceError::Mismatch { what } => write!(f, "{what}: the destination differs from the source"),
            DeviceError::Machine { what, error } => write!(f, "{what}: {error}"),
            DeviceError::NotServed { device, kind: Some(kind), expected } => {
                write!(f, "{device} is of kind {kind}, which does not serve this (kinds that do: {expected})")
            }
            DeviceError::NotServed { device, kind: None, expected } => write!(f, "{device} is no device with a model (kinds that serve this: {expected})"),
        }
    }
}

impl std::error::Error for DeviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DeviceError::Model(e) => e.source(),
            DeviceError::Gpu(e) => e.source(),
            DeviceError::Nvme(e) => e.source(),
            _ => None,
        }
    }
}

impl From<GpuError> for DeviceError {
    fn from(e: GpuError) -> DeviceError {
        DeviceError::Gpu(e)
    }
}

impl From<ModelError> for DeviceError {
    fn from(e: ModelError) -> DeviceError {
        DeviceError::Model(e)
    }
}

impl From<NvmeError> for DeviceError {
    fn from(e: NvmeError) -> DeviceError {
        DeviceError::Nvme(e)
    }
}

pub type DResult<T> = Result<T, DeviceError>;
