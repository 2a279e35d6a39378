//! One simulation point from names: a Table IV configuration (002) with JSON overrides, on a
//! workload profile, tenant count and interleaving.

use crate::error::HtResult;
use crate::params::params;
use crate::sim::{simulate, Stats};
use crate::workload::WorkloadSpec;

/// One point: `config` (a Table IV column name) with JSON `overrides`, on a workload.
pub fn run_point(
    config: &str,
    overrides_json: Option<&str>,
    profile: &str,
    tenants: u32,
    order: &str,
    packets_per_tenant: Option<u64>,
    seed: u64,
) -> HtResult<Stats> {
    let cfg = params().config_with(config, overrides_json)?;
    let mut spec = WorkloadSpec::new(profile, tenants, order)?;
    spec.packets_per_tenant = packets_per_tenant;
    spec.seed = seed;
    simulate(&cfg, &spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_and_bad_input_are_clear_errors() {
        let c = params().config_with("base", Some(r#"{"devtlb_policy": "oracle", "devtlb_ways": 64}"#)).unwrap();
        assert_eq!((c.devtlb_policy, c.devtlb_ways), (crate::Policy::Oracle, 64));
        assert!(params().config_with("base", Some(r#"{"bogus": 1}"#)).unwrap_err().to_string().contains("bogus"));
        assert!(params().config("nope").unwrap_err().to_string().contains("base"));
        assert!(run_point("base", None, "iperf3", 0, "RR1", Some(10), 1).unwrap_err().to_string().contains("0 tenants"));
        let e = run_point("hypertrio", Some(r#"{"l3_partitions": 128}"#), "iperf3", 4, "RR1", Some(10), 1).unwrap_err().to_string();
        assert!(e.contains("L3TLB") && e.contains("partitions"), "{e}");
    }

    #[test]
    fn small_points_behave() {
        // one tenant: everything fits, the link is the limit (after the cold misses)
        let s = run_point("hypertrio", None, "iperf3", 1, "RR1", Some(3000), 1).unwrap();
        assert!(s.gbps > 190.0, "{s:?}");
        assert_eq!(s.translations, 9000);
        // oracle never does worse than LRU on the same DevTLB
        let lru = run_point("base", Some(r#"{"devtlb_policy": "lru"}"#), "iperf3", 8, "RR1", Some(1500), 1).unwrap();
        let opt = run_point("base", Some(r#"{"devtlb_policy": "oracle"}"#), "iperf3", 8, "RR1", Some(1500), 1).unwrap();
        assert!(opt.devtlb_hit_rate >= lru.devtlb_hit_rate, "oracle {} < lru {}", opt.devtlb_hit_rate, lru.devtlb_hit_rate);
    }
}
