//! The transmit decisions' wake-ups, checked after every event of random runs: whenever one of a
//! port's heads could go (ready, the link free, a slot for its class free or known to be coming
//! back), the port has a look scheduled no later than that. Only a class out of credits with no
//! slot coming back yet has none: `return_credit` wakes it when one is returned.

use super::*;
use crate::path::{ps_per_byte_fp, Limits, Stage};

impl Sim {
    /// The first port and class whose head could go before the port's next look, if any.
    pub(super) fn missed_wake(&self) -> Option<(PortId, usize)> {
        for (p, port) in self.ports.iter().enumerate() {
            for c in 0..3 {
                if port.heads[c] == NONE {
                    continue;
                }
                let back = if port.credits[c] > 0 {
                    0
                } else {
                    match port.returns[c].front(&self.slots) {
                        Some(t) => t,
                        None => continue,
                    }
                };
                let go = port.heads[c].max(port.busy_until).max(back).max(self.now);
                if port.wake > go {
                    return Some((p as PortId, c));
                }
            }
        }
        None
    }
}

/// xorshift64*: a fixed sequence per seed, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) % n
    }
}

/// Four links (ports 0-7) of mixed rates, routes crossing up to three of their directions, one or two receive buffers per class, DLLPs on some,
/// one link a half-duplex bus; reads and writes along random routes, started at random times.
fn random_run(seed: u64) {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let rates = [(1, 1), (2, 4), (3, 8), (3, 16)];
    let ports: Vec<(u64, Ps)> = (0..8)
        .map(|p| {
            let (gen, width) = rates[(p / 2 + seed as usize) % 4];
            (ps_per_byte_fp(gen, width), 200 + r.below(2000))
        })
        .collect();
    let credits = (0..8).map(|_| 1 + r.below(2) as u32).collect();
    let mut sim = Sim::tuned(ports, credits, devlend_fabric::tuning::default_timing().clone());
    sim.check_wakes = true;
    // DLLPs on links 2 and 3, or link 3 a bus (which has none).
    let bus = r.below(2) == 0;
    let periods: Vec<Ps> = (0..8).map(|p| if p < 4 || (bus && p >= 6) { 0 } else { 5_000 + r.below(20_000) }).collect();
    sim.set_dllp_periods(&periods);
    if bus {
        sim.set_half_duplex(6, 30_000);
    }
    let route = |r: &mut Rng| -> Vec<u32> {
        let n = 1 + r.below(3) as usize;
        let mut ports: Vec<u32> = Vec::new();
        while ports.len() < n {
            let p = r.below(8) as u32;
            if !ports.contains(&p) {
                ports.push(p);
            }
        }
        // Ports in one order on every route: no cycle of TLPs waiting for each other's buffers
        // (a credit deadlock, which a PCIe tree cannot have).
        ports.sort();
        ports
    };
    let path = |sim: &mut Sim, r: &mut Rng| {
        let stages = route(r)
            .into_iter()
            .map(|port| Stage { port, latency: r.below(600), cut_through: r.below(2) == 0, iommu: None, resplit: None, root: None })
            .collect();
        let mps = [128, 256][r.below(2) as usize];
        let limits = Limits {
            max_payload: mps,
            max_read_request: 512,
            read_tags: 1 + r.below(6) as u32,
            completion_bytes: [64, 128][r.below(2) as usize],
            root_tags: 0,
            iotlb_hit_ps: 0,
            ram_write: None,
        };
        sim.add_path(Path { stages, origin_latency: r.below(1000), target_latency: r.below(3000), target_is_ram: true, limits })
    };
    let mut flows = Vec::new();
    for _ in 0..12 {
        let p = path(&mut sim, &mut r);
        let bytes = 1 + r.below(6000);
        let at = r.below(50_000);
        let f = if r.below(2) == 0 {
            sim.add_flow(FlowKind::Write, p, None, bytes, at)
        } else {
            let cpl = path(&mut sim, &mut r);
            sim.add_flow(FlowKind::Read, p, Some(cpl), bytes, at)
        };
        flows.push(f);
    }
    sim.run();
    for f in flows {
        assert!(sim.flow_end(f).is_some(), "seed {seed}: flow {f} never ended");
    }
}

#[test]
fn a_port_that_can_send_always_has_a_look_scheduled() {
    for seed in 0..300 {
        eprintln!("seed {seed}");
        random_run(seed);
    }
}
