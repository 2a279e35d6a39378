//! One configuration over tenant counts, quick-mode lengths:
//! `cargo run --release -p devlend-hypertrio --example point -- base '{"ptb_entries": 8}' iperf3 RR1 4,16,64,1024 [stats]`
//! (stats: every statistic of each point as well, one JSON line)
use devlend_hypertrio::run_point;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let ov = Some(a[2].as_str()).filter(|s| !s.is_empty());
    for n in a[5].split(',').map(|x| x.parse::<u32>().unwrap()) {
        let ppt = (40_000 / n as u64).max(100);
        let s = run_point(&a[1], ov, &a[3], n, &a[4], Some(ppt), 1).unwrap();
        println!(
            "{:5} {:6.1} Gb/s dtlb {:.3} pb {:.3} l2 {:.2} l3 {:.2} walk {:.1} ptb {:.1} drops {} acc {:.2} cov {:.2}",
            n,
            s.gbps,
            s.devtlb_hit_rate,
            s.pb_hit_rate,
            s.l2_hit_rate,
            s.l3_hit_rate,
            s.mean_walk_accesses,
            s.ptb_mean,
            s.drops,
            s.prefetch_accuracy,
            s.prefetch_coverage
        );
        if a.get(6).is_some_and(|f| f == "stats") {
            println!("{}", serde_json::to_string(&s).unwrap());
        }
    }
}
