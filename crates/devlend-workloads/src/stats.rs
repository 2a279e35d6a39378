//! What the links carried, per direction, and the parameters the run used.

use devlend_engine::machine::Machine;
use devlend_engine::path::port_id;
use devlend_host::Cluster;

/// One link direction that carried TLPs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkStat {
    pub link: u32,
    pub towards_down: bool,
    /// "component.port" the TLPs leave and enter.
    pub from: String,
    pub to: String,
    pub tlps: u64,
    pub wire_bytes: u64,
    pub payload_bytes: u64,
    pub busy_ps: u64,
    /// Summed over TLPs: time spent queued before the link.
    pub queue_ps: u64,
    /// Time the port waited for flow-control credits.
    pub credit_stall_ps: u64,
}

impl LinkStat {
    /// Busy time over `elapsed_ps`.
    pub fn utilisation(&self, elapsed_ps: u64) -> f64 {
        if elapsed_ps == 0 { 0.0 } else { self.busy_ps as f64 / elapsed_ps as f64 }
    }

    /// Mean queueing delay per TLP, ps.
    pub fn mean_queue_ps(&self) -> f64 {
        self.queue_ps as f64 / self.tlps.max(1) as f64
    }
}

/// Every link direction of the machine that carried at least one TLP.
pub fn link_stats(m: &Machine<Cluster>) -> Vec<LinkStat> {
    let c = m.world();
    let f = &c.fabric;
    let name = |n: u32| {
        let node = &f.nodes[n as usize];
        format!("{}.{}", node.component, node.port)
    };
    let stats = m.port_stats();
    let mut rows = Vec::new();
    for (i, l) in f.links.iter().enumerate() {
        for down in [true, false] {
            let Some(s) = stats.get(port_id(i as u32, down) as usize) else { continue };
            if s.tlps == 0 {
                continue;
            }
            let (from, to) = if down { (l.up, l.down) } else { (l.down, l.up) };
            rows.push(LinkStat {
                link: i as u32,
                towards_down: down,
                from: name(from),
                to: name(to),
                tlps: s.tlps,
                wire_bytes: s.wire_bytes,
                payload_bytes: s.payload_bytes,
                busy_ps: s.busy_ps,
                queue_ps: s.queue_ps,
                credit_stall_ps: s.credit_stall_ps,
            });
        }
    }
    rows
}

/// The engine's effective parameters and devlend's version, as (name, value) pairs.
pub fn engine_params() -> Vec<(String, String)> {
    let t = devlend_engine::params::timing();
    let ns = |ps: u64| format!("{}", ps as f64 / 1e3);
    vec![
        ("devlend_version".into(), env!("CARGO_PKG_VERSION").into()),
        ("max_payload_bytes".into(), t.max_payload.to_string()),
        ("max_read_request_bytes".into(), t.max_read_request.to_string()),
        ("read_tags".into(), t.read_tags.to_string()),
        ("ram_completion_bytes".into(), t.ram_completion_bytes.to_string()),
        ("rx_buffer_tlps".into(), t.rx_buffer_tlps.to_string()),
        ("switch_latency_ns".into(), ns(t.switch_latency_ps)),
        ("root_latency_ns".into(), ns(t.root_latency_ps)),
        ("dram_latency_ns".into(), ns(t.dram_latency_ps)),
        ("ntb_latency_ns".into(), ns(t.ntb_latency_ps)),
        ("iotlb_hit_ns".into(), ns(t.iotlb_hit_ps)),
    ]
}
