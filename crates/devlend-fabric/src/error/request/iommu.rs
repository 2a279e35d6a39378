//! Calls of the IOMMU API (VT-d second-level tables, domains) and of interrupt remapping that
//! cannot be carried out.

use crate::intremap::IRT_ENTRIES;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadIommu {
    /// A 4 KiB mapping at `iova`, inside an existing 2 MiB mapping.
    InLargePage { iova: u64 },
    /// `iova` is already mapped.
    Mapped { iova: u64 },
    /// A domain called `name` exists already.
    DomainExists { name: String },
    /// `iommu_map` of `iova`, `paddr` and `size`: not all non-zero multiples of 4 KiB.
    MapAlign { iova: u64, paddr: u64, size: u64 },
    /// `iommu_map` of `iova`+`size`, past the `bits`-bit address width.
    MapWidth { iova: u64, size: u64, bits: u32 },
    /// `iommu_unmap` of `iova` and `size`: not both non-zero multiples of 4 KiB.
    UnmapAlign { iova: u64, size: u64 },
    /// `iommu_unmap` of `iova`+`size`, past the `bits`-bit address width.
    UnmapWidth { iova: u64, size: u64, bits: u32 },
    /// `iommu_unmap` of `iova`+`size`, part of the 2 MiB page at `page`.
    SplitLargePage { iova: u64, size: u64, page: u64 },
    /// Host `host` has its IOMMU disabled.
    Disabled { host: String },
    /// `iommu_map` of `paddr`+`size`, beyond host `host`'s physical address space.
    BeyondPhys { paddr: u64, size: u64, host: String },
    /// `function` attached to a domain of host `host`, which it is not in.
    NotInHost { function: String, host: String },
    /// Interrupt remapping asked of host `host`, whose IOMMU is disabled.
    RemapNoIommu { host: String },
    /// An interrupt remapping entry asked of host `host`, where remapping is off.
    RemapOff { host: String },
    /// All of host `host`'s interrupt remapping entries are in use.
    IrtFull { host: String },
}

impl fmt::Display for BadIommu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadIommu::InLargePage { iova } => write!(f, "iova {iova:#x} lies in an existing 2 MiB mapping"),
            BadIommu::Mapped { iova } => write!(f, "iova {iova:#x} is already mapped"),
            BadIommu::DomainExists { name } => write!(f, "IOMMU domain '{name}' already exists"),
            BadIommu::MapAlign { iova, paddr, size } => {
                write!(f, "iommu_map: iova {iova:#x}, paddr {paddr:#x} and size {size:#x} must be non-zero multiples of 4 KiB")
            }
            BadIommu::MapWidth { iova, size, bits } => write!(f, "iommu_map: iova range {iova:#x}+{size:#x} exceeds the {bits}-bit address width"),
            BadIommu::UnmapAlign { iova, size } => {
                write!(f, "iommu_unmap: iova {iova:#x} and size {size:#x} must be non-zero multiples of 4 KiB")
            }
            BadIommu::UnmapWidth { iova, size, bits } => write!(f, "iommu_unmap: iova range {iova:#x}+{size:#x} exceeds the {bits}-bit address width"),
            BadIommu::SplitLargePage { iova, size, page } => write!(
                f,
                "iommu_unmap: {iova:#x}+{size:#x} covers only part of the 2 MiB page at {page:#x}; unmap the whole page (devlend refuses to split large pages, as VFIO does)"
            ),
            BadIommu::Disabled { host } => write!(f, "host {host} has its IOMMU disabled"),
            BadIommu::BeyondPhys { paddr, size, host } => write!(f, "iommu_map: {paddr:#x}+{size:#x} is beyond host {host}'s physical address space"),
            BadIommu::NotInHost { function, host } => write!(f, "{function} is not in host {host}"),
            BadIommu::RemapNoIommu { host } => write!(f, "host {host} has its IOMMU disabled: no interrupt remapping"),
            BadIommu::RemapOff { host } => write!(f, "host {host}: interrupt remapping is off"),
            BadIommu::IrtFull { host } => write!(f, "host {host}: all {IRT_ENTRIES} interrupt remapping entries are in use"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FabricError;

    /// The messages are the ones the fabric printed when `Invalid` held a `String`.
    #[test]
    fn each_iommu_call_renders_the_fabric_s_message() {
        let cases = [
            (BadIommu::InLargePage { iova: 0x20_1000 }, "iova 0x201000 lies in an existing 2 MiB mapping"),
            (BadIommu::Mapped { iova: 0x1000 }, "iova 0x1000 is already mapped"),
            (BadIommu::DomainExists { name: "d".into() }, "IOMMU domain 'd' already exists"),
            (BadIommu::MapAlign { iova: 1, paddr: 0x1000, size: 0x1000 }, "iommu_map: iova 0x1, paddr 0x1000 and size 0x1000 must be non-zero multiples of 4 KiB"),
            (BadIommu::MapWidth { iova: 1 << 48, size: 0x1000, bits: 48 }, "iommu_map: iova range 0x1000000000000+0x1000 exceeds the 48-bit address width"),
            (BadIommu::UnmapAlign { iova: 1, size: 0 }, "iommu_unmap: iova 0x1 and size 0x0 must be non-zero multiples of 4 KiB"),
            (BadIommu::UnmapWidth { iova: 1 << 48, size: 0x1000, bits: 48 }, "iommu_unmap: iova range 0x1000000000000+0x1000 exceeds the 48-bit address width"),
            (
                BadIommu::SplitLargePage { iova: 0x20_0000, size: 0x1000, page: 0x20_0000 },
                "iommu_unmap: 0x200000+0x1000 covers only part of the 2 MiB page at 0x200000; unmap the whole page (devlend refuses to split large pages, as VFIO does)",
            ),
            (BadIommu::Disabled { host: "a".into() }, "host a has its IOMMU disabled"),
            (BadIommu::BeyondPhys { paddr: 1 << 46, size: 0x1000, host: "a".into() }, "iommu_map: 0x400000000000+0x1000 is beyond host a's physical address space"),
            (BadIommu::NotInHost { function: "gpu0".into(), host: "b".into() }, "gpu0 is not in host b"),
            (BadIommu::RemapNoIommu { host: "a".into() }, "host a has its IOMMU disabled: no interrupt remapping"),
            (BadIommu::RemapOff { host: "a".into() }, "host a: interrupt remapping is off"),
            (BadIommu::IrtFull { host: "a".into() }, "host a: all 128 interrupt remapping entries are in use"),
        ];
        for (call, text) in cases {
            assert_eq!(FabricError::from(call).to_string(), text);
        }
    }
}
