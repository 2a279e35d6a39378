//! Device Lending between two hosts (000 §4) on the pxh830-two-host testbed (000 §7.1, Fig 9),
//! with the lender's IOMMU off (Rem-SW) and on (Rem-IOMMU).

use crate::common;
use common::*;
use devlend_fabric::iommu::FaultReason;
use devlend_fabric::route::{Failure, HopKind};
use devlend_fabric::Requester;
use devlend_host::{BorrowOptions, Cluster, DmaDir, HostError, Origin};
use devlend_wire::Access;

#[test]
fn the_same_driver_runs_on_a_local_device_in_the_lender() {
    for iommu in [false, true] {
        let mut c = two_host(iommu);
        let mut os = c.os("lender").unwrap();
        let gpu = os.find("gpu0").unwrap();
        let (buf, dma) = driver_probe(&mut os, gpu, 0x3000).unwrap();
        assert_eq!(dma == buf, !iommu, "IOMMU off: the bus address is physical");
        let data = pattern(1, 0x2345);
        assert_eq!(device_write(&mut c, "gpu0", dma + 0x100, &data), None);
        assert_eq!(c.os("lender").unwrap().read(buf + 0x100, data.len()).unwrap(), data);
        assert_eq!(bar_bytes(&mut c, "gpu0", 0, 0x100, 4), 0xfeed_f00d_u32.to_le_bytes());
        let mut os = c.os("lender").unwrap();
        os.dma_unmap_single(gpu, dma, 0x3000, DmaDir::FromDevice).unwrap();
        if iommu {
            assert!(matches!(device_write(&mut c, "gpu0", dma, &data), Some(Failure::Iommu { .. })));
        }
    }
}

#[test]
fn a_borrowed_device_dmas_into_borrower_ram_and_cpu_writes_reach_its_bar() {
    for lender_iommu in [false, true] {
        let mut c = two_host(lender_iommu);
        let gpu = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        let d = os.device(gpu).unwrap().clone();
        assert_eq!(d.origin, Origin::Borrowed { lender: 1 });
        let bar1 = os.pci_iomap(gpu, 1).unwrap();
        assert_eq!(bar1 % (256 << 20), 0, "the borrowed 256 MiB BAR is naturally aligned in the borrower");
        let (buf, dma) = driver_probe(&mut os, gpu, 0x4000).unwrap();
        os.write(bar1 + 0x2000, b"frame").unwrap();
        let info = &c.lends()[0];
        assert!(dma >= info.window_addr && dma < info.window_addr + info.window_size, "the driver got a lender-side window address");
        let data = pattern(7, 0x3001);
        assert_eq!(device_write(&mut c, "gpu0", dma + 0xfff, &data), None);
        assert_eq!(c.os("borrower").unwrap().read(buf + 0xfff, data.len()).unwrap(), data, "lands in the borrower's RAM at the buffer");
        assert_eq!(bar_bytes(&mut c, "gpu0", 0, 0x100, 4), 0xfeed_f00d_u32.to_le_bytes(), "register write reached BAR0 in the lender");
        assert_eq!(bar_bytes(&mut c, "gpu0", 1, 0x2000, 5), b"frame");
        assert_eq!(c.os("borrower").unwrap().read(bar1 + 0x2000, 5).unwrap(), b"frame", "CPU reads complete back over the NTB");
        // Rem-SW turns in the lender's switch; Rem-IOMMU climbs to the lender's root (000 §7.1).
        let f = c.fabric.func_id("gpu0").unwrap();
        let r = c.fabric.route(Requester::Func(f), dma, Access::Write);
        let lender_iommu_hops = r.hops.iter().filter(|h| h.host == 1 && h.kind == HopKind::Iommu).count();
        assert_eq!(lender_iommu_hops, lender_iommu as usize);
        assert_eq!(r.ntb_crossings(), 1);
        assert!(c.anomalies().is_empty());
    }
}

#[test]
fn a_borrowed_device_cannot_reach_memory_that_was_not_mapped() {
    for lender_iommu in [false, true] {
        let mut c = two_host(lender_iommu);
        let gpu = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        let (_, dma) = driver_probe(&mut os, gpu, 0x1000).unwrap();
        let ro = os.kmalloc(0x1000).unwrap();
        let ro_dma = os.dma_map_single(gpu, ro, 0x1000, DmaDir::ToDevice).unwrap();
        let before = c.fabric.memory_digest();
        let faults = (c.fabric.iommus()[0].faults.len(), c.fabric.iommus()[1].faults.len());
        let fail = device_write(&mut c, "gpu0", dma + 0x10_0000, b"rogue");
        let fault_host = if lender_iommu { 1 } else { 0 };
        assert!(matches!(fail, Some(Failure::Iommu { host, fault }) if host == fault_host && fault.reason == FaultReason::NotPresent), "{fail:?}");
        let fail = device_write(&mut c, "gpu0", ro_dma, b"rogue");
        assert!(matches!(fail, Some(Failure::Iommu { fault, .. }) if fault.reason == FaultReason::WriteDenied), "a ToDevice buffer is read-only: {fail:?}");
        assert_eq!(c.fabric.memory_digest(), before, "nothing was written");
        let after = (c.fabric.iommus()[0].faults.len(), c.fabric.iommus()[1].faults.len());
        assert_eq!(after.0 + after.1, faults.0 + faults.1 + 2, "both faults recorded");
        let (data, fail) = c.fabric.read(Requester::Func(c.fabric.func_id("gpu0").unwrap()), ro_dma, 16);
        assert_eq!((data, fail), (vec![0; 16], None), "the device may read what it was given to read");
    }
}

#[test]
fn an_unmapped_buffer_faults_and_coherent_and_sg_mappings_work() {
    for lender_iommu in [false, true] {
        let mut c = two_host(lender_iommu);
        let gpu = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        os.pci_set_master(gpu).unwrap();
        let (cpu, dma) = os.dma_alloc_coherent(gpu, 0x2000).unwrap();
        let a = os.kmalloc(0x1000).unwrap();
        let b = os.kmalloc(0x3000).unwrap();
        let sg = [(a + 0x800, 0x800), (b + 0x10, 0x2000)];
        let addrs = os.dma_map_sg(gpu, &sg, DmaDir::FromDevice).unwrap();
        assert_eq!(device_write(&mut c, "gpu0", dma, b"ring"), None);
        assert_eq!(device_write(&mut c, "gpu0", addrs[0], b"sg0"), None);
        assert_eq!(device_write(&mut c, "gpu0", addrs[1] + 0x1ff0, b"sg1-tail"), None);
        let mut os = c.os("borrower").unwrap();
        assert_eq!(os.read(cpu, 4).unwrap(), b"ring");
        assert_eq!(os.read(a + 0x800, 3).unwrap(), b"sg0");
        assert_eq!(os.read(b + 0x2000, 8).unwrap(), b"sg1-tail");
        os.dma_unmap_sg(gpu, &sg, &addrs, DmaDir::FromDevice).unwrap();
        os.dma_free_coherent(gpu, 0x2000, cpu, dma).unwrap();
        assert!(matches!(os.dma_unmap_single(gpu, dma, 0x2000, DmaDir::FromDevice), Err(HostError::Invalid(_))));
        for addr in [dma, addrs[0], addrs[1]] {
            assert!(matches!(device_write(&mut c, "gpu0", addr, b"late"), Some(Failure::Iommu { .. })));
        }
        assert_eq!(c.lends()[0].live_dma_maps, 0);
    }
}

#[test]
fn returning_undoes_everything_and_old_addresses_stop_working() {
    for lender_iommu in [false, true] {
        let mut c = two_host(lender_iommu);
        let clean = c.fabric.programmed();
        let gpu = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        let (_, dma) = driver_probe(&mut os, gpu, 0x1000).unwrap();
        let bar1 = os.pci_iomap(gpu, 1).unwrap();
        assert_eq!(c.kernel("lender").unwrap().device(c.kernel("lender").unwrap().find("gpu0").unwrap()).unwrap().lent_to, Some(0));
        // The driver still holds its buffer: only a forced return (surprise removal) takes it.
        c.return_device_force("borrower", gpu).unwrap();
        assert_eq!(c.fabric.programmed(), clean, "no translation, LUT entry, IOMMU mapping or bus master left");
        assert!(c.lending_idle() && c.anomalies().is_empty());
        assert!(c.kernel("borrower").unwrap().find("gpu0").is_err(), "hot-removed from the borrower's tree");
        assert!(matches!(c.os("borrower").unwrap().pci_iomap(gpu, 1), Err(HostError::NoDevice(_))), "stale handle");
        // Even a device that bus-masters again cannot reach the former borrower.
        let f = c.fabric.func_id("gpu0").unwrap();
        c.fabric.set_bus_master(f, true);
        let digest = c.fabric.memory_digest();
        assert!(device_write(&mut c, "gpu0", dma, b"stale").is_some());
        let (_, fail) = c.fabric.write(Requester::Cpu(0), bar1, b"stale");
        assert!(matches!(fail, Some(Failure::NtbUnmapped { .. })), "{fail:?}");
        assert_eq!(c.fabric.memory_digest(), digest);
        // The lender has its device back.
        let mut os = c.os("lender").unwrap();
        let g = os.find("gpu0").unwrap();
        assert!(driver_probe(&mut os, g, 0x1000).is_ok());
    }
}

#[test]
fn borrowing_again_after_a_return_works() {
    let mut c = two_host(true);
    for round in 0..3u8 {
        let gpu = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        let (buf, dma) = driver_probe(&mut os, gpu, 0x1000).unwrap();
        assert_eq!(device_write(&mut c, "gpu0", dma, &[round; 8]), None);
        assert_eq!(c.os("borrower").unwrap().read(buf, 8).unwrap(), [round; 8]);
        let mut os = c.os("borrower").unwrap();
        os.dma_unmap_single(gpu, dma, 0x1000, DmaDir::FromDevice).unwrap();
        os.pci_clear_master(gpu).unwrap();
        c.return_device("borrower", gpu).unwrap();
    }
    assert!(c.lending_idle() && c.anomalies().is_empty());
}

#[test]
fn borrow_errors_are_clear_and_change_nothing() {
    let mut c = two_host(false);
    let clean = c.fabric.programmed();
    let e = c.borrow("borrower", "gpu9").unwrap_err();
    assert!(matches!(e, HostError::NoDevice(_)) && e.to_string().contains("gpu9"), "{e}");
    let e = c.borrow("lender", "gpu0").unwrap_err();
    assert!(e.to_string().contains("installed in lender itself"), "{e}");
    let e = c.borrow("borrower", "ntb-l").unwrap_err();
    assert!(e.to_string().contains("NTB adapter"), "{e}");
    assert!(matches!(c.borrow("nobody", "gpu0"), Err(HostError::NoDevice(_))));
    let e = c.borrow_with("borrower", "gpu0", BorrowOptions { dma_window: Some(1 << 30), ..Default::default() }).unwrap_err();
    assert!(matches!(e, HostError::WindowTooSmall(_)) && e.to_string().contains("a DMA window of 1 GiB is larger than the NTB can map"), "{e}");
    // The lender's own driver is using the device.
    let mut os = c.os("lender").unwrap();
    let g = os.find("gpu0").unwrap();
    let (_, dma) = driver_probe(&mut os, g, 0x1000).unwrap();
    let e = c.borrow("borrower", "gpu0").unwrap_err();
    assert!(matches!(e, HostError::Busy(_)) && e.to_string().contains("1 DMA mappings"), "{e}");
    c.os("lender").unwrap().dma_unmap_single(g, dma, 0x1000, DmaDir::FromDevice).unwrap();
    c.os("lender").unwrap().pci_clear_master(g).unwrap();
    assert_eq!(c.fabric.programmed(), clean);
    // Once lent, the lender's own DMA API refuses it.
    c.borrow("borrower", "gpu0").unwrap();
    let e = c.os("lender").unwrap().dma_map_single(g, 1 << 30, 0x1000, DmaDir::ToDevice).unwrap_err();
    assert!(matches!(e, HostError::Busy(_)) && e.to_string().contains("lent to host borrower"), "{e}");
    // A borrower without an IOMMU is refused.
    let mut c = Cluster::from_json(&two_host_json(false, false, "quadro-k420")).unwrap();
    let e = c.borrow("borrower", "gpu0").unwrap_err();
    assert!(e.to_string().contains("IOMMU disabled"), "{e}");
}

#[test]
fn driver_misuse_gives_errors_not_panics() {
    let mut c = two_host(false);
    let gpu = c.borrow("borrower", "gpu0").unwrap();
    let mut os = c.os("borrower").unwrap();
    let bar1 = os.pci_iomap(gpu, 1).unwrap();
    assert!(os.pci_iomap(gpu, 5).is_err());
    assert!(matches!(os.dma_map_single(gpu, bar1, 0x1000, DmaDir::ToDevice), Err(HostError::Invalid(_))), "a BAR is not RAM");
    assert!(matches!(os.dma_map_single(gpu, 1 << 30, 0, DmaDir::ToDevice), Err(HostError::Invalid(_))));
    assert!(matches!(os.dma_unmap_single(gpu, 0x1234, 0x10, DmaDir::ToDevice), Err(HostError::Invalid(_))));
    assert!(matches!(os.dma_map_resource(gpu, 1 << 30, 0x10, DmaDir::ToDevice), Err(HostError::Invalid(_))), "RAM is not a BAR");
    let ntb = os.find("ntb-b").unwrap();
    assert!(os.dma_map_single(ntb, 1 << 30, 0x1000, DmaDir::ToDevice).is_err());
    let b = os.kmalloc(0x1000).unwrap();
    let d = os.dma_map_single(gpu, b, 0x1000, DmaDir::ToDevice).unwrap();
    assert!(os.dma_unmap_single(gpu, d, 0x800, DmaDir::ToDevice).is_err(), "size must match");
    assert!(os.kfree(b + 1).is_err());
    assert_eq!(os.pci_read_config(gpu, 0, 2).unwrap(), 0x10de, "config reads are forwarded to the device");
    assert!(matches!(c.return_device("borrower", c.kernel("borrower").unwrap().find("ntb-b").unwrap()), Err(HostError::Invalid(_))));
}

#[test]
fn a_dma_window_too_small_for_a_mapping_is_an_error_and_leaves_nothing_behind() {
    for lender_iommu in [false, true] {
        let mut c = two_host(lender_iommu);
        let gpu = c.borrow_with("borrower", "gpu0", BorrowOptions { dma_window: Some(64 << 10), ..Default::default() }).unwrap();
        assert_eq!(c.lends()[0].window_size, 64 << 10);
        let mut os = c.os("borrower").unwrap();
        let big = os.kmalloc(48 << 10).unwrap();
        let small = os.kmalloc(32 << 10).unwrap();
        let d = os.dma_map_single(gpu, big, 48 << 10, DmaDir::Bidirectional).unwrap();
        let before = c.fabric.programmed();
        let mut os = c.os("borrower").unwrap();
        let e = os.dma_map_single(gpu, small, 32 << 10, DmaDir::Bidirectional).unwrap_err();
        assert!(matches!(e, HostError::WindowTooSmall(_)) && e.to_string().contains("48 KiB of its 64 KiB are in use"), "{e}");
        let e = os.dma_map_sg(gpu, &[(small, 0x1000), (small + 0x1000, 0x7000)], DmaDir::Bidirectional).unwrap_err();
        assert!(matches!(e, HostError::WindowTooSmall(_)), "{e}");
        assert_eq!(c.fabric.programmed(), before, "the failed sg list left nothing mapped");
        c.os("borrower").unwrap().dma_unmap_single(gpu, d, 48 << 10, DmaDir::Bidirectional).unwrap();
        assert!(c.os("borrower").unwrap().dma_map_single(gpu, small, 32 << 10, DmaDir::Bidirectional).is_ok());
    }
}

#[test]
fn a_failed_borrow_leaves_nothing_half_mapped() {
    // A Tesla K40c in large-BAR1 mode has a 16 GiB BAR1: its BAR0 maps into the NTB window, BAR1 cannot.
    for lender_iommu in [false, true] {
        let mut c = Cluster::from_json(&two_host_json(true, lender_iommu, "tesla-k40c-large-bar1")).unwrap();
        let clean = c.fabric.programmed();
        let e = c.borrow("borrower", "gpu0").unwrap_err();
        assert!(matches!(e, HostError::WindowTooSmall(_)), "{e}");
        assert!(e.to_string().contains("gpu0 BAR1") && e.to_string().contains("16 GiB"), "{e}");
        assert_eq!(c.fabric.programmed(), clean, "DMA window, LUT entry, BAR0 segments and IOMMU mappings all undone");
        assert!(c.lending_idle() && c.anomalies().is_empty());
        assert!(c.kernel("borrower").unwrap().find("gpu0").is_err());
        let lender = c.kernel("lender").unwrap();
        assert_eq!(lender.device(lender.find("gpu0").unwrap()).unwrap().lent_to, None);
    }
}
