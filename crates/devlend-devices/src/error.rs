//! Errors of the device models themselves: typed, each naming the function, address or
//! parameter it concerns. Nothing here knows of hosts or drivers (their errors, which wrap these,
//! are devlend-drivers' `DeviceError`).

use devlend_fabric::model::FuncId;
use devlend_fabric::report::FailureReport;
use devlend_fabric::FabricError;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
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
    /// A PEX8749 DMA engine asked for with `channels` channels, where the engine has 1 to `max`.
    DmaChannels { channels: u32, max: u32 },
    /// A PEX8749 DMA channel asked to keep no read in flight.
    NoOutstandingReads,
    /// NT adapter `ntb` has no peer adapter: its NT registers have no other side.
    NoPeer { ntb: String },
    /// NT adapter `ntb` has no BAR 0 of at least `span` bytes for its NT registers.
    NoControlBar { ntb: String, span: u64 },
    /// A call into the fabric failed (an NTB interface refused: its link down, no interrupt
    /// remapping entry left).
    Fabric(FabricError),
}

impl From<FabricError> for ModelError {
    fn from(e: FabricError) -> ModelError {
        ModelError::Fabric(e)
    }
}

/// What is wrong with a hardware parameter of params/hardware.toml.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamsProblem {
    /// The file, or the table that should hold the parameter, does not read as what is expected.
    /// Boxed, as `NoMediaTiming`'s: the parser's error is large and every `MResult` would carry it.
    Toml(Box<toml::de::Error>),
    /// The file has no table `[table]`.
    NoTable { table: &'static str },
    /// The file has no `[device.profile]` table.
    NoProfile { profile: String },
    /// Device profile `profile` lacks the media timing fields (`error` names the field).
    NoMediaTiming { profile: String, error: Box<toml::de::Error> },
    /// The kind's settings (`[device_kind.KIND]`) name `key`, which the device model does not have.
    NoSuchSetting { key: String },
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
            ParamsProblem::NoSuchSetting { key } => write!(f, "the kind's settings name {key}, which the device model does not read"),
            ParamsProblem::Zero => write!(f, "is 0"),
        }
    }
}

impl ModelError {
    /// A short kind, for bindings: "params", "no-function", "no-bar", "dma", "outside-memory",
    /// "dma-channels", "no-outstanding-reads", "no-peer", "no-control-bar", "fabric".
    pub fn kind(&self) -> &'static str {
        match self {
            ModelError::Params { .. } => "params",
            ModelError::NoFunction { .. } => "no-function",
            ModelError::NoBar { .. } => "no-bar",
            ModelError::Dma { .. } => "dma",
            ModelError::OutsideMemory { .. } => "outside-memory",
            ModelError::DmaChannels { .. } => "dma-channels",
            ModelError::NoOutstandingReads => "no-outstanding-reads",
            ModelError::NoPeer { .. } => "no-peer",
            ModelError::NoControlBar { .. } => "no-control-bar",
            ModelError::Fabric(_) => "fabric",
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Params { field, problem } => write!(f, "params/hardware.toml {field}: {problem}"),
            ModelError::NoFunction { func } => write!(f, "no function #{func}"),
            ModelError::NoBar { device, bar } => write!(f, "{device} has no BAR {bar} to window onto device memory"),
            ModelError::Dma { addr, failure, .. } => write!(f, "DMA at {addr:#x} failed: {failure}"),
            ModelError::OutsideMemory { func, off, len, size } => {
                write!(f, "device memory {off:#x}+{len:#x} is outside the GPU's {size:#x} bytes of memory (function #{func})")
            }
            ModelError::DmaChannels { channels, max } => write!(f, "{channels} DMA channels: the engine has 1 to {max}"),
            ModelError::NoOutstandingReads => write!(f, "outstanding_reads must be at least 1"),
            ModelError::NoPeer { ntb } => write!(f, "{ntb} has no peer: nothing reaches the other host"),
            ModelError::NoControlBar { ntb, span } => write!(f, "{ntb}: no control BAR 0 of {span:#x} bytes for the NT registers"),
            ModelError::Fabric(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ModelError::Dma { failure, .. } => Some(failure.as_ref()),
            ModelError::Fabric(e) => Some(e),
            ModelError::Params { problem: ParamsProblem::Toml(e) | ParamsProblem::NoMediaTiming { error: e, .. }, .. } => Some(e.as_ref()),
            _ => None,
        }
    }
}

pub type MResult<T> = Result<T, ModelError>;
