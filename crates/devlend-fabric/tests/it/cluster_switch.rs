//! NTB adapters with several peers: a cluster switch of the MXS824 class, multi-port adapters,
//! and links trained down to what their ends support (issue 15).

use devlend_fabric::route::{Failure, HopKind, Outcome, Requester};
use devlend_fabric::{Fabric, Target};
use devlend_wire::{Access, TlpHeader, TlpKind};

const MIB: u64 = 1 << 20;

fn cluster(n: usize) -> Fabric {
    devlend_fabric::build_json(&devlend_fabric::fixtures::hosts_on_mxs824(n)).unwrap()
}

fn ids(f: &Fabric, names: &[&str]) -> Vec<u32> {
    names.iter().map(|n| f.ntb_id(n).unwrap()).collect()
}

#[test]
fn every_adapter_on_the_switch_is_a_peer_of_every_other() {
    let f = cluster(4);
    let n = ids(&f, &["n0", "n1", "n2", "n3"]);
    for (i, &a) in n.iter().enumerate() {
        assert_eq!(f.peer_port_count(a), 3);
        let others: Vec<u32> = (0..3).map(|p| f.peer_port_number(a, p).unwrap()).collect();
        assert!(!others.contains(&a) && n.iter().filter(|x| **x != a).all(|x| others.contains(x)), "n{i}: {others:?}");
        assert_eq!(f.peer_port_idx(a, others[2]).unwrap(), 2);
    }
    assert!(f.peer_port_number(n[0], 3).is_err(), "three peers: indices 0 to 2");
}

#[test]
fn a_write_crosses_both_cables_and_the_switch_into_the_peer_it_is_mapped_to() {
    let mut f = cluster(3);
    let n = ids(&f, &["n0", "n1", "n2"]);
    let p = f.peer_port_idx(n[2], n[0]).unwrap();
    f.ntb_mw_set_trans(n[2], p, 1, 0x1000_0000, MIB).unwrap();
    let (mw, _) = f.peer_mw_get_addr(n[0], 1).unwrap();
    let h0 = f.host_id("h0").unwrap();
    let r = f.route_uncached(Requester::Cpu(h0), mw + 0x40, Access::Write);
    assert_eq!(r.outcome, Outcome::Delivered(Target::Ram { host: f.host_id("h2").unwrap(), addr: 0x1000_0040 }));
    let kinds: Vec<_> = r.hops.iter().map(|h| (h.kind, f.node(h.node).component.as_str())).collect();
    let at = kinds.iter().position(|k| *k == (HopKind::Ntb, "n0")).unwrap();
    assert_eq!(&kinds[at..at + 4], &[(HopKind::Ntb, "n0"), (HopKind::Link, "sw"), (HopKind::Forward, "sw"), (HopKind::Link, "n2")]);
    let fwd = f.node(r.hops[at + 2].node);
    assert_eq!(fwd.port, format!("p{}", 2), "the switch forwards out of the port n2 is cabled to");
    // n1 did not map anything for n0: the same window does not reach it, and n1's own window to n2
    // is another translation.
    let q = f.peer_port_idx(n[2], n[1]).unwrap();
    assert_eq!(
        f.route_uncached(Requester::Cpu(f.host_id("h1").unwrap()), f.peer_mw_get_addr(n[1], 1).unwrap().0, Access::Write).outcome,
        Outcome::Failed(Failure::NtbUnmapped { ntb: n[1], window: 1, offset: 0 })
    );
    f.ntb_mw_set_trans(n[2], q, 1, 0x2000_0000, MIB).unwrap();
    assert_eq!(
        f.route_uncached(Requester::Cpu(f.host_id("h1").unwrap()), f.peer_mw_get_addr(n[1], 1).unwrap().0, Access::Write).delivered(),
        Some(Target::Ram { host: 2, addr: 0x2000_0000 })
    );
}

#[test]
fn a_write_tlp_arrives_with_its_header_as_the_ntb_rewrote_it() {
    let mut f = cluster(3);
    let n = ids(&f, &["n0", "n2"]);
    let p = f.peer_port_idx(n[1], n[0]).unwrap();
    f.ntb_mw_set_trans(n[1], p, 1, 0x1000_0000, MIB).unwrap();
    let (mw, _) = f.peer_mw_get_addr(n[0], 1).unwrap();
    let cpu = Requester::Cpu(f.host_id("h0").unwrap());
    let sent = TlpHeader::write(f.requester_rid(cpu), mw + 0x40, 4);
    let route = f.route_uncached(cpu, mw + 0x40, Access::Write);
    let last = *route.hops.last().unwrap();
    // Three times: the route as found (left to carry), from the per-page cache shifted to the
    // TLP's offset, and along the carried route.
    let mut carried = None;
    for (along, lookups) in [(true, 1), (false, 1), (true, 0)] {
        let looked = f.route_cache_stats();
        let mut none = None;
        let a = f.write_tlp(cpu, &sent, &[1, 2, 3, 4], if along { &mut carried } else { &mut none }).unwrap();
        let (hits, misses) = f.route_cache_stats();
        assert_eq!(hits + misses - looked.0 - looked.1, lookups, "along the carried route nothing is looked up");
        assert_eq!(a.target, Target::Ram { host: f.host_id("h2").unwrap(), addr: 0x1000_0040 });
        assert_eq!(a.header, TlpHeader { requester: last.rid, addr: 0x1000_0040, ..sent }, "address and requester ID as the path rewrote them");
        assert_ne!(a.header.requester, sent.requester, "the NTB's requester-ID LUT rewrote it");
        assert_eq!((a.header.kind, a.header.len), (TlpKind::MemWrite, 4));
    }
    assert_eq!(f.read(cpu, mw + 0x40, 4), (vec![1, 2, 3, 4], None));
}

#[test]
fn segments_of_one_window_lead_to_different_peers_and_a_taken_segment_is_refused() {
    let mut f = cluster(3);
    let n = ids(&f, &["n0", "n1", "n2"]);
    let seg = 8 * MIB;
    let (p1, p2) = (f.peer_port_idx(n[1], n[0]).unwrap(), f.peer_port_idx(n[2], n[0]).unwrap());
    f.ntb_lut_set_trans(n[1], p1, 0, 0, 0x1000_0000).unwrap();
    f.ntb_lut_set_trans(n[2], p2, 0, 1, 0x3000_0000).unwrap();
    let (mw0, _) = f.peer_mw_get_addr(n[0], 0).unwrap();
    let cpu = Requester::Cpu(f.host_id("h0").unwrap());
    assert_eq!(f.route_uncached(cpu, mw0 + 8, Access::Write).delivered(), Some(Target::Ram { host: 1, addr: 0x1000_0008 }));
    assert_eq!(f.route_uncached(cpu, mw0 + seg + 8, Access::Write).delivered(), Some(Target::Ram { host: 2, addr: 0x3000_0008 }));
    let e = f.ntb_lut_set_trans(n[2], p2, 0, 0, 0x3000_0000).unwrap_err().to_string();
    assert!(e.contains("segment 0 of memory window 0 of n0 already leads to n1"), "{e}");
    let e = f.ntb_mw_set_trans(n[2], p2, 0, 0x3000_0000, 2 * seg).unwrap_err().to_string();
    assert!(e.contains("already leads to n1"), "{e}");
    f.ntb_mw_clear_trans(n[1], p1, 0).unwrap();
    assert_eq!(
        f.route_uncached(cpu, mw0 + seg, Access::Write).delivered(),
        Some(Target::Ram { host: 2, addr: 0x3000_0000 }),
        "clearing n1's translation keeps n2's segment"
    );
    f.ntb_lut_set_trans(n[2], p2, 0, 0, 0x3000_0000).unwrap();
    assert_eq!(f.programmed().out_peers[n[0] as usize][0][..2], [Some(p2_of(&f, n[0], n[2])), Some(p2_of(&f, n[0], n[2]))]);
}

fn p2_of(f: &Fabric, a: u32, b: u32) -> u8 {
    f.peer_port_idx(a, b).unwrap() as u8
}

#[test]
fn a_read_through_the_switch_completes_to_the_requester_of_the_right_peer() {
    let mut f = cluster(3);
    let n = ids(&f, &["n0", "n1", "n2"]);
    for (src, at) in [(0usize, 0x1000_0000u64), (1, 0x2000_0000)] {
        let p = f.peer_port_idx(n[2], n[src]).unwrap();
        f.ntb_mw_set_trans(n[2], p, 1, at, MIB).unwrap();
    }
    let h2 = f.host_id("h2").unwrap();
    f.write(Requester::Cpu(h2), 0x1000_0000, &[1, 2, 3, 4]);
    f.write(Requester::Cpu(h2), 0x2000_0000, &[5, 6, 7, 8]);
    for (src, want) in [(0usize, [1u8, 2, 3, 4]), (1, [5, 6, 7, 8])] {
        let host = f.host_id(&format!("h{src}")).unwrap();
        let mw = f.peer_mw_get_addr(n[src], 1).unwrap().0;
        let r = f.route_uncached(Requester::Cpu(host), mw, Access::Read);
        let c = r.completion.as_ref().unwrap();
        assert_eq!(c.outcome, Outcome::Delivered(Target::Cpu { host }), "h{src}'s completion comes back to h{src}");
        assert_eq!(f.read(Requester::Cpu(host), mw, 4), (want.to_vec(), None));
    }
    let aliases = f.ntb_dma_aliases(n[2]);
    assert_eq!(aliases.len(), 64, "32 LUT entries from each of two peers");
    assert!(aliases.iter().collect::<std::collections::BTreeSet<_>>().len() == 64, "distinct far-side IDs per peer");
}

#[test]
fn one_adapter_link_down_cuts_it_off_and_leaves_the_others_connected() {
    let mut f = cluster(3);
    let n = ids(&f, &["n0", "n1", "n2"]);
    for src in [0usize, 1] {
        let p = f.peer_port_idx(n[2], n[src]).unwrap();
        f.ntb_mw_set_trans(n[2], p, 1, 0x1000_0000 * (src as u64 + 1), MIB).unwrap();
    }
    f.ntb_link_disable(n[0]).unwrap();
    assert!(!f.ntb_link_is_up(n[0]) && f.ntb_link_is_up(n[1]) && f.ntb_link_is_up(n[2]));
    let w = |f: &mut Fabric, i: usize| {
        let mw = f.peer_mw_get_addr(n[i], 1).unwrap().0;
        f.route_uncached(Requester::Cpu(i as u16), mw, Access::Write).outcome
    };
    assert_eq!(w(&mut f, 0), Outcome::Failed(Failure::NtbLinkDown { ntb: n[0] }));
    assert!(matches!(w(&mut f, 1), Outcome::Delivered(_)));
    assert!(f.ntb_peer_spad_write(n[1], f.peer_port_idx(n[1], n[0]).unwrap(), 0, 1).is_err(), "n0 is unreachable");
    assert!(f.ntb_peer_spad_write(n[1], f.peer_port_idx(n[1], n[2]).unwrap(), 0, 7).is_ok());
    assert_eq!(f.spad_read(n[2], 0).unwrap(), 7);
}

#[test]
fn a_two_port_pxh830_reaches_two_hosts_directly() {
    let json = r#"{"name":"three","hosts":[
        {"name":"a","cpu":"intel-xeon-e5","ram":4294967296,"root_ports":1},
        {"name":"b","cpu":"intel-xeon-e5","ram":4294967296,"root_ports":1},
        {"name":"c","cpu":"intel-xeon-e5","ram":4294967296,"root_ports":1}],
      "ntbs":[{"name":"na","profile":"pxh830"},{"name":"nb","profile":"pxh830"},{"name":"nc","profile":"pxh830"}],
      "links":[{"a":"a.rp0","b":"na","gen":3,"width":8},{"a":"b.rp0","b":"nb","gen":3,"width":8},{"a":"c.rp0","b":"nc","gen":3,"width":8},
               {"a":"na.cable0","b":"nb.cable","gen":3,"width":8,"kind":"cable"},
               {"a":"na.cable1","b":"nc.cable","gen":3,"width":8,"kind":"cable"}]}"#;
    let mut f = devlend_fabric::build_json(json).unwrap();
    let n = ids(&f, &["na", "nb", "nc"]);
    assert_eq!((f.peer_port_count(n[0]), f.peer_port_count(n[1])), (2, 1));
    f.mw_set_trans(n[1], 1, 0x1000_0000, MIB).unwrap();
    let cpu = Requester::Cpu(f.host_id("a").unwrap());
    let r = f.route_uncached(cpu, f.peer_mw_get_addr(n[0], 1).unwrap().0, Access::Write);
    assert_eq!(r.delivered(), Some(Target::Ram { host: 1, addr: 0x1000_0000 }));
    assert!(r.hops.iter().all(|h| h.kind != HopKind::Forward || f.node(h.node).component != "sw"));
    let e = devlend_fabric::build_json(&json.replace("na.cable1", "na.cable2")).err().unwrap();
    assert!(e.to_string().contains("'na' has 2 cable ports: na.cable0 to na.cable1"), "{e}");
}

#[test]
fn a_link_faster_than_its_ends_trains_down_and_says_so() {
    let json = devlend_fabric::fixtures::two_hosts_pxh830("intel-xeon-e5", 4294967296, false, false)
        .replace(r#""na.cable","b":"nb.cable","gen":3,"width":8"#, r#""na.cable","b":"nb.cable","gen":4,"width":16"#);
    let f = devlend_fabric::build_json(&json).unwrap();
    assert_eq!(f.trained_down().len(), 1);
    let t = &f.trained_down()[0];
    assert_eq!((t.asked, t.trained, t.spec_path.as_str()), ((4, 16), (3, 8), "/links/2"));
    assert!(t.message().contains("trains to Gen3 x8") && t.message().contains("na (pxh830) (Gen3 x8)"), "{}", t.message());
    let l = &f.links()[t.link as usize];
    assert_eq!((l.gen, l.width), (3, 8), "the effective speed is what the engine uses");
    assert!(devlend_fabric::build_json(&devlend_fabric::fixtures::two_hosts_pxh830("intel-xeon-e5", 4294967296, false, false))
        .unwrap()
        .trained_down()
        .is_empty());
}
