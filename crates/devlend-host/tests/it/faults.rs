//! Drivers that get things wrong: touching BAR addresses nothing maps, and giving a borrowed
//! device back while it may still have DMA in flight. Each is a clear error or a fault the fabric
//! records, never a panic, and nothing is written where it should not be.

use crate::common;
use common::*;
use devlend_fabric::config::{CMD_BUS_MASTER, COMMAND};
use devlend_fabric::fabric::Event;
use devlend_fabric::route::Failure;
use devlend_host::{Cluster, DmaDir, HostError};

fn failures(c: &Cluster) -> usize {
    c.fabric.events().iter().filter(|e| matches!(e, Event::Failed(_))).count()
}

/// A store and a load at `addr` both fail with `Fault`, each recorded once, nothing written.
fn assert_faults(c: &mut Cluster, host: &str, addr: u64, what: &str) {
    let (n, digest) = (failures(c), c.fabric.memory_digest());
    let mut os = c.os(host).unwrap();
    let w = os.write(addr, b"stray").map(|_| panic!("{what}: store at {addr:#x} went through")).unwrap_err();
    let r = os.read(addr, 8).unwrap_err();
    let at = |e: &HostError| matches!(e, HostError::Fault { addr: a, .. } if *a == addr);
    assert!(at(&w) && at(&r), "{what}: {w} / {r}");
    assert_eq!(failures(c), n + 2, "{what}: both accesses recorded");
    assert_eq!(c.fabric.memory_digest(), digest, "{what}: nothing written");
}

#[test]
fn a_driver_touching_an_unmapped_bar_gets_a_recorded_fault() {
    for (profile, lender_iommu) in [("quadro-k420", false), ("quadro-k420", true), ("optane-900p", false), ("optane-900p", true)] {
        let mut c = Cluster::from_json(&two_host_json(true, lender_iommu, profile)).unwrap();
        // Locally: past the end of BAR 0 (a hole in the bridge window), and with memory decoding off.
        let os = c.os("lender").unwrap();
        let dev = os.find("gpu0").unwrap();
        let (bar0, len) = (os.pci_iomap(dev, 0).unwrap(), os.pci_resource_len(dev, 0).unwrap());
        assert!(matches!(os.pci_iomap(dev, 5), Err(HostError::Invalid(_))), "a BAR the device does not have");
        if profile == "optane-900p" {
            assert_faults(&mut c, "lender", bar0 + len, "local, past BAR 0");
        }
        let f = c.fabric.func_id("gpu0").unwrap();
        c.fabric.config_write(f, COMMAND, 2, CMD_BUS_MASTER as u32).unwrap();
        assert_faults(&mut c, "lender", bar0, "local, memory decoding off");
        c.fabric.config_write(f, COMMAND, 2, devlend_fabric::config::CMD_MEMORY as u32).unwrap();
        // Borrowed: past the end of the BAR inside its window, in a window segment nothing maps,
        // through a stale view after the device went back.
        let g = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        let (view, len) = (os.pci_iomap(g, 0).unwrap(), os.pci_resource_len(g, 0).unwrap());
        assert_eq!(os.write(view, b"ok").unwrap(), ());
        assert_faults(&mut c, "borrower", view + len, "borrowed, past BAR 0");
        let mw0 = c.fabric.resolve_expr("ntb-b.mw0").unwrap();
        assert_faults(&mut c, "borrower", mw0 + (200 << 20), "borrowed, a window segment without translation");
        c.fabric.config_write(f, COMMAND, 2, CMD_BUS_MASTER as u32).unwrap();
        assert_faults(&mut c, "borrower", view, "borrowed, memory decoding off in the lender");
        c.fabric.config_write(f, COMMAND, 2, devlend_fabric::config::CMD_MEMORY as u32).unwrap();
        c.return_device("borrower", g).unwrap();
        assert!(matches!(c.os("borrower").unwrap().pci_iomap(g, 0), Err(HostError::NoDevice(_))), "stale handle");
        assert_faults(&mut c, "borrower", view, "borrowed, after the return");
        // Accesses that cannot be expressed on the bus are refused before they reach it.
        let n = failures(&c);
        let mut os = c.os("borrower").unwrap();
        assert!(matches!(os.write(u64::MAX - 2, b"wrap"), Err(HostError::Invalid(_))));
        assert!(matches!(os.read(u64::MAX, 2), Err(HostError::Invalid(_))));
        assert!(matches!(os.read(view, usize::MAX), Err(HostError::Invalid(_))));
        assert!(
            matches!(os.read(u64::MAX, 1), Err(HostError::Fault { addr: u64::MAX, .. })),
            "the last byte of the address space is addressable (nothing decodes it)"
        );
        assert_eq!(failures(&c), n + 1, "only the load that reached the bus is recorded");
    }
}

#[test]
fn returning_a_device_with_dma_in_flight_is_refused_or_forced() {
    for lender_iommu in [false, true] {
        let mut c = two_host(lender_iommu);
        let clean = c.fabric.programmed();
        let gpu = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        let (buf, dma) = driver_probe(&mut os, gpu, 0x2000).unwrap();
        let b2 = os.kmalloc(0x1000).unwrap();
        let sg = os.dma_map_sg(gpu, &[(b2, 0x800)], DmaDir::FromDevice).unwrap();
        let held = c.fabric.programmed();
        let e = c.return_device("borrower", gpu).unwrap_err();
        assert!(matches!(e, HostError::Busy(_)), "{e}");
        assert!(e.to_string().contains("cannot return gpu0: its driver in borrower still holds 2 DMA mappings and 0 interrupt vectors"), "{e}");
        assert_eq!(c.fabric.programmed(), held, "a refused return changes nothing");
        assert_eq!(c.lends()[0].live_dma_maps, 2);
        assert_eq!(device_write(&mut c, "gpu0", dma, b"in-flight"), None, "the device keeps working");
        assert_eq!(c.os("borrower").unwrap().read(buf, 9).unwrap(), b"in-flight");
        // Forced: everything is undone, and DMA the device still issues is refused and recorded.
        c.return_device_force("borrower", gpu).unwrap();
        assert_eq!(c.fabric.programmed(), clean);
        assert!(c.lending_idle() && c.anomalies().is_empty());
        let f = c.fabric.func_id("gpu0").unwrap();
        c.fabric.set_bus_master(f, true);
        let (digest, n) = (c.fabric.memory_digest(), failures(&c));
        for addr in [dma, sg[0]] {
            let fail = device_write(&mut c, "gpu0", addr, b"late");
            assert!(matches!(fail, Some(Failure::NtbUnmapped { .. } | Failure::RidLutMiss { .. } | Failure::Iommu { .. })), "{fail:?}");
        }
        assert_eq!((failures(&c), c.fabric.memory_digest()), (n + 2, digest), "both recorded, nothing landed in the former borrower");
        // An orderly driver: unmap, then the return goes through.
        let gpu = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        let (_, dma) = driver_probe(&mut os, gpu, 0x1000).unwrap();
        assert!(matches!(c.return_device("borrower", gpu), Err(HostError::Busy(_))));
        let mut os = c.os("borrower").unwrap();
        os.dma_unmap_single(gpu, dma, 0x1000, DmaDir::FromDevice).unwrap();
        os.pci_clear_master(gpu).unwrap();
        c.return_device("borrower", gpu).unwrap();
        assert_eq!(c.fabric.programmed(), clean);
    }
}

#[test]
fn a_link_down_mid_lend_is_torn_down_on_both_sides_and_the_device_can_be_borrowed_again() {
    for (lender_iommu, forced) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut c = two_host(lender_iommu);
        let clean = c.fabric.programmed();
        let ntb = c.fabric.ntb_id("ntb-l").unwrap();
        let gpu = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        let (buf, dma) = driver_probe(&mut os, gpu, 0x2000).unwrap();
        assert_eq!(device_write(&mut c, "gpu0", dma, b"before"), None);
        c.fabric.ntb_link_disable(ntb).unwrap();
        let (digest, n) = (c.fabric.memory_digest(), failures(&c));
        assert!(matches!(device_write(&mut c, "gpu0", dma, b"after"), Some(Failure::NtbLinkDown { .. })));
        assert_eq!((failures(&c), c.fabric.memory_digest()), (n + 1, digest), "recorded, nothing landed");
        let report = if forced {
            c.return_device_force("borrower", gpu).unwrap()
        } else {
            let mut os = c.os("borrower").unwrap();
            os.dma_unmap_single(gpu, dma, 0x2000, DmaDir::FromDevice).unwrap();
            c.return_device("borrower", gpu).unwrap()
        };
        assert_eq!(report.unreached.len(), 1, "{report:?}");
        assert_eq!((report.unreached[0].device.as_str(), report.unreached[0].ntb.as_str()), ("gpu0", "ntb-l"));
        assert_eq!(
            c.fabric.programmed(),
            clean,
            "no translation, LUT entry, context entry or IOMMU mapping left (lender IOMMU {lender_iommu}, forced {forced})"
        );
        assert!(c.lending_idle() && c.anomalies().is_empty(), "{:?}", c.anomalies());
        assert!(c.lends().is_empty() && c.kernel("borrower").unwrap().devices().all(|d| d.name != "gpu0"));
        let e = c.borrow("borrower", "gpu0").unwrap_err();
        assert!(matches!(e, HostError::Unreachable(_)) && e.to_string().contains("link of ntb-l to borrower is down"), "{e}");
        assert_eq!(c.fabric.programmed(), clean, "a refused borrow programs nothing");
        c.fabric.ntb_link_enable(ntb).unwrap();
        let gpu = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        let (buf2, dma) = driver_probe(&mut os, gpu, 0x1000).unwrap();
        assert_eq!(device_write(&mut c, "gpu0", dma, b"again"), None);
        assert_eq!(c.os("borrower").unwrap().read(buf2, 5).unwrap(), b"again");
        assert_ne!(buf, 0);
    }
}

/// Configuration reads of a device no one can reach answer as a missing device does, all ones
/// (PCIe Base 4.0 §2.3.2, §7.5.1.1; Linux `pci_device_is_present`): a borrower's while the cable
/// of its lend is out (Device Lending relays them to the lender), its owner's once it is pulled
/// out of its slot; both read the real registers before.
#[test]
fn config_reads_of_a_device_that_cannot_be_reached_read_all_ones() {
    use devlend_host::FaultKind;
    let mut c = Cluster::from_json(&two_host_json(true, true, "optane-900p")).unwrap();
    let g = c.borrow("borrower", "gpu0").unwrap();
    let id = c.os("borrower").unwrap().pci_read_config(g, 0, 4).unwrap();
    assert_eq!(id & 0xffff, 0x8086);
    c.inject(FaultKind::LinkDown, "ntb-b").unwrap();
    assert_eq!(c.os("borrower").unwrap().pci_read_config(g, 0, 4).unwrap(), 0xffff_ffff);
    assert_eq!(c.os("borrower").unwrap().pci_read_config(g, 0x0a, 2).unwrap(), 0xffff);
    c.inject(FaultKind::LinkUp, "ntb-b").unwrap();
    assert_eq!(c.os("borrower").unwrap().pci_read_config(g, 0, 4).unwrap(), id);
    c.return_device("borrower", g).unwrap();
    let d = c.os("lender").unwrap().find("gpu0").unwrap();
    assert_eq!(c.os("lender").unwrap().pci_read_config(d, 0, 4).unwrap(), id);
    c.inject(FaultKind::SurpriseRemoval, "gpu0").unwrap();
    assert_eq!(c.os("lender").unwrap().pci_read_config(d, 0, 4).unwrap(), 0xffff_ffff);
    assert_eq!(c.os("lender").unwrap().pci_read_config(d, 0x2c, 1).unwrap(), 0xff);
}
