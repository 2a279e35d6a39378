//! Errors of the host layer: values with a clear message, never panics. Faults on the data path
//! (a device DMA that the IOMMU refuses) are not errors of this layer; the fabric records them.

use devlend_fabric::FabricError;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostError {
    /// A host, device or device handle that does not exist (or no longer exists).
    NoDevice(String),
    /// The device is already lent to (borrowed by) some host.
    AlreadyLent(String),
    /// No NTB joins the two hosts directly.
    Unreachable(String),
    /// An NTB memory window, or the DMA window opened in one, cannot hold what was asked.
    WindowTooSmall(String),
    /// Out of RAM pages or IOVA space.
    NoMemory(String),
    /// The device is in a state that forbids the request (lent away, live DMA mappings).
    Busy(String),
    /// A request that makes no sense (unknown mapping, wrong size, not RAM, not a BAR, ...).
    Invalid(String),
    /// A CPU access that failed on the data path (the fabric's message).
    Fault(String),
    /// The fabric refused a programming call.
    Fabric(String),
}

impl HostError {
    pub fn message(&self) -> &str {
        match self {
            HostError::NoDevice(m)
            | HostError::AlreadyLent(m)
            | HostError::Unreachable(m)
            | HostError::WindowTooSmall(m)
            | HostError::NoMemory(m)
            | HostError::Busy(m)
            | HostError::Invalid(m)
            | HostError::Fault(m)
            | HostError::Fabric(m) => m,
        }
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for HostError {}

impl From<FabricError> for HostError {
    fn from(e: FabricError) -> Self {
        match e {
            FabricError::UnknownName(m) => HostError::NoDevice(m),
            FabricError::Invalid(m) => HostError::Fabric(m),
            e @ (FabricError::ResourceConflict { .. } | FabricError::LinkDown { .. }) => HostError::Fabric(e.to_string()),
        }
    }
}

pub type HResult<T> = Result<T, HostError>;

pub(crate) fn invalid<T>(msg: impl Into<String>) -> HResult<T> {
    Err(HostError::Invalid(msg.into()))
}

/// Human-readable size (the fabric's formatter).
pub(crate) fn size(bytes: u64) -> String {
    devlend_fabric::error::fmt_size(bytes)
}
