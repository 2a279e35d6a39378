//! The Xeon face as ntb_hw_gen1.c programs it (B2B with the SNB errata: the peer's registers
//! through the last memory window), every access a CPU load or store on the machine.

use devlend_devices::ntb_xeon::*;
use devlend_engine::machine::Machine;
use devlend_fabric::config::MSIX_TABLE_OFFSET;
use devlend_fabric::events::Event;
use devlend_fabric::model::FuncId;
use devlend_host::Cluster;
use std::cell::RefCell;
use std::rc::Rc;

const TOPO: &str = r#"{"name":"xeon-ntb-two-host","source":"test","hosts":[
 {"name":"a","cpu":"intel-xeon-e5","ram":4294967296,"iommu":false,"root_ports":2},
 {"name":"b","cpu":"intel-xeon-e5","ram":4294967296,"iommu":false,"root_ports":2}],
 "switches":[],"devices":[],
 "ntbs":[{"name":"ntb-a","profile":"xeon-gen1"},{"name":"ntb-b","profile":"xeon-gen1"}],
 "links":[{"a":"a.rp0","b":"ntb-a","gen":3,"width":8,"kind":"slot"},{"a":"b.rp0","b":"ntb-b","gen":3,"width":8,"kind":"slot"},
  {"a":"ntb-a.cable","b":"ntb-b.cable","gen":3,"width":8,"kind":"cable"}],"setup":[]}"#;

/// The B2B addresses ntb_hw_gen1.c uses (XEON_B2B_BAR2_ADDR64, XEON_B2B_BAR4_ADDR64).
const B2B_BAR2: u64 = 0x2000_0000_0000_0000;
const B2B_BAR4: u64 = 0x4000_0000_0000_0000;
const MSI_DATA: u32 = 0x42;

struct Rig {
    m: Machine<Cluster>,
    ntb: Rc<RefCell<XeonNtb>>,
    /// Per host: host id, function, CPU address of BAR 0, 2, 4.
    side: [(u16, FuncId, [u64; 3]); 2],
}

fn rig() -> Rig {
    let mut c = Cluster::from_json(TOPO).unwrap();
    let mut side = [(0u16, 0 as FuncId, [0u64; 3]); 2];
    for (k, (host, name)) in [("a", "ntb-a"), ("b", "ntb-b")].into_iter().enumerate() {
        let func = c.fabric.func_id(name).unwrap();
        let h = c.fabric.host_id(host).unwrap();
        let os = c.os(host).unwrap();
        let dev = os.find(name).unwrap();
        let bars = [0u8, 2, 4].map(|b| os.pci_iomap(dev, b).unwrap());
        c.fabric.config_write(func, 0x04, 2, 0x6).unwrap(); // memory space, bus master
                                                            // MSI-X entries 0..3 aimed at the host, as request_irq leaves them (unmasked).
        let msi = c.fabric.host(h).msi.start;
        for v in 0..4u64 {
            let mut e = [0u8; 16];
            e[0..8].copy_from_slice(&msi.to_le_bytes());
            e[8..12].copy_from_slice(&(MSI_DATA + v as u32).to_le_bytes());
            c.fabric.bar_store(func, 0, MSIX_TABLE_OFFSET + 16 * v, &e);
        }
        side[k] = (h, func, bars);
    }
    let a = c.fabric.ntb_id("ntb-a").unwrap();
    let x = XeonNtb::new(&mut c.fabric, a).unwrap();
    let mut m = Machine::new(c);
    let ntb = x.add_to(&mut m);
    Rig { m, ntb, side }
}

impl Rig {
    /// Stores of host `k`, in order, from time `at`; run the machine to the end.
    fn stores(&mut self, k: usize, at: u64, stores: Vec<(u64, Vec<u8>)>) {
        let host = self.side[k].0;
        self.m.spawn("stores", at, move |t| {
            for (addr, d) in stores {
                t.cpu_write(host, addr, &d)?;
            }
            Ok(())
        });
        self.m.run_until(at + 100_000_000).unwrap();
    }

    fn load(&mut self, k: usize, addr: u64, len: usize) -> Vec<u8> {
        let host = self.side[k].0;
        let out = Rc::new(RefCell::new(Vec::new()));
        let o = out.clone();
        let at = self.m.now();
        self.m.spawn("load", at, move |t| {
            *o.borrow_mut() = t.cpu_read(host, addr, len)?;
            Ok(())
        });
        self.m.run_until(at + 100_000_000).unwrap();
        let v = out.borrow().clone();
        v
    }

    /// What xeon_setup_b2b_mw programs on host `k` (USD or DSD alike), then unmask all doorbells.
    fn setup(&mut self, k: usize) {
        let bar0 = self.side[k].2[0];
        let q = |v: u64| v.to_le_bytes().to_vec();
        self.stores(
            k,
            self.m.now(),
            vec![
                (bar0 + SBAR0BASE, q(B2B_BAR4)),
                (bar0 + SBAR23BASE, q(B2B_BAR2)),
                (bar0 + SBAR45BASE, q(B2B_BAR4)),
                (bar0 + SBAR23LMT, q(B2B_BAR2)),
                (bar0 + SBAR45LMT, q(B2B_BAR4)),
                (bar0 + SBAR23XLAT, q(0)),
                (bar0 + PBAR23XLAT, q(B2B_BAR2)),
                (bar0 + PBAR45XLAT, q(B2B_BAR4)),
                (bar0 + PDBMSK, 0u16.to_le_bytes().to_vec()),
            ],
        );
    }

    fn msis(&mut self, k: usize) -> Vec<u32> {
        let host = self.side[k].0;
        self.m
            .world()
            .fabric
            .events()
            .iter()
            .filter_map(|e| match e {
                Event::Msi { host: h, data, .. } if *h == host => Some(*data),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn config_space_says_intel_b2b_with_the_cable_link_status() {
    let r = rig();
    let mut w = r.m.world();
    let f = &w.fabric;
    let (fa, fb) = (r.side[0].1, r.side[1].1);
    let mut x = r.ntb.borrow_mut();
    let id: Vec<u8> = (0..4).map(|o| x.config_read(f, fa, o).unwrap()).collect();
    assert_eq!(id, [0x86, 0x80, 0x0d, 0x3c]);
    assert_eq!(x.config_read(f, fa, PPD), Some(PPD_B2B_USD));
    assert_eq!(x.config_read(f, fb, PPD), Some(PPD_B2B_DSD));
    assert_eq!(x.config_read(f, fa, PBAR23SZ), Some(21), "2 MiB windows");
    let lo = x.config_read(f, fa, LINK_STATUS).unwrap() as u16;
    let hi = x.config_read(f, fa, LINK_STATUS + 1).unwrap() as u16;
    assert_eq!(hi << 8 | lo, LNK_STA_ACTIVE | 8 << 4 | 3, "active, x8, Gen3");
    assert!(x.config_write(f, fa, SBAR23SZ, 21));
    assert_eq!(x.config_read(f, fa, SBAR23SZ), Some(21));
    drop(x);
    w.fabric.ntb_link_disable(0).unwrap();
    let f = &w.fabric;
    assert_eq!(r.ntb.borrow_mut().config_read(f, fa, LINK_STATUS), Some(0), "link down: not active");
    assert!(r.ntb.borrow().unimplemented().is_empty());
}

#[test]
fn a_doorbell_rung_through_the_b2b_window_interrupts_the_peer_on_its_vector() {
    let mut r = rig();
    r.setup(0);
    r.setup(1);
    let bar4 = r.side[0].2[2]; // host a's BAR 4: b's registers (the b2b window)
    let before = r.msis(1).len();
    // Bit 6 is vector 1 (five bits a vector).
    r.stores(0, r.m.now(), vec![(bar4 + PDOORBELL, (1u16 << 6).to_le_bytes().to_vec())]);
    let got = r.msis(1);
    assert_eq!(got[before..], [MSI_DATA + 1], "one MSI on b's vector 1");
    let bar0b = r.side[1].2[0];
    assert_eq!(r.load(1, bar0b + PDOORBELL, 2), (1u16 << 6).to_le_bytes());
    // b clears it (write 1 to clear from its own side).
    r.stores(1, r.m.now(), vec![(bar0b + PDOORBELL, (1u16 << 6).to_le_bytes().to_vec())]);
    assert_eq!(r.load(1, bar0b + PDOORBELL, 2), [0, 0]);
}

#[test]
fn a_masked_doorbell_interrupts_when_unmasked() {
    let mut r = rig();
    r.setup(0);
    r.setup(1);
    let (bar4, bar0b) = (r.side[0].2[2], r.side[1].2[0]);
    r.stores(1, r.m.now(), vec![(bar0b + PDBMSK, 0x7fffu16.to_le_bytes().to_vec())]);
    let before = r.msis(1).len();
    r.stores(0, r.m.now(), vec![(bar4 + PDOORBELL, 1u16.to_le_bytes().to_vec())]);
    assert_eq!(r.msis(1).len(), before, "masked: no interrupt");
    r.stores(1, r.m.now(), vec![(bar0b + PDBMSK, 0u16.to_le_bytes().to_vec())]);
    assert_eq!(r.msis(1)[before..], [MSI_DATA]);
}

#[test]
fn a_scratchpad_written_through_the_window_is_the_peers_and_reads_back_across() {
    let mut r = rig();
    r.setup(0);
    r.setup(1);
    let (bar4, bar0b) = (r.side[0].2[2], r.side[1].2[0]);
    r.stores(0, r.m.now(), vec![(bar4 + SPAD + 4 * 3, 0xdead_beefu32.to_le_bytes().to_vec())]);
    assert_eq!(r.load(1, bar0b + SPAD + 12, 4), 0xdead_beefu32.to_le_bytes(), "b's own scratchpad 3");
    assert_eq!(r.load(0, bar4 + SPAD + 12, 4), 0xdead_beefu32.to_le_bytes(), "a reads it across the link");
    assert_eq!(r.m.world().fabric.spad_read(1, 3).unwrap(), 0xdead_beef, "the fabric's scratchpad: one model");
}

#[test]
fn a_memory_window_lands_where_the_peer_translates_it() {
    let mut r = rig();
    r.setup(0);
    r.setup(1);
    let (bar2, bar0b) = (r.side[0].2[1], r.side[1].2[0]);
    let buf = 0x4000_0000u64; // 2 MiB aligned, in b's RAM
    r.stores(1, r.m.now(), vec![(bar0b + SBAR23XLAT, buf.to_le_bytes().to_vec()), (bar0b + SBAR23LMT, 0u64.to_le_bytes().to_vec())]);
    r.stores(0, r.m.now(), vec![(bar2 + 0x100, b"across".to_vec())]);
    let mut got = [0u8; 6];
    r.m.world().fabric.ram(r.side[1].0).read(buf + 0x100, &mut got);
    assert_eq!(&got, b"across");
    // A limit equal to the base closes the window again.
    r.stores(1, r.m.now(), vec![(bar0b + SBAR23LMT, B2B_BAR2.to_le_bytes().to_vec())]);
    assert!(r.m.world().fabric.ntb(1).inbound[0][0] == devlend_fabric::ntb::Inbound::Unset);
}

#[test]
fn registers_not_modelled_are_recorded_not_answered_silently() {
    let r = rig();
    let fa = r.side[0].1;
    let mut w = r.m.world();
    let f = &w.fabric;
    let mut x = r.ntb.borrow_mut();
    assert!(x.check_read(f, fa, 0, PDOORBELL, 2));
    assert!(!x.check_read(f, fa, 0, 0x70, 4), "USMEMMISS");
    assert_eq!(x.config_read(f, fa, 0xe0), Some(0), "WCCNTRL");
    let u = x.unimplemented().to_vec();
    assert_eq!(u.len(), 2, "{u:?}");
    assert_eq!((u[0].space, u[0].offset, u[0].access), ("bar0", 0x70, Access::Read));
    assert_eq!((u[1].space, u[1].offset), ("config", 0xe0));
    drop(x);
    let _ = &mut w;
}

#[test]
fn a_cable_pulled_sets_the_link_doorbell_and_interrupts_both_sides_on_the_link_vector() {
    let mut r = rig();
    r.setup(0);
    r.setup(1);
    let (fa, at) = (r.side[0].1, r.m.now() + 1000);
    let before = [r.msis(0).len(), r.msis(1).len()];
    r.m.world().fabric.ntb_link_disable(0).unwrap();
    assert!(r.m.signal(fa, at, LINK_SIGNAL));
    r.m.run_until(at + 100_000_000).unwrap();
    for (k, from) in before.into_iter().enumerate() {
        assert_eq!(r.msis(k)[from..], [MSI_DATA + 3], "side {k}: one MSI on the link vector");
        let bar0 = r.side[k].2[0];
        assert_eq!(r.load(k, bar0 + PDOORBELL, 2), (DB_LINK_BIT as u16).to_le_bytes());
    }
    let status = r.ntb.borrow_mut().config_read(&r.m.world().fabric, fa, LINK_STATUS);
    assert_eq!(status, Some(0));
    // A signal with the link unchanged reports nothing.
    let now = r.m.now();
    r.m.signal(fa, now + 10, LINK_SIGNAL);
    r.m.run_until(now + 100_000_000).unwrap();
    assert_eq!(r.msis(0).len(), before[0] + 1);
}
