//! Errors as values with context. A [`SpecError`] points into the topology description with a
//! JSON pointer (`/devices/3/functions/0/bars/1/size`) that the Python front end turns into a
//! file, line and field, and says what is wrong there as a typed [`SpecFault`] (by group, see
//! `spec`). A `FabricError` is a failed request to the live model (bad name, bad
//! programming); faults on the data path are not errors but recorded events (see `route`).
//! Its variants hold typed payloads, names, indices and addresses as fields: [`Unknown`] (a
//! name or id the fabric does not have), [`BadRequest`] (an invalid request, by what it
//! programs: [`BadNtb`], [`BadIommu`], [`BadAddress`]), rendered to the same messages the
//! fabric printed when they held a `String`.

use crate::route::Failure;
use std::fmt;

mod request;
mod spec;
mod unknown;
pub use request::{BadAddress, BadIommu, BadNtb, BadRequest};
pub use spec::{BarFault, DeviceFault, EndFault, HostFault, JsonError, LinkFault, NameFault, ParamFault, ResourceFault, SpecError, SpecFault};
pub use unknown::Unknown;

/// A request to the live fabric that cannot be carried out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FabricError {
    /// A name (host, device, NTB, domain) or id that the fabric does not have.
    UnknownName(Unknown),
    /// An argument out of range or inconsistent with the hardware (window index, size,
    /// alignment). Boxed: some requests hold several names and addresses.
    Invalid(Box<BadRequest>),
    /// A config write that would make a BAR decode where RAM or the MSI range already is: refused,
    /// as Linux refuses overlapping resources (kernel/resource.c `request_resource` returns the
    /// conflict; drivers/pci/setup-res.c `pci_claim_resource`). `function` and `bar` name the BAR,
    /// [addr, addr+size) where it would have decoded, `with` what is there already.
    ResourceConflict { function: String, bar: u8, addr: u64, size: u64, with: String },
    /// An access to the peer through NTB adapter `ntb` while its link is down: no cable to a peer
    /// (`cabled` false) or the link disabled (`ntb_link_disable`).
    LinkDown { ntb: String, cabled: bool },
}

impl fmt::Display for FabricError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FabricError::UnknownName(e) => write!(f, "{e}"),
            FabricError::Invalid(e) => write!(f, "{e}"),
            FabricError::LinkDown { ntb, cabled: false } => write!(f, "{ntb}: NTB link is down (no cable to a peer)"),
            FabricError::LinkDown { ntb, cabled: true } => write!(f, "{ntb}: NTB link is down (ntb_link_disable)"),
            FabricError::ResourceConflict { function, bar, addr, size, with } => {
                write!(f, "{function} BAR {bar} at {addr:#x} ({}) would overlap {with} while decoding; refused, the BAR stays where it was", fmt_size(*size))
            }
        }
    }
}

/// A transfer stopped by the first of its TLPs that could not be delivered. `addr` is the
/// transfer's own address there (as the requester issued it), `delivered` the bytes before it,
/// and `failure` what refused it, naming the component (`Fabric::describe_failure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaFault {
    pub addr: u64,
    pub delivered: u64,
    pub failure: Failure,
}

impl std::error::Error for FabricError {}

pub type FResult<T> = Result<T, FabricError>;

/// Human-readable size: 256 MiB, 4 KiB, 1536 B.
pub fn fmt_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 5] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)];
    for (name, unit) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {}", bytes / unit, name);
        }
    }
    if bytes == 0 {
        return "0 B".into();
    }
    format!("{bytes} B")
}
