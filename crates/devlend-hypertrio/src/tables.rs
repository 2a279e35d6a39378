//! The page tables behind the translations, on devlend-fabric's VT-d model (002 §II-A, Fig 2).
//!
//! Choice (documented, as the issue asks): the two dimensions of the nested walk are two
//! `devlend_fabric::iommu::Iommu` instances with one domain per tenant:
//! - `host`: the chipset IOMMU. Its context entries map each VF's requester ID (SID) to the
//!   tenant's domain (DID), whose second-level table translates guest-physical to host-physical
//!   addresses (the hypervisor's mapping of the VM).
//! - `guest`: the first-level tables each guest OS builds for its VF (gIOVA -> gPA). The fabric
//!   models second-level tables only, so the guest's table is a second fabric `PageTable`
//!   (a domain of its own `Iommu`) with the same 4-level radix format.
//!
//! The guest's page-table pages live in guest memory (a pool at gPA 0x200000 that the host maps
//! with 4 KiB pages, as in Fig 2); ring, notification and set-up pages are 4 KiB; the data pages
//! are 2 MiB in both dimensions (002 §IV-D: the L1VM used huge pages).
//!
//! Every memory access of a walk is counted from these tables: each guest level read costs one
//! access plus a host walk of the gPA of the guest table it reads; the leaf's gPA costs one more
//! host walk. A 4 KiB page with nothing cached: 4 x (4 + 1) + 4 = 24 accesses, 002 Table II;
//! a 2 MiB data page: 3 x (4 + 1) + 3 = 18. The page-structure caches skip guest levels: an
//! L3TLB hit (guest L3 entry) starts the walk at the guest L2 table, an L2TLB hit (guest L2
//! entry pointing to an L1 table) at the guest L1 table.
//!
//! All tenants run the same guest driver and the hypervisor backs each VM the same way, so the
//! walk's shape (levels read in each dimension) depends only on the page; `Tables::build`
//! derives it once per page from tenant 0's tables and `shape_of` re-derives it for any tenant
//! (a test checks they agree), so the hot path does not re-walk; the functional translation
//! (gIOVA -> hPA through both tables) is `Tables::translate`.

use crate::error::{HtError, HtResult};
use crate::workload::Layout;
use devlend_fabric::iommu::{FaultReason, Iommu};
use devlend_wire::Bdf;

pub const PT_POOL_GPA: u64 = 0x20_0000;
pub const SMALL_GPA: u64 = 0x40_0000;
pub const DATA_GPA: u64 = 0x4000_0000;
/// hPA of tenant t's memory: HPA_BASE + t * HPA_STRIDE.
pub const HPA_BASE: u64 = 0x1_0000_0000;
pub const HPA_STRIDE: u64 = 0x1000_0000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkShape {
    /// Guest level holding the leaf (1: 4 KiB, 2: 2 MiB).
    pub leaf_level: u32,
    /// Host levels read to translate the gPA of a guest page-table page.
    pub table_host_levels: u32,
    /// Host levels read to translate the leaf's gPA.
    pub final_host_levels: u32,
}

impl WalkShape {
    /// Memory accesses of a walk that starts reading the guest table at `start_level`.
    #[inline]
    pub fn accesses(&self, start_level: u32) -> u32 {
        (start_level + 1 - self.leaf_level) * (self.table_host_levels + 1) + self.final_host_levels
    }

    /// Memory accesses of the one-dimensional walk the QEMU logs record (002 §IV-A: the L1VM's
    /// emulated IOMMU reads one entry per level of its second-level table), from `start_level`.
    #[inline]
    pub fn logged_accesses(&self, start_level: u32) -> u32 {
        start_level + 1 - self.leaf_level
    }
}

pub fn sid_bdf(sid: u32) -> Bdf {
    // VFs of an SR-IOV NIC from bus 1: 256 functions per bus (ARI).
    Bdf::new(1 + (sid >> 8) as u8, ((sid >> 3) & 31) as u8, (sid & 7) as u8)
}

fn check_tenants(tenants: u32) -> HtResult<()> {
    if tenants > 255 * 256 {
        return Err(HtError::range("tenants", format_args!("{tenants} source IDs"), "at most 65280 (the requester-ID space)"));
    }
    Ok(())
}

pub struct Tables {
    pub host: Iommu,
    pub guest: Iommu,
    pub shapes: Vec<WalkShape>,
    small_slots: Vec<u64>,
}

impl Tables {
    /// The walk shape of every page of `layout` for `tenants` tenants, without keeping every
    /// tenant's tables: the shapes depend only on the page (see the module docs), so one tenant's
    /// tables are built (and checked to be buildable) and the rest never exist. At 1024 tenants
    /// the replay's peak memory was the 2 x 1024 page-table sets built here only to be dropped.
    pub fn shapes(layout: &Layout, tenants: u32) -> HtResult<Vec<WalkShape>> {
        check_tenants(tenants)?;
        Ok(Tables::build(layout, 1)?.shapes)
    }

    pub fn build(layout: &Layout, tenants: u32) -> HtResult<Tables> {
        check_tenants(tenants)?;
        let mut host = Iommu::new(true);
        let mut guest = Iommu::new(true);
        // gPA of each small (4 KiB) page, by page id; data pages get DATA_GPA + k * 2 MiB.
        let mut small_slots = vec![u64::MAX; layout.pages.len()];
        let mut slot = 0;
        for (i, pg) in layout.pages.iter().enumerate() {
            if pg.size == 0x1000 {
                small_slots[i] = SMALL_GPA + slot * 0x1000;
                slot += 1;
            }
        }
        let pool_pages = 64u64;
        for t in 0..tenants {
            let hpa = HPA_BASE + t as u64 * HPA_STRIDE;
            let e = |x: devlend_fabric::error::FabricError| HtError::Tables { tenant: t, iova: None, reason: x.to_string() };
            let hd = host.domain_alloc(&format!("vm{t}")).map_err(e)?;
            host.attach(hd, &[sid_bdf(t)]);
            host.map(hd, PT_POOL_GPA, hpa + PT_POOL_GPA, pool_pages * 0x1000, true).map_err(e)?;
            host.map(hd, SMALL_GPA, hpa + SMALL_GPA, slot * 0x1000, true).map_err(e)?;
            host.map(hd, DATA_GPA, hpa + DATA_GPA, layout.data_pages as u64 * 0x20_0000, true).map_err(e)?;
            let gd = guest.domain_alloc(&format!("vm{t}-first-level")).map_err(e)?;
            let mut k = 0u64;
            for (i, pg) in layout.pages.iter().enumerate() {
                let gpa = if pg.size == 0x1000 {
                    small_slots[i]
                } else {
                    let g = DATA_GPA + k * 0x20_0000;
                    k += 1;
                    g
                };
                guest.map(gd, pg.iova, gpa, pg.size, true).map_err(e)?;
            }
        }
        let mut t = Tables { host, guest, shapes: Vec::new(), small_slots };
        t.shapes = (0..layout.pages.len()).map(|i| t.shape_of(0, layout.pages[i].iova)).collect::<Result<_, _>>()?;
        Ok(t)
    }

    /// The walk's shape for tenant `sid` and `iova`, from the fabric's tables.
    pub fn shape_of(&self, sid: u32, iova: u64) -> HtResult<WalkShape> {
        let f = |r: FaultReason| HtError::Tables { tenant: sid, iova: Some(iova), reason: r.describe().to_string() };
        let g = self.guest.domains.get(sid as usize).ok_or_else(|| HtError::Tables { tenant: sid, iova: None, reason: "no first-level table".into() })?;
        let gt = g.table.walk(iova, true).map_err(f)?;
        let table_host_levels = self.host.translate(sid_bdf(sid), PT_POOL_GPA, false).map_err(f)?.levels;
        let fin = self.host.translate(sid_bdf(sid), gt.addr, true).map_err(f)?;
        Ok(WalkShape { leaf_level: 5 - gt.levels, table_host_levels, final_host_levels: fin.levels })
    }

    /// Functional nested translation: gIOVA of tenant `sid` -> hPA (through the context entry).
    pub fn translate(&self, sid: u32, iova: u64, write: bool) -> Result<u64, FaultReason> {
        let g = self.guest.domains.get(sid as usize).ok_or(FaultReason::NoContext)?;
        let gpa = g.table.walk(iova, write)?.addr;
        Ok(self.host.translate(sid_bdf(sid), gpa, write)?.addr)
    }

    pub fn small_gpa(&self, page: usize) -> u64 {
        self.small_slots[page]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::params;

    #[test]
    fn nested_walk_is_24_accesses_for_4k_and_shapes_agree_across_tenants() {
        let l = Layout::new();
        let t = Tables::build(&l, 40).unwrap();
        let ring = t.shapes[l.ring as usize];
        assert_eq!(ring.accesses(4), params().nested_walk_accesses, "002 Table II");
        assert_eq!(t.shapes[l.data0 as usize].accesses(4), 18);
        for sid in [1, 17, 39] {
            for (i, pg) in l.pages.iter().enumerate() {
                assert_eq!(t.shape_of(sid, pg.iova).unwrap(), t.shapes[i]);
            }
        }
        // gIOVAs are shared, hPAs are not.
        let a = t.translate(3, l.pages[l.data0 as usize].iova + 0x123, false).unwrap();
        let b = t.translate(4, l.pages[l.data0 as usize].iova + 0x123, false).unwrap();
        assert_eq!(b - a, HPA_STRIDE);
        assert_eq!(a, HPA_BASE + 3 * HPA_STRIDE + DATA_GPA + 0x123);
        assert_eq!(t.translate(5, 0x1234_5000, false), Err(FaultReason::NotPresent));
        assert_eq!(Tables::shapes(&l, 40).unwrap(), t.shapes, "one tenant's tables give every tenant's shapes");
        assert!(Tables::shapes(&l, 255 * 256 + 1).is_err());
    }
}
