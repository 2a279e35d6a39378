//! What ran out ([`super::HostError::NoMemory`]): RAM pages, IOVA space or interrupt vectors,
//! with the host or VM and the size asked as values, rendered to the host layer's messages.

use super::{size, HostError};
use crate::irq::{FIRST_DEVICE_VECTOR, FIRST_SYSTEM_VECTOR};
use std::fmt;

/// Out of RAM pages, IOVA space or interrupt vectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutOf {
    /// Host `host` has no free device vector (all of the device range are requested).
    Vector { host: String },
    /// A device's IOVA space cannot map `len` more bytes.
    Iova { len: u64 },
    /// `bytes` rounded up to pages overflows the address space of host `host`.
    HostBytes { host: String, bytes: u64 },
    /// Host `host` has `free` bytes of pages, fewer than the `asked`.
    HostPages { host: String, asked: u64, free: u64 },
    /// The lender's IOVA space has no room for a DMA window of `len` bytes.
    DmaWindow { len: u64 },
    /// Host `host` cannot back VM `vm`'s `ram` bytes of guest RAM: `cause`.
    GuestRam { vm: String, host: String, ram: u64, cause: Box<HostError> },
    /// VM `vm`'s guest kernel has no `bytes` bytes free.
    GuestMemory { vm: String, bytes: u64 },
    /// VM `vm` has no free interrupt vector.
    GuestVector { vm: String },
}

impl fmt::Display for OutOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutOf::Vector { host } => {
                write!(f, "host {host}: no free interrupt vector (all of {FIRST_DEVICE_VECTOR:#x}-{:#x} are requested)", FIRST_SYSTEM_VECTOR - 1)
            }
            OutOf::Iova { len } => write!(f, "IOVA space exhausted: cannot map {}", size(*len)),
            OutOf::HostBytes { host, bytes } => write!(f, "host {host}: cannot allocate {bytes} bytes"),
            OutOf::HostPages { host, asked, free } => {
                write!(f, "host {host}: out of memory allocating {} ({} free)", size(*asked), size(*free))
            }
            OutOf::DmaWindow { len } => write!(f, "no IOVA space left for a DMA window of {}", size(*len)),
            OutOf::GuestRam { vm, host, ram, cause } => {
                write!(f, "VM {vm}: host {host} cannot back {} of guest RAM: {cause}", size(*ram))
            }
            OutOf::GuestMemory { vm, bytes } => write!(f, "VM {vm}: out of guest memory allocating {bytes} bytes"),
            OutOf::GuestVector { vm } => write!(f, "VM {vm}: no free interrupt vector"),
        }
    }
}

impl From<OutOf> for HostError {
    fn from(e: OutOf) -> Self {
        HostError::NoMemory(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages are the ones the host layer printed when `NoMemory` held a `String`.
    #[test]
    fn each_shortage_renders_the_host_layer_s_message() {
        let cause = HostError::from(OutOf::HostPages { host: "a".into(), asked: 2 << 20, free: 1 << 20 });
        let cases = [
            (OutOf::Vector { host: "a".into() }, "host a: no free interrupt vector (all of 0x20-0xeb are requested)"),
            (OutOf::Iova { len: 8192 }, "IOVA space exhausted: cannot map 8 KiB"),
            (OutOf::HostBytes { host: "a".into(), bytes: u64::MAX }, "host a: cannot allocate 18446744073709551615 bytes"),
            (OutOf::DmaWindow { len: 1 << 30 }, "no IOVA space left for a DMA window of 1 GiB"),
            (
                OutOf::GuestRam { vm: "g".into(), host: "a".into(), ram: 4 << 20, cause: Box::new(cause) },
                "VM g: host a cannot back 4 MiB of guest RAM: host a: out of memory allocating 2 MiB (1 MiB free)",
            ),
            (OutOf::GuestMemory { vm: "g".into(), bytes: 100 }, "VM g: out of guest memory allocating 100 bytes"),
            (OutOf::GuestVector { vm: "g".into() }, "VM g: no free interrupt vector"),
        ];
        for (shortage, text) in cases {
            assert_eq!(HostError::from(shortage).to_string(), text);
        }
    }
}
