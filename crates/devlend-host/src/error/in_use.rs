//! Why a device or host is in a state that forbids a request ([`super::HostError::Busy`]): the
//! device, host and counts as values, rendered to the host layer's messages.

use std::fmt;

/// A device or host in a state that forbids the request (lent away, live DMA mappings or
/// interrupt vectors, a vector already taken).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InUse {
    /// Lender `host`'s driver of `device` holds `count` DMA mappings (`vectors`: interrupt
    /// vectors instead), so the device cannot be lent.
    Lender { device: String, host: String, count: usize, vectors: bool },
    /// Borrower `host`'s driver still holds `maps` DMA mappings and `irqs` interrupt vectors of
    /// `device`, so it cannot be returned.
    Return { device: String, host: String, maps: usize, irqs: usize },
    /// Host `host` holds interrupt vectors, so interrupt remapping cannot be turned on.
    VectorsHeld { host: String },
    /// The INTx line of `device` already has handler `handler`.
    IntxHandler { device: String, handler: u32 },
    /// `device` is lent to host `borrower`.
    LentTo { device: String, borrower: String },
    /// MSI-X entry `entry` of `device` already has vector `vector`.
    MsixEntry { device: String, entry: u16, vector: u8 },
    /// `device` is passed through to VM `owner`, so VM `vm` cannot have it.
    PassedThrough { device: String, owner: String, vm: String },
    /// Interrupt source `source` (its debug form) of guest device handle `device` already has
    /// vector `vector`.
    GuestVector { source: String, device: u32, vector: u8 },
    /// `device` anchors the VM's memory mappings on its lender; `others` must go first.
    Anchor { device: String, others: Box<[String]> },
    /// A VM's device needs interrupt remapping, which `cause` forbids turning on.
    RemapForVm(Box<InUse>),
    /// A driver's submission queue of `device` is full.
    QueueFull { device: String },
    /// No completion of `device` arrived within `seconds` s.
    NoCompletion { device: String, seconds: u64 },
}

impl fmt::Display for InUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InUse::Lender { device, host, count, vectors } => {
                let what = if *vectors { "interrupt vectors" } else { "DMA mappings" };
                write!(f, "{device} is in use in {host}: its driver holds {count} {what}")
            }
            InUse::Return { device, host, maps, irqs } => write!(
                f,
                "cannot return {device}: its driver in {host} still holds {maps} DMA mappings and {irqs} interrupt vectors, so the device may have DMA or interrupts in flight; \
                 the driver must unmap and free_irq first (return_device_force takes it back anyway)"
            ),
            InUse::VectorsHeld { host } => {
                write!(f, "host {host}: interrupt vectors are in use; enable remapping before drivers request them")
            }
            InUse::IntxHandler { device, handler } => write!(f, "the INTx line of {device} already has handler {handler:#x}"),
            InUse::LentTo { device, borrower } => write!(f, "{device} is lent to host {borrower}"),
            InUse::MsixEntry { device, entry, vector } => {
                write!(f, "request_irq: MSI-X entry {entry} of {device} already has vector {vector:#x}")
            }
            InUse::PassedThrough { device, owner, vm } => {
                write!(f, "{device} is already passed through to VM {owner}; it must be removed there before VM {vm} can have it")
            }
            InUse::GuestVector { source, device, vector } => {
                write!(f, "{source} of guest device {device} already has vector {vector:#x}")
            }
            InUse::Anchor { device, others } => {
                write!(f, "{device} carries the VM's memory mappings on its lender; hot-remove {} first", others.join(", "))
            }
            InUse::RemapForVm(cause) => write!(
                f,
                "{cause}: a VM's device needs interrupt remapping, which must be on before any driver in the host requests a vector"
            ),
            InUse::QueueFull { device } => write!(f, "{device} queue full"),
            InUse::NoCompletion { device, seconds } => write!(f, "no {device} completion in {seconds} s"),
        }
    }
}

impl From<InUse> for super::HostError {
    fn from(e: InUse) -> Self {
        super::HostError::Busy(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostError;

    /// The messages are the ones the host layer printed when `Busy` held a `String`.
    #[test]
    fn each_reason_renders_the_host_layer_s_message() {
        let cases = [
            (InUse::Lender { device: "gpu0".into(), host: "lender".into(), count: 1, vectors: false }, "gpu0 is in use in lender: its driver holds 1 DMA mappings"),
            (InUse::Lender { device: "gpu0".into(), host: "lender".into(), count: 2, vectors: true }, "gpu0 is in use in lender: its driver holds 2 interrupt vectors"),
            (
                InUse::Return { device: "gpu0".into(), host: "b".into(), maps: 0, irqs: 1 },
                "cannot return gpu0: its driver in b still holds 0 DMA mappings and 1 interrupt vectors, so the device may have DMA or interrupts in flight; the driver must unmap and free_irq first (return_device_force takes it back anyway)",
            ),
            (InUse::IntxHandler { device: "nic0".into(), handler: 0x40 }, "the INTx line of nic0 already has handler 0x40"),
            (InUse::MsixEntry { device: "gpu0".into(), entry: 3, vector: 0x20 }, "request_irq: MSI-X entry 3 of gpu0 already has vector 0x20"),
            (InUse::GuestVector { source: "Msix(0)".into(), device: 7, vector: 0x21 }, "Msix(0) of guest device 7 already has vector 0x21"),
            (InUse::Anchor { device: "gpu0".into(), others: ["gpu1".into(), "nvme0".into()].into() }, "gpu0 carries the VM's memory mappings on its lender; hot-remove gpu1, nvme0 first"),
            (InUse::NoCompletion { device: "ramdisk".into(), seconds: 1 }, "no ramdisk completion in 1 s"),
        ];
        for (reason, text) in cases {
            assert_eq!(HostError::from(reason).to_string(), text);
        }
        let held = InUse::VectorsHeld { host: "a".into() };
        assert_eq!(
            InUse::RemapForVm(Box::new(held)).to_string(),
            "host a: interrupt vectors are in use; enable remapping before drivers request them: a VM's device needs interrupt remapping, which must be on before any driver in the host requests a vector"
        );
    }
}
