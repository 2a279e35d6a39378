//! Tests of the IOMMU's tables (`iommu.rs`): map, translate and unmap with 4 KiB and 2 MiB pages,
//! refusals that change nothing, page tables freed.

use super::*;

#[test]
fn map_translate_unmap_with_4k_and_2m_pages() {
    let mut m = Iommu::new(true);
    let d = m.domain_alloc("d").unwrap();
    let rid = Bdf::new(3, 0, 0);
    m.attach(d, &[rid]);
    m.map(d, 0x4000_0000, 0x1_0000_0000, 0x40_1000, true).unwrap();
    let t = m.translate(rid, 0x4000_0123, true).unwrap();
    assert_eq!((t.addr, t.page_size, t.levels), (0x1_0000_0123, 0x20_0000, 3));
    let t = m.translate(rid, 0x4040_0fff, false).unwrap();
    assert_eq!((t.addr, t.page_size, t.levels), (0x1_0040_0fff, 0x1000, 4));
    assert_eq!(m.translate(rid, 0x4040_1000, false), Err(FaultReason::NotPresent));
    // QEMU's default 39-bit (3-level) tables: one level fewer for both page sizes.
    m.address_bits = 39;
    assert_eq!(m.translate(rid, 0x4000_0123, true).unwrap().levels, 2);
    assert_eq!(m.translate(rid, 0x4040_0fff, false).unwrap().levels, 3);
    assert_eq!(m.translate(Bdf::new(4, 0, 0), 0x4000_0000, false), Err(FaultReason::NoContext));
    assert_eq!(m.unmap(d, 0x4000_0000, 0x40_1000).unwrap(), 0x40_1000);
    assert_eq!(m.translate(rid, 0x4000_0000, false), Err(FaultReason::NotPresent));
}

#[test]
fn read_only_mapping_denies_writes_and_overlap_is_refused_without_leftovers() {
    let mut m = Iommu::new(true);
    let d = m.domain_alloc("d").unwrap();
    let rid = Bdf::new(1, 0, 0);
    m.attach(d, &[rid]);
    m.map(d, 0x3000, 0x9000, 0x1000, false).unwrap();
    assert_eq!(m.translate(rid, 0x3000, true), Err(FaultReason::WriteDenied));
    assert!(m.map(d, 0x1000, 0x5000, 0x3000, true).is_err());
    // The failed map must not leave 0x1000 or 0x2000 mapped.
    assert_eq!(m.translate(rid, 0x1000, false), Err(FaultReason::NotPresent));
    assert_eq!(m.translate(rid, 0x2000, false), Err(FaultReason::NotPresent));
    assert_eq!(m.translate(rid, 1 << 50, false), Err(FaultReason::AddressWidth));
}

fn domain() -> (Iommu, DomainId, Bdf) {
    let mut m = Iommu::new(true);
    let d = m.domain_alloc("d").unwrap();
    let rid = Bdf::new(2, 0, 0);
    m.attach(d, &[rid]);
    (m, d, rid)
}

#[test]
fn unmapping_part_of_a_2m_page_is_refused_and_changes_nothing() {
    let (mut m, d, rid) = domain();
    m.map(d, 0x4000_0000, 0x8000_0000, 0x20_0000, true).unwrap();
    // From 1 MiB inside the page, 2 MiB long: half of the page and 1 MiB of nothing.
    assert!(m.unmap(d, 0x4010_0000, 0x20_0000).is_err());
    assert!(m.unmap(d, 0x4000_0000, 0x10_0000).is_err(), "the first half alone");
    for a in [0x4000_0000, 0x400f_f000, 0x4010_0000, 0x401f_f000] {
        assert_eq!(m.translate(rid, a, true).map(|t| t.addr), Ok(a + 0x4000_0000), "{a:#x} still mapped");
    }
    assert_eq!(m.unmap(d, 0x3fe0_0000, 0x60_0000).unwrap(), 0x20_0000, "the whole page, with holes around it");
    assert_eq!(m.translate(rid, 0x4010_0000, true), Err(FaultReason::NotPresent));
}

#[test]
fn a_2m_map_fits_where_a_4k_page_was_mapped_and_unmapped() {
    let (mut m, d, rid) = domain();
    m.map(d, 0x20_0000, 0x40_0000, 0x1000, true).unwrap();
    assert_eq!(m.unmap(d, 0x20_0000, 0x1000).unwrap(), 0x1000);
    m.map(d, 0x20_0000, 0x40_0000, 0x20_0000, true).unwrap();
    assert_eq!(m.translate(rid, 0x20_0000, false).unwrap().page_size, 0x20_0000);
}

#[test]
fn unmap_checks_its_arguments_and_skips_what_is_not_mapped() {
    let (mut m, d, _) = domain();
    assert!(m.unmap(d, 0, u64::MAX).is_err(), "not a multiple of 4 KiB");
    assert!(m.unmap(d, 0x1000, 1 << 48).is_err(), "beyond the address width");
    assert!(m.unmap(d, 0, 0).is_err());
    m.map(d, 0x7f_0000_0000, 0x1000, 0x3000, true).unwrap();
    m.map(d, 0x1000, 0x1000, 0x20_0000, false).unwrap();
    // The whole 48-bit space: only the tables present are visited.
    assert_eq!(m.unmap(d, 0, 1 << 48).unwrap(), 0x20_3000);
    assert_eq!(m.unmap(d, 0, 1 << 48).unwrap(), 0, "nothing left");
    assert_eq!(m.table_count(d), Some(1));
}

#[test]
fn page_tables_left_empty_are_freed() {
    let (mut m, d, _) = domain();
    let start = m.table_count(d).unwrap();
    for i in 0..20_000u64 {
        // Spread over 512 GiB regions so every cycle builds and frees a full path of tables.
        let iova = (i % 64) << 39 | (i % 512) << 21 | (i % 7) << 12;
        m.map(d, iova, 0x10_0000, 0x1000, true).unwrap();
        assert_eq!(m.table_count(d), Some(start + 3));
        assert_eq!(m.unmap(d, iova, 0x1000).unwrap(), 0x1000);
    }
    assert_eq!(m.table_count(d), Some(start));
    assert_eq!(m.domains[d as usize].mapped_bytes, 0);
}
