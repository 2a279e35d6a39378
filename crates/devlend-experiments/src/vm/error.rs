//! Errors of the paper figures in a VM (D4-D6, the VM borrower's block reads): each names the
//! step that failed and the set-up it failed in, following `devlend_rdma::RdmaError`.

use devlend_devices::gpu_driver::GpuError;
use devlend_devices::nvme_driver::NvmeError;
use devlend_host::HostError;
use std::fmt;

#[derive(Debug)]
pub enum VmRunError {
    /// The testbed, the VM or its devices could not be set up (the hypervisor's or cluster's message).
    Setup { what: &'static str, message: String },
    /// A call into the guest kernel failed.
    Guest { what: &'static str, error: HostError },
    /// The guest's GPU driver failed.
    Gpu(GpuError),
    /// The guest's NVMe driver failed.
    Nvme(NvmeError),
    /// The run on the machine stopped (a thread failed, or a wait was never satisfied).
    Machine { scenario: String, message: String },
    /// What arrived differs from what was sent.
    Mismatch { scenario: String, what: String },
    /// An interrupt did not reach the guest, or has no route to it.
    NoInterrupt { scenario: String },
    /// An argument outside what the procedure takes.
    Invalid(String),
}

impl fmt::Display for VmRunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmRunError::Setup { what, message } => write!(f, "setting up {what}: {message}"),
            VmRunError::Guest { what, error } => write!(f, "guest kernel, {what}: {error}"),
            VmRunError::Gpu(e) => write!(f, "guest GPU driver: {e}"),
            VmRunError::Nvme(e) => write!(f, "guest NVMe driver: {e}"),
            VmRunError::Machine { scenario, message } => write!(f, "{scenario}: {message}"),
            VmRunError::Mismatch { scenario, what } => write!(f, "{scenario}: {what}"),
            VmRunError::NoInterrupt { scenario } => write!(f, "{scenario}: the interrupt did not reach the guest"),
            VmRunError::Invalid(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for VmRunError {}

impl From<GpuError> for VmRunError {
    fn from(e: GpuError) -> Self {
        VmRunError::Gpu(e)
    }
}

impl From<NvmeError> for VmRunError {
    fn from(e: NvmeError) -> Self {
        VmRunError::Nvme(e)
    }
}

pub type VResult<T> = Result<T, VmRunError>;

/// A set-up step's error (the fixture's, the hypervisor's or the cluster's message).
pub(crate) fn setup<E: fmt::Display>(what: &'static str) -> impl Fn(E) -> VmRunError {
    move |e| VmRunError::Setup { what, message: e.to_string() }
}

/// A guest kernel call's error.
pub(crate) fn guest(what: &'static str) -> impl Fn(HostError) -> VmRunError {
    move |error| VmRunError::Guest { what, error }
}
