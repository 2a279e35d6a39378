//! devlend-bench: how fast the fabric model enumerates a large cluster and answers route lookups.
//!
//! The cluster: 64 hosts (Xeon E5 profile, IOMMU on), each with 2 root ports leading to 2 PCIe
//! switches; 8 devices (GPU, NVMe and NIC profiles in turn) below each switch, 16 per host and
//! 1024 in all; each switch's last port holds a PXH830 NTB adapter, and the adapters are cabled
//! host i "next" to host i+1 "prev", a ring of 64 cables.
//!
//! Measured, each as the median of several repetitions (see bench/README.md for what each row is):
//! enumeration (`devlend_fabric::build`), peak RSS after building, and route lookups per second
//! for two routes (a CPU write to a BAR in its own host; a device DMA write through its host's
//! IOMMU, across an NTB and the far host's IOMMU into the far host's RAM) with `Fabric::lookup`
//! (cached outcome), `Fabric::route` (cached, full hops) and `Fabric::route_uncached`.
//!
//! Many DMA streams at once on one Machine (`contention`): see `src/contention.rs`.
//!
//! Usage: devlend-bench [--json] [--reps N] [--quick] [--contention]
//!        devlend-bench --one copy BYTES | --one contention STREAMS BYTES | --one mix SEED STREAMS | --one data BYTES
//!
//! `--one` runs a single engine sample (no repetitions, nothing else) and prints it as one JSON
//! line with a digest of the simulated results: for profiling (cachegrind on two sizes) and for
//! checking that an engine change leaves the simulated run bit-identical.

use devlend_fabric::spec::*;
use devlend_fabric::{build, Fabric, Outcome, Requester, Target};
use devlend_wire::Access;
use serde_json::json;
use std::hint::black_box;
use std::time::Instant;

mod contention;
mod data;
mod engine;
mod mix;

const HOSTS: usize = 64;
const SWITCHES_PER_HOST: usize = 2;
const DEVICES_PER_SWITCH: usize = 8;
const PROFILES: [&str; 3] = ["quadro-k420", "optane-900p", "sriov-nic"];
const PAGE: u64 = 0x1000;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Pages per host in each working set (64 hosts x 64 = 4096 pages per route kind).
const PAGES_PER_HOST: usize = 64;

struct Opts {
    json: bool,
    reps: usize,
    /// Scale factor for the number of operations per repetition (--quick: 0.1).
    scale: f64,
    /// Only the contention rows.
    contention_only: bool,
    /// `--one`: the sample's arguments.
    one: Option<Vec<String>>,
}

fn parse_args() -> Opts {
    let mut o = Opts { json: false, reps: 7, scale: 1.0, contention_only: false, one: None };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => o.json = true,
            "--contention" => o.contention_only = true,
            "--one" => o.one = Some(args.by_ref().collect()),
            "--quick" => {
                o.scale = 0.1;
                o.reps = o.reps.min(3);
            }
            "--reps" => o.reps = args.next().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or_else(|| usage("--reps needs a positive integer")),
            "-h" | "--help" => usage(""),
            other => usage(&format!("unknown argument '{other}'")),
        }
    }
    o
}

fn usage(msg: &str) -> ! {
    if !msg.is_empty() {
        eprintln!("devlend-bench: {msg}");
    }
    eprintln!("usage: devlend-bench [--json] [--reps N] [--quick] [--contention]");
    eprintln!("       devlend-bench --one copy BYTES | --one contention STREAMS BYTES | --one mix SEED STREAMS | --one data BYTES");
    std::process::exit(if msg.is_empty() { 0 } else { 2 });
}

fn link(a: String, b: String, width: u8, kind: LinkKind) -> LinkSpec {
    LinkSpec { a, b, gen: 3, width, kind }
}

/// The 64-host, 1024-device cluster with an NTB ring.
fn cluster_spec() -> TopologySpec {
    cluster_spec_of(HOSTS)
}

/// The same cluster with `hosts` hosts (16 devices each) in the ring.
fn cluster_spec_of(hosts: usize) -> TopologySpec {
    let mut s = TopologySpec { name: format!("bench-{hosts}h-{}d", hosts * 16), ..Default::default() };
    for h in 0..hosts {
        s.hosts.push(HostSpec {
            name: format!("h{h}"),
            cpu: "intel-xeon-e5".into(),
            ram: 64 * GIB,
            iommu: true,
            root_ports: SWITCHES_PER_HOST as u8,
            memory_map: None,
            interrupt_remapping: None,
        });
        for sw in 0..SWITCHES_PER_HOST {
            let swn = format!("h{h}-sw{sw}");
            s.switches.push(SwitchSpec { name: swn.clone(), profile: Some("pex8796".into()), downstream_ports: DEVICES_PER_SWITCH as u8 + 1 });
            s.links.push(link(format!("h{h}.rp{sw}"), swn.clone(), 16, LinkKind::Slot));
            for d in 0..DEVICES_PER_SWITCH {
                let k = sw * DEVICES_PER_SWITCH + d;
                let dev = format!("h{h}-d{k}");
                s.devices.push(DeviceSpec {
                    name: dev.clone(),
                    profile: Some(PROFILES[k % PROFILES.len()].into()),
                    kind: None,
                    functions: None,
                    num_vfs: None,
                });
                s.links.push(link(format!("{swn}.d{d}"), dev, 8, LinkKind::Slot));
            }
            let ntb = format!("h{h}-{}", if sw == 0 { "next" } else { "prev" });
            s.ntbs.push(NtbSpec {
                name: ntb.clone(),
                profile: Some("pxh830".into()),
                windows: None,
                rid_lut_entries: None,
                doorbells: None,
                scratchpads: None,
                message_registers: None,
                cable_ports: None,
            });
            s.links.push(link(format!("{swn}.d{DEVICES_PER_SWITCH}"), ntb, 8, LinkKind::Slot));
        }
    }
    for h in 0..hosts {
        s.links.push(link(format!("h{h}-next.cable"), format!("h{}-prev.cable", (h + 1) % hosts), 8, LinkKind::Cable));
    }
    s
}

/// Program the DMA route of every host h: its first device writes at `NEAR_IOVA`, which its
/// host's IOMMU maps onto the "next" adapter's window 1; the peer adapter in host h+1 translates
/// the window to `FAR_IOVA`, which host h+1's IOMMU maps onto 64 MiB of its RAM at 1 GiB.
const NEAR_IOVA: u64 = 0x10_0000_0000;
const FAR_IOVA: u64 = 0x8000_0000;
const DMA_SIZE: u64 = 64 * MIB;

fn program_dma(f: &mut Fabric) -> Vec<Requester> {
    let mut reqs = Vec::new();
    for h in 0..HOSTS {
        let near = f.ntb_id(&format!("h{h}-next")).unwrap();
        let far = f.ntb(near).peer.unwrap();
        let fh = f.ntb(far).host;
        let ffunc = f.ntb(far).func;
        let lend = f.iommu_domain_alloc(fh, &format!("lend-from-h{h}")).unwrap();
        let ram = f.ram_offset_to_phys(f.host(fh), GIB).unwrap();
        f.mw_set_trans(far, 1, FAR_IOVA, DMA_SIZE).unwrap();

        let g = f.func_id(&format!("h{h}-d0")).unwrap();
        f.set_bus_master(g, true);
        let rid = f.func(g).bdf;
        f.rid_lut_add(near, rid).unwrap();
        // Attach after the LUT entry exists: the far adapter's DMA aliases include it.
        f.iommu_attach(fh, lend, ffunc).unwrap();
        f.iommu_map(fh, lend, FAR_IOVA, ram, DMA_SIZE, true).unwrap();

        let nh = f.ntb(near).host;
        let (win, _) = f.peer_mw_get_addr(near, 1).unwrap();
        let dma = f.iommu_domain_alloc(nh, "dma").unwrap();
        f.iommu_attach(nh, dma, g).unwrap();
        f.iommu_map(nh, dma, NEAR_IOVA, win, DMA_SIZE, true).unwrap();
        reqs.push(Requester::Func(g));
    }
    reqs
}

/// An address list over a working set of pages, with in-page offsets that vary per visit.
fn spread(pages: &[(Requester, u64)], visits: usize) -> Vec<(Requester, u64)> {
    let mut v = Vec::with_capacity(pages.len() * visits);
    for k in 0..visits {
        for (i, (r, p)) in pages.iter().enumerate() {
            v.push((*r, p + ((i * 13 + k * 7) as u64 * 64) % PAGE));
        }
    }
    // Interleave hosts and pages so consecutive lookups do not share a cache line of the table.
    let n = v.len();
    (0..n).map(|i| v[(i * 7919) % n]).collect()
}

fn cpu_bar_pages(f: &Fabric) -> Vec<(Requester, u64)> {
    let mut pages = Vec::new();
    for h in 0..HOSTS {
        let bars: Vec<(u64, u64)> = (0..f.funcs().len())
            .filter(|i| f.func_host(*i as u32) as usize == h && f.funcs()[*i].name.starts_with(&format!("h{h}-d")))
            .flat_map(|i| f.funcs()[i].bars.iter().map(|b| (b.addr, b.size)))
            .collect();
        for k in 0..PAGES_PER_HOST {
            let (addr, size) = bars[k % bars.len()];
            let npages = size.div_ceil(PAGE);
            pages.push((Requester::Cpu(h as u16), addr + ((k as u64 * 7919) % npages) * PAGE));
        }
    }
    pages
}

fn dma_pages(reqs: &[Requester]) -> Vec<(Requester, u64)> {
    let npages = DMA_SIZE / PAGE;
    reqs.iter().flat_map(|r| (0..PAGES_PER_HOST as u64).map(move |k| (*r, NEAR_IOVA + (k * 101 % npages) * PAGE))).collect()
}

struct Row {
    name: String,
    samples: Vec<f64>,
    unit: &'static str,
}

impl Row {
    fn median(&self) -> f64 {
        let mut s = self.samples.clone();
        s.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let n = s.len();
        if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        }
    }
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Time `n` operations per repetition; returns millions of operations per second for each repetition.
fn rate(reps: usize, n: usize, mut op: impl FnMut(usize)) -> Vec<f64> {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            for i in 0..n {
                op(i);
            }
            n as f64 / t.elapsed().as_secs_f64() / 1e6
        })
        .collect()
}

/// One stream alone, then every device at once, on the cluster (see `contention.rs`).
fn contention_rows(o: &Opts, rows: &mut Vec<Row>) {
    let reps = o.reps.clamp(3, 5);
    let per_stream = if o.scale < 1.0 { 256 << 10 } else { 2 * MIB };
    for (label, streams, bytes) in [("1-stream-8MiB", 1, 8 * MIB), ("512-streams", 0, per_stream)] {
        let samples: Vec<contention::Sample> = (0..reps).map(|_| contention::run(streams, bytes)).collect();
        rows.push(Row {
            name: format!("contention/tlp-hops-per-s/{label}"),
            samples: samples.iter().map(|s| s.tlp_hops as f64 / s.seconds / 1e6).collect(),
            unit: "M TLP-hops/s",
        });
        rows.push(Row { name: format!("contention/wall/{label}"), samples: samples.iter().map(|s| s.seconds).collect(), unit: "s" });
        rows.push(Row { name: format!("contention/tlp-hops/{label}"), samples: vec![samples[0].tlp_hops as f64 / 1e6], unit: "M TLP-hops" });
        rows.push(Row {
            name: format!("contention/events-per-tlp-hop/{label}"),
            samples: vec![samples[0].events as f64 / samples[0].tlp_hops as f64],
            unit: "events",
        });
        rows.push(Row { name: format!("contention/peak-tlps/{label}"), samples: vec![samples[0].peak_tlps as f64], unit: "TLP records" });
        rows.push(Row { name: format!("contention/sim-total-bw/{label}"), samples: vec![samples[0].total_bw / 1e9], unit: "GB/s (sim)" });
        rows.push(Row { name: format!("contention/sim-min-stream-bw/{label}"), samples: vec![samples[0].min_stream_bw / 1e9], unit: "GB/s (sim)" });
    }
    if let Some(r) = peak_rss_kib() {
        rows.push(Row { name: "contention/peak-rss".into(), samples: vec![r as f64 / 1024.0], unit: "MiB" });
    }
}

fn print_rows(rows: &[Row]) {
    println!("{:<38} {:>12}  {:<12} {:>4}", "name", "median", "unit", "reps");
    for r in rows {
        let m = r.median();
        let v = if m >= 100.0 {
            format!("{m:.0}")
        } else if m >= 10.0 {
            format!("{m:.1}")
        } else {
            format!("{m:.3}")
        };
        println!("{:<38} {:>12}  {:<12} {:>4}", r.name, v, r.unit, r.samples.len());
    }
}

const ONE_USAGE: &str =
    "--one: copy BYTES | contention STREAMS BYTES | contention-hosts HOSTS STREAMS BYTES | mix SEED STREAMS | data BYTES | route cpu-local-bar|dma-ntb-remote-ram N";

/// One engine sample, as one JSON line (see the module's usage).
fn one(args: &[String]) {
    let num = |i: usize| args.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or_else(|| usage(ONE_USAGE));
    let mut v = match args.first().map(String::as_str) {
        Some("copy") => {
            let r = engine::copy(num(1));
            json!({"seconds": r.seconds, "tlp_hops": r.tlp_hops, "events": r.events, "peak_tlps": r.peak_tlps, "sim_bw": r.simulated_bandwidth, "digest": format!("{:016x}", r.digest)})
        }
        Some(kind @ ("contention" | "contention-hosts")) => {
            let (hosts, a) = if kind == "contention" { (HOSTS, 1) } else { (num(1) as usize, 2) };
            let r = contention::run_on(hosts, num(a) as usize, num(a + 1));
            json!({"seconds": r.seconds, "tlp_hops": r.tlp_hops, "events": r.events, "peak_tlps": r.peak_tlps, "sim_total_bw": r.total_bw, "sim_min_stream_bw": r.min_stream_bw, "digest": format!("{:016x}", r.digest)})
        }
        Some("data") => {
            let r = data::run(num(1));
            json!({"seconds": r.seconds, "tlp_hops": r.tlp_hops, "events": r.events, "peak_tlps": r.peak_tlps, "moved": r.moved, "digest": format!("{:016x}", r.digest)})
        }
        Some("mix") => {
            let r = mix::run(num(1), num(2) as usize);
            json!({"seconds": r.seconds, "tlp_hops": r.tlp_hops, "events": r.events, "digest": format!("{:016x}", r.digest)})
        }
        Some("route") => return route_one(args.get(1).map(String::as_str), num(2) as usize),
        _ => usage(ONE_USAGE),
    };
    v["mhops_per_s"] = json!(v["tlp_hops"].as_f64().unwrap() / v["seconds"].as_f64().unwrap() / 1e6);
    v["peak_rss_kib"] = json!(peak_rss_kib());
    println!("{v}");
}

/// `--one route KIND N`: N uncached routes of the `route-uncached/KIND` row's working set, alone
/// in the process (for `valgrind --tool=cachegrind`: instructions per route, load-independent).
fn route_one(kind: Option<&str>, n: usize) {
    let mut f = build(&cluster_spec()).expect("benchmark topology builds");
    let list = match kind {
        Some("cpu-local-bar") => spread(&cpu_bar_pages(&f), 4),
        Some("dma-ntb-remote-ram") => spread(&dma_pages(&program_dma(&mut f)), 4),
        _ => usage(ONE_USAGE),
    };
    let t = Instant::now();
    for i in 0..n {
        let (r, a) = list[i % list.len()];
        black_box(f.route_uncached(r, a, Access::Write));
    }
    let seconds = t.elapsed().as_secs_f64();
    println!("{}", json!({"routes": n, "seconds": seconds, "m_routes_per_s": n as f64 / seconds / 1e6, "peak_rss_kib": peak_rss_kib()}));
}

fn main() {
    let o = parse_args();
    if let Some(args) = &o.one {
        one(args);
        return;
    }
    let spec = cluster_spec();
    let mut rows: Vec<Row> = Vec::new();
    if o.contention_only {
        contention_rows(&o, &mut rows);
        if o.json {
            let rows: Vec<_> = rows
                .iter()
                .map(|r| json!({"name": r.name, "median": r.median(), "unit": r.unit, "repetitions": r.samples.len(), "samples": r.samples}))
                .collect();
            println!("{}", serde_json::to_string_pretty(&json!({"rows": rows})).unwrap());
        } else {
            print_rows(&rows);
        }
        return;
    }

    // Enumeration: build (names, links, bus numbers, BARs, windows) from the description.
    let mut build_ms = Vec::new();
    let mut fabric = None;
    for _ in 0..o.reps {
        let t = Instant::now();
        let f = build(&spec).expect("benchmark topology builds");
        build_ms.push(t.elapsed().as_secs_f64() * 1e3);
        fabric = Some(black_box(f));
    }
    let mut f = fabric.unwrap();
    let rss = peak_rss_kib().map(|k| k as f64 / 1024.0);
    rows.push(Row { name: "build/64h-1024d".into(), samples: build_ms, unit: "ms" });
    if let Some(r) = rss {
        rows.push(Row { name: "peak-rss-after-build".into(), samples: vec![r], unit: "MiB" });
    }

    let dma_reqs = program_dma(&mut f);
    let scenarios = [("cpu-local-bar", spread(&cpu_bar_pages(&f), 4)), ("dma-ntb-remote-ram", spread(&dma_pages(&dma_reqs), 4))];

    // Sanity: every address routes where it should; report the hop count of each kind.
    let mut hops = Vec::new();
    for (name, list) in &scenarios {
        let (r, a) = list[0];
        let route = f.route_uncached(r, a, Access::Write);
        hops.push(json!({"route": name, "hops": route.hop_count(), "roots": route.roots(), "ntb_crossings": route.ntb_crossings(), "steps": route.hops.len()}));
        for (r, a) in list {
            match (f.route_uncached(*r, *a, Access::Write).outcome, *name) {
                (Outcome::Delivered(Target::Bar { .. }), "cpu-local-bar") | (Outcome::Delivered(Target::Ram { .. }), "dma-ntb-remote-ram") => {}
                (o, _) => panic!("{name}: {r:?} at {a:#x} does not route as intended: {o:?}"),
            }
        }
    }

    let scale = |n: usize| ((n as f64 * o.scale) as usize).max(1000);
    for (name, list) in &scenarios {
        let len = list.len();
        // Warm the cache with one pass.
        for (r, a) in list {
            black_box(f.lookup(*r, *a, Access::Write));
        }
        let misses = f.route_cache_stats().1;
        let lk = rate(o.reps, scale(20_000_000), |i| {
            let (r, a) = list[i % len];
            black_box(f.lookup(r, a, Access::Write));
        });
        assert_eq!(f.route_cache_stats().1, misses, "{name}: the working set must stay cached");
        let ns: Vec<f64> = lk.iter().map(|m| 1e3 / m).collect();
        rows.push(Row { name: format!("lookup-cached/{name}"), samples: lk, unit: "M lookups/s" });
        rows.push(Row { name: format!("lookup-cached-ns/{name}"), samples: ns, unit: "ns/lookup" });
        let rc = rate(o.reps, scale(4_000_000), |i| {
            let (r, a) = list[i % len];
            black_box(f.route(r, a, Access::Write));
        });
        rows.push(Row { name: format!("route-cached/{name}"), samples: rc, unit: "M routes/s" });
        // Page-aligned addresses: the cache hands out its own Arc, no copy of the hops.
        let ra = rate(o.reps, scale(4_000_000), |i| {
            let (r, a) = list[i % len];
            black_box(f.route(r, a & !(PAGE - 1), Access::Write));
        });
        rows.push(Row { name: format!("route-cached-aligned/{name}"), samples: ra, unit: "M routes/s" });
        let ru = rate(o.reps, scale(2_000_000), |i| {
            let (r, a) = list[i % len];
            black_box(f.route_uncached(r, a, Access::Write));
        });
        rows.push(Row { name: format!("route-uncached/{name}"), samples: ru, unit: "M routes/s" });
    }

    // Engine: a saturated device-to-device write stream over the 2L path (TLP-hops per second),
    // and a copy of all of gpu3's 256 MiB BAR1 (the most the NTB window onto it holds; the fabric
    // checks every page of a DMA): wall time, and peak RSS before and after the copy, four times
    // the stream's size (memory must stay flat).
    let stream = 64u64 << 20;
    let mut hops_per_s = Vec::new();
    let mut events_per_hop = Vec::new();
    for _ in 0..o.reps.min(5) {
        let r = engine::copy(stream);
        hops_per_s.push(r.tlp_hops as f64 / r.seconds / 1e6);
        events_per_hop.push(r.events as f64 / r.tlp_hops as f64);
    }
    rows.push(Row { name: "engine/tlp-hops-per-s/2L-p2p-write".into(), samples: hops_per_s, unit: "M TLP-hops/s" });
    rows.push(Row { name: "engine/events-per-tlp-hop".into(), samples: events_per_hop, unit: "events" });
    let rss_before = peak_rss_kib().unwrap_or(0) as f64 / 1024.0;
    let gib = engine::WINDOW;
    let big = engine::copy(gib);
    let rss_after = peak_rss_kib().unwrap_or(0) as f64 / 1024.0;
    rows.push(Row { name: format!("engine/wall/{}MiB-d2d-copy-2L", gib >> 20), samples: vec![big.seconds], unit: "s" });
    rows.push(Row { name: "engine/simulated-bandwidth/2L-p2p-write".into(), samples: vec![big.simulated_bandwidth / 1e9], unit: "GB/s" });
    rows.push(Row { name: "engine/peak-rss-growth-during-copy".into(), samples: vec![rss_after - rss_before], unit: "MiB" });

    // HyperTRIO: translations simulated per second, 1024 tenants of the iperf3 profile (002
    // Table III: the full 69.7 M-translation trace), Base and HyperTRIO, RR1 and RAND1; --quick
    // shortens each tenant's log (building the tenants' page tables then weighs more).
    let ppt = if o.scale < 1.0 { Some(2000) } else { None };
    for cfg in ["base", "hypertrio"] {
        for order in ["RR1", "RAND1"] {
            let mut spec = devlend_hypertrio::WorkloadSpec::new("iperf3", 1024, order).expect("iperf3 workload");
            spec.packets_per_tenant = ppt;
            let config = devlend_hypertrio::params().config(cfg).expect("Table IV configuration");
            let mut rates = Vec::new();
            for _ in 0..o.reps.min(2) {
                let t = Instant::now();
                let st = devlend_hypertrio::simulate(&config, &spec).expect("simulation runs");
                rates.push(st.translations as f64 / t.elapsed().as_secs_f64() / 1e6);
            }
            rows.push(Row { name: format!("hypertrio/{cfg}/{order}/1024-tenants"), samples: rates, unit: "M translations/s" });
        }
    }

    contention_rows(&o, &mut rows);

    let nfuncs = f.funcs().len();
    let info = json!({
        "hosts": f.hosts().len(), "devices": f.devices().len(), "functions": nfuncs, "switches": f.switches().len(),
        "ntbs": f.ntbs().len(), "nodes": f.nodes().len(), "links": f.links().len(),
        "working_set_pages": scenarios[0].1.len() / 4, "cached_routes": f.cached_routes(), "routes": hops,
    });
    if o.json {
        let rows: Vec<_> =
            rows.iter().map(|r| json!({"name": r.name, "median": r.median(), "unit": r.unit, "repetitions": r.samples.len(), "samples": r.samples})).collect();
        println!("{}", serde_json::to_string_pretty(&json!({"fabric": info, "rows": rows})).unwrap());
        return;
    }
    println!(
        "fabric: {} hosts, {} devices ({} functions), {} switches, {} NTB adapters, {} nodes; working set {} pages per route kind",
        info["hosts"], info["devices"], info["functions"], info["switches"], info["ntbs"], info["nodes"], info["working_set_pages"]
    );
    for h in &hops {
        println!(
            "route {}: {} hops ({} root complexes, {} NTB crossings, {} steps)",
            h["route"].as_str().unwrap(),
            h["hops"],
            h["roots"],
            h["ntb_crossings"],
            h["steps"]
        );
    }
    println!();
    print_rows(&rows);
}
