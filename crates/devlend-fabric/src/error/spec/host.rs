//! A host's description that its CPU profile's address map cannot hold: root ports, RAM, the
//! memory map's windows, interrupt remapping without an IOMMU.

use crate::error::fmt_size;
use crate::model::Range;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostFault {
    /// `n` root ports: a host has 1 to 31 (devices 1-31 on bus 0).
    RootPorts { n: u8 },
    /// A memory map boundary `addr` not aligned to 1 MiB.
    Unaligned { addr: u64 },
    /// RAM of zero bytes or not a multiple of 4 KiB.
    RamSize,
    /// Low RAM ending at `low_top` reaches the 32-bit MMIO window ending at `mmio32_end`.
    LowRamTop { low_top: u64, mmio32_end: u64 },
    /// The 32-bit MMIO window ending at `mmio32_end` reaches into the MSI range `msi`.
    Mmio32OverMsi { mmio32_end: u64, msi: Range },
    /// `ram` bytes of RAM do not fit `bits` of physical address.
    RamBeyond { ram: u64, bits: u32 },
    /// The 64-bit MMIO window at `base` starts below the end of high RAM, `ram_end`.
    Mmio64OverRam { base: u64, ram_end: u64 },
    /// The 64-bit MMIO window at `base` starts beyond `bits` of physical address.
    Mmio64Beyond { base: u64, bits: u32 },
    /// Interrupt remapping asked of host `host`, which has no IOMMU.
    NoIommu { host: String },
}

impl fmt::Display for HostFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostFault::RootPorts { n } => write!(f, "{n} root ports: expected 1 to 31 (devices 1-31 on bus 0)"),
            HostFault::Unaligned { addr } => write!(f, "{addr:#x} is not aligned to 1 MiB"),
            HostFault::RamSize => write!(f, "RAM size must be a non-zero multiple of 4 KiB"),
            HostFault::LowRamTop { low_top, mmio32_end } => write!(f, "low RAM top {low_top:#x} overlaps the 32-bit MMIO window ending at {mmio32_end:#x}"),
            HostFault::Mmio32OverMsi { mmio32_end, msi } => write!(f, "32-bit MMIO window end {mmio32_end:#x} overlaps the MSI range {msi}"),
            HostFault::RamBeyond { ram, bits } => write!(f, "{} of RAM does not fit the {bits}-bit physical address space", fmt_size(*ram)),
            HostFault::Mmio64OverRam { base, ram_end } => write!(f, "64-bit MMIO window at {base:#x} overlaps high RAM ending at {ram_end:#x}"),
            HostFault::Mmio64Beyond { base, bits } => write!(f, "64-bit MMIO base {base:#x} is beyond the {bits}-bit physical address space"),
            HostFault::NoIommu { host } => write!(f, "host {host} has no IOMMU (iommu: false): interrupt remapping needs one"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SpecFault;

    /// The messages are the ones the loader printed when a `SpecError` held a `String`.
    #[test]
    fn each_host_fault_renders_the_loader_s_message() {
        let cases = [
            (HostFault::RootPorts { n: 0 }, "0 root ports: expected 1 to 31 (devices 1-31 on bus 0)"),
            (HostFault::Unaligned { addr: 0x1234 }, "0x1234 is not aligned to 1 MiB"),
            (HostFault::RamSize, "RAM size must be a non-zero multiple of 4 KiB"),
            (
                HostFault::LowRamTop { low_top: 0xd000_0000, mmio32_end: 0xc000_0000 },
                "low RAM top 0xd0000000 overlaps the 32-bit MMIO window ending at 0xc0000000",
            ),
            (
                HostFault::Mmio32OverMsi { mmio32_end: 0xff00_0000, msi: Range::new(0xfee0_0000, 0x10_0000) },
                "32-bit MMIO window end 0xff000000 overlaps the MSI range 0xfee00000-0xfeefffff",
            ),
            (HostFault::RamBeyond { ram: 1 << 50, bits: 46 }, "1024 TiB of RAM does not fit the 46-bit physical address space"),
            (
                HostFault::Mmio64OverRam { base: 0x10_0000_0000, ram_end: 0x20_0000_0000 },
                "64-bit MMIO window at 0x1000000000 overlaps high RAM ending at 0x2000000000",
            ),
            (HostFault::Mmio64Beyond { base: 1 << 46, bits: 46 }, "64-bit MMIO base 0x400000000000 is beyond the 46-bit physical address space"),
            (HostFault::NoIommu { host: "a".into() }, "host a has no IOMMU (iommu: false): interrupt remapping needs one"),
        ];
        for (fault, text) in cases {
            assert_eq!(SpecFault::from(fault).to_string(), text);
        }
    }
}
