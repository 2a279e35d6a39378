//! Interrupt remapping, modelled on Intel VT-d (rev. 3.0, chapter 5): a host's IOMMU takes MSI
//! writes through an Interrupt Remapping Table (IRT) instead of letting the message name its own
//! vector.
//!
//! - Formats (§5.1.2): a write to 0xFEEx_xxxx is in *compatibility* format (address bit 4 = 0:
//!   the data names the vector) or *remappable* format (bit 4 = 1: address bits 19:5 and bit 2
//!   hold a 16-bit handle, bit 3 SHV says whether the data adds a subhandle). With remapping
//!   on, compatibility-format interrupts are blocked (§5.1.2.1, GSTS.CFIS clear), as Linux sets
//!   it up (drivers/iommu/intel/irq_remapping.c clears DMA_GCMD_CFI).
//! - Each handle indexes an Interrupt Remapping Table Entry (§9.10): present, the vector to
//!   raise, and source validation: SVT 01 checks the requester ID (devlend uses SQ = 0, all 16
//!   bits compared), SVT 10 checks that its bus lies in a range (Linux uses it for NTB proxy IDs,
//!   `set_msi_sid`), SVT 00 checks nothing.
//! - A blocked request (§7.1.3: compatibility format blocked, handle beyond the table, entry not
//!   present, source-ID verification failed) is a recorded fault: `Failure::Interrupt`, nothing
//!   delivered. The vector raised is the entry's, whatever data the message carries.
//!
//! Not modelled: SHV = 1 (the handle plus a subhandle from the data: devlend's kernels write
//! SHV = 0, the whole handle in the address, which the spec allows; a message with SHV set is
//! blocked), posted interrupts, destination modes (every host has one destination, APIC ID 0).

use crate::error::{BadIommu, FResult};
use crate::fabric::Fabric;
use crate::model::HostId;
use devlend_wire::Bdf;

/// IRT entries per host: 128, the handles whose address bits (11:5) stay inside the MSI page, so
/// a borrower's one mapped MSI page reaches every entry (`lending::msi`). Assumed: real tables
/// hold up to 64 Ki entries; devlend hands out the lowest free handle.
pub const IRT_ENTRIES: usize = 128;
const FORMAT_REMAPPABLE: u64 = 1 << 4;
const SHV: u64 = 1 << 3;

/// Source validation of an entry (§9.10, SVT/SQ/SID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// SVT 00.
    Any,
    /// SVT 01 with SQ 0: the requester ID must equal this.
    Rid(Bdf),
    /// SVT 10: the requester's bus must lie in [first, last].
    Bus { first: u8, last: u8 },
}

impl Source {
    fn allows(self, rid: Bdf) -> bool {
        match self {
            Source::Any => true,
            Source::Rid(r) => r == rid,
            Source::Bus { first, last } => (first..=last).contains(&rid.bus()),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Irte {
    pub vector: u8,
    pub source: Source,
}

/// Why an interrupt request was blocked (§7.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntrFault {
    CompatibilityBlocked,
    SubhandleUnsupported,
    HandleOutOfRange { handle: u32 },
    NotPresent { handle: u32 },
    SourceMismatch { handle: u32 },
}

impl IntrFault {
    pub fn code(self) -> &'static str {
        match self {
            IntrFault::CompatibilityBlocked => "compatibility-format-blocked",
            IntrFault::SubhandleUnsupported => "subhandle-unsupported",
            IntrFault::HandleOutOfRange { .. } => "handle-out-of-range",
            IntrFault::NotPresent { .. } => "irte-not-present",
            IntrFault::SourceMismatch { .. } => "source-id-mismatch",
        }
    }

    pub fn describe(self) -> String {
        match self {
            IntrFault::CompatibilityBlocked => "compatibility-format interrupt blocked (interrupt remapping is on)".into(),
            IntrFault::SubhandleUnsupported => "remappable interrupt with SHV set (subhandles are not modelled)".into(),
            IntrFault::HandleOutOfRange { handle } => format!("interrupt handle {handle} is beyond the remapping table ({IRT_ENTRIES} entries)"),
            IntrFault::NotPresent { handle } => format!("interrupt remapping entry {handle} is not present"),
            IntrFault::SourceMismatch { handle } => format!("the requester is not the source interrupt remapping entry {handle} validates"),
        }
    }
}

/// The Interrupt Remapping Table of one host.
#[derive(Clone, Debug)]
pub struct Irt {
    pub entries: Vec<Option<Irte>>,
}

impl Irt {
    fn new() -> Irt {
        Irt { entries: vec![None; IRT_ENTRIES] }
    }

    /// Decode a write into the MSI range: the entry it selects, or why it is blocked.
    pub fn lookup(&self, addr: u64, rid: Bdf) -> Result<(u32, Irte), IntrFault> {
        if addr & FORMAT_REMAPPABLE == 0 {
            return Err(IntrFault::CompatibilityBlocked);
        }
        if addr & SHV != 0 {
            return Err(IntrFault::SubhandleUnsupported);
        }
        let handle = handle_of(addr);
        let e = self.entries.get(handle as usize).ok_or(IntrFault::HandleOutOfRange { handle })?;
        let e = e.ok_or(IntrFault::NotPresent { handle })?;
        if !e.source.allows(rid) {
            return Err(IntrFault::SourceMismatch { handle });
        }
        Ok((handle, e))
    }

    /// The entry a remappable address selects (no source check: the route made it).
    pub fn entry_at(&self, addr: u64) -> Option<Irte> {
        self.entries.get(handle_of(addr) as usize).copied().flatten()
    }
}

fn handle_of(addr: u64) -> u32 {
    ((addr >> 5) & 0x7fff) as u32 | (((addr >> 2) & 1) as u32) << 15
}

/// The remappable-format message address of `handle` on an MSI page at `page` (SHV = 0).
pub fn remappable_addr(page: u64, handle: u32) -> u64 {
    page | ((handle as u64 & 0x7fff) << 5) | FORMAT_REMAPPABLE | (((handle as u64 >> 15) & 1) << 2)
}

impl Fabric {
    /// Turn interrupt remapping on in `host`'s IOMMU (GCMD.IRE, with compatibility format
    /// blocked). Refused without an IOMMU. Idempotent.
    pub fn intr_remap_enable(&mut self, host: HostId) -> FResult<()> {
        if !self.hosts[host as usize].iommu {
            return Err(BadIommu::RemapNoIommu { host: self.hosts[host as usize].name.clone() }.into());
        }
        let m = &mut self.iommus[host as usize];
        m.irt.get_or_insert_with(Irt::new);
        self.invalidate_routes();
        Ok(())
    }

    pub fn intr_remap_on(&self, host: HostId) -> bool {
        self.iommus[host as usize].irt.is_some()
    }

    /// Program the lowest free entry; returns its handle.
    pub fn irte_alloc(&mut self, host: HostId, irte: Irte) -> FResult<u32> {
        let name = self.hosts[host as usize].name.clone();
        let Some(t) = self.iommus[host as usize].irt.as_mut() else { return Err(BadIommu::RemapOff { host: name }.into()) };
        let Some(i) = t.entries.iter().position(|e| e.is_none()) else {
            return Err(BadIommu::IrtFull { host: name }.into());
        };
        t.entries[i] = Some(irte);
        Ok(i as u32)
    }

    /// Clear an entry; false when it was not present.
    pub fn irte_free(&mut self, host: HostId, handle: u32) -> bool {
        let e = self.iommus[host as usize].irt.as_mut().and_then(|t| t.entries.get_mut(handle as usize));
        e.and_then(|e| e.take()).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_handles_and_source_validation() {
        let mut t = Irt::new();
        let dev = Bdf::new(3, 0, 0);
        t.entries[5] = Some(Irte { vector: 0x31, source: Source::Rid(dev) });
        t.entries[6] = Some(Irte { vector: 0x32, source: Source::Bus { first: 8, last: 8 } });
        let a = remappable_addr(0xfee0_0000, 5);
        assert_eq!(a, 0xfee0_00b0);
        assert_eq!(t.lookup(a, dev), Ok((5, t.entries[5].unwrap())));
        assert_eq!(t.lookup(a, Bdf::new(4, 0, 0)), Err(IntrFault::SourceMismatch { handle: 5 }));
        assert_eq!(t.lookup(0xfee0_0000, dev), Err(IntrFault::CompatibilityBlocked));
        assert_eq!(t.lookup(a | SHV, dev), Err(IntrFault::SubhandleUnsupported));
        assert_eq!(t.lookup(remappable_addr(0xfee0_0000, 7), dev), Err(IntrFault::NotPresent { handle: 7 }));
        assert_eq!(t.lookup(remappable_addr(0xfee0_0000, 0x81), dev), Err(IntrFault::HandleOutOfRange { handle: 0x81 }));
        assert!(t.lookup(remappable_addr(0xfee0_0000, 6), Bdf::new(8, 1, 2)).is_ok());
        assert!(t.lookup(remappable_addr(0xfee0_0000, 6), Bdf::new(9, 0, 0)).is_err());
    }
}
