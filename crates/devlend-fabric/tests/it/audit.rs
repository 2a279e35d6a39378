//! Issue 17's fabric audit: each case as it was found, now blocked, recorded, memory unchanged.

use devlend_fabric::config::{BAR0, CMD_BUS_MASTER, CMD_MEMORY, COMMAND};
use devlend_fabric::route::Failure;
use devlend_fabric::{Fabric, FabricError, Outcome, Requester};
use devlend_wire::Access;

/// Two hosts, each NTB adapter on a root port (CPUs allow peer-to-peer through the root), IOMMUs
/// off, a GPU in the lender.
fn two_hosts() -> Fabric {
    devlend_fabric::build_json(
        r#"{"name":"audit","hosts":[
        {"name":"b","cpu":"intel-xeon-e5","ram":8589934592,"iommu":false,"root_ports":2},
        {"name":"l","cpu":"intel-xeon-e5","ram":8589934592,"iommu":false,"root_ports":2}],
      "devices":[{"name":"gpu0","profile":"quadro-k420"}],
      "ntbs":[{"name":"ntb-b","profile":"pxh830"},{"name":"ntb-l","profile":"pxh830"}],
      "links":[{"a":"b.rp0","b":"ntb-b","gen":3,"width":8},{"a":"l.rp0","b":"ntb-l","gen":3,"width":8},
               {"a":"l.rp1","b":"gpu0","gen":2,"width":16},
               {"a":"ntb-b.cable","b":"ntb-l.cable","gen":3,"width":8,"kind":"cable"}]}"#,
    )
    .unwrap()
}

fn ids(f: &Fabric) -> (u32, u32) {
    (f.ntb_id("ntb-b").unwrap(), f.ntb_id("ntb-l").unwrap())
}

/// Let the requester IDs that arrive through each adapter go back out through it.
fn open_luts(f: &mut Fabric) {
    let (b, l) = ids(f);
    for (near, far) in [(b, l), (l, b)] {
        for idx in 0..2 {
            let alias = f.ntb_alias(near, idx);
            f.rid_lut_add(far, alias).unwrap();
        }
    }
}

#[test]
fn a_window_translated_onto_its_own_bar_is_a_recorded_loop_that_changes_nothing() {
    let mut f = two_hosts();
    let (b, l) = ids(&f);
    open_luts(&mut f);
    // Each side's window 0 lands on that side's own window-0 BAR, 64 MiB further on; window 1
    // leads into RAM. On main the TLP went round eight times, left window 0 at its end, entered
    // window 1 and wrote RAM.
    let (lw0, size) = f.peer_mw_get_addr(l, 0).unwrap();
    let (bw0, _) = f.peer_mw_get_addr(b, 0).unwrap();
    f.mw_set_trans(l, 0, lw0 + (64 << 20), size).unwrap();
    f.mw_set_trans(b, 0, bw0 + (64 << 20), size).unwrap();
    f.mw_set_trans(l, 1, 0x1000_0000, size).unwrap();
    f.mw_set_trans(b, 1, 0x1000_0000, size).unwrap();
    let before = f.memory_digest();
    let cpu = Requester::Cpu(f.host_id("b").unwrap());
    let (n, fail) = f.write(cpu, bw0, b"loop");
    assert_eq!(n, 0);
    assert!(matches!(fail, Some(Failure::RoutingLoop { .. })), "{fail:?}");
    assert_eq!(f.memory_digest(), before, "nothing written");
    assert_eq!(f.events().counts().get("routing-loop"), Some(&1), "recorded");
}

#[test]
fn the_two_window_ping_pong_is_the_same_recorded_loop() {
    let mut f = two_hosts();
    let (b, l) = ids(&f);
    open_luts(&mut f);
    let (lw0, size) = f.peer_mw_get_addr(l, 0).unwrap();
    let (bw0, _) = f.peer_mw_get_addr(b, 0).unwrap();
    f.mw_set_trans(l, 0, lw0, size).unwrap();
    f.mw_set_trans(b, 0, bw0, size).unwrap();
    let cpu = Requester::Cpu(f.host_id("b").unwrap());
    for access in [Access::Write, Access::Read] {
        let r = f.route_uncached(cpu, bw0 + 8, access);
        assert!(matches!(r.outcome, Outcome::Failed(Failure::RoutingLoop { ntb, window: 0, .. }) if ntb == b), "{:?}", r.outcome);
        assert!(r.hops.len() < 32, "stopped at the second crossing, not after a hop budget");
    }
}

fn bar1(f: &Fabric) -> (u32, u64) {
    let g = f.func_id("gpu0").unwrap();
    (g, f.func(g).bars.iter().find(|b| b.index == 1).unwrap().addr)
}

#[test]
fn a_config_write_moving_a_decoding_bar_over_ram_is_refused() {
    let mut f = two_hosts();
    let (g, _) = bar1(&f);
    f.config_write(g, COMMAND, 2, (CMD_MEMORY | CMD_BUS_MASTER) as u32).unwrap();
    // BAR 1 is 64-bit (registers 0x14, 0x18): high dword to 0, low dword to 256 MiB. (Low dword
    // first would stop earlier: at 0x3800_1000_0000, over the adapter's window BAR, issue 30.)
    let hi = f.config_write(g, BAR0 + 8, 4, 0);
    let lo = f.config_write(g, BAR0 + 4, 4, 0x1000_0000);
    let err = hi.err().or(lo.err()).expect("one of the two writes lands the BAR in RAM");
    assert!(matches!(&err, FabricError::ResourceConflict { function, bar: 1, with, .. } if function == "gpu0" && with.contains("RAM")), "{err}");
    assert_ne!(bar1(&f).1 & 0xffff_ffff_0000_0000, 0, "the BAR never decodes in low RAM");
    // A device's DMA to that RAM still reaches RAM, and the CPU's too, as before.
    let gpu = Requester::Func(g);
    assert!(matches!(f.route_uncached(gpu, 0x1000_0000, Access::Write).outcome, Outcome::Delivered(devlend_fabric::Target::Ram { .. })));
    // Decoding off, the BAR may hold any value (Linux disables decoding while it rewrites a
    // 64-bit BAR); turning decoding back on over RAM is refused.
    f.config_write(g, COMMAND, 2, CMD_BUS_MASTER as u32).unwrap();
    f.config_write(g, BAR0 + 4, 4, 0x1000_0000).unwrap();
    f.config_write(g, BAR0 + 8, 4, 0).unwrap();
    assert_eq!(bar1(&f).1, 0x1000_0000);
    assert!(matches!(f.config_write(g, COMMAND, 2, (CMD_MEMORY | CMD_BUS_MASTER) as u32), Err(FabricError::ResourceConflict { .. })));
    assert!(!f.decodes(g), "the command register kept decoding off");
}

/// Issue 30: a decoding BAR moved onto another function's BAR (here the lender adapter's memory
/// window, BAR 2) is refused as a resource conflict, and stays where it was.
#[test]
fn a_config_write_moving_a_decoding_bar_onto_an_ntb_window_is_refused() {
    let mut f = two_hosts();
    let (g, before) = bar1(&f);
    let ntb = f.func_id("ntb-l").unwrap();
    let win = f.func(ntb).bars.iter().find(|b| b.index == 2).unwrap().addr;
    f.config_write(ntb, COMMAND, 2, (CMD_MEMORY | CMD_BUS_MASTER) as u32).unwrap();
    f.config_write(g, COMMAND, 2, (CMD_MEMORY | CMD_BUS_MASTER) as u32).unwrap();
    let lo = f.config_write(g, BAR0 + 4, 4, win as u32);
    let hi = f.config_write(g, BAR0 + 8, 4, (win >> 32) as u32);
    let err = lo.err().or(hi.err()).expect("one of the two writes lands BAR 1 on the window");
    assert!(matches!(&err, FabricError::ResourceConflict { function, bar: 1, with, .. } if function == "gpu0" && with == "BAR 2 of ntb-l"), "{err}");
    assert_ne!(bar1(&f).1, win, "BAR 1 never decodes on the window (it was at {before:#x})");
}
