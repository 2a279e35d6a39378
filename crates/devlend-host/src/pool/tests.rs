use super::*;
use crate::error::HostError;
use crate::os::DmaDir;
use devlend_fabric::ntb::Inbound;

const GIB: u64 = 1 << 30;

/// pxh830-two-host.yaml without its setup, and a third host `far` that no NTB reaches.
fn cluster() -> Cluster {
    let json = r#"{"name":"t","hosts":[
      {"name":"borrower","cpu":"intel-xeon-e5","ram":34359738368,"iommu":true,"root_ports":3},
      {"name":"lender","cpu":"intel-xeon-e5","ram":34359738368,"iommu":false,"root_ports":3},
      {"name":"far","cpu":"intel-xeon-e5","ram":4294967296,"iommu":true,"root_ports":1}],
     "switches":[{"name":"lender-sw","profile":"pex8796","downstream_ports":4}],
     "devices":[{"name":"gpu0","profile":"quadro-k420"},{"name":"gpu1","profile":"quadro-k420"}],
     "ntbs":[{"name":"ntb-b","profile":"pxh830"},{"name":"ntb-l","profile":"pxh830"}],
     "links":[{"a":"borrower.rp0","b":"ntb-b","gen":3,"width":8},{"a":"lender.rp0","b":"lender-sw","gen":3,"width":16},
      {"a":"lender-sw.d0","b":"ntb-l","gen":3,"width":8},{"a":"lender-sw.d1","b":"gpu0","gen":2,"width":16},
      {"a":"lender-sw.d2","b":"gpu1","gen":2,"width":16},
      {"a":"ntb-b.cable","b":"ntb-l.cable","gen":3,"width":8,"kind":"cable"}]}"#;
    Cluster::from_json(json).unwrap()
}

/// Nothing of Device Lending left in the fabric: no NTB translation, no LUT entry past the
/// root complex's, no IOMMU mapping.
fn fabric_clean(p: &Pool) -> bool {
    let f = &p.cluster().fabric;
    let ntbs = f.ntbs().iter().all(|n| n.inbound.iter().flatten().all(|i| *i == Inbound::Unset) && n.rid_lut.iter().skip(1).all(|e| e.is_none()));
    let iommu = f.iommus().iter().all(|i| i.domains.iter().all(|d| d.mapped_bytes == 0));
    p.idle() && ntbs && iommu
}

fn offered(p: &mut Pool, dev: &str) {
    p.connect("lender", "borrower").unwrap();
    p.add(dev).unwrap();
    p.available(dev).unwrap();
}

#[test]
fn fabric_device_ids_follow_node_and_place() {
    let p = Pool::new(cluster());
    let ids: Vec<(Fdid, String)> = p.entries().into_iter().map(|e| (e.fdid, e.device)).collect();
    assert_eq!(ids, vec![(0x80000, "gpu0".to_string()), (0x80001, "gpu1".to_string())], "lender is host 1: node 8; NTBs get none");
    assert_eq!(p.resolve("80001").unwrap(), p.resolve("gpu1").unwrap());
    assert_eq!(p.resolve("0x80000").unwrap(), p.resolve("gpu0").unwrap());
    assert_eq!(p.resolve("ntb-l").unwrap_err().kind(), "not-lendable");
    assert_eq!(p.resolve("90000").unwrap_err().kind(), "no-such-device");
}

#[test]
fn borrow_needs_add_available_and_connect_then_return_undoes_everything() {
    let mut p = Pool::new(cluster());
    assert_eq!(p.borrow("borrower", "gpu0", None).unwrap_err().kind(), "not-in-pool");
    p.add("gpu0").unwrap();
    assert_eq!(p.add("gpu0").unwrap_err().kind(), "already-in-pool");
    assert_eq!(p.borrow("borrower", "gpu0", None).unwrap_err().kind(), "unavailable");
    p.available("gpu0").unwrap();
    assert_eq!(p.borrow("borrower", "gpu0", None).unwrap_err().kind(), "not-connected");
    p.connect("lender", "borrower").unwrap();
    let dev = p.borrow("borrower", "80000", Some(64 << 20)).unwrap();
    let e = p.entry("gpu0").unwrap();
    assert_eq!((e.state, e.borrower.as_deref(), e.visible_to.clone()), (State::Borrowed, Some("borrower"), vec!["borrower".to_string()]));
    let lend = p.lend("gpu0").unwrap().unwrap();
    assert_eq!(lend.window_size, 64 << 20);
    assert_eq!(p.cluster().kernel("borrower").unwrap().device(dev).unwrap().name, "gpu0", "hot-added on the borrower");
    assert!(!fabric_clean(&p));
    for verb in [Pool::unavailable, Pool::remove] {
        assert_eq!(verb(&mut p, "gpu0").unwrap_err().kind(), "borrowed");
    }
    assert_eq!(p.borrow("borrower", "gpu0", None).unwrap_err().kind(), "borrowed");
    assert_eq!(p.return_device("gpu0", Some("lender")).unwrap_err().kind(), "not-borrowed");
    p.return_device("gpu0", Some("borrower")).unwrap();
    assert!(fabric_clean(&p), "return undoes every window, LUT entry and mapping");
    assert_eq!(p.entry("gpu0").unwrap().state, State::Available);
    assert_eq!(p.return_device("gpu0", None).unwrap_err().kind(), "not-borrowed");
}

#[test]
fn failed_borrows_leave_nothing_mapped() {
    let mut p = Pool::new(cluster());
    offered(&mut p, "gpu0");
    let e = p.borrow("borrower", "gpu0", Some(16 * GIB)).unwrap_err();
    assert_eq!(e.kind(), "window-too-large", "{e}");
    assert!(e.to_string().contains("larger than the NTB can map"), "{e}");
    assert!(fabric_clean(&p));
    assert_eq!(p.entry("gpu0").unwrap().state, State::Available);
    assert_eq!(p.connect("lender", "far").unwrap_err().kind(), "unreachable");
    assert_eq!(p.borrow("nobody", "gpu0", None).unwrap_err().kind(), "no-such-host");
}

#[test]
fn return_is_refused_while_the_borrowers_driver_holds_the_device() {
    let mut p = Pool::new(cluster());
    offered(&mut p, "gpu0");
    let dev = p.borrow("borrower", "gpu0", None).unwrap();
    let mut os = p.cluster_mut().os("borrower").unwrap();
    let buf = os.kmalloc(1 << 16).unwrap();
    let dma = os.dma_map_single(dev, buf, 1 << 16, DmaDir::FromDevice).unwrap();
    let e = p.return_device("gpu0", None).unwrap_err();
    assert_eq!(e.kind(), "in-use", "{e}");
    assert_eq!(p.entry("gpu0").unwrap().state, State::Borrowed);
    p.cluster_mut().os("borrower").unwrap().dma_unmap_single(dev, dma, 1 << 16, DmaDir::FromDevice).unwrap();
    p.return_device("gpu0", None).unwrap();
    assert!(fabric_clean(&p));
}

#[test]
fn a_topology_borrow_offers_the_device_and_undoes_that_when_it_fails() {
    let mut p = Pool::new(cluster());
    assert_eq!(p.offer_and_borrow("borrower", "gpu0", Some(16 * GIB)).unwrap_err().kind(), "window-too-large");
    assert_eq!((p.entry("gpu0").unwrap().state, p.entry("gpu0").unwrap().visible_to.len()), (State::NotAdded, 0));
    p.offer_and_borrow("borrower", "gpu0", None).unwrap();
    p.offer_and_borrow("borrower", "gpu1", None).unwrap();
    assert_eq!(p.offer_and_borrow("borrower", "gpu1", None).unwrap_err().kind(), "borrowed");
    assert_eq!(p.entry("gpu1").unwrap().state, State::Borrowed, "a refused second borrow leaves the first alone");
    p.return_device("gpu1", None).unwrap();
    p.return_device("gpu0", None).unwrap();
    assert!(fabric_clean(&p));
}

#[test]
fn a_crash_on_either_side_ends_the_lend_and_leaves_nothing_mapped() {
    for (crashed, why) in [("lender", "lender lender crashed"), ("borrower", "borrower borrower crashed")] {
        let mut p = Pool::new(cluster());
        offered(&mut p, "gpu0");
        p.borrow("borrower", "gpu0", None).unwrap();
        let r = p.inject("host-crash", crashed).unwrap();
        assert_eq!(p.cluster().leftovers(), vec![], "after the fault");
        assert_eq!(r.ended.len(), 1, "{crashed}");
        assert!(r.ended[0].why.to_string().contains(why), "{}", r.ended[0].why);
        assert!(fabric_clean(&p), "{crashed}: nothing of the lend is left");
        assert_eq!(p.entry("gpu0").unwrap().state, State::Available);
        p.inject("host-reboot", crashed).unwrap();
        assert_eq!(p.cluster().leftovers(), vec![], "after the fault");
        p.borrow("borrower", "gpu0", None).unwrap();
        assert!(!p.needs_reset().contains(&"gpu0".to_string()), "reset before the next borrower");
    }
}

#[test]
fn a_removed_device_is_refused_until_its_slot_is_back_and_a_hung_one_cannot_be_reset() {
    let mut p = Pool::new(cluster());
    offered(&mut p, "gpu0");
    offered_again(&mut p, "gpu1");
    p.borrow("borrower", "gpu0", None).unwrap();
    let r = p.inject("surprise-removal", "gpu0").unwrap();
    assert_eq!(p.cluster().leftovers(), vec![], "after the fault");
    assert_eq!((r.ended.len(), r.halted.len()), (1, 1));
    assert!(fabric_clean(&p));
    assert_eq!(p.borrow("borrower", "gpu0", None).unwrap_err().kind(), "removed");
    p.inject("port-up", "gpu0").unwrap();
    assert_eq!(p.cluster().leftovers(), vec![], "after the fault");
    p.borrow("borrower", "gpu0", None).unwrap();
    p.borrow("borrower", "gpu1", None).unwrap();
    p.inject("completion-timeout", "gpu1").unwrap();
    assert_eq!(p.cluster().leftovers(), vec![], "after the fault");
    p.return_device("gpu1", None).unwrap();
    let e = p.borrow("borrower", "gpu1", None).unwrap_err();
    assert_eq!(e.kind(), "reset-failed", "{e}");
    assert!(e.to_string().contains("does not answer"), "{e}");
    p.return_device("gpu0", None).unwrap();
    assert!(fabric_clean(&p));
    assert_eq!(p.inject("meteor", "gpu0").unwrap_err().kind(), "fault");
    assert_eq!(p.inject("completion-timeout", "ntb-l").unwrap_err().kind(), "fault");
}

#[test]
fn a_switch_port_down_cuts_what_is_below_it_until_it_is_back() {
    let mut p = Pool::new(cluster());
    offered(&mut p, "gpu0");
    let dev = p.borrow("borrower", "gpu0", None).unwrap();
    let bar = p.lend("gpu0").unwrap().unwrap().bars[0].cpu_addr;
    p.inject("port-down", "lender-sw.d1").unwrap();
    assert_eq!(p.cluster().leftovers(), vec![], "after the fault");
    let mut os = p.cluster_mut().os("borrower").unwrap();
    let e = os.read(bar, 4).unwrap_err();
    let HostError::Fault { addr, failure, during: None } = &e else { panic!("{e}") };
    assert!(*addr == bar && matches!(failure.failure, devlend_fabric::route::Failure::PortDown { .. }), "{e}");
    assert!(e.to_string().contains("gpu0.up") || e.to_string().contains("link above"), "{e}");
    p.inject("port-up", "lender-sw.d1").unwrap();
    assert_eq!(p.cluster().leftovers(), vec![], "after the fault");
    assert!(p.cluster_mut().os("borrower").unwrap().read(bar, 4).is_ok());
    assert!(p.inject("port-down", "lender-sw.d3").is_err(), "nothing below d3");
    let _ = dev;
}

fn offered_again(p: &mut Pool, dev: &str) {
    p.add(dev).unwrap();
    p.available(dev).unwrap();
}

/// Borrow gpu0, write a secret into its device memory (BAR 1) and a register (BAR 0, CE_SRC) as
/// the borrower's CPU, then end the lend with `end`; borrow it again and read both back.
fn secret_after(hygiene: crate::Hygiene, end: impl Fn(&mut Pool)) -> (Vec<u8>, Vec<u8>) {
    let mut p = Pool::new(cluster());
    p.cluster_mut().set_hygiene(hygiene);
    offered(&mut p, "gpu0");
    p.borrow("borrower", "gpu0", None).unwrap();
    let bar = |p: &Pool, i: u8| p.lend("gpu0").unwrap().unwrap().bars.iter().find(|b| b.index == i).unwrap().cpu_addr;
    let (mem, regs) = (bar(&p, 1) + 0x1000, bar(&p, 0) + 0x100);
    let mut os = p.cluster_mut().os("borrower").unwrap();
    os.write(mem, b"tenant A's secret").unwrap();
    os.write(regs, &0xdead_beef_u64.to_le_bytes()).unwrap();
    assert_eq!(os.read(mem, 17).unwrap(), b"tenant A's secret");
    end(&mut p);
    p.borrow("borrower", "gpu0", None).unwrap();
    let (mem, regs) = (bar(&p, 1) + 0x1000, bar(&p, 0) + 0x100);
    let mut os = p.cluster_mut().os("borrower").unwrap();
    (os.read(mem, 17).unwrap(), os.read(regs, 8).unwrap())
}

fn plain_return(p: &mut Pool) {
    p.return_device("gpu0", None).unwrap();
}

fn borrower_crash(p: &mut Pool) {
    p.inject("host-crash", "borrower").unwrap();
    p.inject("host-reboot", "borrower").unwrap();
}

fn poisoned_then_flr(p: &mut Pool) {
    p.inject("poisoned", "gpu0").unwrap();
    p.return_device("gpu0", None).unwrap();
    assert_eq!(p.needs_reset(), vec!["gpu0".to_string()], "an FLR comes before the next borrow");
}

#[test]
fn the_next_borrower_reads_zeros_where_the_last_wrote_a_secret() {
    type End = (&'static str, fn(&mut Pool));
    let ends: [End; 3] = [("a plain return", plain_return), ("a fault", borrower_crash), ("an FLR", poisoned_then_flr)];
    for (what, end) in ends {
        let (mem, regs) = secret_after(crate::Hygiene::Scrub, end);
        assert_eq!((mem, regs), (vec![0; 17], vec![0; 8]), "scrub, after {what}");
        let (mem, regs) = secret_after(crate::Hygiene::None, end);
        assert_eq!((mem.as_slice(), regs), (&b"tenant A's secret"[..], 0xdead_beef_u64.to_le_bytes().to_vec()), "policy none leaks, after {what}");
    }
}

#[test]
fn a_scrub_is_timed_as_the_device_would_do_it_and_waits_for_a_crashed_lender() {
    let mut p = Pool::new(cluster());
    offered(&mut p, "gpu0");
    p.borrow("borrower", "gpu0", None).unwrap();
    p.return_device("gpu0", None).unwrap();
    let func = p.resolve("gpu0").unwrap();
    let s = p.cluster().last_scrub(func).unwrap().clone();
    // The K420's 1 GiB of DDR3 filled at its 29 GB/s: 37.0 ms.
    assert_eq!(s.how, crate::ScrubHow::Fill { bytes: 1 << 30, bytes_per_s: 29_000_000_000 });
    assert_eq!(s.ps, (1u128 << 30) as u64 * 1000 / 29);
    p.borrow("borrower", "gpu0", None).unwrap();
    p.inject("host-crash", "lender").unwrap();
    assert!(p.cluster().scrub_is_pending(func), "a crashed lender's agent scrubs nothing");
    p.inject("host-reboot", "lender").unwrap();
    assert!(p.cluster().scrub_is_pending(func));
    assert!(p.needs_reset().is_empty(), "the reboot reset the lender's devices: {:?}", p.needs_reset());
    p.borrow("borrower", "gpu0", None).unwrap();
    assert!(!p.cluster().scrub_is_pending(func), "scrubbed before its next borrower");
}
