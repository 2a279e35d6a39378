//! H1 (002 §IV-D, Fig 9) and H2 (002 §V-B, Fig 10) as grids of `simulate` runs, run in parallel
//! on the machine's cores (each point on one core); `grid` for any other set of points (H3 / Fig
//! 11 and H4 / Fig 12 are such grids, built in python/devlend/experiments/h3.py, h4.py).

use devlend_hypertrio::{params, simulate, Config, HtError, HtResult, Stats, WorkloadSpec};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub figure: String,
    pub config: String,
    pub workload: String,
    pub order: String,
    pub tenants: u32,
    pub stats: Stats,
}

/// Run points on all cores, results in input order.
pub fn par_run(jobs: Vec<(String, Config, WorkloadSpec, String)>, threads: usize) -> HtResult<Vec<Point>> {
    let n = jobs.len();
    let threads = threads.clamp(1, n.max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<HtResult<Point>>> = (0..n).map(|_| None).collect();
    let slots: Vec<std::sync::Mutex<&mut Option<HtResult<Point>>>> = out.iter_mut().map(std::sync::Mutex::new).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let (cname, cfg, spec, order) = &jobs[i];
                let r = simulate(cfg, spec).map(|stats| Point {
                    figure: String::new(),
                    config: cname.clone(),
                    workload: spec.profile.clone(),
                    order: order.clone(),
                    tenants: spec.tenants,
                    stats,
                });
                **slots[i].lock().unwrap() = Some(r);
            });
        }
    });
    drop(slots);
    out.into_iter().map(|r| r.unwrap()).collect()
}

pub fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// The DevTLB variants of Fig 9 ("IOTLB configuration"): Table IV's Base with its 64-entry
/// 8-way LFU DevTLB, the same 64 entries fully associative, and 1024 entries 8-way.
pub fn h1_configs() -> Vec<(String, Config)> {
    let base = params().config("base").unwrap();
    let mut fa = base.clone();
    fa.devtlb_ways = fa.devtlb_entries;
    let mut big = base.clone();
    big.devtlb_entries = 1024;
    vec![("64-entry 8-way".into(), base), ("64-entry fully associative".into(), fa), ("1024-entry 8-way".into(), big)]
}

/// H1: iperf3 connections (one tenant each, RR1) against DevTLB configuration (Fig 9).
pub fn h1(connections: &[u32], packets_per_tenant: Option<u64>, threads: usize) -> HtResult<Vec<Point>> {
    let mut jobs = Vec::new();
    for (name, cfg) in h1_configs() {
        for &c in connections {
            let mut spec = WorkloadSpec::new("iperf3", c, "RR1")?;
            spec.packets_per_tenant = packets_per_tenant;
            jobs.push((name.clone(), cfg.clone(), spec, "RR1".to_string()));
        }
    }
    let mut r = par_run(jobs, threads)?;
    r.iter_mut().for_each(|p| p.figure = "H1".into());
    Ok(r)
}

/// H2: Base vs HyperTRIO (Table IV) over tenants x interleaving x workload (Fig 10).
pub fn h2(
    tenants: &[u32],
    orders: &[String],
    workloads: &[String],
    configs: &[String],
    packets_per_tenant: Option<u64>,
    threads: usize,
) -> HtResult<Vec<Point>> {
    let mut jobs = Vec::new();
    for w in workloads {
        for o in orders {
            for c in configs {
                let cfg = params().config(c)?;
                for &n in tenants {
                    let mut spec = WorkloadSpec::new(w, n, o)?;
                    spec.packets_per_tenant = packets_per_tenant;
                    jobs.push((c.clone(), cfg.clone(), spec, o.to_ascii_uppercase()));
                }
            }
        }
    }
    let mut r = par_run(jobs, threads)?;
    r.iter_mut().for_each(|p| p.figure = "H2".into());
    Ok(r)
}

/// One point of an arbitrary grid (H3, H4, sweeps): a Table IV column with JSON overrides.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct GridPoint {
    pub label: String,
    pub config: String,
    #[serde(default)]
    pub overrides: Option<serde_json::Value>,
    pub workload: String,
    pub tenants: u32,
    pub order: String,
    #[serde(default)]
    pub packets_per_tenant: Option<u64>,
}

/// Run a grid given as a JSON list of `GridPoint`s, in parallel; `Point.config` is the label.
pub fn grid(points_json: &str, threads: usize) -> HtResult<Vec<Point>> {
    let pts: Vec<GridPoint> = serde_json::from_str(points_json).map_err(|e| HtError::Grid { problem: e.to_string() })?;
    let mut jobs = Vec::new();
    for (i, p) in pts.iter().enumerate() {
        let at = |e: HtError| HtError::InPoint { index: i, label: p.label.clone(), error: Box::new(e) };
        let o = p.overrides.as_ref().map(|v| v.to_string());
        let cfg = params().config_with(&p.config, o.as_deref()).map_err(at)?;
        let mut spec = WorkloadSpec::new(&p.workload, p.tenants, &p.order).map_err(at)?;
        spec.packets_per_tenant = p.packets_per_tenant;
        jobs.push((p.label.clone(), cfg, spec, p.order.to_ascii_uppercase()));
    }
    let mut r = par_run(jobs, threads)?;
    r.iter_mut().for_each(|p| p.figure = "grid".into());
    Ok(r)
}
