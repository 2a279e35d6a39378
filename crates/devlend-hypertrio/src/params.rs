//! The `[hypertrio]` table of `params/hardware.toml` (each value's source is written there):
//! 002 Table II latencies and sizes, the Base/HyperTRIO configurations of Table IV and the
//! workload profiles of Table III / §IV-D / §V-C.

use crate::cache::Policy;
use crate::error::{HtError, HtResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

#[derive(Debug, Clone, Deserialize)]
pub struct HyperTrioParams {
    pub pcie_one_way_ps: u64,
    pub dram_access_ps: u64,
    pub iotlb_hit_ps: u64,
    pub devtlb_hit_ps: u64,
    pub qemu_walk_levels: u32,
    pub nested_walk_accesses: u32,
    pub packet_bytes: u64,
    pub link_gbps: u64,
    pub translations_per_packet: u32,
    pub context_cache_entries: usize,
    pub context_miss_accesses: u32,
    pub iotlb_entries: usize,
    pub iotlb_ways: usize,
    pub lfu_counter_bits: u32,
    pub data_page_reuse: u32,
    pub data_pages: u32,
    pub setup_pages: u32,
    pub setup_touches: u32,
    pub run_packets: u32,
    pub ring_iova: u64,
    pub data_iova: u64,
    pub setup_iova: u64,
    pub config: BTreeMap<String, Config>,
    pub workload: BTreeMap<String, Profile>,
}

/// One column of 002 Table IV (or a variant built from one).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct Config {
    pub ptb_entries: usize,
    pub devtlb_entries: usize,
    pub devtlb_ways: usize,
    pub devtlb_policy: Policy,
    pub devtlb_partitions: usize,
    pub l2_entries: usize,
    pub l2_ways: usize,
    pub l2_policy: Policy,
    pub l2_partitions: usize,
    pub l3_entries: usize,
    pub l3_ways: usize,
    pub l3_policy: Policy,
    pub l3_partitions: usize,
    pub prefetch: bool,
    pub pb_entries: usize,
    pub sid_history: usize,
    pub history_pages: usize,
    #[serde(default)]
    pub source: String,
    /// Partition tag match: low bits of the SID/DID (false, 002 §III "a group of tenants") or the
    /// whole SID (true: a row holds one tenant's entries at a time and is flushed on re-tagging).
    #[serde(default)]
    pub full_tag_match: bool,
    /// Walk length: true, the two-dimensional walk of 002 Table II (24 accesses cold); false,
    /// the one-dimensional walk 002's logs record (§IV-A; see `sim`).
    pub nested_walk: bool,
    /// PCIe round trip of a translation request between the device and the IOMMU's chipset for
    /// this run, the IOMMU's own work excluded (ps); None: twice 002 Table II's `pcie_one_way_ps`.
    /// A device on a topology (`hnic`) sets it from an engine run of the request on its route.
    #[serde(default)]
    pub pcie_round_trip_ps: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Profile {
    pub translations_min: u64,
    pub translations_max: u64,
    pub total_1024: u64,
    pub data_streams: u32,
    pub random_streams: bool,
    #[serde(default)]
    pub source: String,
}

#[derive(Deserialize)]
struct File {
    hypertrio: HyperTrioParams,
}

pub fn params() -> &'static HyperTrioParams {
    static P: OnceLock<HyperTrioParams> = OnceLock::new();
    P.get_or_init(|| devlend_fabric::params::from_hardware::<File>().expect("[hypertrio] in params/hardware.toml is malformed").hypertrio)
}

impl HyperTrioParams {
    /// Time between packet arrivals on a fully used link, in ps (1542 B at 200 Gb/s = 61.68 ns).
    pub fn packet_slot_ps(&self) -> u64 {
        self.packet_bytes * 8 * 1000 / self.link_gbps
    }
    pub fn config(&self, name: &str) -> HtResult<Config> {
        self.config.get(name).cloned().ok_or_else(|| HtError::unknown("HyperTRIO configuration", name, self.config.keys()))
    }
    /// A Table IV configuration with fields replaced from a JSON object, e.g.
    /// `{"devtlb_policy": "oracle", "devtlb_ways": 64}`; unknown fields are errors.
    pub fn config_with(&self, name: &str, overrides_json: Option<&str>) -> HtResult<Config> {
        let c = self.config(name)?;
        let Some(o) = overrides_json.filter(|s| !s.trim().is_empty()) else {
            return Ok(c);
        };
        let whole = |problem: String| HtError::Overrides { field: None, problem };
        let o: serde_json::Value = serde_json::from_str(o).map_err(|e| whole(format!("not JSON: {e}")))?;
        let serde_json::Value::Object(o) = o else {
            return Err(whole("expected a JSON object".into()));
        };
        let base = serde_json::to_value(&c).map_err(|e| whole(e.to_string()))?;
        let mut v = base.clone();
        let m = v.as_object_mut().unwrap();
        for (k, x) in o {
            if !m.contains_key(&k) {
                return Err(whole(format!("unknown field '{k}': expected one of {}", m.keys().cloned().collect::<Vec<_>>().join(", "))));
            }
            // Each value checked alone, so the error names its field.
            let mut one = base.clone();
            one.as_object_mut().unwrap().insert(k.clone(), x.clone());
            serde_json::from_value::<Config>(one).map_err(|e| HtError::Overrides { field: Some(k.clone()), problem: e.to_string() })?;
            m.insert(k, x);
        }
        serde_json::from_value(v).map_err(|e| whole(e.to_string()))
    }

    pub fn profile(&self, name: &str) -> HtResult<Profile> {
        self.workload.get(name).cloned().ok_or_else(|| HtError::unknown("workload profile", name, self.workload.keys()))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tables_parse_and_match_table_iv() {
        let p = super::params();
        assert_eq!(p.packet_slot_ps(), 61_680);
        let b = p.config("base").unwrap();
        let h = p.config("hypertrio").unwrap();
        assert_eq!((b.ptb_entries, h.ptb_entries), (1, 32));
        assert_eq!((b.devtlb_partitions, h.devtlb_partitions, h.l2_partitions, h.l3_partitions), (1, 8, 32, 64));
        assert!(!b.prefetch && h.prefetch && h.pb_entries == 8 && h.sid_history == 48 && h.history_pages == 2);
        for (name, w) in &p.workload {
            // Table III: total for 1024 tenants = 1024 x the minimum per tenant, within rounding.
            let t = w.translations_min * 1024;
            assert!(t.abs_diff(w.total_1024) * 10_000 < w.total_1024, "{name}");
        }
    }
}
