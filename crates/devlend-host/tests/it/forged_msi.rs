//! Issue 30: interrupt remapping wherever an IOMMU is on, bare-metal lending included. A host
//! with an IOMMU has remapping on unless its description says `interrupt_remapping: false`, so a
//! device's forged MSI write (another device's remappable entry from the wrong source ID,
//! another device's vector in compatibility format, the lender's own vector) is blocked and
//! recorded; with remapping off each of them raises the vector it names.

use crate::common;
use common::*;
use devlend_fabric::error::{HostFault, SpecFault};
use devlend_fabric::fabric::Event;
use devlend_fabric::route::Failure;
use devlend_host::Cluster;

const HANDLER: u32 = 7;

/// The three-host cluster with lender-a's IOMMU on, remapping left to its default or turned off.
fn cluster(remapping: bool) -> Cluster {
    let mut json = three_host_json(true, false, false);
    if !remapping {
        json = json.replace(r#""iommu":true,"root_ports""#, r#""iommu":true,"interrupt_remapping":false,"root_ports""#);
    }
    Cluster::from_json(&json).unwrap()
}

#[test]
fn forged_msi_writes_are_blocked_with_remapping_and_raise_vectors_without() {
    for remapping in [true, false] {
        let mut c = cluster(remapping);
        let (b, la) = (c.host_id("borrower").unwrap(), c.host_id("lender-a").unwrap());
        assert_eq!((c.fabric.intr_remap_on(b), c.fabric.intr_remap_on(la)), (remapping, remapping), "on wherever the IOMMU is");
        assert!(!c.fabric.intr_remap_on(c.host_id("lender-b").unwrap()), "no IOMMU, no remapping");
        let g0 = c.borrow("borrower", "gpu0").unwrap();
        let mut os = c.os("borrower").unwrap();
        os.pci_set_master(g0).unwrap();
        let v0 = os.request_irq(g0, 0, HANDLER).unwrap();
        let g4 = os.find("gpu4").unwrap();
        os.pci_set_master(g4).unwrap();
        let v4 = os.request_irq(g4, 0, HANDLER).unwrap();
        let mut los = c.os("lender-a").unwrap();
        let g1 = los.find("gpu1").unwrap();
        los.pci_set_master(g1).unwrap();
        let v1 = los.request_irq(g1, 0, HANDLER).unwrap();
        assert_eq!(device_msi(&mut c, "gpu0", 0), (true, None), "the borrowed device's own message is delivered");
        let counts = |c: &mut Cluster| {
            let (x, y) = (c.os("borrower").unwrap().irq_count(v0), c.os("borrower").unwrap().irq_count(v4));
            (x, y, c.os("lender-a").unwrap().irq_count(v1))
        };
        assert_eq!(counts(&mut c), (1, 0, 0));
        let v0_addr = c.kernel("borrower").unwrap().irqs().get(v0).unwrap().msg_addr;
        let v1_addr = c.kernel("lender-a").unwrap().irqs().get(v1).unwrap().msg_addr;
        let (borrower_msi, lender_msi) = (c.fabric.host(b).msi.start, c.fabric.host(la).msi.start);
        let page = v0_addr - (v0_addr & 0xfff);
        let forged = [
            // gpu4 sends gpu0's message, from the wrong source ID.
            ("wrong source ID", "gpu4", borrower_msi | (v0_addr & 0xfff), v0 as u32, (1, 0, 0), b),
            // The borrowed gpu0 raises gpu4's vector in compatibility format through its MSI mapping.
            ("another device's vector", "gpu0", page, v4 as u32, (0, 1, 0), b),
            // The borrowed gpu0 raises the lender's own vector in its lender.
            ("the lender's own vector", "gpu0", if remapping { v1_addr } else { lender_msi }, v1 as u32, (0, 0, 1), la),
        ];
        for (what, dev, addr, data, raised, host) in forged {
            let before = c.fabric.events().total();
            let was = counts(&mut c);
            let fail = device_write(&mut c, dev, addr, &data.to_le_bytes());
            let now = counts(&mut c);
            if remapping {
                assert!(matches!(fail, Some(Failure::Interrupt { host: h, .. }) if h == host), "{what}: {fail:?}");
                assert_eq!(now, was, "{what}: nothing raised");
                assert!(c.fabric.events().total() > before && matches!(c.fabric.events().last(), Some(Event::Failed(_))), "{what}: recorded");
            } else {
                assert_eq!(fail, None, "{what}");
                assert_eq!((now.0 - was.0, now.1 - was.1, now.2 - was.2), raised, "{what}: the forged vector is raised");
            }
        }
    }
}

#[test]
fn a_description_cannot_ask_remapping_of_a_host_without_iommu() {
    let json = three_host_json(false, false, false).replace(r#""iommu":false,"root_ports""#, r#""iommu":false,"interrupt_remapping":true,"root_ports""#);
    let Err(e) = devlend_fabric::build_json(&json) else { panic!("built") };
    assert!(e.path == "/hosts/1/interrupt_remapping" && matches!(&*e.fault, SpecFault::Host(HostFault::NoIommu { .. })), "{e:?}");
}
