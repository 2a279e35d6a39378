//! The parameters a run used (what the links carried is the engine's `Machine::link_stats`).

/// `f`'s effective parameters (`Fabric::tuning`): the global values, the root latency of every
/// CPU profile on the fabric that has its own, then every per-CPU, per-host, per-device and
/// per-link override as `scope.name.key`.
pub fn engine_params(f: &devlend_fabric::Fabric) -> Vec<(String, String)> {
    let t = &*f.tuning().timing;
    let ns = |ps: u64| format!("{}", ps as f64 / 1e3);
    vec![
        ("devlend_version".into(), env!("CARGO_PKG_VERSION").into()),
        ("max_payload_bytes".into(), t.max_payload.to_string()),
        ("max_read_request_bytes".into(), t.max_read_request.to_string()),
        ("read_tags".into(), t.read_tags.to_string()),
        ("rx_buffer_tlps".into(), t.rx_buffer_tlps.to_string()),
        ("switch_latency_ns".into(), ns(t.switch_latency_ps)),
        ("root_latency_ns".into(), ns(t.root_latency_ps)),
        ("dram_latency_ns".into(), ns(t.dram_latency_ps)),
        ("ntb_latency_ns".into(), ns(t.ntb_latency_ps)),
        ("iotlb_hit_ns".into(), ns(t.iotlb_hit_ps)),
        ("switch_cut_through".into(), t.switch_cut_through.to_string()),
        ("endpoint_latency_ns".into(), ns(t.endpoint_latency_ps)),
        ("updatefc_ns".into(), ns(t.updatefc_ps)),
        ("cable_length_m".into(), t.cable_length_m.to_string()),
    ]
    .into_iter()
    .chain(cpu_root_latencies(f))
    // Only where it applies, so that results of fabrics without a cluster switch read as before.
    .chain((!f.cluster_switches().is_empty()).then(|| ("cluster_switch_latency_ns".to_string(), ns(t.cluster_switch_latency_ps))))
    .chain(f.tuning().overrides.iter().filter(|(k, _)| !k.starts_with("timing.") && !k.starts_with("cpus.")).cloned())
    .collect()
}

/// `cpus.PROFILE.root_latency_ps` for each CPU profile of `f`'s hosts that has its own (its
/// profile's value, or the run's override of it).
fn cpu_root_latencies(f: &devlend_fabric::Fabric) -> Vec<(String, String)> {
    let mut seen = std::collections::BTreeMap::new();
    for h in f.hosts() {
        if let Some(ps) = h.cpu.root_latency_ps {
            seen.insert(format!("cpus.{}.root_latency_ps", h.cpu_name), ps.to_string());
        }
    }
    seen.into_iter().collect()
}
