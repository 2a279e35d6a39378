//! The parameters a run used (what the links carried is the engine's `Machine::link_stats`).

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
