//! Engine benchmark (issue 13): many DMA streams at once on one Machine. On the 64-host cluster,
//! the 8 devices below each host's first switch all write through the host's "next" NTB adapter
//! into host h+1's RAM at once (512 streams, 8 sharing each x8 NTB link), beside one stream alone
//! on the same fabric. Reported: TLP-hops simulated per wall-clock second, and the most TLP
//! records alive at once.

use crate::{cluster_spec_of, DEVICES_PER_SWITCH, GIB, HOSTS, MIB};
use devlend_engine::machine::Machine;
use devlend_fabric::{build, Fabric, Requester};
use devlend_wire::Access;
use std::time::Instant;

pub const NEAR_IOVA: u64 = 0x20_0000_0000;
const FAR_IOVA: u64 = 0x1_0000_0000;
/// Each device's region of its target host's lent buffer.
pub const REGION: u64 = 8 * MIB;

/// Every host's devices d0..d7 (below switch 0, beside the "next" adapter) may DMA at
/// `NEAR_IOVA + k * REGION` into 64 MiB of host h+1's RAM. Returns the requesters, host by host.
pub fn program(f: &mut Fabric) -> Vec<Requester> {
    let span = REGION * DEVICES_PER_SWITCH as u64;
    let mut reqs = Vec::new();
    for h in 0..f.hosts().len() {
        let near = f.ntb_id(&format!("h{h}-next")).unwrap();
        let far = f.ntb(near).peer.unwrap();
        let (fh, ffunc, nh) = (f.ntb(far).host, f.ntb(far).func, f.ntb(near).host);
        f.mw_set_trans(far, 1, FAR_IOVA, span).unwrap();
        let devs: Vec<u32> = (0..DEVICES_PER_SWITCH).map(|k| f.func_id(&format!("h{h}-d{k}")).unwrap()).collect();
        for &g in &devs {
            f.set_bus_master(g, true);
            let rid = f.func(g).bdf;
            f.rid_lut_add(near, rid).unwrap();
        }
        // Attach after the LUT entries exist: the far adapter's DMA aliases include them.
        let lend = f.iommu_domain_alloc(fh, &format!("lend-from-h{h}")).unwrap();
        let ram = f.ram_offset_to_phys(f.host(fh), GIB).unwrap();
        f.iommu_attach(fh, lend, ffunc).unwrap();
        f.iommu_map(fh, lend, FAR_IOVA, ram, span, true).unwrap();
        let (win, _) = f.peer_mw_get_addr(near, 1).unwrap();
        let dma = f.iommu_domain_alloc(nh, "contention").unwrap();
        for &g in &devs {
            f.iommu_attach(nh, dma, g).unwrap();
        }
        f.iommu_map(nh, dma, NEAR_IOVA, win, span, true).unwrap();
        reqs.extend(devs.into_iter().map(Requester::Func));
    }
    reqs
}

pub struct Sample {
    pub seconds: f64,
    pub tlp_hops: u64,
    pub events: u64,
    pub peak_tlps: usize,
    /// Simulated: the slowest stream's bandwidth, and the aggregate over the run.
    pub min_stream_bw: f64,
    pub total_bw: f64,
    /// FNV-1a over every stream's end time and every port's statistics: equal digests mean the
    /// same simulated run (for checking that an engine change leaves results bit-identical).
    pub digest: u64,
}

/// Build and program the cluster (untimed), then time one Machine running `streams` streams of
/// `bytes` each (the first `streams` requesters, host by host; all of them with `streams == 0`).
pub fn run(streams: usize, bytes: u64) -> Sample {
    run_on(HOSTS, streams, bytes)
}

/// `run` on the cluster of `hosts` hosts (8 streams a host with `streams == 0`).
pub fn run_on(hosts: usize, streams: usize, bytes: u64) -> Sample {
    let mut f = build(&cluster_spec_of(hosts)).expect("benchmark topology builds");
    let reqs = program(&mut f);
    let n = if streams == 0 { reqs.len() } else { streams.min(reqs.len()) };
    let mut m = Machine::new(f);
    let t = Instant::now();
    for (i, r) in reqs[..n].iter().enumerate() {
        let k = (i % DEVICES_PER_SWITCH) as u64;
        m.stream(&format!("s{i}"), *r, NEAR_IOVA + k * REGION, bytes, Access::Write, 0).expect("every device reaches its neighbour's RAM");
    }
    m.run().expect("timing-only streams end");
    let seconds = t.elapsed().as_secs_f64();
    let s = m.stats();
    let min_stream_bw = m.streams().iter().filter_map(|s| s.bandwidth()).fold(f64::INFINITY, f64::min);
    let total_bw = (n as u64 * bytes) as f64 / (m.now() as f64 * 1e-12);
    let ends = m.streams().iter().map(|s| s.end.unwrap_or(u64::MAX));
    let ports = m.port_stats().into_iter().flat_map(|p| [p.tlps, p.wire_bytes, p.payload_bytes, p.busy_ps, p.queue_ps, p.credit_stall_ps]);
    let digest = fnv(ends.chain(ports).chain([m.now(), s.iotlb_hits, s.iotlb_misses]));
    Sample { seconds, tlp_hops: s.tlp_hops, events: s.events, peak_tlps: s.peak_tlps, min_stream_bw, total_bw, digest }
}

/// FNV-1a over the bytes of `words`.
pub fn fnv(words: impl Iterator<Item = u64>) -> u64 {
    words.flat_map(u64::to_le_bytes).fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}
