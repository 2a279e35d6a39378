//! Requests to the live fabric that cannot be carried out ([`super::FabricError::Invalid`]): an
//! argument out of range or inconsistent with the hardware, grouped by what it programs (the
//! NTB API, the IOMMU and interrupt remapping, address expressions), each case with the names,
//! indices, addresses and sizes as fields, rendered to the fabric's messages (the ones it
//! printed when `Invalid` held a `String`).

use super::{fmt_size, FabricError};
use std::fmt;

mod address;
mod iommu;
mod ntb;
pub use address::BadAddress;
pub use iommu::BadIommu;
pub use ntb::BadNtb;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadRequest {
    /// A call of the NTB API (windows, translations, LUTs, doorbells, scratchpads, messages).
    Ntb(BadNtb),
    /// A call of the IOMMU API or of interrupt remapping.
    Iommu(BadIommu),
    /// A requester or an address expression over the fabric's names.
    Address(BadAddress),
    /// A config access of `len` bytes at offset `off`: not 1, 2 or 4 bytes, naturally aligned,
    /// inside the config space.
    ConfigAccess { off: usize, len: usize },
    /// BAR `bar` of `function` moved to `addr`, where its `size` bytes run past 64 bits.
    BarWraps { function: String, bar: u8, addr: u64, size: u64 },
    /// Port `port` of `component` has no upstream link to take down.
    NoUpstream { component: String, port: String },
}

impl fmt::Display for BadRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadRequest::Ntb(e) => write!(f, "{e}"),
            BadRequest::Iommu(e) => write!(f, "{e}"),
            BadRequest::Address(e) => write!(f, "{e}"),
            BadRequest::ConfigAccess { off, len } => {
                write!(f, "config access of {len} bytes at {off:#x}: expected 1, 2 or 4 bytes, naturally aligned, inside 4 KiB")
            }
            BadRequest::BarWraps { function, bar, addr, size } => {
                write!(f, "{function} BAR {bar}: {addr:#x} + {} runs past the 64-bit address space", fmt_size(*size))
            }
            BadRequest::NoUpstream { component, port } => write!(f, "{component}.{port} has no upstream link to take down"),
        }
    }
}

impl From<BadRequest> for FabricError {
    fn from(e: BadRequest) -> Self {
        FabricError::Invalid(Box::new(e))
    }
}

/// Each group's case is a fabric error through its request.
macro_rules! into_fabric_error {
    ($($bad:ident => $variant:ident),*) => {$(
        impl From<$bad> for FabricError {
            fn from(e: $bad) -> Self {
                FabricError::Invalid(Box::new(BadRequest::$variant(e)))
            }
        }
    )*};
}
into_fabric_error!(BadNtb => Ntb, BadIommu => Iommu, BadAddress => Address);

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages are the ones the fabric printed when `Invalid` held a `String`.
    #[test]
    fn each_request_renders_the_fabric_s_message() {
        let cases = [
            (BadRequest::ConfigAccess { off: 3, len: 2 }, "config access of 2 bytes at 0x3: expected 1, 2 or 4 bytes, naturally aligned, inside 4 KiB"),
            (
                BadRequest::BarWraps { function: "gpu0".into(), bar: 1, addr: u64::MAX - 0xfff, size: 1 << 20 },
                "gpu0 BAR 1: 0xfffffffffffff000 + 1 MiB runs past the 64-bit address space",
            ),
            (BadRequest::NoUpstream { component: "a".into(), port: "rc".into() }, "a.rc has no upstream link to take down"),
        ];
        for (request, text) in cases {
            assert_eq!(FabricError::from(request).to_string(), text);
        }
    }
}
