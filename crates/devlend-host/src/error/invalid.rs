//! Requests that make no sense ([`super::HostError::Invalid`]): an unknown mapping, a wrong
//! size, an address that is not RAM, a device that has no such BAR, ... Grouped by subsystem
//! (CPU and memory accesses, the DMA API, interrupts, Device Lending, VMs), each case with the
//! names, addresses and sizes it concerns as fields, rendered to the host layer's messages.
//!
//! A few cases carry fields their message does not show (the function or adapter whose record
//! a lending step expected to find): the messages are the ones the host layer printed when
//! `Invalid` held a `String`, which the Python tests and the CLI read.

use super::HostError;
use crate::fault::FAULT_KINDS;
use crate::hygiene::HYGIENE_POLICIES;
use devlend_fabric::SpecError;
use std::fmt;

mod access;
mod dma;
mod irq;
mod lend;
mod vm;
pub use access::BadAccess;
pub use dma::BadDma;
pub use irq::BadIrq;
pub use lend::BadLend;
pub use vm::{vm_size, BadVm, Refusal};

/// A request that makes no sense, by subsystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InvalidRequest {
    /// A CPU or memory access, or a kernel allocation call.
    Access(BadAccess),
    /// A call of the DMA API.
    Dma(BadDma),
    /// An interrupt call (MSI-X, INTx, vectors).
    Irq(BadIrq),
    /// Device Lending: lend, borrow, return, peer-to-peer and MSI windows.
    Lend(BadLend),
    /// A VM: its hypervisor, its guest kernel, migration.
    Vm(BadVm),
    /// `device` is an NTB adapter, which `refused` cannot use.
    NtbAdapter { device: String, refused: NtbUse },
    /// `device` has no BAR `bar`.
    NoBar { device: String, bar: u8 },
    /// A topology description that does not build.
    Topology(SpecError),
    /// No fault kind is called `name`.
    UnknownFaultKind { name: String },
    /// No hygiene policy is called `name`.
    UnknownHygiene { name: String },
    /// A link fault on NTB `ntb`, which has no cable to a peer.
    NoCable { ntb: String },
    /// A port fault on switch port `port`, below which nothing is linked.
    NothingBelow { port: String },
}

/// What an NTB adapter was asked for, which the NTB driver and Device Lending keep to themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NtbUse {
    /// To be lent.
    Lend,
    /// To request interrupts.
    Interrupts,
    /// To map DMA.
    Dma,
    /// To be registered with the mediated parent, which passes devices through to VMs.
    PassThrough,
    /// To be passed through to a VM: the hosts' Device Lending uses it.
    PassThroughLent,
    /// To be faulted as a device (its cable is pulled with link-down).
    DeviceFault,
}

impl fmt::Display for NtbUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NtbUse::Lend => " and cannot be lent",
            NtbUse::Interrupts => "; its interrupts belong to the NTB driver",
            NtbUse::Dma => "; its DMA belongs to the NTB driver and Device Lending",
            NtbUse::PassThrough => " and cannot be passed through",
            NtbUse::PassThroughLent => " and cannot be passed through (the hosts' Device Lending uses it)",
            NtbUse::DeviceFault => ": pull its cable with link-down instead",
        })
    }
}

impl fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidRequest::Access(e) => write!(f, "{e}"),
            InvalidRequest::Dma(e) => write!(f, "{e}"),
            InvalidRequest::Irq(e) => write!(f, "{e}"),
            InvalidRequest::Lend(e) => write!(f, "{e}"),
            InvalidRequest::Vm(e) => write!(f, "{e}"),
            InvalidRequest::NtbAdapter { device, refused } => write!(f, "{device} is an NTB adapter{refused}"),
            InvalidRequest::NoBar { device, bar } => write!(f, "{device} has no BAR {bar}"),
            InvalidRequest::Topology(e) => write!(f, "{e}"),
            InvalidRequest::UnknownFaultKind { name } => {
                write!(f, "no fault kind '{name}': expected one of {}", FAULT_KINDS.map(|(n, _, _)| n).join(", "))
            }
            InvalidRequest::UnknownHygiene { name } => {
                write!(f, "no hygiene policy '{name}': expected one of {}", HYGIENE_POLICIES.map(|(n, _, _)| n).join(", "))
            }
            InvalidRequest::NoCable { ntb } => write!(f, "{ntb} has no cable to a peer: there is no link to change"),
            InvalidRequest::NothingBelow { port } => write!(f, "{port}: nothing is linked below this switch port"),
        }
    }
}

impl From<InvalidRequest> for HostError {
    fn from(e: InvalidRequest) -> Self {
        HostError::Invalid(Box::new(e))
    }
}

/// Each subsystem's case is a host error through its request.
macro_rules! into_host_error {
    ($($bad:ident => $variant:ident),*) => {$(
        impl From<$bad> for InvalidRequest {
            fn from(e: $bad) -> Self {
                InvalidRequest::$variant(e)
            }
        }
        impl From<$bad> for HostError {
            fn from(e: $bad) -> Self {
                HostError::Invalid(Box::new(InvalidRequest::$variant(e)))
            }
        }
    )*};
}
into_host_error!(BadAccess => Access, BadDma => Dma, BadIrq => Irq, BadLend => Lend, BadVm => Vm);

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages are the ones the host layer printed when `Invalid` held a `String`.
    #[test]
    fn each_request_renders_the_host_layer_s_message() {
        let ntb = |refused| InvalidRequest::NtbAdapter { device: "ntb-a".into(), refused };
        let cases = [
            (ntb(NtbUse::Lend), "ntb-a is an NTB adapter and cannot be lent"),
            (ntb(NtbUse::Interrupts), "ntb-a is an NTB adapter; its interrupts belong to the NTB driver"),
            (ntb(NtbUse::Dma), "ntb-a is an NTB adapter; its DMA belongs to the NTB driver and Device Lending"),
            (ntb(NtbUse::PassThrough), "ntb-a is an NTB adapter and cannot be passed through"),
            (ntb(NtbUse::PassThroughLent), "ntb-a is an NTB adapter and cannot be passed through (the hosts' Device Lending uses it)"),
            (ntb(NtbUse::DeviceFault), "ntb-a is an NTB adapter: pull its cable with link-down instead"),
            (InvalidRequest::NoBar { device: "gpu0".into(), bar: 5 }, "gpu0 has no BAR 5"),
            (InvalidRequest::Topology(SpecError::at("/hosts/0", devlend_fabric::error::NameFault::ReservedCpu)), "/hosts/0: 'cpu' is reserved for the CPU requester of a host"),
            (
                InvalidRequest::UnknownFaultKind { name: "melt".into() },
                "no fault kind 'melt': expected one of link-down, link-up, host-crash, host-reboot, surprise-removal, port-down, port-up, completion-timeout, poisoned",
            ),
            (InvalidRequest::UnknownHygiene { name: "wipe".into() }, "no hygiene policy 'wipe': expected one of scrub, none"),
            (InvalidRequest::NoCable { ntb: "ntb-x".into() }, "ntb-x has no cable to a peer: there is no link to change"),
            (InvalidRequest::NothingBelow { port: "sw0.p3".into() }, "sw0.p3: nothing is linked below this switch port"),
        ];
        for (request, text) in cases {
            assert_eq!(HostError::from(request).to_string(), text);
        }
    }
}
