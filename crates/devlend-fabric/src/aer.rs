//! Advanced Error Reporting (PCIe Base 4.0 §6.2, §7.8.4): which errors the hardware reports for
//! the failures the fabric models, where, and how severe; and the hot-plug steps that follow a
//! link going down (§6.7.3). Timeless: the machine (`devlend_engine::machine::aer`) times the
//! error message's delivery to the host's AER driver, and records it as [`Event::Aer`].
//!
//! - A poisoned completion (§2.7.2; §6.2.7 Table 6-5 "Poisoned TLP Received"), a completion
//!   timeout (§2.8, "Completion Timeout") and an Unsupported Request (§2.3.1; a port whose link is
//!   down terminates requests as UR, §2.9.1) are uncorrectable errors of the default severity
//!   non-fatal (§7.8.4.4, Uncorrectable Error Severity register defaults: bits 12, 14 and 20 are 0).
//! - A Surprise Down (§6.2.7, the link of a downstream port going down unexpectedly; §7.8.4.4 bit
//!   5 defaults to 1) is fatal.
//!
//! Where it is logged: at the root port above the device concerned (the completer, or the port
//! whose link went down), with the source ID of the agent that detected it: the root port itself
//! for a CPU's request (the root port is the requester on that link and receives the
//! completion), or a switch downstream port for its own Surprise Down or UR (it sends an error
//! message up to its root port, §6.2.3.1). Errors of devices' own DMA are logged the same way
//! (which agent's log a DMA error lands in is not modelled further). Correctable errors
//! (replays, bad TLPs) are not modelled: the fabric's links do not corrupt.
//!
//! [`Event::Aer`]: crate::events::Event::Aer

use crate::fabric::Fabric;
use crate::model::{FuncId, HostId, NodeId, NodeKind};
use crate::route::Failure;
use devlend_wire::Bdf;

/// The errors of §6.2.7 the fabric reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AerError {
    PoisonedTlp,
    CompletionTimeout,
    UnsupportedRequest,
    SurpriseDown,
}

/// §6.2.2: correctable, uncorrectable non-fatal, uncorrectable fatal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Correctable,
    NonFatal,
    Fatal,
}

impl AerError {
    pub fn name(self) -> &'static str {
        match self {
            AerError::PoisonedTlp => "poisoned-tlp",
            AerError::CompletionTimeout => "completion-timeout",
            AerError::UnsupportedRequest => "unsupported-request",
            AerError::SurpriseDown => "surprise-down",
        }
    }

    /// The default severity (§7.8.4.4).
    pub fn severity(self) -> Severity {
        match self {
            AerError::SurpriseDown => Severity::Fatal,
            _ => Severity::NonFatal,
        }
    }
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Correctable => "correctable",
            Severity::NonFatal => "non-fatal",
            Severity::Fatal => "fatal",
        }
    }
}

/// An error detected: the root port that logs it, and who detected it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AerDetect {
    pub host: HostId,
    pub root_port: NodeId,
    pub source: Bdf,
    pub error: AerError,
}

/// The steps of a surprise removal reaching a driver (Linux pciehp, then Device Lending's
/// notice to the borrower for a lent device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HotplugStep {
    /// The downstream port's Data Link Layer State Changed / Presence Detect Changed interrupt
    /// (§6.7.3.3-4, Slot Status §7.8.11), or an NTB adapter's link-down interrupt.
    Interrupt,
    /// pciehp's handler ran and removed the device (`pci_stop_and_remove_bus_device`).
    Removed,
    /// The borrower's Device Lending agent learnt that the lend is gone.
    Notified,
    /// The driver's `remove` ran: its requests fail, its waits end with "no such device".
    DriverRemoved,
    /// The hypervisor forwarded the removal into the VM that had the device: the guest
    /// driver's `remove` ran (`devlend_vm::unplug`).
    GuestRemoved,
}

impl HotplugStep {
    pub fn name(self) -> &'static str {
        match self {
            HotplugStep::Interrupt => "slot-interrupt",
            HotplugStep::Removed => "pciehp-removed",
            HotplugStep::Notified => "lending-notified",
            HotplugStep::DriverRemoved => "driver-removed",
            HotplugStep::GuestRemoved => "guest-driver-removed",
        }
    }
}

impl Fabric {
    /// The AER error a failed access makes the hardware report, if any.
    pub fn aer_of(&self, f: &Failure) -> Option<AerDetect> {
        let (node, error) = match *f {
            Failure::Poisoned { func } => (self.funcs[func as usize].node, AerError::PoisonedTlp),
            Failure::Unresponsive { func } => (self.funcs[func as usize].node, AerError::CompletionTimeout),
            Failure::PortDown { node } => (self.nodes[node as usize].parent?, AerError::UnsupportedRequest),
            _ => return None,
        };
        self.detect_at(node, error)
    }

    /// The Surprise Down the downstream port above `node` reports when its link goes down.
    pub fn surprise_down(&self, node: NodeId) -> Option<AerDetect> {
        let port = self.nodes[node as usize].parent?;
        self.nodes[port as usize].kind.faces_down().then_some(())?;
        self.detect_at(port, AerError::SurpriseDown)
    }

    /// Logged at the root port at or above `node`: by that port (a device's errors, detected by
    /// the root port as requester) or by the switch downstream port `node` itself.
    fn detect_at(&self, node: NodeId, error: AerError) -> Option<AerDetect> {
        let mut n = node;
        while !matches!(self.nodes[n as usize].kind, NodeKind::RootPort { .. }) {
            n = self.nodes[n as usize].parent?;
        }
        let by = if matches!(self.nodes[node as usize].kind, NodeKind::SwitchDown { .. }) { node } else { n };
        Some(AerDetect { host: self.nodes[n as usize].host, root_port: n, source: self.nodes[by as usize].bridge.bdf, error })
    }

    /// The function's name, for events.
    pub fn func_name(&self, func: FuncId) -> &str {
        &self.funcs[func as usize].name
    }
}
