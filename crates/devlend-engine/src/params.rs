//! The `[timing]` table of `params/hardware.toml`: every constant the engine charges, with its source there.

use serde::Deserialize;
use std::sync::OnceLock;

#[derive(Debug, Clone, Deserialize)]
pub struct Timing {
    pub request_overhead_bytes: u32,
    pub completion_overhead_bytes: u32,
    pub dllp_overhead_bytes_per_tlp: u32,
    pub max_payload: u32,
    pub max_read_request: u32,
    pub ram_completion_bytes: u32,
    pub read_tags: u32,
    pub rx_buffer_tlps: u32,
    pub updatefc_ps: u64,
    pub switch_latency_ps: u64,
    pub switch_cut_through: bool,
    pub root_latency_ps: u64,
    pub dram_latency_ps: u64,
    pub iotlb_hit_ps: u64,
    pub ntb_latency_ps: u64,
    pub cable_prop_ps_per_m: u64,
    pub cable_length_m: u64,
    pub slot_prop_ps: u64,
    pub endpoint_latency_ps: u64,
}

impl Timing {
    /// The per-TLP wire overheads, for `devlend_wire::Overheads::wire_bytes` (the one place TLP
    /// sizes are computed).
    pub fn overheads(&self) -> devlend_wire::Overheads {
        devlend_wire::Overheads { request: self.request_overhead_bytes, completion: self.completion_overhead_bytes, dllp_per_tlp: self.dllp_overhead_bytes_per_tlp }
    }
}

#[derive(Deserialize)]
struct File {
    timing: Timing,
}

pub fn timing() -> &'static Timing {
    static T: OnceLock<Timing> = OnceLock::new();
    T.get_or_init(|| toml::from_str::<File>(devlend_fabric::params::HARDWARE_TOML).expect("[timing] in params/hardware.toml is malformed").timing)
}

#[cfg(test)]
mod tests {
    #[test]
    fn timing_table_parses() {
        assert_eq!(super::timing().max_payload, 256);
    }
}
