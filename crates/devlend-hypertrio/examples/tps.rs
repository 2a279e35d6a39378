//! Translations simulated per second on one core:
//! `cargo run --release -p devlend-hypertrio --example tps -- [tenants] [packets_per_tenant] [config] [order] [overrides JSON]`
use devlend_hypertrio::{params, simulate, WorkloadSpec};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let tenants: u32 = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let ppt: Option<u64> = a.get(2).and_then(|s| s.parse().ok());
    let only = a.get(3).cloned();
    for cfg in ["base", "hypertrio"].into_iter().filter(|c| only.as_deref().is_none_or(|o| o == *c)) {
        for order in a.get(4).map(|o| vec![o.as_str()]).unwrap_or(vec!["RR1", "RAND1"]) {
            let mut spec = WorkloadSpec::new("iperf3", tenants, order).unwrap();
            spec.packets_per_tenant = ppt;
            let t0 = std::time::Instant::now();
            let c = params().config_with(cfg, a.get(5).map(|s| s.as_str())).unwrap();
            let st = simulate(&c, &spec).unwrap();
            let dt = t0.elapsed().as_secs_f64();
            println!(
                "{cfg:9} {order:5} tenants {tenants:5}: {} translations in {dt:.2} s = {:.1} M translations/s; {:.1} Gb/s",
                st.translations,
                st.translations as f64 / dt / 1e6,
                st.gbps
            );
        }
    }
}
