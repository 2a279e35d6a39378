//! Errors of the hypervisor's own procedures, typed and naming the device, VM or step they
//! concern (the RDMA crate's `error.rs` is the model): setting up the VM testbed ([`SetupError`]),
//! running a guest on the machine ([`RunError`]), what could not be undone ([`Anomaly`]). The
//! guest kernel's calls keep the host layer's `HostError` (it is the same `Os` interface), and
//! the attack suite's are in `attacks` ([`crate::attacks::AttackError`]).

use crate::held::Held;
use devlend_drivers::error::DeviceError;
use devlend_drivers::gpu_driver::GpuError;
use devlend_engine::machine::MachineError;
use devlend_fabric::FabricError;
use devlend_host::HostError;
use std::error::Error;
use std::fmt;

/// Setting up VMs and their GPUs (the testbed of `fixtures`, the attack cases' own VMs).
#[derive(Debug)]
pub enum SetupError {
    /// A VM scenario name other than VMLoc or VMRem.
    UnknownScenario { given: String },
    /// The cluster or the hypervisor refused `step` (for `device`, "" when none).
    Host { step: &'static str, device: String, error: HostError },
    /// The fabric has no function `device`.
    Fabric { device: String, error: FabricError },
    /// The GPU model of `device` cannot be built on its function (boxed: a device model's error
    /// is large, and this one is rare).
    Device { device: String, error: Box<DeviceError> },
    /// The guest's GPU driver could not probe `device`.
    Driver { device: String, error: GpuError },
}

impl SetupError {
    /// The host layer's refusal of `step` for `device`.
    pub fn host<'a>(step: &'static str, device: &'a str) -> impl FnOnce(HostError) -> SetupError + 'a {
        move |error| SetupError::Host { step, device: device.to_string(), error }
    }
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::UnknownScenario { given } => write!(f, "unknown VM scenario '{given}' (VMLoc or VMRem)"),
            SetupError::Host { error, .. } => write!(f, "{error}"),
            SetupError::Fabric { error, .. } => write!(f, "{error}"),
            SetupError::Device { error, .. } => write!(f, "{error}"),
            SetupError::Driver { error, .. } => write!(f, "{error}"),
        }
    }
}

impl Error for SetupError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            SetupError::UnknownScenario { .. } => None,
            SetupError::Host { error, .. } => Some(error),
            SetupError::Fabric { error, .. } => Some(error),
            SetupError::Device { error, .. } => Some(error.as_ref()),
            SetupError::Driver { error, .. } => Some(error),
        }
    }
}

/// A guest kernel on the machine (`timed::on_machine`, `timed::back`).
#[derive(Debug)]
pub enum RunError {
    /// The VM's interrupt path could not be put on the machine (`irq_clock::spawn`).
    IrqPath(HostError),
    /// A step of the guest kernel before the run (`step`) was refused.
    Guest { step: &'static str, error: HostError },
    /// The machine stopped: a thread failed, or a wait was never satisfied.
    Machine(MachineError),
    /// A device model still holds the machine's world after the run.
    WorldHeld,
    /// The hypervisor is still shared with a thread after the run.
    VmmShared,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::IrqPath(e) => write!(f, "{e}"),
            RunError::Guest { step, error } => write!(f, "{step}: {error}"),
            RunError::Machine(e) => write!(f, "{e}"),
            RunError::WorldHeld => write!(f, "a device model still holds the machine's world"),
            RunError::VmmShared => write!(f, "the hypervisor is still shared"),
        }
    }
}

impl Error for RunError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            RunError::IrqPath(e) => Some(e),
            RunError::Guest { error, .. } => Some(error),
            RunError::Machine(e) => Some(e),
            RunError::WorldHeld | RunError::VmmShared => None,
        }
    }
}

/// A step the hypervisor takes on its own (undoing, forwarding an interrupt) that the host or
/// fabric refused (`Vmm::anomalies`: empty unless this crate has a bug).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Anomaly {
    /// Releasing `held` (a mapping, a borrow, pages...) failed.
    Release { held: Held, error: HostError },
    /// Step `step` (an undo, a forwarded interrupt) failed.
    Step { step: &'static str, error: HostError },
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Anomaly::Release { held, error } => write!(f, "releasing {held:?}: {error}"),
            Anomaly::Step { step, error } => write!(f, "{step}: {error}"),
        }
    }
}
