//! A mixed workload for checking that an engine change leaves results bit-identical (`--one mix
//! SEED STREAMS`): seeded random read and write streams of random sizes and start times, from the
//! devices and CPUs of the first few hosts of the contention cluster (several streams share a
//! device, reads are re-split at the roots, CPU accesses go to local BARs), on one Machine.

use crate::contention::{fnv, program, NEAR_IOVA, REGION};
use crate::{cluster_spec, DEVICES_PER_SWITCH};
use devlend_engine::machine::Machine;
use devlend_fabric::{build, Requester};
use devlend_wire::Access;

/// Hosts the streams start from (few, so that streams share devices, switches and roots).
const HOSTS_USED: usize = 4;

pub struct Mix {
    pub seconds: f64,
    pub tlp_hops: u64,
    pub events: u64,
    pub digest: u64,
}

/// A small linear congruential generator: the same streams for the same seed everywhere.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

pub fn run(seed: u64, streams: usize) -> Mix {
    let mut f = build(&cluster_spec()).expect("benchmark topology builds");
    let devs = program(&mut f);
    let bars: Vec<(u64, u64)> = devs
        .iter()
        .map(|r| match r {
            Requester::Func(g) => f.func(*g).bars.iter().map(|b| (b.addr, b.size)).max_by_key(|b| b.1).expect("a device has a BAR"),
            _ => unreachable!("program returns devices"),
        })
        .collect();
    let mut m = Machine::new(f);
    let mut rng = Lcg(seed);
    let sizes = [4, 64, 100, 256, 1000, 4096, 4097, 65536, 300_000, 1 << 20];
    for i in 0..streams {
        let h = rng.below(HOSTS_USED as u64) as usize;
        let k = rng.below(DEVICES_PER_SWITCH as u64 + 1) as usize;
        let mut bytes = sizes[rng.below(sizes.len() as u64) as usize];
        let access = if rng.below(2) == 0 { Access::Read } else { Access::Write };
        // Start times on a coarse grid, so that streams often start at the same picosecond.
        let at = rng.below(40) * 500_000;
        let (who, addr) = if k == DEVICES_PER_SWITCH {
            // The host's CPU touches a BAR of one of its own devices.
            let (bar, size) = bars[h * DEVICES_PER_SWITCH + rng.below(DEVICES_PER_SWITCH as u64) as usize];
            bytes = bytes.min(size / 2);
            (Requester::Cpu(h as u16), bar + rng.below((size - bytes) / 4) * 4)
        } else {
            (devs[h * DEVICES_PER_SWITCH + k], NEAR_IOVA + k as u64 * REGION + rng.below((REGION - bytes) / 4) * 4)
        };
        m.stream(&format!("m{i}"), who, addr, bytes, access, at).expect("every mixed stream reaches its target");
    }
    let t = std::time::Instant::now();
    m.run().expect("timing-only streams end");
    let seconds = t.elapsed().as_secs_f64();
    let s = m.stats();
    let ends = m.streams().iter().map(|s| s.end.unwrap_or(u64::MAX));
    let ports = m.port_stats().into_iter().flat_map(|p| [p.tlps, p.wire_bytes, p.payload_bytes, p.busy_ps, p.queue_ps, p.credit_stall_ps]);
    let digest = fnv(ends.chain(ports).chain([m.now(), s.tlp_hops, s.iotlb_hits, s.iotlb_misses, s.resplit_requests, s.peak_tlps as u64]));
    Mix { seconds, tlp_hops: s.tlp_hops, events: s.events, digest }
}
