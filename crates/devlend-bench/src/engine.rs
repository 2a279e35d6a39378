//! Engine benchmarks (issue 3): TLP-hops simulated per second for a saturated DMA stream, and the
//! wall time and memory to simulate a 1 GiB device-to-device copy over the 2L peer-to-peer path of
//! the three-host cluster (gpu2 in lender A writes gpu3's BAR1 in lender B through their NTB).

use devlend_fabric::route::Requester;
use devlend_fabric::spec::TopologySpec;
use devlend_fabric::Fabric;
use devlend_wire::Access;
use std::time::Instant;

/// The window onto gpu3's BAR1: all of it (256 MiB, the quadro-k420's default aperture).
pub const WINDOW: u64 = 256 << 20;

/// `three-host.json` is `python/devlend/topologies/three-host-cluster.yaml` as JSON (a Python test
/// keeps them equal).
pub fn two_lender_path() -> (Fabric, Requester, u64) {
    let spec: TopologySpec = serde_json::from_str(include_str!("../three-host.json")).expect("fixture parses");
    let mut f = devlend_fabric::build(&spec).expect("three-host cluster builds");
    let (g2, g3) = (f.func_id("gpu2").unwrap(), f.func_id("gpu3").unwrap());
    f.set_bus_master(g2, true);
    let (ac, ca) = (f.ntb_id("ntb-a-c").unwrap(), f.ntb_id("ntb-c-a").unwrap());
    let bar1 = f.func(g3).bars.iter().find(|b| b.index == 1).unwrap().addr;
    f.mw_set_trans(ca, 0, bar1, WINDOW).unwrap();
    let rid = f.func(g2).bdf;
    f.rid_lut_add(ac, rid).unwrap();
    let (win, _) = f.peer_mw_get_addr(ac, 0).unwrap();
    (f, Requester::Func(g2), win)
}

pub struct EngineResult {
    pub seconds: f64,
    pub tlp_hops: u64,
    pub events: u64,
    pub simulated_bandwidth: f64,
    pub peak_tlps: usize,
    /// Simulated time and statistics (see `contention::Sample::digest`).
    pub digest: u64,
}

/// Simulate one device-to-device copy of `bytes` (posted writes) and time the simulation itself.
pub fn copy(bytes: u64) -> EngineResult {
    let (mut f, req, addr) = two_lender_path();
    let t = Instant::now();
    let tr = devlend_engine::dma(&mut f, req, addr, bytes, Access::Write, false).expect("2L path delivers");
    let seconds = t.elapsed().as_secs_f64();
    let st = &tr.stats;
    let digest = crate::contention::fnv([tr.time_ps, st.tlp_hops, st.iotlb_hits, st.iotlb_misses, st.resplit_requests, st.peak_tlps as u64].into_iter());
    EngineResult { seconds, tlp_hops: st.tlp_hops, events: st.events, simulated_bandwidth: tr.bandwidth(), peak_tlps: st.peak_tlps, digest }
}
