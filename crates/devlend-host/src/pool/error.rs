//! Errors of the device pool: each names the device (and hosts) it concerns; what the lending
//! agents refused is kept as the host layer's typed error.

use crate::error::HostError;
use devlend_fabric::report::FailureReport;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolError {
    /// No host of that name: `error` is the host layer's refusal of it.
    NoSuchHost { host: String, error: HostError },
    /// Neither a function of the fabric nor a fabric device ID.
    NoSuchDevice { device: String },
    /// An NTB adapter: it carries lending, it cannot be lent.
    NotLendable { device: String },
    /// `connect` between hosts that no NTB joins.
    NoPath { lender: String, borrower: String },
    /// `add` of a device that is in the pool already.
    AlreadyInPool { device: String },
    /// The device was never added to the pool (`smartio_tool add`).
    NotInPool { device: String },
    /// The device is in the pool but its lender has not made it available.
    Unavailable { device: String },
    /// The lender has not connected to the borrower (`smartio_tool connect`).
    NotConnected { device: String, lender: String, borrower: String },
    /// The device is borrowed: it cannot be borrowed again, made unavailable or removed.
    Borrowed { device: String, by: String },
    /// `return` of a device that is not borrowed (or not by that host).
    NotBorrowed { device: String, by: Option<String> },
    /// The lending agents refused (no NTB between the hosts, a DMA window the NTB cannot map,
    /// a driver still holding the device, ...); nothing of the attempt is left programmed.
    Lending { device: String, error: HostError },
    /// A fault that cannot be injected (unknown kind or target).
    Fault { kind: String, target: String, error: HostError },
    /// The device was surprise-removed: it is gone until its slot comes back.
    Removed { device: String },
    /// A fault touched the device and its reset (FLR) before the next borrow failed: `failure`
    /// is what the fabric refused (boxed: it is large).
    ResetFailed { device: String, failure: Box<FailureReport> },
}

impl PoolError {
    /// A short kind for bindings and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            PoolError::NoSuchHost { .. } => "no-such-host",
            PoolError::NoSuchDevice { .. } => "no-such-device",
            PoolError::NotLendable { .. } => "not-lendable",
            PoolError::NoPath { .. } => "unreachable",
            PoolError::AlreadyInPool { .. } => "already-in-pool",
            PoolError::NotInPool { .. } => "not-in-pool",
            PoolError::Unavailable { .. } => "unavailable",
            PoolError::NotConnected { .. } => "not-connected",
            PoolError::Borrowed { .. } => "borrowed",
            PoolError::NotBorrowed { .. } => "not-borrowed",
            PoolError::Fault { .. } => "fault",
            PoolError::Removed { .. } => "removed",
            PoolError::ResetFailed { .. } => "reset-failed",
            PoolError::Lending { error, .. } => match error {
                HostError::Unreachable(_) => "unreachable",
                HostError::WindowTooSmall(_) => "window-too-large",
                HostError::Busy(_) => "in-use",
                HostError::AlreadyLent(_) => "borrowed",
                HostError::NoMemory(_) => "no-memory",
                _ => "lending",
            },
        }
    }
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::NoSuchHost { error, .. } => write!(f, "{error}"),
            PoolError::NoSuchDevice { device } => write!(f, "no device named '{device}' and no fabric device ID {device} (`list` shows them)"),
            PoolError::NotLendable { device } => write!(f, "{device} is an NTB adapter: it carries Device Lending and cannot be lent"),
            PoolError::NoPath { lender, borrower } => {
                write!(f, "{lender} cannot lend to {borrower}: no NTB joins the two hosts (Device Lending maps through one NTB between them)")
            }
            PoolError::AlreadyInPool { device } => write!(f, "{device} is in the pool already"),
            PoolError::NotInPool { device } => write!(f, "{device} is not in the pool: its lender must add it first (smartio_tool add)"),
            PoolError::Unavailable { device } => write!(f, "{device} is in the pool but unavailable: its lender must make it available first"),
            PoolError::NotConnected { device, lender, borrower } => {
                write!(f, "{borrower} cannot see {device}: its lender {lender} has not connected to {borrower} (smartio_tool connect)")
            }
            PoolError::Borrowed { device, by } => write!(f, "{device} is borrowed by {by}; it must be returned first"),
            PoolError::NotBorrowed { device, by: None } => write!(f, "{device} is not borrowed"),
            PoolError::NotBorrowed { device, by: Some(h) } => write!(f, "{device} is not borrowed by {h}"),
            PoolError::Lending { device, error } => write!(f, "{device}: {error}"),
            PoolError::Fault { kind, target, error } => write!(f, "cannot inject {kind} at {target}: {error}"),
            PoolError::Removed { device } => write!(f, "{device} was surprise-removed: it cannot be borrowed until its slot is back (port-up)"),
            PoolError::ResetFailed { device, failure } => {
                write!(f, "{device} cannot be lent again: a fault touched it and its Function Level Reset failed ({failure}); a device that cannot be reset is not given to the next borrower")
            }
        }
    }
}

impl std::error::Error for PoolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PoolError::NoSuchHost { error, .. } | PoolError::Lending { error, .. } | PoolError::Fault { error, .. } => Some(error),
            PoolError::ResetFailed { failure, .. } => Some(failure.as_ref()),
            _ => None,
        }
    }
}

pub type PResult<T> = Result<T, PoolError>;
