//! The IOMMU of one host, modelled on Intel VT-d (rev. 3.0).
//!
//! - Context entries (§3.4.3): one per requester ID (bus, devfn), pointing at a domain. A DMA
//!   from a requester without a context entry faults ("context entry not present").
//! - Second-level page tables (§3.6): 4 levels of 512 entries for a 48-bit address width, with
//!   4 KiB leaves at level 1 and 2 MiB leaves (PS bit) at level 2. Read and write permissions.
//! - Faults (§7.2) are recorded in a log with requester, address, access and reason; the model
//!   never panics on a bad DMA.
//!
//! What devlend takes from the papers: 000 §2.2 and §6 (Fig 8): with an IOMMU, devices live in
//! domains with private I/O virtual address spaces, so peer-to-peer TLPs must climb to the root to
//! be translated (Linux enables ACS redirect in the switches; see `route`). Device Lending maps
//! DMA buffers on the borrower through this IOMMU into the window the lender opens (000 §4).
//!
//! The IOMMU whole, in this order (the unit tests are `iommu_tests.rs`):
//! 1. faults and translations (`FaultReason`, `Fault`, `Translation`; VT-d §7.2);
//! 2. the second-level page table (`PageTable`: map, clear, walk; VT-d §3.6);
//! 3. a host's IOMMU (`Iommu`: domains, context entries §3.4.3, `Iommu::map`, `Iommu::unmap`,
//!    `Iommu::translate`, the fault log);
//! 4. the IOMMU API software programs it through, on `Fabric` (Linux include/linux/iommu.h:
//!    `iommu_domain_alloc`, `iommu_attach` (`iommu_attach_device`), `iommu_attach_rid`,
//!    `iommu_detach`, `iommu_map`, `iommu_unmap`; each change drops the cached routes);
//! 5. `remap`: the router's IOMMU piece, where a walk (`crate::route`) meets the IOMMU at the
//!    root complex: `Fabric::translate` (DMA remapping, VT-d §3) and `Fabric::remap_interrupt`
//!    (interrupt remapping, §5, the table in `crate::intremap`).

use crate::error::{BadIommu, FResult, Unknown};
use crate::fabric::Fabric;
use crate::model::{FuncId, HostId, NodeKind};
use crate::params::params;
use devlend_wire::Bdf;
use rustc_hash::FxHashMap;

pub type DomainId = u32;

const PRESENT: u64 = 1;
const WRITE: u64 = 2;
const LEAF_2M: u64 = 1 << 7;
const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultReason {
    NoContext,
    NotPresent,
    WriteDenied,
    AddressWidth,
}

impl FaultReason {
    pub fn describe(self) -> &'static str {
        match self {
            FaultReason::NoContext => "context entry not present (device not attached to a domain)",
            FaultReason::NotPresent => "second-level page entry not present",
            FaultReason::WriteDenied => "write to a read-only mapping",
            FaultReason::AddressWidth => "address beyond the IOMMU's address width",
        }
    }

    /// The short name of the fault, as events and JSON report it.
    pub fn code(self) -> &'static str {
        match self {
            FaultReason::NoContext => "no-context",
            FaultReason::NotPresent => "not-present",
            FaultReason::WriteDenied => "write-denied",
            FaultReason::AddressWidth => "address-width",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub requester: Bdf,
    pub addr: u64,
    pub write: bool,
    pub reason: FaultReason,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    pub addr: u64,
    pub page_size: u64,
    /// Page-table levels a walk reads: the address width's table levels down to the leaf (48 bits:
    /// 4 for a 4 KiB leaf, 3 for 2 MiB; 39 bits: 3 and 2).
    pub levels: u32,
}

/// A 4-level radix page table; table entries hold the index of the child table. Tables that
/// become empty on unmap are freed (their slot is reused by the next table made), as Linux frees
/// page-table pages on unmap (drivers/iommu/intel/iommu.c `dma_pte_clear_level` + freelist).
#[derive(Clone, Default)]
pub struct PageTable {
    tables: Vec<Option<Box<[u64; 512]>>>,
    /// Present entries per table, to know when one becomes empty without scanning it.
    used: Vec<u16>,
    free: Vec<usize>,
}

/// Bytes one entry of a table at `level` covers (4 KiB at level 1, 2 MiB at 2, ...).
fn entry_span(level: u32) -> u64 {
    0x1000 << (9 * (level - 1))
}

impl PageTable {
    fn new() -> PageTable {
        PageTable { tables: vec![Some(Box::new([0; 512]))], used: vec![0], free: Vec::new() }
    }

    /// Page-table pages in use (the root included): 1 for an empty domain.
    pub fn table_count(&self) -> usize {
        self.tables.len() - self.free.len()
    }

    fn t(&self, t: usize) -> &[u64; 512] {
        self.tables[t].as_ref().expect("a live table")
    }

    fn set(&mut self, t: usize, i: usize, e: u64) {
        let tab = self.tables[t].as_mut().expect("a live table");
        let was = tab[i] & PRESENT != 0;
        tab[i] = e;
        let now = e & PRESENT != 0;
        self.used[t] = self.used[t] + now as u16 - was as u16;
    }

    fn alloc(&mut self) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.tables[i] = Some(Box::new([0; 512]));
                self.used[i] = 0;
                i
            }
            None => {
                self.tables.push(Some(Box::new([0; 512])));
                self.used.push(0);
                self.tables.len() - 1
            }
        }
    }

    fn index(iova: u64, level: u32) -> usize {
        ((iova >> (12 + 9 * (level - 1))) & 511) as usize
    }

    /// Walk to the table at `stop_level`, creating tables on the way.
    fn table_for(&mut self, iova: u64, stop_level: u32) -> FResult<usize> {
        let mut t = 0usize;
        for level in (stop_level + 1..=4).rev() {
            let i = Self::index(iova, level);
            let e = self.t(t)[i];
            if e & PRESENT == 0 {
                let child = self.alloc();
                self.set(t, i, ((child as u64) << 12) | PRESENT | WRITE);
                t = child;
            } else if e & LEAF_2M != 0 {
                return Err(BadIommu::InLargePage { iova }.into());
            } else {
                t = (e >> 12) as usize;
            }
        }
        Ok(t)
    }

    fn map_page(&mut self, iova: u64, paddr: u64, big: bool, write: bool) -> FResult<()> {
        let level = if big { 2 } else { 1 };
        let t = self.table_for(iova, level)?;
        let i = Self::index(iova, level);
        if self.t(t)[i] & PRESENT != 0 {
            return Err(BadIommu::Mapped { iova }.into());
        }
        self.set(t, i, (paddr & ADDR_MASK) | PRESENT | if write { WRITE } else { 0 } | if big { LEAF_2M } else { 0 });
        Ok(())
    }

    /// Clear every leaf inside [lo, hi) of table `t` (at `level`, covering from `base`), skipping
    /// absent subtrees and freeing child tables that become empty; returns the bytes cleared.
    /// The caller has checked that no 2 MiB leaf straddles `lo` or `hi`.
    fn clear(&mut self, t: usize, level: u32, base: u64, lo: u64, hi: u64) -> u64 {
        let span = entry_span(level);
        let (first, last) = (((lo - base) / span) as usize, ((hi - 1 - base) / span) as usize);
        let mut done = 0;
        for i in first..=last {
            let e = self.t(t)[i];
            if e & PRESENT == 0 {
                continue;
            }
            let b = base + i as u64 * span;
            if level == 1 || e & LEAF_2M != 0 {
                self.set(t, i, 0);
                done += span;
                continue;
            }
            let child = (e >> 12) as usize;
            done += self.clear(child, level - 1, b, lo.max(b), hi.min(b + span));
            if self.used[child] == 0 {
                self.tables[child] = None;
                self.free.push(child);
                self.set(t, i, 0);
            }
        }
        done
    }

    /// The size of the leaf mapping `iova`, if any (no permission check).
    fn leaf_size(&self, iova: u64) -> Option<u64> {
        self.walk(iova, false).ok().map(|t| t.page_size)
    }

    pub fn walk(&self, iova: u64, write: bool) -> Result<Translation, FaultReason> {
        let mut t = 0usize;
        for level in (1..=4u32).rev() {
            let e = self.t(t)[Self::index(iova, level)];
            if e & PRESENT == 0 {
                return Err(FaultReason::NotPresent);
            }
            let leaf = level == 1 || e & LEAF_2M != 0;
            if leaf {
                if write && e & WRITE == 0 {
                    return Err(FaultReason::WriteDenied);
                }
                let size = entry_span(level);
                return Ok(Translation { addr: (e & ADDR_MASK) + (iova & (size - 1)), page_size: size, levels: 5 - level });
            }
            t = (e >> 12) as usize;
        }
        Err(FaultReason::NotPresent)
    }
}

#[derive(Clone)]
pub struct Domain {
    pub name: String,
    pub table: PageTable,
    pub mapped_bytes: u64,
}

#[derive(Clone)]
pub struct Iommu {
    pub enabled: bool,
    pub address_bits: u32,
    pub context: FxHashMap<Bdf, DomainId>,
    pub domains: Vec<Domain>,
    pub faults: Vec<Fault>,
    pub faults_dropped: u64,
    /// The interrupt remapping table, when remapping is on (`intremap`).
    pub irt: Option<crate::intremap::Irt>,
}

impl Iommu {
    pub fn new(enabled: bool) -> Iommu {
        Iommu {
            enabled,
            address_bits: params().iommu.address_bits,
            context: FxHashMap::default(),
            domains: Vec::new(),
            faults: Vec::new(),
            faults_dropped: 0,
            irt: None,
        }
    }

    pub fn domain_alloc(&mut self, name: &str) -> FResult<DomainId> {
        if self.domains.iter().any(|d| d.name == name) {
            return Err(BadIommu::DomainExists { name: name.into() }.into());
        }
        self.domains.push(Domain { name: name.to_string(), table: PageTable::new(), mapped_bytes: 0 });
        Ok(self.domains.len() as DomainId - 1)
    }

    pub fn domain_by_name(&self, name: &str) -> Option<DomainId> {
        self.domains.iter().position(|d| d.name == name).map(|i| i as DomainId)
    }

    /// Point the context entries of `rids` at `domain` (iommu_attach_device; aliases included by the caller).
    pub fn attach(&mut self, domain: DomainId, rids: &[Bdf]) {
        for r in rids {
            self.context.insert(*r, domain);
        }
    }

    pub fn detach(&mut self, rids: &[Bdf]) {
        for r in rids {
            self.context.remove(r);
        }
    }

    /// iommu_map: map [iova, iova+size) to [paddr, ...), using 2 MiB pages where both are aligned.
    /// Nothing is left mapped when it fails part-way.
    pub fn map(&mut self, domain: DomainId, iova: u64, paddr: u64, size: u64, write: bool) -> FResult<()> {
        let (p4k, p2m) = (params().iommu.page_4k, params().iommu.page_2m);
        if !iova.is_multiple_of(p4k) || !paddr.is_multiple_of(p4k) || !size.is_multiple_of(p4k) || size == 0 {
            return Err(BadIommu::MapAlign { iova, paddr, size }.into());
        }
        if iova.checked_add(size).is_none_or(|e| e > 1u64 << self.address_bits) {
            return Err(BadIommu::MapWidth { iova, size, bits: self.address_bits }.into());
        }
        let d = self.domains.get_mut(domain as usize).ok_or(crate::error::Unknown::DomainId { domain })?;
        let mut off = 0;
        while off < size {
            let (i, p) = (iova + off, paddr + off);
            let big = i % p2m == 0 && p % p2m == 0 && size - off >= p2m;
            if let Err(e) = d.table.map_page(i, p, big, write) {
                if off > 0 {
                    d.table.clear(0, 4, 0, iova, iova + off);
                }
                return Err(e);
            }
            off += if big { p2m } else { p4k };
        }
        d.mapped_bytes += size;
        Ok(())
    }

    /// iommu_unmap: clear every mapping inside [iova, iova+size); returns the bytes unmapped (0
    /// when nothing was mapped there). Time grows with the page tables present in the range, not
    /// with its size: absent subtrees are skipped. Page tables left empty are freed.
    ///
    /// Refused, changing nothing: an iova or size that is not a non-zero multiple of 4 KiB (Linux
    /// `__iommu_unmap` refuses an unmap not aligned to the smallest page size), a range beyond the
    /// address width, and a range that covers only part of a 2 MiB page. For the last, devlend
    /// refuses rather than splits: VFIO type1 v2 rejects unmaps that bisect a mapping
    /// (drivers/vfio/vfio_iommu_type1.c, `vfio_dma_do_unmap`), while the VT-d driver would clear
    /// the whole large page and return more than asked (drivers/iommu/intel/iommu.c
    /// `intel_iommu_unmap`: "Cope with horrid API which requires us to unmap more than the size
    /// argument if it happens to be a large-page mapping"), silently cutting off DMA to the part
    /// the caller kept. A refusal leaves the caller's view of the domain true.
    pub fn unmap(&mut self, domain: DomainId, iova: u64, size: u64) -> FResult<u64> {
        let (p4k, p2m) = (params().iommu.page_4k, params().iommu.page_2m);
        if !iova.is_multiple_of(p4k) || !size.is_multiple_of(p4k) || size == 0 {
            return Err(BadIommu::UnmapAlign { iova, size }.into());
        }
        let end = iova.checked_add(size).filter(|e| *e <= 1u64 << self.address_bits);
        let Some(end) = end else {
            return Err(BadIommu::UnmapWidth { iova, size, bits: self.address_bits }.into());
        };
        let d = self.domains.get_mut(domain as usize).ok_or(crate::error::Unknown::DomainId { domain })?;
        for (at, edge) in [(iova, iova), (end - 1, end)] {
            if d.table.leaf_size(at) == Some(p2m) && edge % p2m != 0 {
                let page = at & !(p2m - 1);
                return Err(BadIommu::SplitLargePage { iova, size, page }.into());
            }
        }
        let done = d.table.clear(0, 4, 0, iova, end);
        d.mapped_bytes -= done.min(d.mapped_bytes);
        Ok(done)
    }

    /// Page-table pages a domain holds (the root included).
    pub fn table_count(&self, domain: DomainId) -> Option<usize> {
        self.domains.get(domain as usize).map(|d| d.table.table_count())
    }

    /// Levels of second-level table this IOMMU's address width needs: 3 for 39 bits, 4 for 48,
    /// 5 for 57 (VT-d 3.0 §3.6: 9 bits per level above the 12-bit page offset).
    pub fn table_levels(&self) -> u32 {
        (self.address_bits - 12).div_ceil(9)
    }

    /// Entries a walk with nothing cached reads to reach a leaf of `page_size` bytes.
    pub fn walk_levels(&self, page_size: u64) -> u32 {
        let leaf_level = (page_size.trailing_zeros() - 12) / 9 + 1;
        self.table_levels() + 1 - leaf_level
    }

    /// Translate a DMA address for a requester. Pure: the caller records faults.
    pub fn translate(&self, rid: Bdf, iova: u64, write: bool) -> Result<Translation, FaultReason> {
        if iova >> self.address_bits != 0 {
            return Err(FaultReason::AddressWidth);
        }
        let d = self.context.get(&rid).ok_or(FaultReason::NoContext)?;
        let t = self.domains[*d as usize].table.walk(iova, write)?;
        Ok(Translation { levels: self.walk_levels(t.page_size), ..t })
    }

    pub fn record(&mut self, fault: Fault) {
        if self.faults.len() < params().iommu.fault_log_entries {
            self.faults.push(fault);
        } else {
            self.faults_dropped += 1;
        }
    }
}

/// The IOMMU API (Linux include/linux/iommu.h: `iommu_domain_alloc`, `iommu_attach_device`,
/// `iommu_map`, `iommu_unmap`, ...) on a host's IOMMU: what software programs, each change
/// dropping the cached routes ([`Fabric::invalidate_routes`]).
impl Fabric {
    fn iommu_on(&self, host: HostId) -> FResult<()> {
        if !self.hosts[host as usize].iommu {
            return Err(BadIommu::Disabled { host: self.hosts[host as usize].name.clone() }.into());
        }
        Ok(())
    }

    pub fn iommu_domain_alloc(&mut self, host: HostId, name: &str) -> FResult<DomainId> {
        self.iommu_on(host)?;
        self.iommus[host as usize].domain_alloc(name)
    }

    pub fn iommu_domain(&self, host: HostId, name: &str) -> FResult<DomainId> {
        self.iommus[host as usize]
            .domain_by_name(name)
            .ok_or_else(|| Unknown::Domain { host: self.hosts[host as usize].name.clone(), name: name.into() }.into())
    }

    /// The requester IDs a function issues DMA under: its own, plus an NTB's aliases.
    pub fn dma_rids(&self, f: FuncId) -> Vec<Bdf> {
        let mut v = vec![self.funcs[f as usize].bdf];
        if let NodeKind::Ntb { ntb } = self.nodes[self.funcs[f as usize].node as usize].kind {
            v.extend(self.ntb_dma_aliases(ntb));
        }
        v
    }

    /// iommu_attach_device: the function (with its DMA aliases) now translates through `domain`.
    pub fn iommu_attach(&mut self, host: HostId, domain: DomainId, f: FuncId) -> FResult<()> {
        self.iommu_on(host)?;
        if self.func_host(f) != host {
            return Err(BadIommu::NotInHost { function: self.funcs[f as usize].name.clone(), host: self.hosts[host as usize].name.clone() }.into());
        }
        let rids = self.dma_rids(f);
        self.iommus[host as usize].attach(domain, &rids);
        self.invalidate_routes();
        Ok(())
    }

    /// Point the context entry of one requester ID at `domain` (one DMA alias of a function,
    /// e.g. the far-side ID of one NTB LUT entry, given its own domain).
    pub fn iommu_attach_rid(&mut self, host: HostId, domain: DomainId, rid: Bdf) -> FResult<()> {
        self.iommu_on(host)?;
        if domain as usize >= self.iommus[host as usize].domains.len() {
            return Err(Unknown::DomainId { domain }.into());
        }
        self.iommus[host as usize].attach(domain, &[rid]);
        self.invalidate_routes();
        Ok(())
    }

    pub fn iommu_detach(&mut self, host: HostId, f: FuncId) -> FResult<()> {
        let rids = self.dma_rids(f);
        self.iommus[host as usize].detach(&rids);
        self.invalidate_routes();
        Ok(())
    }

    pub fn iommu_map(&mut self, host: HostId, domain: DomainId, iova: u64, paddr: u64, size: u64, write: bool) -> FResult<()> {
        self.iommu_on(host)?;
        let h = &self.hosts[host as usize];
        if paddr.checked_add(size).is_none_or(|e| e > h.phys_limit()) {
            return Err(BadIommu::BeyondPhys { paddr, size, host: h.name.clone() }.into());
        }
        self.iommus[host as usize].map(domain, iova, paddr, size, write)?;
        self.invalidate_routes();
        Ok(())
    }

    pub fn iommu_unmap(&mut self, host: HostId, domain: DomainId, iova: u64, size: u64) -> FResult<u64> {
        let n = self.iommus[host as usize].unmap(domain, iova, size)?;
        self.invalidate_routes();
        Ok(n)
    }
}

mod remap {
    //! The router's IOMMU piece, at the root complex (Intel VT-d 3.0 §3 DMA remapping, §5
    //! interrupt remapping; the tables are the rest of this file and `crate::intremap`): a device's
    //! request arriving from a root port is translated from its I/O virtual address to a physical
    //! one, and an MSI write is checked against the interrupt remapping table. Either failing ends
    //! the walk (`crate::route`'s root piece calls both).

    use super::Fault;
    use crate::fabric::Fabric;
    use crate::model::HostId;
    use crate::route::walk::{fail, Next, Walk};
    use crate::route::{Failure, HopKind};
    use std::ops::ControlFlow::Continue;

    impl Fabric {
        /// Translate the walk's address through `host`'s IOMMU (a hop with the page size), for a
        /// write or a read as the TLP's kind says.
        #[inline(always)]
        pub(crate) fn translate(&self, w: &mut Walk, host: HostId) -> Next<()> {
            let write = w.tlp.access().is_write();
            match self.iommus[host as usize].translate(w.tlp.requester, w.tlp.addr, write) {
                Ok(t) => {
                    w.tlp.addr = t.addr;
                    w.push(HopKind::Iommu, self.hosts[host as usize].rc, t.page_size);
                    Continue(())
                }
                Err(reason) => fail(Failure::Iommu { host, fault: Fault { requester: w.tlp.requester, addr: w.tlp.addr, write, reason } }),
            }
        }

        /// An MSI write passes `host`'s interrupt remapping table, when it has one.
        #[inline(always)]
        pub(crate) fn remap_interrupt(&self, w: &Walk, host: HostId) -> Next<()> {
            if let Some(Err(fault)) = self.iommus[host as usize].irt.as_ref().map(|t| t.lookup(w.tlp.addr, w.tlp.requester)) {
                return fail(Failure::Interrupt { host, rid: w.tlp.requester, addr: w.tlp.addr, fault });
            }
            Continue(())
        }
    }
}

#[cfg(test)]
#[path = "iommu_tests.rs"]
mod tests;
