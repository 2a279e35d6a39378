//! Several borrowed devices and peer-to-peer between them (000 §6) on the three-host-cluster
//! testbed (000 §7.2, Fig 11), plus a local GPU in the borrower.

use crate::common;
use common::*;
use devlend_fabric::route::{Failure, HopKind, Target};
use devlend_fabric::Requester;
use devlend_host::{Cluster, DmaDir, HostError};
use devlend_wire::Access;

fn hops_through(c: &mut Cluster, src: &str, dma: u64, ntb: &str) -> (usize, usize, bool) {
    let f = c.fabric.func_id(src).unwrap();
    let node = c.fabric.ntb(c.fabric.ntb_id(ntb).unwrap()).node;
    let r = c.fabric.route(Requester::Func(f), dma, Access::Write);
    let via = r.hops.iter().any(|h| h.kind == HopKind::Ntb && h.node == node);
    (r.ntb_crossings(), r.roots(), via)
}

#[test]
fn borrowed_devices_write_into_each_other_in_all_three_cases() {
    for (a_iommu, b_iommu) in [(false, false), (true, true), (true, false)] {
        let mut c = three_host(a_iommu, b_iommu);
        let g0 = c.borrow("borrower", "gpu0").unwrap();
        let g1 = c.borrow("borrower", "gpu1").unwrap();
        let g3 = c.borrow("borrower", "gpu3").unwrap();
        let mut os = c.os("borrower").unwrap();
        os.pci_set_master(g0).unwrap();
        let g4 = os.find("gpu4").unwrap();
        let mut views = Vec::new();
        for (i, (t, name, off)) in [(g4, "gpu4", 0x1000u64), (g1, "gpu1", 0x2000), (g3, "gpu3", 0x3000)].into_iter().enumerate() {
            let mut os = c.os("borrower").unwrap();
            let view = os.pci_iomap(t, 1).unwrap();
            views.push((name, view));
            let dma = os.dma_map_resource(g0, view + off, 0x200, DmaDir::FromDevice).unwrap();
            let data = pattern(i as u8, 0x200);
            assert_eq!(device_write(&mut c, "gpu0", dma, &data), None, "case {} ({name})", i + 1);
            assert_eq!(bar_bytes(&mut c, name, 1, off, 0x200), data, "case {} ({name}) lands in its BAR", i + 1);
            let (ntbs, roots, _) = hops_through(&mut c, "gpu0", dma, "ntb-a-b");
            match name {
                "gpu4" => assert_eq!((ntbs, hops_through(&mut c, "gpu0", dma, "ntb-a-b").2), (1, true), "case 1 crosses into the borrower"),
                "gpu1" => assert_eq!((ntbs, roots), (0, a_iommu as usize), "case 2: switch only (1L-P2P-SW) or via lender-a's root (1L-P2P-IOMMU)"),
                _ => assert_eq!((ntbs, hops_through(&mut c, "gpu0", dma, "ntb-a-c").2), (1, true), "case 3 takes the NTB from lender-a to lender-b"),
            }
        }
        let table = c.p2p_table("gpu0");
        assert_eq!(table.len(), 3);
        for (name, view) in views {
            let e = table.iter().find(|e| e.target == name).unwrap();
            assert_eq!((e.bar, e.borrower_addr), (1, view), "borrower address stored beside the lender-local one");
        }
        let gpu1 = &table.iter().find(|e| e.target == "gpu1").unwrap();
        assert_eq!(gpu1.lender_addr, c.fabric.resolve_expr("gpu1.bar1").unwrap(), "case 2 uses the BAR's own lender address");
        assert!(c.anomalies().is_empty());
    }
}

#[test]
fn returning_everything_in_any_order_leaves_the_fabric_clean() {
    for a_iommu in [false, true] {
        let mut c = three_host(a_iommu, a_iommu);
        let clean = c.fabric.programmed();
        let g0 = c.borrow("borrower", "gpu0").unwrap();
        let g1 = c.borrow("borrower", "gpu1").unwrap();
        let g3 = c.borrow("borrower", "gpu3").unwrap();
        let mut os = c.os("borrower").unwrap();
        let g4 = os.find("gpu4").unwrap();
        for src in [g0, g1] {
            os.pci_set_master(src).unwrap();
            for t in [g1, g3, g4] {
                let view = os.pci_iomap(t, 0).unwrap();
                os.dma_map_resource(src, view, 0x1000, DmaDir::Bidirectional).unwrap();
            }
            driver_probe(&mut os, src, 0x2000).unwrap();
        }
        let g1_to_g3 = os.dma_map_resource(g1, os.pci_iomap(g3, 1).unwrap(), 0x10, DmaDir::FromDevice).unwrap();
        // The drivers still hold their mappings: an orderly return is refused, a forced one
        // (surprise removal) takes everything back.
        assert!(matches!(c.return_device("borrower", g0), Err(HostError::Busy(_))));
        c.return_device_force("borrower", g0).unwrap();
        assert_eq!(device_write(&mut c, "gpu1", g1_to_g3, b"still"), None, "the shared window to gpu3 outlives gpu0's use of it");
        c.return_device("borrower", g3).unwrap();
        assert!(device_write(&mut c, "gpu1", g1_to_g3, b"gone").is_some(), "returning the target revokes its P2P windows");
        assert!(c.p2p_table("gpu1").iter().all(|e| e.target != "gpu3"));
        c.return_device_force("borrower", g1).unwrap();
        c.os("borrower").unwrap().pci_clear_master(g4).unwrap();
        assert_eq!(c.fabric.programmed(), clean);
        assert!(c.lending_idle() && c.anomalies().is_empty());
    }
}

#[test]
fn devices_from_one_lender_share_its_dma_window() {
    let mut c = three_host(false, false);
    let g0 = c.borrow("borrower", "gpu0").unwrap();
    let g1 = c.borrow("borrower", "gpu1").unwrap();
    let lends = c.lends();
    assert_eq!(lends[0].window_addr, lends[1].window_addr);
    let spilled = lends.iter().find(|l| l.device == "gpu1").unwrap().bars.iter().find(|b| b.index == 1).unwrap().cpu_addr;
    assert_eq!(spilled, c.fabric.resolve_expr("ntb-b-a.mw1").unwrap(), "gpu1's BAR1 no longer fits the LUT window: the direct window takes it");
    let mut bufs = Vec::new();
    for (g, name) in [(g0, "gpu0"), (g1, "gpu1")] {
        let mut os = c.os("borrower").unwrap();
        let (buf, dma) = driver_probe(&mut os, g, 0x1000).unwrap();
        bufs.push((name, buf, dma));
    }
    c.return_device_force("borrower", g0).unwrap();
    let (_, buf, dma) = bufs[1];
    assert_eq!(device_write(&mut c, "gpu1", dma, b"alive"), None);
    assert_eq!(c.os("borrower").unwrap().read(buf, 5).unwrap(), b"alive");
    let mut os = c.os("borrower").unwrap();
    let regs = os.pci_iomap(g1, 0).unwrap();
    os.write(regs + 0x8, b"reg").unwrap();
    assert_eq!(bar_bytes(&mut c, "gpu1", 0, 0x8, 3), b"reg", "gpu1's BARs survive the reprogramming of the shared LUT window");
}

#[test]
fn a_returned_device_can_be_borrowed_by_another_host_but_never_by_two() {
    let mut c = three_host(false, true);
    let g = c.borrow("borrower", "gpu0").unwrap();
    let e = c.borrow("lender-b", "gpu0").unwrap_err();
    assert!(matches!(e, HostError::AlreadyLent(_)) && e.to_string().contains("already lent to borrower"), "{e}");
    let e = c.borrow("borrower", "gpu0").unwrap_err();
    assert!(matches!(e, HostError::AlreadyLent(_)), "{e}");
    c.return_device("borrower", g).unwrap();
    let g = c.borrow("lender-b", "gpu0").unwrap();
    let lend = &c.lends()[0];
    assert_eq!((lend.lender_ntb.as_str(), lend.borrower_ntb.as_str()), ("ntb-a-c", "ntb-c-a"));
    let mut os = c.os("lender-b").unwrap();
    let (buf, dma) = driver_probe(&mut os, g, 0x1000).unwrap();
    assert_eq!(device_write(&mut c, "gpu0", dma, b"lender-b"), None);
    assert_eq!(c.os("lender-b").unwrap().read(buf, 8).unwrap(), b"lender-b");
    assert_eq!(bar_bytes(&mut c, "gpu0", 0, 0x100, 4), 0xfeed_f00d_u32.to_le_bytes());
    let e = c.borrow("borrower", "gpu0").unwrap_err();
    assert!(e.to_string().contains("already lent to lender-b"), "{e}");
}

#[test]
fn a_target_in_a_lender_without_an_ntb_to_the_source_lender_is_unreachable() {
    let mut c = Cluster::from_json(&three_host_json(true, false, false)).unwrap();
    let g0 = c.borrow("borrower", "gpu0").unwrap();
    let g3 = c.borrow("borrower", "gpu3").unwrap();
    let before = c.fabric.programmed();
    let mut os = c.os("borrower").unwrap();
    let view = os.pci_iomap(g3, 1).unwrap();
    let e = os.dma_map_resource(g0, view, 0x100, DmaDir::FromDevice).unwrap_err();
    assert!(matches!(e, HostError::Unreachable(_)) && e.to_string().contains("no NTB joins lender-a and lender-b"), "{e}");
    assert_eq!(c.fabric.programmed(), before);
    assert!(c.p2p_table("gpu0").is_empty());
}

#[test]
fn a_local_device_of_the_borrower_can_write_into_a_borrowed_one() {
    let mut c = three_host(false, false);
    let g0 = c.borrow("borrower", "gpu0").unwrap();
    let mut os = c.os("borrower").unwrap();
    let g4 = os.find("gpu4").unwrap();
    os.pci_set_master(g4).unwrap();
    let view = os.pci_iomap(g0, 1).unwrap();
    let dma = os.dma_map_resource(g4, view + 0x40, 0x40, DmaDir::FromDevice).unwrap();
    assert_ne!(dma, view + 0x40, "the borrower's IOMMU translates for its local device");
    assert_eq!(device_write(&mut c, "gpu4", dma, b"from-borrower"), None);
    assert_eq!(bar_bytes(&mut c, "gpu0", 1, 0x40, 13), b"from-borrower");
    c.return_device("borrower", g0).unwrap();
    let f = c.fabric.func_id("gpu4").unwrap();
    let (_, fail) = c.fabric.write(Requester::Func(f), dma, b"late");
    assert!(matches!(fail, Some(Failure::RidLutMiss { .. } | Failure::NtbUnmapped { .. })), "{fail:?}");
    c.os("borrower").unwrap().dma_unmap_resource(g4, dma, 0x40, DmaDir::FromDevice).unwrap();
    assert!(c.lending_idle() && c.anomalies().is_empty());
}

#[test]
fn p2p_mappings_are_stored_once_per_target_bar() {
    let mut c = three_host(true, true);
    let g0 = c.borrow("borrower", "gpu0").unwrap();
    let g3 = c.borrow("borrower", "gpu3").unwrap();
    let mut os = c.os("borrower").unwrap();
    let view = os.pci_iomap(g3, 3).unwrap();
    let a = os.dma_map_resource(g0, view, 0x1000, DmaDir::FromDevice).unwrap();
    let b = os.dma_map_resource(g0, view + 0x10_0000, 0x1000, DmaDir::FromDevice).unwrap();
    assert_eq!(b - a, 0x10_0000, "offsets within the BAR are kept");
    assert_eq!(c.p2p_table("gpu0").len(), 1);
    let mut os = c.os("borrower").unwrap();
    os.dma_unmap_resource(g0, a, 0x1000, DmaDir::FromDevice).unwrap();
    assert!(os.dma_unmap_resource(g0, a, 0x1000, DmaDir::FromDevice).is_err());
    os.pci_set_master(g0).unwrap();
    assert_eq!(device_write(&mut c, "gpu0", b, b"x"), None);
    let f = c.fabric.func_id("gpu0").unwrap();
    let r = c.fabric.route(Requester::Func(f), b, Access::Write);
    assert!(matches!(r.delivered(), Some(Target::Bar { bar: 3, offset: 0x10_0000, .. })));
    assert_eq!(r.hops.iter().filter(|h| h.kind == HopKind::Iommu).count(), 2, "Rem-IOMMU: through lender-a's and lender-b's IOMMUs");
}

#[test]
fn two_hosts_can_lend_to_each_other_over_one_ntb_pair() {
    // lender-a borrows gpu3 from lender-b while lender-b borrows gpu0 from lender-a: each
    // adapter is a borrower's adapter (DMA window IOVAs) and a lender's adapter (BARs mapped
    // one-to-one) at once, in one IOMMU domain.
    let mut c = three_host(true, true);
    let clean = c.fabric.programmed();
    let g0 = c.borrow("lender-b", "gpu0").unwrap();
    let g3 = c.borrow("lender-a", "gpu3").unwrap();
    for (host, dev, name, tag) in [("lender-b", g0, "gpu0", b"to-b"), ("lender-a", g3, "gpu3", b"to-a")] {
        let mut os = c.os(host).unwrap();
        let (buf, dma) = driver_probe(&mut os, dev, 0x1000).unwrap();
        assert_eq!(device_write(&mut c, name, dma, tag), None);
        assert_eq!(c.os(host).unwrap().read(buf, 4).unwrap(), tag);
        assert_eq!(bar_bytes(&mut c, name, 0, 0x100, 4), 0xfeed_f00d_u32.to_le_bytes());
    }
    c.return_device_force("lender-b", g0).unwrap();
    c.return_device_force("lender-a", g3).unwrap();
    assert_eq!(c.fabric.programmed(), clean);
    assert!(c.lending_idle() && c.anomalies().is_empty());
}

/// Two GPUs of lender-a (IOMMU off) lent to the same borrower: gpu0 writes the buffer gpu1's
/// driver mapped. By default they share the DMA window and the borrower adapter's domain, so it
/// lands, unrecorded (the stated limitation, 000 §4-§5); with `BorrowOptions::device_domain`
/// it is blocked by the borrower's IOMMU and recorded.
#[test]
fn devices_lent_to_one_borrower_share_a_domain_unless_each_gets_its_own() {
    use devlend_fabric::fabric::Event;
    use devlend_host::BorrowOptions;
    for own in [false, true] {
        let mut c = three_host(false, false);
        let clean = c.fabric.programmed();
        let opts = BorrowOptions { device_domain: own, ..Default::default() };
        let g0 = c.borrow_with("borrower", "gpu0", opts).unwrap();
        let g1 = c.borrow_with("borrower", "gpu1", opts).unwrap();
        let mut os = c.os("borrower").unwrap();
        let (_, dma0) = driver_probe(&mut os, g0, 0x1000).unwrap();
        let (buf1, dma1) = driver_probe(&mut os, g1, 0x1000).unwrap();
        assert_eq!(c.lends()[0].window_addr, c.lends()[1].window_addr, "one DMA window either way");
        assert_eq!(device_write(&mut c, "gpu0", dma0, b"mine"), None, "a device reaches its own buffer");
        assert_eq!(device_write(&mut c, "gpu1", dma1, b"ones"), None);
        let (digest, n) = (c.fabric.memory_digest(), c.fabric.events().iter().filter(|e| matches!(e, Event::Failed(_))).count());
        let fail = device_write(&mut c, "gpu0", dma1, b"theirs");
        let now = c.fabric.events().iter().filter(|e| matches!(e, Event::Failed(_))).count();
        if own {
            assert!(matches!(fail, Some(Failure::Iommu { host: 0, .. })), "{fail:?}");
            assert_eq!((now, c.fabric.memory_digest()), (n + 1, digest), "blocked, recorded, nothing written");
            assert_eq!(c.os("borrower").unwrap().read(buf1, 4).unwrap(), b"ones");
        } else {
            assert_eq!((fail, now), (None, n), "the limitation: delivered and not recorded");
            assert_eq!(c.os("borrower").unwrap().read(buf1, 6).unwrap(), b"theirs");
        }
        for (g, dma) in [(g0, dma0), (g1, dma1)] {
            c.os("borrower").unwrap().dma_unmap_single(g, dma, 0x1000, DmaDir::FromDevice).unwrap();
            c.return_device("borrower", g).unwrap();
        }
        assert_eq!(c.fabric.programmed(), clean, "own domains {own}: nothing left");
        assert!(c.lending_idle() && c.anomalies().is_empty(), "{:?}", c.anomalies());
    }
}
