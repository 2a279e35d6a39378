//! Interrupts of devices passed through to a VM (000 §5, §8): MSI-X and legacy INTx raised by
//! the device reach the guest's handler on the machine, with the latency of the path
//! (`irq_clock`); a bare-metal borrower cannot take INTx.

use devlend_host::Cluster;
use devlend_host::Os;
use devlend_vm::fixtures::{self, Scenario};
use devlend_vm::irq::{device_interrupt, Src};
use devlend_vm::irq_clock::{Raiser, RAISE};
use devlend_vm::timed::{on_machine, raise_once};
use std::cell::RefCell;
use std::rc::Rc;

const JSON: &str = include_str!("../expansion-chassis-vm.json");
const H: u32 = 0xabc;

fn host_irqs(c: &Cluster, host: &str) -> usize {
    c.kernel(host).unwrap().irqs().iter().count()
}

#[test]
fn msix_reaches_the_guest_handler_vfio_directly_mdev_through_the_lender() {
    for sc in [Scenario::VmLoc, Scenario::VmRem] {
        let mut t = fixtures::testbed(JSON, sc).unwrap();
        let dev = t.a.dev;
        let mut os = t.vmm.guest(&mut t.c, t.vm).unwrap();
        assert_eq!(os.pci_msix_vec_count(dev).unwrap(), 1);
        let gv = os.request_irq(dev, 0, H).unwrap();
        // The physical table holds the first host's MSI page and a host vector, never the guest's,
        // in remappable format: an entry validating gpu0's ID (the hosts remap interrupts).
        // (gpu0 sits in the lender in both scenarios: VMLoc's VM runs there.)
        let desc = t.c.kernel("lender").unwrap().irqs().iter().next().unwrap().clone();
        let handle = desc.irte.expect("a remapping entry");
        assert_eq!(desc.msg_addr, devlend_fabric::intremap::remappable_addr(t.c.fabric.hosts()[0].msi.start, handle));
        assert_eq!((desc.handler, desc.count), (if sc == Scenario::VmLoc { devlend_vm::irq::VFIO_HANDLER } else { devlend_vm::irq::LENDER_HANDLER }, 0));
        assert_eq!(t.vmm.guest(&mut t.c, t.vm).unwrap().irq_latency_ps(gv), None, "nothing delivered yet");
        for n in 1..=3 {
            (t.c, t.vmm) = raise_once(t.c, t.vmm, t.vm, dev, gv).unwrap();
            let os = t.vmm.guest(&mut t.c, t.vm).unwrap();
            assert_eq!(os.irq_count(gv), n, "{sc:?}: interrupt {n} reached the guest handler");
            assert!(os.irq_latency_ps(gv).is_some_and(|ps| ps > 0), "{sc:?}: timed on the machine");
        }
        let relayed = t.c.kernel("remote").unwrap().irqs().iter().map(|d| d.count).sum::<u64>();
        assert_eq!(relayed, if sc == Scenario::VmRem { 3 } else { 0 }, "the borrower's relay vector took each forwarded interrupt");
        assert_eq!(t.vmm.guest(&mut t.c, t.vm).unwrap().irq_spurious(), 0);
        assert_eq!(t.c.os("lender").unwrap().irq_spurious() + t.c.os("remote").unwrap().irq_spurious(), 0);
        // free_irq takes the route down: no vectors left in any host, MSI-X off on the device.
        t.vmm.guest(&mut t.c, t.vm).unwrap().free_irq(dev, 0).unwrap();
        assert_eq!(host_irqs(&t.c, "lender") + host_irqs(&t.c, "remote"), 0);
        assert_eq!(t.c.fabric.config_state(t.c.fabric.func_id("gpu0").unwrap()).msix_control, 0, "MSI-X off on the function");
        t.vmm.shutdown(&mut t.c, t.vm).unwrap();
        assert!(t.vmm.idle() && t.c.lending_idle() && t.vmm.anomalies.is_empty() && t.c.anomalies().is_empty());
    }
}

#[test]
fn intx_is_refused_to_a_bare_metal_borrower_and_delivered_to_a_vm() {
    // Bare metal: the borrower's driver cannot have the INTx of a borrowed device.
    let mut c = Cluster::from_json(JSON).unwrap();
    let d = c.borrow("remote", "gpu0").unwrap();
    let e = c.os("remote").unwrap().request_intx(d, H).unwrap_err();
    assert!(e.to_string().contains("cannot be remapped over the NTB") && e.to_string().contains("borrowed from lender"), "{e}");
    device_interrupt(&mut c, "gpu0", 0).unwrap();
    assert_eq!(c.kernel("lender").unwrap().irqs().intx_unhandled(), 1, "the line ends at the lender, where nobody takes it");
    c.return_device("remote", d).unwrap();
    // A VM gets it, through the lender-side handler (VMRem) or vfio's (VMLoc).
    for sc in [Scenario::VmLoc, Scenario::VmRem] {
        let mut t = fixtures::testbed(JSON, sc).unwrap();
        let dev = t.b.dev;
        let gv = t.vmm.guest(&mut t.c, t.vm).unwrap().request_intx(dev, H).unwrap();
        for n in 1..=2 {
            (t.c, t.vmm) = raise_once(t.c, t.vmm, t.vm, dev, gv).unwrap();
            assert_eq!(t.vmm.guest(&mut t.c, t.vm).unwrap().irq_count(gv), n, "{sc:?}");
        }
        let line = t.c.kernel("lender").unwrap().irqs().intx(t.c.fabric.func_id("gpu1").unwrap()).unwrap().clone();
        assert_eq!(line.count, 2);
        // MSI-X on switches the device off INTx (PCI 3.0 §6.8): the INTx route goes away.
        let mut os = t.vmm.guest(&mut t.c, t.vm).unwrap();
        let mv = os.request_irq(dev, 0, H + 1).unwrap();
        assert!(t.vmm.irq_route(t.vm, dev, Src::Intx).is_none());
        (t.c, t.vmm) = raise_once(t.c, t.vmm, t.vm, dev, mv).unwrap();
        let mut os = t.vmm.guest(&mut t.c, t.vm).unwrap();
        assert_eq!((os.irq_count(mv), os.irq_count(gv)), (1, 2));
        os.free_irq(dev, 0).unwrap();
        os.free_intx(dev).unwrap();
        t.vmm.shutdown(&mut t.c, t.vm).unwrap();
        assert!(t.vmm.idle() && t.c.lending_idle() && t.vmm.anomalies.is_empty());
        assert!(t.c.kernel("lender").unwrap().irqs().intx(t.c.fabric.func_id("gpu1").unwrap()).is_none());
    }
}

#[test]
fn hot_remove_with_interrupts_live_takes_every_route_down() {
    let mut t = fixtures::testbed(JSON, Scenario::VmRem).unwrap();
    let (a, b) = (t.a.dev, t.b.dev);
    let mut os = t.vmm.guest(&mut t.c, t.vm).unwrap();
    os.request_irq(a, 0, H).unwrap();
    os.request_irq(b, 0, H).unwrap();
    assert_eq!(t.c.lends().iter().map(|l| l.irq_vectors).sum::<usize>(), 2, "one relay vector per device in the borrower");
    t.vmm.hot_remove(&mut t.c, t.vm, b).unwrap();
    t.vmm.hot_remove(&mut t.c, t.vm, a).unwrap();
    assert_eq!(host_irqs(&t.c, "lender") + host_irqs(&t.c, "remote"), 0);
    assert!(t.c.lending_idle() && t.c.anomalies().is_empty() && t.vmm.anomalies.is_empty());
    // The device keeps interrupting after it left: nothing reaches the guest or the old borrower.
    device_interrupt(&mut t.c, "gpu0", 0).unwrap();
    assert_eq!(t.vmm.guest(&mut t.c, t.vm).unwrap().irq_spurious(), 0);
    assert_eq!(t.c.os("remote").unwrap().irq_spurious(), 0);
}

#[test]
fn interrupt_and_config_misuse_gives_errors_and_leaves_nothing() {
    let mut t = fixtures::testbed(JSON, Scenario::VmRem).unwrap();
    let dev = t.a.dev;
    let mut os = t.vmm.guest(&mut t.c, t.vm).unwrap();
    assert!(os.request_irq(dev, 5, H).unwrap_err().to_string().contains("has 1 MSI-X entries; there is no entry 5"));
    assert!(os.free_irq(dev, 0).unwrap_err().to_string().contains("has no interrupt"));
    assert!(os.free_intx(dev).unwrap_err().to_string().contains("no INTx handler"));
    os.request_irq(dev, 0, H).unwrap();
    assert!(matches!(os.request_irq(dev, 0, H).unwrap_err(), devlend_host::HostError::Busy(_)));
    assert!(os.pci_write_config(dev, 0x05, 2, 0).unwrap_err().to_string().contains("naturally aligned"));
    // The BAR sizing protocol is allowed: all ones, the size mask reads back, the address goes back.
    use devlend_host::Os;
    let bar0 = os.pci_read_config(dev, 0x10, 4).unwrap();
    os.pci_write_config(dev, 0x10, 4, u32::MAX).unwrap();
    assert_eq!(os.pci_read_config(dev, 0x10, 4).unwrap() & !0xf, !(16u32 << 20) + 1, "16 MiB BAR 0");
    os.pci_write_config(dev, 0x10, 4, bar0).unwrap();
    assert_eq!(os.pci_read_config(dev, 0x10, 4).unwrap(), bar0);
    assert!(t.vmm.blocked.is_empty(), "nothing here was an attack: {:?}", t.vmm.blocked);
    t.vmm.shutdown(&mut t.c, t.vm).unwrap();
    assert!(t.vmm.idle() && t.c.lending_idle() && t.vmm.anomalies.is_empty() && t.c.anomalies().is_empty());
    assert_eq!(host_irqs(&t.c, "lender") + host_irqs(&t.c, "remote"), 0);
}

/// What [`raised`] saw: when the device sent each interrupt, when the guest saw each, the steps of
/// the last one, and the guest's count.
struct Raised {
    sent: Vec<u64>,
    seen: Vec<u64>,
    steps: Vec<(String, u64)>,
    count: u64,
}

/// On the machine: gpu0 of the testbed's VM raises `n` interrupts back to back (MSI-X entry 0,
/// or INTx), and the guest waits for them.
fn raised(sc: Scenario, src: Src, n: u64) -> Raised {
    let fixtures::Testbed { mut c, mut vmm, vm, a, .. } = fixtures::testbed(JSON, sc).unwrap();
    let mut os = vmm.guest(&mut c, vm).unwrap();
    let gv = if src == Src::Intx { os.request_intx(a.dev, H).unwrap() } else { os.request_irq(a.dev, 0, H).unwrap() };
    let bar0 = os.pci_iomap(a.dev, 0).unwrap();
    let raiser = Rc::new(RefCell::new(Raiser::new(0)));
    let seen = Rc::new(RefCell::new(Vec::new()));
    let out = seen.clone();
    let (_m, vmm, _) = on_machine(c, vmm, vm, vec![(a.gpu.func, raiser.clone())], move |os| {
        for _ in 0..n {
            os.write(bar0 + RAISE, &1u32.to_le_bytes())?;
        }
        let mut got = 0;
        while got < n {
            got = os.wait_irq(gv, got)?;
            out.borrow_mut().push(os.now());
        }
        Ok::<(), devlend_host::HostError>(())
    })
    .unwrap();
    let v = vmm.borrow();
    let steps = v.irq_route(vm, a.dev, src).unwrap().steps.clone();
    let count = v.vm(vm).unwrap().irqs.descs[&gv].count;
    let sent = raiser.borrow().sent.clone();
    let seen = seen.borrow().clone();
    Raised { sent, seen, steps, count }
}

#[test]
fn on_the_machine_forwarding_through_the_lender_costs_time_for_msix_and_intx() {
    let p = devlend_vm::params::params();
    let entry = devlend_fabric::tuning::default_timing().irq_entry_ps;
    for src in [Src::Msix(0), Src::Intx] {
        let lat: Vec<u64> = [Scenario::VmLoc, Scenario::VmRem]
            .map(|sc| {
                let r = raised(sc, src, 1);
                assert_eq!(r.count, 1);
                let names: Vec<&str> = r.steps.iter().map(|s| s.0.as_str()).collect();
                assert_eq!(names.contains(&"notification through the NTB"), sc == Scenario::VmRem, "{names:?}");
                assert!(!names.iter().any(|n| n.starts_with("waiting for")), "an idle machine: {names:?}");
                r.seen[0] - r.sent[0]
            })
            .to_vec();
        assert!(lat[1] > lat[0] + p.lender_forward_ps + entry, "{src:?}: forwarding through the lender costs time: {lat:?}");
    }
}

#[test]
fn a_second_intx_while_the_line_is_masked_waits_for_the_guests_eoi() {
    // vfio masks the level-triggered line in its handler and unmasks it when the guest has taken
    // the interrupt: the second assertion is taken by the host only then.
    for sc in [Scenario::VmLoc, Scenario::VmRem] {
        let path: u64 = raised(sc, Src::Intx, 1).steps.iter().map(|s| s.1).sum();
        let two = raised(sc, Src::Intx, 2);
        assert_eq!(two.count, 2, "{sc:?}: the line was still asserted when unmasked: taken again");
        assert!(two.seen[1] - two.seen[0] >= path, "{sc:?}: the second waited for the guest's EOI, then took the whole path: {:?}, path {path} ps", two.seen);
        let msix = raised(sc, Src::Msix(0), 2);
        assert!(msix.seen[1] - msix.seen[0] < path, "{sc:?}: MSI-X has no mask to wait for: {:?}", msix.seen);
    }
}

#[test]
fn two_interrupts_back_to_back_the_second_waits_for_the_first() {
    let Raised { sent, seen, steps, .. } = raised(Scenario::VmRem, Src::Msix(0), 2);
    assert_eq!(sent.len(), 2);
    let (first, second) = (seen[0] - sent[0], seen[1] - sent[1]);
    let waited: u64 = steps.iter().filter(|s| s.0.starts_with("waiting for")).map(|s| s.1).sum();
    let names: Vec<&str> = steps.iter().map(|s| s.0.as_str()).collect();
    assert!(names.contains(&"waiting for lender's CPU"), "the second queues behind the first at the lender: {names:?}");
    assert!(waited > 0 && second >= first + waited / 2, "first {first} ps, second {second} ps, waited {waited} ps");
}

#[test]
fn raising_an_interrupt_of_a_device_the_guest_lacks_names_the_step() {
    let t = fixtures::testbed(JSON, Scenario::VmLoc).unwrap();
    let e = raise_once(t.c, t.vmm, t.vm, devlend_host::DevId(999), 1).err().expect("no device 999 in the guest");
    assert!(matches!(e, devlend_vm::RunError::Guest { step: "looking up the guest device", .. }), "{e}");
    assert!(e.to_string().starts_with("looking up the guest device: "), "{e}");
}
