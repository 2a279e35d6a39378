//! Errors of the paper figures in a VM (D4-D6, the VM borrower's block reads): each names the
//! step that failed and the set-up it failed in, following `devlend_rdma::RdmaError`.

use devlend_devices::error::ModelError;
use devlend_drivers::error::DeviceError;
use devlend_drivers::gpu_driver::GpuError;
use devlend_drivers::nvme_driver::NvmeError;
use devlend_engine::machine::MachineError;
use devlend_fabric::FabricError;
use devlend_host::HostError;
use devlend_vm::{RunError, SetupError};
use std::error::Error;
use std::fmt;

/// What refused a set-up step: the testbed, the host layer, the fabric or a device model.
#[derive(Debug)]
pub enum SetupCause {
    Testbed(SetupError),
    Host(HostError),
    Fabric(FabricError),
    Device(DeviceError),
}

impl fmt::Display for SetupCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupCause::Testbed(e) => write!(f, "{e}"),
            SetupCause::Host(e) => write!(f, "{e}"),
            SetupCause::Fabric(e) => write!(f, "{e}"),
            SetupCause::Device(e) => write!(f, "{e}"),
        }
    }
}

impl SetupCause {
    fn error(&self) -> &(dyn Error + 'static) {
        match self {
            SetupCause::Testbed(e) => e,
            SetupCause::Host(e) => e,
            SetupCause::Fabric(e) => e,
            SetupCause::Device(e) => e,
        }
    }
}

impl From<SetupError> for SetupCause {
    fn from(e: SetupError) -> Self {
        SetupCause::Testbed(e)
    }
}

impl From<HostError> for SetupCause {
    fn from(e: HostError) -> Self {
        SetupCause::Host(e)
    }
}

impl From<FabricError> for SetupCause {
    fn from(e: FabricError) -> Self {
        SetupCause::Fabric(e)
    }
}

impl From<DeviceError> for SetupCause {
    fn from(e: DeviceError) -> Self {
        SetupCause::Device(e)
    }
}

impl From<ModelError> for SetupCause {
    fn from(e: ModelError) -> Self {
        SetupCause::Device(DeviceError::Model(e))
    }
}

/// What stopped a run on the machine: the guest's run (`devlend_vm::timed`), the machine itself,
/// or a device model's check after it.
#[derive(Debug)]
pub enum RunCause {
    Guest(RunError),
    Machine(MachineError),
    Device(DeviceError),
}

impl fmt::Display for RunCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunCause::Guest(e) => write!(f, "{e}"),
            RunCause::Machine(e) => write!(f, "{e}"),
            RunCause::Device(e) => write!(f, "{e}"),
        }
    }
}

#[derive(Debug)]
pub enum VmRunError {
    /// The testbed, the VM or its devices could not be set up (`what`: the step).
    Setup { what: &'static str, error: Box<SetupCause> },
    /// A call into the guest kernel failed.
    Guest { what: &'static str, error: HostError },
    /// The guest's GPU driver failed.
    Gpu(GpuError),
    /// The guest's NVMe driver failed.
    Nvme(NvmeError),
    /// The run on the machine stopped (a thread failed, or a wait was never satisfied).
    Machine { scenario: String, error: Box<RunCause> },
    /// What arrived differs from what was sent.
    Mismatch { scenario: String, what: String },
    /// An interrupt did not reach the guest, or has no route to it.
    NoInterrupt { scenario: String },
    /// A device model refused what the procedure asked of it (a size, a copy, its memory).
    Device(DeviceError),
    /// A copy of `len` bytes, where the procedure takes 1 byte to half the guest's `guest_ram`
    /// (and no more than the GPU's memory).
    Length { len: u64, guest_ram: u64 },
    /// A set-up name the procedure does not know (`known`: those it does).
    UnknownSetup { given: String, known: &'static str },
    /// An argument outside what the procedure takes.
    Invalid { reason: &'static str },
}

impl fmt::Display for VmRunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmRunError::Setup { what, error } => write!(f, "setting up {what}: {error}"),
            VmRunError::Guest { what, error } => write!(f, "guest kernel, {what}: {error}"),
            VmRunError::Gpu(e) => write!(f, "guest GPU driver: {e}"),
            VmRunError::Nvme(e) => write!(f, "guest NVMe driver: {e}"),
            VmRunError::Machine { scenario, error } => write!(f, "{scenario}: {error}"),
            VmRunError::Mismatch { scenario, what } => write!(f, "{scenario}: {what}"),
            VmRunError::NoInterrupt { scenario } => write!(f, "{scenario}: the interrupt did not reach the guest"),
            VmRunError::Device(e) => write!(f, "{e}"),
            VmRunError::Length { len, guest_ram } => write!(f, "{len} bytes: expected 1 byte to half the guest's {guest_ram} bytes of RAM"),
            VmRunError::UnknownSetup { given, known } => write!(f, "no D6 set-up '{given}' ({known})"),
            VmRunError::Invalid { reason } => write!(f, "{reason}"),
        }
    }
}

impl Error for VmRunError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            VmRunError::Setup { error, .. } => Some(error.error()),
            VmRunError::Guest { error, .. } => Some(error),
            VmRunError::Gpu(e) => Some(e),
            VmRunError::Nvme(e) => Some(e),
            VmRunError::Machine { error, .. } => match error.as_ref() {
                RunCause::Guest(e) => Some(e),
                RunCause::Machine(e) => Some(e),
                RunCause::Device(e) => Some(e),
            },
            VmRunError::Device(e) => Some(e),
            _ => None,
        }
    }
}

impl From<DeviceError> for VmRunError {
    fn from(e: DeviceError) -> Self {
        VmRunError::Device(e)
    }
}

impl From<ModelError> for VmRunError {
    fn from(e: ModelError) -> Self {
        VmRunError::Device(DeviceError::Model(e))
    }
}

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

/// A set-up step's error (the fixture's, the hypervisor's, the cluster's or a device model's).
pub(crate) fn setup<E: Into<SetupCause>>(what: &'static str) -> impl Fn(E) -> VmRunError {
    move |e| VmRunError::Setup { what, error: Box::new(e.into()) }
}

/// A run on the machine in `scenario` that stopped.
pub(crate) fn stopped<E>(scenario: String, into: fn(E) -> RunCause) -> impl FnOnce(E) -> VmRunError {
    move |e| VmRunError::Machine { scenario, error: Box::new(into(e)) }
}

/// A guest kernel call's error.
pub(crate) fn guest(what: &'static str) -> impl Fn(HostError) -> VmRunError {
    move |error| VmRunError::Guest { what, error }
}
