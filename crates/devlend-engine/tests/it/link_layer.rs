//! The data link layer: Ack and UpdateFC DLLPs travel on the reverse direction of the TLPs they
//! answer, at the rate of the AckNak / UpdateFC latency timers (PCIe Base 3.0 §3.5.3.1,
//! §2.6.1.2), not as a flat charge on the TLP's own direction.

use devlend_engine::params::timing;
use devlend_engine::path::{dllp_period_ps, ps_per_byte_fp, Limits, Path, Stage};
use devlend_engine::sim::{FlowKind, Sim};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn stage(port: u32) -> Stage {
    Stage { port, latency: 0, cut_through: false, iommu: None, resplit: None, root: None }
}

fn path(port: u32, mps: u32) -> Path {
    let limits = Limits { max_payload: mps, max_read_request: 512, read_tags: 256, completion_bytes: mps, root_tags: 0, iotlb_hit_ps: 0, ram_write: None };
    Path { stages: vec![stage(port)], origin_latency: 0, target_latency: 0, target_is_ram: true, limits }
}

/// One Gen3 x8 link (ports 0 and 1 are its two directions), with or without the link layer.
fn link(dllps: bool) -> Sim {
    let fp = ps_per_byte_fp(3, 8);
    let mut sim = Sim::tuned(vec![(fp, 1000); 2], vec![256; 2], Arc::new(timing().clone()));
    if dllps {
        let p = dllp_period_ps(timing(), 3, 8, 256);
        sim.set_dllp_periods(&[p, p]);
    }
    sim
}

/// Time of `bytes` written each way at once (one way when `both` is false), and the port stats.
fn writes(dllps: bool, both: bool) -> (u64, Vec<devlend_engine::sim::PortStats>) {
    let mut sim = link(dllps);
    let there = sim.add_path(path(0, 256));
    let back = sim.add_path(path(1, 256));
    let f = sim.add_flow(FlowKind::Write, there, None, 4 * MIB, 0);
    if both {
        sim.add_flow(FlowKind::Write, back, None, 4 * MIB, 0);
    }
    sim.run();
    (sim.flow_time(f).unwrap(), sim.port_stats())
}

#[test]
fn a_saturated_write_direction_is_acknowledged_on_the_reverse_one() {
    let (t_plain, _) = writes(false, false);
    let (t, ports) = writes(true, false);
    assert_eq!(ports[0].dllps, 0, "the write direction carries no DLLP of its own");
    assert!(ports[1].dllps > 0 && ports[1].tlps == 0);
    assert_eq!(ports[1].wire_bytes, ports[1].dllps * timing().dllp_bytes as u64);
    // One Ack and one UpdateFC (posted) per timer period while the writes arrive.
    let period = dllp_period_ps(timing(), 3, 8, 256);
    let expected = 2.0 * t as f64 / period as f64;
    assert!((ports[1].dllps as f64 - expected).abs() < 0.05 * expected, "{} DLLPs, {expected:.0} expected", ports[1].dllps);
    assert!(t <= t_plain + t_plain / 1000, "a one-way stream does not pay for its DLLPs: {t} vs {t_plain}");
}

#[test]
fn writes_both_ways_pay_for_each_others_dllps() {
    let (t_plain, _) = writes(false, true);
    let (t, ports) = writes(true, true);
    assert!(ports[0].dllps > 0 && ports[1].dllps > 0);
    // Each direction loses the share of its time the other direction's DLLPs take.
    let share = ports[0].dllps as f64 * ((timing().dllp_bytes as u64 * ps_per_byte_fp(3, 8)) >> 16) as f64 / t as f64;
    let slower = t as f64 / t_plain as f64 - 1.0;
    assert!(slower > 0.5 * share && slower < 2.0 * share, "{:.3}% slower, DLLPs take {:.3}%", slower * 100.0, share * 100.0);
}

#[test]
fn a_shorter_timer_sends_more_dllps() {
    let count = |pct: u32| {
        let mut t = timing().clone();
        t.dllp_timer_pct = pct;
        let mut sim = Sim::tuned(vec![(ps_per_byte_fp(3, 8), 1000); 2], vec![256; 2], Arc::new(t.clone()));
        let p = dllp_period_ps(&t, 3, 8, 256);
        sim.set_dllp_periods(&[p, p]);
        let there = sim.add_path(path(0, 256));
        sim.add_flow(FlowKind::Write, there, None, MIB, 0);
        sim.run();
        sim.port_stats()[1].dllps
    };
    let (full, quarter) = (count(100), count(25));
    assert!(quarter > 3 * full && quarter < 5 * full, "{quarter} vs {full}");
}
