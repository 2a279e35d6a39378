//! Explore: `cargo run --release -p devlend-experiments --example hypertrio_grid -- [packets]`
use devlend_experiments::hypertrio as experiments;
use devlend_hypertrio::params;
fn main() {
    let ppt: Option<u64> = std::env::args().nth(1).and_then(|s| s.parse().ok());
    let t0 = std::time::Instant::now();
    let r = experiments::h1(&[1, 2, 4, 5, 6, 8, 16, 64], ppt, 2).unwrap();
    for p in &r {
        println!("H1 {:28} {:5} {:7.1} Gb/s devtlb {:.3}", p.config, p.tenants, p.stats.gbps, p.stats.devtlb_hit_rate);
    }
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let r =
        experiments::h2(&[4, 16, 64, 256, 1024], &s(&["RR1", "RR4", "RAND1"]), &s(&["iperf3", "mediastream", "websearch"]), &s(&["base", "hypertrio"]), ppt, 2)
            .unwrap();
    for p in &r {
        let st = &p.stats;
        println!(
            "H2 {:11} {:5} {:9} {:5} {:6.1} Gb/s dtlb {:.2} pb {:.2} l2 {:.2} l3 {:.2} walk {:.1} ptb {:.1} acc {:.2} cov {:.2} drops {}",
            p.workload,
            p.order,
            p.config,
            p.tenants,
            st.gbps,
            st.devtlb_hit_rate,
            st.pb_hit_rate,
            st.l2_hit_rate,
            st.l3_hit_rate,
            st.mean_walk_accesses,
            st.ptb_mean,
            st.prefetch_accuracy,
            st.prefetch_coverage,
            st.drops
        );
    }
    let _ = params();
    eprintln!("{:.1} s", t0.elapsed().as_secs_f64());
}
