//! Errors of the host layer: values with a clear message, never panics. Faults on the data path
//! (a device DMA that the IOMMU refuses) are not errors of this layer; the fabric records them.
//!
//! Each variant holds a typed payload (the names and numbers as fields; its `Display` renders
//! the message): [`NoSuch`], [`Lent`], [`Unreachability`], [`NoRoom`] (a window too small),
//! [`OutOf`] (no memory), [`InUse`] (busy), [`InvalidRequest`] (a request that makes no sense,
//! by subsystem: [`BadAccess`], [`BadDma`], [`BadIrq`], [`BadLend`], [`BadVm`]), [`EptFault`].

use devlend_fabric::report::FailureReport;
use devlend_fabric::route::Failure;
use devlend_fabric::FabricError;
use std::fmt;

mod in_use;
mod invalid;
mod no_room;
mod no_such;
mod out_of;
mod unreachable;
pub use in_use::InUse;
pub use invalid::{vm_size, BadAccess, BadDma, BadIrq, BadLend, BadVm, InvalidRequest, NtbUse, Refusal};
pub use no_room::{MwState, MwUse, NoRoom};
pub use no_such::{HandleUse, InVm, NoSuch};
pub use out_of::OutOf;
pub use unreachable::{LinkStep, Migration, Unreachability};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostError {
    /// A host, device, device handle or VM that does not exist (or no longer exists).
    NoDevice(NoSuch),
    /// The device is already lent to (borrowed by) some host.
    AlreadyLent(Lent),
    /// No NTB joins the two hosts directly, or its link is down. Boxed: a failed migration
    /// holds the error of its step.
    Unreachable(Box<Unreachability>),
    /// An NTB memory window, or the DMA window opened in one, cannot hold what was asked.
    /// Boxed: the refusal names the NTB and lists its windows.
    WindowTooSmall(Box<NoRoom>),
    /// Out of RAM pages, IOVA space or interrupt vectors. Boxed: a VM's shortage holds its cause.
    NoMemory(Box<OutOf>),
    /// The device is in a state that forbids the request (lent away, live DMA mappings). Boxed:
    /// some reasons hold three names.
    Busy(Box<InUse>),
    /// A request that makes no sense (unknown mapping, wrong size, not RAM, not a BAR, ...).
    /// Boxed: some requests hold several names and addresses.
    Invalid(Box<InvalidRequest>),
    /// A CPU access at `addr` that failed on the data path: the fabric's record of what refused
    /// it, with the names of what it refers to; `during`: the step it failed in, if the host
    /// names one (a VM migration's copy of the memory image). Boxed: the report is large, and
    /// every call of the host layer returns this type.
    Fault { addr: u64, failure: Box<FailureReport>, during: Option<&'static str> },
    /// A guest-physical access that a VM's EPT does not map (the guest kernel of `devlend-vm`).
    Ept(EptFault),
    /// The fabric refused a programming call.
    Fabric(FabricError),
}

/// Why a VM's EPT (guest-physical to host-physical) has no translation for an access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EptFault {
    /// `gpa`+`len` runs past the end of the address space.
    Overflow { gpa: u64, len: u64 },
    /// Guest RAM at `gpa` of VM `vm` has no host page behind it.
    NoBacking { vm: String, gpa: u64 },
    /// BAR `bar` of `device`, at guest-physical `gpa` in VM `vm`, has no host BAR behind it yet.
    BarNotBacked { vm: String, device: String, bar: u8, gpa: u64 },
    /// `gpa`+`len` is neither RAM of VM `vm` nor a BAR of a device passed through to it.
    Violation { vm: String, gpa: u64, len: u64 },
}

/// A device that cannot go where it was asked: it is lent to host `borrower`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lent {
    /// Another host asked to borrow `device`.
    Borrow { device: String, borrower: String },
    /// A VM asked for `device` passed through.
    PassThrough { device: String, borrower: String },
}

impl fmt::Display for Lent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lent::Borrow { device, borrower } => {
                write!(f, "{device} is already lent to {borrower}; it must be returned before another host can borrow it")
            }
            Lent::PassThrough { device, borrower } => write!(f, "{device} is lent to {borrower}"),
        }
    }
}

impl fmt::Display for EptFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EptFault::Overflow { gpa, .. } => write!(f, "guest access at {gpa:#x} overflows"),
            EptFault::NoBacking { gpa, .. } => write!(f, "guest RAM at {gpa:#x} has no backing"),
            EptFault::BarNotBacked { device, bar, gpa, .. } => {
                write!(f, "{device}'s BAR {bar} at guest-physical {gpa:#x} is not backed yet: the device is attached when the guest enables bus mastering")
            }
            EptFault::Violation { vm, gpa, len } => {
                write!(f, "EPT violation in VM {vm}: guest-physical {gpa:#x}+{len:#x} is neither its RAM nor a BAR of a device passed through to it")
            }
        }
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::NoDevice(e) => write!(f, "{e}"),
            HostError::AlreadyLent(e) => write!(f, "{e}"),
            HostError::Unreachable(e) => write!(f, "{e}"),
            HostError::Busy(e) => write!(f, "{e}"),
            HostError::NoMemory(e) => write!(f, "{e}"),
            HostError::WindowTooSmall(e) => write!(f, "{e}"),
            HostError::Invalid(e) => write!(f, "{e}"),
            HostError::Fault { failure, during: None, .. } => write!(f, "{failure}"),
            HostError::Fault { failure, during: Some(step), .. } => write!(f, "{step}: {failure}"),
            HostError::Ept(e) => write!(f, "{e}"),
            HostError::Fabric(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for HostError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HostError::Fabric(e) => Some(e),
            HostError::NoDevice(NoSuch::Name(e)) => Some(e.as_ref()),
            HostError::Unreachable(u) => match u.as_ref() {
                Unreachability::Migration(m) => Some(&m.error),
                _ => None,
            },
            HostError::Fault { failure, .. } => Some(failure.as_ref()),
            _ => None,
        }
    }
}

impl HostError {
    /// A CPU access at `addr` that `failure` stopped on the fabric `f` (which names the component).
    pub fn fault(f: &devlend_fabric::Fabric, addr: u64, failure: Failure) -> HostError {
        HostError::Fault { addr, failure: Box::new(f.failure_report(&failure)), during: None }
    }
}

impl From<FabricError> for HostError {
    fn from(e: FabricError) -> Self {
        match e {
            e @ FabricError::UnknownName(_) => HostError::NoDevice(NoSuch::Name(Box::new(e))),
            e => HostError::Fabric(e),
        }
    }
}

pub type HResult<T> = Result<T, HostError>;

/// Human-readable size (the fabric's formatter).
pub(crate) fn size(bytes: u64) -> String {
    devlend_fabric::error::fmt_size(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn a_fabric_refusal_stays_the_fabric_error_as_the_source() {
        let fe = FabricError::LinkDown { ntb: "ntb-l".into(), cabled: true };
        let e = HostError::from(fe.clone());
        assert_eq!(e, HostError::Fabric(fe.clone()));
        assert_eq!(e.to_string(), fe.to_string());
        assert_eq!(e.source().and_then(|s| s.downcast_ref::<FabricError>()), Some(&fe));
        let unknown = FabricError::from(devlend_fabric::Unknown::Ntb { name: "gpu9".into() });
        let e = HostError::from(unknown.clone());
        assert_eq!(e, HostError::NoDevice(NoSuch::Name(Box::new(unknown.clone()))));
        assert_eq!(e.to_string(), "no NTB named 'gpu9'");
        assert_eq!(e.source().and_then(|s| s.downcast_ref::<FabricError>()), Some(&unknown));
    }

    #[test]
    fn a_lent_device_renders_the_request_it_refuses() {
        let borrow = Lent::Borrow { device: "gpu0".into(), borrower: "b".into() };
        assert_eq!(HostError::AlreadyLent(borrow).to_string(), "gpu0 is already lent to b; it must be returned before another host can borrow it");
        let pass = Lent::PassThrough { device: "gpu0".into(), borrower: "b".into() };
        assert_eq!(HostError::AlreadyLent(pass).to_string(), "gpu0 is lent to b");
    }

    #[test]
    fn a_failed_migration_keeps_the_step_s_error_as_the_source() {
        let step = HostError::NoDevice(NoSuch::NotInTree("gpu1".into()));
        let m = Migration { vm: "g".into(), target: "t".into(), from: "a".into(), device: "gpu1".into(), error: step.clone() };
        let e = HostError::from(Unreachability::Migration(m));
        assert_eq!(e.source().and_then(|s| s.downcast_ref::<HostError>()), Some(&step));
    }

    #[test]
    fn the_typed_payloads_keep_host_error_small() {
        assert!(std::mem::size_of::<HostError>() <= 72, "{}", std::mem::size_of::<HostError>());
    }
}
