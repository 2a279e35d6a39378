//! The attack suite's errors: a case that did not run, or did not show its attack blocked,
//! recorded and memory-neutral.

use super::names;
use crate::config::MsixEntry;
use crate::error::{RunError, SetupError};
use devlend_fabric::route::Failure;
use devlend_fabric::FabricError;
use devlend_host::HostError;
use std::error::Error;
use std::fmt;

/// Why a case did not show its attack blocked: its set-up failed, or one of the three checks
/// (blocked, recorded once, no memory changed) did not hold.
#[derive(Debug)]
pub enum CaseError {
    /// The testbed or the case's VMs and GPUs could not be set up (boxed: the largest variant).
    Setup(Box<SetupError>),
    /// A step of the case that the hypervisor or the guest kernel refused.
    Host { step: &'static str, error: HostError },
    /// A config read of the case that the fabric refused.
    Fabric { step: &'static str, error: FabricError },
    /// The testbed lacks what the case needs (`what`).
    Testbed { what: &'static str },
    /// The rogue device's access of `bytes` bytes at `addr` went through.
    WentThrough { addr: u64, bytes: usize },
    /// The guest's config or MSI-X table write was accepted.
    Accepted,
    /// The blocked access left `recorded` faults in the fabric's log, not one.
    Faults { recorded: usize },
    /// The refused write left `recorded` entries in `Vmm::blocked`, not one.
    Refusals { recorded: usize },
    /// A forged interrupt did not leave exactly one interrupt remapping fault (`got`: what it left).
    NotRemapped { got: Vec<Failure> },
    /// The fabric's memory changed.
    MemoryChanged,
    /// The function's registers or the fabric's memory changed.
    FunctionChanged,
    /// The guest's virtual MSI-X entry 0 no longer holds its message (`entry`: what it holds).
    EntryChanged { entry: Option<MsixEntry> },
    /// The victim device's physical MSI-X entry 0 holds no message.
    NotLive { device: String },
    /// The victim VM took a forged interrupt.
    VictimInterrupted,
    /// The victim device's own interrupt did not reach its VM.
    OwnInterruptLost { device: String },
    /// The machine run of a step (`step`) failed otherwise.
    Run { step: &'static str, error: Box<RunError> },
}

impl fmt::Display for CaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaseError::Setup(e) => write!(f, "{e}"),
            CaseError::Host { step, error } => write!(f, "{step}: {error}"),
            CaseError::Fabric { step, error } => write!(f, "{step}: {error}"),
            CaseError::Testbed { what } => write!(f, "{what}"),
            CaseError::WentThrough { addr, bytes } => write!(f, "the access at {addr:#x} went through ({bytes} bytes)"),
            CaseError::Accepted => write!(f, "the write was accepted"),
            CaseError::Faults { recorded } => write!(f, "{recorded} faults recorded, expected one"),
            CaseError::Refusals { recorded } => write!(f, "{recorded} refusals recorded, expected one"),
            CaseError::NotRemapped { got } => write!(f, "expected one interrupt remapping fault, got {got:?}"),
            CaseError::MemoryChanged => write!(f, "memory changed"),
            CaseError::FunctionChanged => write!(f, "the function or memory changed"),
            CaseError::EntryChanged { entry } => write!(f, "the virtual entry changed: {entry:?}"),
            CaseError::NotLive { device } => write!(f, "{device}'s MSI-X entry 0 is not live"),
            CaseError::VictimInterrupted => write!(f, "the victim VM took the forged interrupt"),
            CaseError::OwnInterruptLost { device } => write!(f, "{device}'s own interrupt did not reach its VM"),
            CaseError::Run { step, error } => write!(f, "{step}: {error}"),
        }
    }
}

impl Error for CaseError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CaseError::Setup(e) => Some(e.as_ref()),
            CaseError::Host { error, .. } => Some(error),
            CaseError::Fabric { error, .. } => Some(error),
            CaseError::Run { error, .. } => Some(error.as_ref()),
            _ => None,
        }
    }
}

impl From<SetupError> for CaseError {
    fn from(e: SetupError) -> CaseError {
        CaseError::Setup(Box::new(e))
    }
}

/// A case that did not run, or did not show its attack blocked.
#[derive(Debug)]
pub enum AttackError {
    /// No case of that name.
    UnknownCase { name: String },
    /// Case `case` failed.
    Case { case: &'static str, error: CaseError },
}

impl fmt::Display for AttackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttackError::UnknownCase { name } => write!(f, "no attack case '{name}' (cases: {})", names().join(", ")),
            AttackError::Case { case, error } => write!(f, "{case}: {error}"),
        }
    }
}

impl Error for AttackError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            AttackError::UnknownCase { .. } => None,
            AttackError::Case { error, .. } => Some(error),
        }
    }
}

pub type CaseResult<T> = Result<T, CaseError>;
