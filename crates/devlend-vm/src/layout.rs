//! The guest-physical address space of an x86 VM, as QEMU's `pc` machine lays it out
//! (000 §5: "The x86 architecture uses well-defined addresses for low and high memory"):
//!
//! - low memory from 0: all of the RAM when the guest has less than 3.5 GiB, else 3 GiB
//!   (QEMU `pc_piix`: `lowmem = 0xc0000000` when `ram_size >= 0xe0000000`, gigabyte-aligned);
//! - high memory from 4 GiB: the rest;
//! - the 32-bit PCI hole from the end of low memory (rounded up to 256 MiB) to the IOAPIC at
//!   0xfec00000, for 32-bit BARs;
//! - the 64-bit PCI hole from the end of high memory rounded up to 1 GiB (QEMU's
//!   `pci_hole64_start`), for 64-bit BARs.
//!
//! Guest RAM is backed by host memory in 2 MiB chunks (hugetlbfs-backed guests), which the host
//! hands out scattered (see `vm`).

use devlend_host::alloc::align_up;

pub const GIB: u64 = 1 << 30;
/// The granule of guest RAM backing and of pinning (a 2 MiB huge page).
pub const CHUNK: u64 = 2 << 20;
/// Where high memory starts.
pub const HIGH_BASE: u64 = 1 << 32;
/// Low memory of a guest with 3.5 GiB of RAM or more.
pub const LOW_MAX: u64 = 0xc000_0000;
const LOW_ALL_BELOW: u64 = 0xe000_0000;
const IOAPIC: u64 = 0xfec0_0000;
/// Guest RAM the guest kernel keeps for itself (its image, page tables): never handed out.
pub const GUEST_RESERVED: u64 = 16 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of low memory, from guest-physical 0.
    pub low: u64,
    /// Bytes of high memory, from 4 GiB.
    pub high: u64,
}

impl Layout {
    /// The layout of a guest with `ram` bytes (a multiple of [`CHUNK`]).
    pub fn for_ram(ram: u64) -> Layout {
        let low = if ram >= LOW_ALL_BELOW { LOW_MAX } else { ram };
        Layout { low, high: ram - low }
    }

    pub fn ram(&self) -> u64 {
        self.low + self.high
    }

    /// RAM ranges [start, end) in guest-physical addresses.
    pub fn ranges(&self) -> Vec<(u64, u64)> {
        let mut v = vec![(0, self.low)];
        if self.high > 0 {
            v.push((HIGH_BASE, HIGH_BASE + self.high));
        }
        v
    }

    pub fn is_ram(&self, gpa: u64, len: u64) -> bool {
        let Some(end) = gpa.checked_add(len) else { return false };
        self.ranges().iter().any(|&(s, e)| gpa >= s && end <= e)
    }

    /// The 32-bit PCI hole [start, end).
    pub fn mmio32(&self) -> (u64, u64) {
        (align_up(self.low, 256 << 20).unwrap_or(IOAPIC), IOAPIC)
    }

    /// Where the 64-bit PCI hole starts.
    pub fn mmio64_base(&self) -> u64 {
        let end = if self.high > 0 { HIGH_BASE + self.high } else { HIGH_BASE };
        align_up(end, GIB).unwrap_or(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_guests_live_below_4g_large_ones_split_at_3g() {
        let s = Layout::for_ram(512 << 20);
        assert_eq!((s.low, s.high, s.ranges().len()), (512 << 20, 0, 1));
        assert_eq!(s.mmio32(), (512 << 20, IOAPIC));
        assert_eq!(s.mmio64_base(), HIGH_BASE);
        let b = Layout::for_ram(4 * GIB);
        assert_eq!((b.low, b.high), (3 * GIB, GIB));
        assert_eq!(b.ranges(), vec![(0, 3 * GIB), (HIGH_BASE, HIGH_BASE + GIB)]);
        assert_eq!(b.mmio64_base(), 5 * GIB);
        assert!(b.is_ram(HIGH_BASE, 4096) && !b.is_ram(3 * GIB, 1) && !b.is_ram(u64::MAX, 2));
    }
}
