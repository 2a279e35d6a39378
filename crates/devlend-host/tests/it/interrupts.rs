//! MSI-X interrupts of local and borrowed devices (000 §2.1, §4): `request_irq` programs the
//! device's table through the CPU's BAR mapping; a borrowed device's message crosses the NTB
//! through the lender's reverse mapping of the borrower's MSI page and is taken by the borrower.

use crate::common;
use common::*;
use devlend_fabric::config::MSIX_ENABLE;
use devlend_fabric::fabric::Event;
use devlend_fabric::route::{Failure, HopKind, Target};
use devlend_fabric::Requester;
use devlend_host::irq::FIRST_DEVICE_VECTOR;
use devlend_host::{Cluster, HostError};
use devlend_wire::Access;

const HANDLER: u32 = 42;

/// These tests follow messages in compatibility format, as hosts without interrupt remapping send
/// them: every host's remapping is off (`interrupt_remapping: false`; it is on by default wherever
/// the IOMMU is). Remapping's own tests: the last one here, and `forged_msi.rs`.
fn no_remapping(json: String) -> Cluster {
    Cluster::from_json(&json.replace(r#""iommu":true,"root_ports""#, r#""iommu":true,"interrupt_remapping":false,"root_ports""#)).unwrap()
}

fn two_host(lender_iommu: bool) -> Cluster {
    no_remapping(two_host_json(true, lender_iommu, "quadro-k420"))
}

fn three_host(a_iommu: bool, b_iommu: bool) -> Cluster {
    no_remapping(three_host_json(a_iommu, b_iommu, true))
}

fn msix_enabled(c: &Cluster, dev: &str) -> bool {
    c.fabric.config_state(c.fabric.func_id(dev).unwrap()).msix_control & MSIX_ENABLE != 0
}

fn msi_events(c: &Cluster, host: u16) -> usize {
    c.fabric.events().iter().filter(|e| matches!(e, Event::Msi { host: h, .. } if *h == host)).count()
}

#[test]
fn a_local_device_interrupts_its_own_host() {
    for iommu in [false, true] {
        let mut c = two_host(iommu);
        let lender = c.host_id("lender").unwrap();
        let mut os = c.os("lender").unwrap();
        let gpu = os.find("gpu0").unwrap();
        os.pci_set_master(gpu).unwrap();
        assert_eq!(os.pci_msix_vec_count(gpu).unwrap(), 1);
        let v = os.request_irq(gpu, 0, HANDLER).unwrap();
        assert_eq!(v, FIRST_DEVICE_VECTOR);
        let msi = os.msi_address();
        assert_eq!(msix_entry(&mut c, "gpu0", 0), (msi, v as u32, false), "address, data, unmasked");
        assert!(msix_enabled(&c, "gpu0"));
        for n in 1..=3 {
            assert_eq!(device_msi(&mut c, "gpu0", 0), (true, None));
            assert_eq!(c.os("lender").unwrap().irq_count(v), n, "IOMMU {iommu}: MSI bypasses DMA remapping");
        }
        let d = c.kernel("lender").unwrap().irqs().get(v).unwrap().clone();
        assert_eq!((d.dev, d.entry, d.handler, d.count), (gpu, 0, HANDLER, 3));
        assert_eq!(msi_events(&c, lender), 0, "the kernel took its messages from the log");
        let mut os = c.os("lender").unwrap();
        os.free_irq(gpu, 0).unwrap();
        assert!(msix_entry(&mut c, "gpu0", 0).2, "freed entry is masked");
        assert!(!msix_enabled(&c, "gpu0"), "the last vector disables MSI-X");
        assert_eq!(device_msi(&mut c, "gpu0", 0), (false, None), "a masked device sends nothing");
        assert_eq!(c.os("lender").unwrap().irq_spurious(), 0);
    }
}

#[test]
fn a_borrowed_device_interrupts_the_borrower_through_the_lenders_ntb() {
    for lender_iommu in [false, true] {
        let mut c = two_host(lender_iommu);
        let (b, l) = (c.host_id("borrower").unwrap(), c.host_id("lender").unwrap());
        let gpu = c.borrow("borrower", "gpu0").unwrap();
        let before = c.fabric.programmed();
        let mut os = c.os("borrower").unwrap();
        os.pci_set_master(gpu).unwrap();
        let v = os.request_irq(gpu, 0, HANDLER).unwrap();
        let (addr, data, masked) = msix_entry(&mut c, "gpu0", 0);
        assert_eq!((data, masked), (v as u32, false));
        let (mw0, mw0_size) = c.fabric.peer_mw_get_addr(c.fabric.ntb_id("ntb-l").unwrap(), 0).unwrap();
        assert!((mw0..mw0 + mw0_size).contains(&addr), "the table holds a lender-side NTB address ({addr:#x}), not the borrower's MSI page");
        assert_eq!(c.kernel("borrower").unwrap().irqs().get(v).unwrap().msg_addr, addr);
        let f = c.fabric.func_id("gpu0").unwrap();
        let r = c.fabric.route(Requester::Func(f), addr, Access::Write);
        assert_eq!(r.delivered(), Some(Target::Msi { host: b, addr: c.fabric.host(b).msi.start }), "{r:?}");
        assert_eq!(r.ntb_crossings(), 1);
        let iommu_hops = |h| r.hops.iter().filter(|x| x.kind == HopKind::Iommu && x.host == h).count();
        assert_eq!((iommu_hops(b), iommu_hops(l)), (0, lender_iommu as usize), "borrower: MSI is not DMA-remapped; lender: Rem-IOMMU checks it");
        for n in 1..=2 {
            assert_eq!(device_msi(&mut c, "gpu0", 0), (true, None));
            assert_eq!(c.os("borrower").unwrap().irq_count(v), n);
        }
        assert_eq!(c.lends()[0].irq_vectors, 1);
        assert_eq!(c.os("lender").unwrap().irq_spurious(), 0);
        assert_eq!(msi_events(&c, l), 0, "nothing reached the lender's CPUs");
        c.os("borrower").unwrap().free_irq(gpu, 0).unwrap();
        c.os("borrower").unwrap().pci_clear_master(gpu).unwrap();
        assert_eq!(c.fabric.programmed(), before, "free_irq undoes the MSI mapping and disables MSI-X");
        c.return_device("borrower", gpu).unwrap();
        assert!(c.lending_idle() && c.anomalies().is_empty());
    }
}

#[test]
fn vectors_of_one_device_share_the_msi_page_and_are_told_apart_by_their_data() {
    for lender_iommu in [false, true] {
        let mut c = no_remapping(two_host_json(true, lender_iommu, "optane-900p"));
        let clean = c.fabric.programmed();
        let dev = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        os.pci_set_master(dev).unwrap();
        assert_eq!(os.pci_msix_vec_count(dev).unwrap(), 32);
        let vs: Vec<u8> = (0..4).map(|e| os.request_irq(dev, e, 100 + e as u32).unwrap()).collect();
        assert_eq!(vs, [0x20, 0x21, 0x22, 0x23]);
        let addrs: Vec<u64> = (0..4).map(|e| msix_entry(&mut c, "gpu0", e).0).collect();
        assert!(addrs.iter().all(|a| *a == addrs[0]), "one MSI page for every vector");
        for (i, e) in [2u16, 2, 0, 3].into_iter().enumerate() {
            assert_eq!(device_msi(&mut c, "gpu0", e), (true, None), "message {i}");
        }
        let mut os = c.os("borrower").unwrap();
        let counts: Vec<u64> = vs.iter().map(|v| os.irq_count(*v)).collect();
        assert_eq!(counts, [1, 0, 2, 1]);
        os.free_irq(dev, 2).unwrap();
        assert!(msix_enabled(&c, "gpu0"), "other vectors are still in use");
        assert_eq!(device_msi(&mut c, "gpu0", 0), (true, None), "the shared mapping stays for the others");
        assert_eq!(c.os("borrower").unwrap().irq_count(vs[0]), 2);
        let v = c.os("borrower").unwrap().request_irq(dev, 7, 7).unwrap();
        assert_eq!(v, 0x22, "a freed vector is reused");
        for e in [0, 1, 3, 7] {
            c.os("borrower").unwrap().free_irq(dev, e).unwrap();
        }
        c.os("borrower").unwrap().pci_clear_master(dev).unwrap();
        c.return_device("borrower", dev).unwrap();
        assert_eq!(c.fabric.programmed(), clean);
        assert!(c.lending_idle() && c.anomalies().is_empty());
    }
}

#[test]
fn devices_from_one_lender_share_the_mapping_of_the_borrowers_msi_page() {
    for a_iommu in [false, true] {
        let mut c = three_host(a_iommu, false);
        let clean = c.fabric.programmed();
        let g0 = c.borrow("borrower", "gpu0").unwrap();
        let g1 = c.borrow("borrower", "gpu1").unwrap();
        let g3 = c.borrow("borrower", "gpu3").unwrap();
        let mut vs = Vec::new();
        for g in [g0, g1, g3] {
            let mut os = c.os("borrower").unwrap();
            os.pci_set_master(g).unwrap();
            vs.push(os.request_irq(g, 0, g.0).unwrap());
        }
        let a: Vec<u64> = ["gpu0", "gpu1", "gpu3"].iter().map(|n| msix_entry(&mut c, n, 0).0).collect();
        assert_eq!(a[0], a[1], "gpu0 and gpu1 come from lender-a over one NTB pair");
        let msi = c.fabric.hosts()[0].msi.start;
        let onto_msi = |c: &Cluster, ntb: &str| match &c.fabric.ntb(c.fabric.ntb_id(ntb).unwrap()).inbound[0][0] {
            devlend_fabric::ntb::Inbound::Lut(segs) => segs.iter().filter(|s| **s == Some(msi)).count(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (onto_msi(&c, "ntb-b-a"), onto_msi(&c, "ntb-b-b")),
            (1, 1),
            "one translation onto the MSI page per lender's NTB; gpu3 comes through lender-b's"
        );
        c.os("borrower").unwrap().free_irq(g0, 0).unwrap();
        assert!(matches!(c.return_device("borrower", g1), Err(HostError::Busy(_))));
        c.return_device_force("borrower", g0).unwrap();
        for (name, v) in [("gpu1", vs[1]), ("gpu3", vs[2])] {
            assert_eq!(device_msi(&mut c, name, 0), (true, None), "{name} still interrupts the borrower");
            assert_eq!(c.os("borrower").unwrap().irq_count(v), 1);
        }
        c.return_device_force("borrower", g1).unwrap();
        c.return_device_force("borrower", g3).unwrap();
        assert!(c.kernel("borrower").unwrap().irqs().iter().next().is_none(), "hot-removal drops the vectors");
        assert_eq!(c.fabric.programmed(), clean);
        assert!(c.lending_idle() && c.anomalies().is_empty());
    }
}

#[test]
fn returning_a_device_with_interrupts_requested_is_refused_or_forced() {
    for lender_iommu in [false, true] {
        let mut c = two_host(lender_iommu);
        let clean = c.fabric.programmed();
        let gpu = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        os.pci_set_master(gpu).unwrap();
        let v = os.request_irq(gpu, 0, HANDLER).unwrap();
        let old = msix_entry(&mut c, "gpu0", 0).0;
        let held = c.fabric.programmed();
        let e = c.return_device("borrower", gpu).unwrap_err();
        assert!(matches!(e, HostError::Busy(_)) && e.to_string().contains("0 DMA mappings and 1 interrupt vectors"), "{e}");
        assert_eq!(c.fabric.programmed(), held, "a refused return changes nothing");
        assert_eq!(device_msi(&mut c, "gpu0", 0), (true, None));
        assert_eq!(c.os("borrower").unwrap().irq_count(v), 1);
        c.return_device_force("borrower", gpu).unwrap();
        assert_eq!(c.fabric.programmed(), clean, "MSI window, Rem-IOMMU mapping, MSI-X enable and bus master all undone");
        assert!(msix_entry(&mut c, "gpu0", 0).2, "the lender masked the table");
        assert!(c.kernel("borrower").unwrap().irqs().get(v).is_none());
        // A device that ignored the mask and wrote its old message anyway is refused and recorded.
        let f = c.fabric.func_id("gpu0").unwrap();
        c.fabric.set_bus_master(f, true);
        let (_, fail) = c.fabric.write(Requester::Func(f), old, &(v as u32).to_le_bytes());
        assert!(matches!(fail, Some(Failure::NtbUnmapped { .. } | Failure::RidLutMiss { .. } | Failure::Iommu { .. })), "{fail:?}");
        assert!(matches!(c.fabric.events().last(), Some(Event::Failed(_))));
        assert_eq!(c.os("borrower").unwrap().irq_spurious(), 0);
        assert!(c.lending_idle() && c.anomalies().is_empty());
        // The lender can use its device's interrupts again.
        let mut os = c.os("lender").unwrap();
        let g = os.find("gpu0").unwrap();
        let v = os.request_irq(g, 0, 1).unwrap();
        assert_eq!(device_msi(&mut c, "gpu0", 0), (true, None));
        assert_eq!(c.os("lender").unwrap().irq_count(v), 1);
    }
}

#[test]
fn interrupt_misuse_gives_errors_not_panics() {
    let mut c = two_host(true);
    let mut os = c.os("lender").unwrap();
    let gpu = os.find("gpu0").unwrap();
    let e = os.request_irq(gpu, 1, HANDLER).unwrap_err();
    assert!(matches!(e, HostError::Invalid(_)) && e.to_string().contains("has 1 MSI-X entries; there is no entry 1"), "{e}");
    let e = os.free_irq(gpu, 0).unwrap_err();
    assert!(matches!(e, HostError::Invalid(_)) && e.to_string().contains("never requested"), "{e}");
    let ntb = os.find("ntb-l").unwrap();
    assert!(matches!(os.request_irq(ntb, 0, HANDLER), Err(HostError::Invalid(_))));
    let v = os.request_irq(gpu, 0, HANDLER).unwrap();
    let e = os.request_irq(gpu, 0, HANDLER).unwrap_err();
    assert!(matches!(e, HostError::Busy(_)) && e.to_string().contains("already has vector 0x20"), "{e}");
    assert_eq!(os.irq_count(v + 1), 0);
    // The lender's driver holds an interrupt: the device cannot be lent.
    let e = c.borrow("borrower", "gpu0").unwrap_err();
    assert!(matches!(e, HostError::Busy(_)) && e.to_string().contains("1 interrupt vectors"), "{e}");
    c.os("lender").unwrap().free_irq(gpu, 0).unwrap();
    c.borrow("borrower", "gpu0").unwrap();
    let e = c.os("lender").unwrap().request_irq(gpu, 0, HANDLER).unwrap_err();
    assert!(matches!(e, HostError::Busy(_)) && e.to_string().contains("lent to host borrower"), "{e}");
    // A message for a vector nobody requested is counted as spurious.
    let f = c.fabric.func_id("gpu0").unwrap();
    c.fabric.set_bus_master(f, true);
    let lender_msi = c.fabric.hosts()[1].msi.start;
    assert_eq!(c.fabric.write(Requester::Func(f), lender_msi, &[0x99, 0, 0, 0]).1, None);
    assert_eq!(c.os("lender").unwrap().irq_spurious(), 1);
    // The borrower's MSI page is reachable only through the mapping request_irq asks for.
    let borrower_msi = c.fabric.hosts()[0].msi.start;
    assert_eq!(c.fabric.write(Requester::Func(f), borrower_msi, &[0x20, 0, 0, 0]).1, None, "that is the lender's own MSI range");
    assert_eq!(c.os("borrower").unwrap().irq_spurious(), 0);
}

/// A device's MSI write is checked by the receiving host's interrupt remapping: a vector of
/// another device (its remappable address, or its vector in compatibility format) is blocked and
/// recorded, nothing delivered; a borrowed device's message through the NTB is delivered because
/// its entry validates the far-side requester ID of its LUT entry.
#[test]
fn interrupt_remapping_blocks_forged_messages_and_passes_the_borrowed_devices() {
    use devlend_fabric::route::Failure;
    for lender_iommu in [false, true] {
        let mut c = three_host(lender_iommu, false);
        c.enable_interrupt_remapping("borrower").unwrap();
        let b = c.host_id("borrower").unwrap();
        let g0 = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        os.pci_set_master(g0).unwrap();
        let v0 = os.request_irq(g0, 0, HANDLER).unwrap();
        let local = os.find("gpu4").unwrap();
        os.pci_set_master(local).unwrap();
        let v4 = os.request_irq(local, 0, HANDLER).unwrap();
        for n in 1..=2 {
            assert_eq!(device_msi(&mut c, "gpu0", 0), (true, None), "lender IOMMU {lender_iommu}");
            assert_eq!(device_msi(&mut c, "gpu4", 0), (true, None));
            let mut os = c.os("borrower").unwrap();
            assert_eq!((os.irq_count(v0), os.irq_count(v4)), (n, n));
        }
        let msi = c.fabric.host(b).msi.start;
        let v4_addr = c.kernel("borrower").unwrap().irqs().get(v4).unwrap().msg_addr;
        let v0_lender_addr = c.kernel("borrower").unwrap().irqs().get(v0).unwrap().msg_addr;
        // gpu4 (local) forges: gpu0's vector in compatibility format, and gpu0's entry through
        // its own root. gpu0 (borrowed) forges gpu4's entry through the NTB's MSI mapping.
        let forged = [
            ("gpu4", msi, v0 as u32),
            ("gpu4", msi | (v0_lender_addr & 0xfff), v0 as u32),
            ("gpu0", v0_lender_addr - (v0_lender_addr & 0xfff) + (v4_addr & 0xfff), v4 as u32),
        ];
        for (dev, addr, data) in forged {
            let (digest, before) = (c.fabric.memory_digest(), c.fabric.events().total());
            let fail = device_write(&mut c, dev, addr, &data.to_le_bytes());
            assert!(matches!(fail, Some(Failure::Interrupt { host, .. }) if host == b), "{dev} at {addr:#x}: {fail:?}");
            assert_eq!((c.fabric.events().total(), c.fabric.memory_digest()), (before + 1, digest), "recorded once, nothing changed");
            let mut os = c.os("borrower").unwrap();
            assert_eq!((os.irq_count(v0), os.irq_count(v4), os.irq_spurious()), (2, 2, 0), "{dev}: no interrupt raised");
        }
        let mut os = c.os("borrower").unwrap();
        os.free_irq(g0, 0).unwrap();
        os.free_irq(local, 0).unwrap();
        assert!(c.fabric.iommu(b).irt.as_ref().unwrap().entries.iter().all(|e| e.is_none()), "free_irq clears the entries");
    }
}
