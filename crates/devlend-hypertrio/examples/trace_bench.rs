//! Trace benchmarks (issue 5): one phase per process, so each peak RSS (VmHWM) is that phase's.
//! `bench/trace` runs them all.
//!
//!   trace_bench synth OUT.dlt [tenants [packets]] write the iperf3 workload (Table III length)
//!   trace_bench mklog OUT.log tenants requests [hypersio]   a QEMU log: `tenants` SIDs, `requests` each
//!                                                (hypersio: as HyperSIO's patched QEMU prints it)
//!   trace_bench build OUT.dlt tenants ORDER LOG...   the constructor (002 §IV-B)
//!   trace_bench replay IN.dlt CONFIG [stats]     the model on the trace, streamed (stats: then
//!                                                every statistic, one JSON line)
use devlend_hypertrio::{construct, params, replay, WorkloadSpec};
use std::io::Write;
use std::time::Instant;

fn peak_rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok()).map_or(f64::NAN, |kb| kb / 1024.0)
}

fn size_mib(p: &str) -> f64 {
    std::fs::metadata(p).map_or(f64::NAN, |m| m.len() as f64 / (1 << 20) as f64)
}

/// iperf3-like lines as QEMU prints them: per packet ring (4 KiB), data (2 MiB, 1500 in a
/// row), notification (4 KiB); tenants interleaved round robin, a hit on every line but the
/// first touch of a page. `hypersio`: the lines of HyperSIO's patched QEMU
/// (src/scripts/qemu_patch.diff: `pmask` on hits, `level` on updates) for the NICs its log
/// collector attaches (device 2 onwards on bus 0, `FIRST_DEV_ID` in its sioperf/include/defines.h),
/// each context entry's domain in bits 72-87 (VT-d 3.0 §9.4), so that its `hypersio-perf --build`
/// reads the same file.
fn mklog(out: &str, tenants: u32, requests: u64, hypersio: bool) {
    let f = std::fs::File::create(out).unwrap();
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let sid = |t: u32| if hypersio { (2 + t) << 3 } else { 0x100 + t * 8 };
    for t in 0..tenants {
        let high = if hypersio { (t + 1) << 8 | 1 } else { 0x101 + t };
        writeln!(
            w,
            "7@1.000000:vtd_iotlb_cc_update IOTLB context update bus 0x{:x} devfn 0x{:x} high 0x{high:x} low 0x7f0001 gen 0 -> gen 1",
            sid(t) >> 8,
            sid(t) & 0xff
        )
        .unwrap();
    }
    for i in 0..requests {
        let pkt = i / 3;
        for t in 0..tenants {
            let (iova, ps) = match i % 3 {
                0 => (0x3480_0000 + (pkt % 256) * 16, 0),
                1 => (0xbbe0_0000 + ((pkt / 1500 + t as u64) % 32) * 0x20_0000 + (pkt % 1500) * 64, 0x80),
                _ => (0xf040_0000 + ((pkt / 32) % 6) * 0x1000 + (pkt % 64) * 8, 0),
            };
            let ev = if pkt == 0 { "update" } else { "hit" };
            let slpte = 0x1_2345_6003u64 | ps;
            let (pmask, level) = match (hypersio, ps != 0) {
                (false, _) => (String::new(), String::new()),
                (true, big) if pkt == 0 => (String::new(), format!(" level 0x{}", 1 + big as u8)),
                (true, big) => (format!(" pmask 0x{:x}", if big { !0x1f_ffffu64 } else { !0xfffu64 }), String::new()),
            };
            writeln!(
                w,
                "7@1.{:06}:vtd_iotlb_page_{ev} IOTLB page {ev} sid 0x{:x} iova 0x{iova:x}{pmask} slpte 0x{slpte:x}{level} domain 0x{:x}",
                i % 1_000_000,
                sid(t),
                t + 1
            )
            .unwrap();
        }
    }
    w.flush().unwrap();
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let t0 = Instant::now();
    match a.get(1).map(String::as_str) {
        Some("synth") => {
            let tenants = a.get(3).map_or(1024, |s| s.parse().unwrap());
            let mut spec = WorkloadSpec::new("iperf3", tenants, "RR1").unwrap();
            spec.packets_per_tenant = a.get(4).map(|s| s.parse().unwrap());
            let n = construct::write_synthetic(&spec, &a[2], &mut |_, _| {}).unwrap();
            let dt = t0.elapsed().as_secs_f64();
            println!("synth   {tenants} tenants iperf3 RR1: {} translations, {:.1} MiB on disk ({:.3} B/translation), {dt:.2} s = {:.1} M translations/s written, peak RSS {:.1} MiB",
                n * 3, size_mib(&a[2]), size_mib(&a[2]) * (1 << 20) as f64 / (3 * n) as f64, 3.0 * n as f64 / dt / 1e6, peak_rss_mib());
        }
        Some("mklog") => {
            mklog(&a[2], a[3].parse().unwrap(), a[4].parse().unwrap(), a.get(5).is_some_and(|f| f == "hypersio"));
            println!("mklog   {}: {:.1} MiB in {:.2} s", a[2], size_mib(&a[2]), t0.elapsed().as_secs_f64());
        }
        Some("build") => {
            let logs: Vec<String> = a[5..].to_vec();
            let s = construct::build_file(&logs, Some(a[3].parse().unwrap()), &a[4], 1, &a[2], &mut |_, _| {}).unwrap();
            let dt = t0.elapsed().as_secs_f64();
            let lines: u64 = s.inputs.iter().map(|i| i.lines).sum();
            println!("build   {} log lines -> {} tenants {}: {} translations, {:.1} MiB, {dt:.2} s = {:.2} M log lines/s, {:.1} M translations/s written, peak RSS {:.1} MiB",
                lines, s.tenants, s.order, s.translations, size_mib(&a[2]), lines as f64 / dt / 1e6, s.translations as f64 / dt / 1e6, peak_rss_mib());
        }
        Some("replay") => {
            let cfg = params().config(&a[3]).unwrap();
            let st = replay::replay_trace(&a[2], &cfg, &mut |_, _| {}).unwrap();
            let dt = t0.elapsed().as_secs_f64();
            println!(
                "replay  {} {:9}: {} translations in {dt:.2} s = {:.1} M translations/s; {:.1} Gb/s; peak RSS {:.1} MiB",
                a[2].rsplit('/').next().unwrap(),
                a[3],
                st.translations,
                st.translations as f64 / dt / 1e6,
                st.gbps,
                peak_rss_mib()
            );
            if a.get(4).is_some_and(|f| f == "stats") {
                println!("{}", serde_json::to_string(&st).unwrap());
            }
        }
        _ => eprintln!("usage: see the top of examples/trace_bench.rs"),
    }
}

#[cfg(test)]
mod tests {
    use devlend_hypertrio::qemu::{read_log_events, Event};

    /// (tenant by first appearance, page-aligned gIOVA, page size, domain) of every request.
    fn requests(path: &str) -> (Vec<(usize, u64, u64, u16)>, u64) {
        let mut sids: Vec<u16> = Vec::new();
        let mut out = Vec::new();
        let f = std::fs::File::open(path).unwrap();
        let s = read_log_events(path, std::io::BufReader::new(f), |e| {
            if let (Some((sid, page, size)), Event::PageHit { domain, .. } | Event::PageUpdate { domain, .. }) = (e.page(), e) {
                let t = sids.iter().position(|&s| s == sid).unwrap_or_else(|| {
                    sids.push(sid);
                    sids.len() - 1
                });
                out.push((t, page, size, *domain));
            }
            Ok(())
        })
        .unwrap();
        (out, s.context_updates)
    }

    /// A log in HyperSIO's format is read back by devlend's QEMU-log reader to the same
    /// translations (tenant, page, page size, domain) as the same log in QEMU's own format.
    #[test]
    fn hypersio_log_reads_back_to_the_same_translations() {
        let dir = std::env::temp_dir();
        let (q, h) = (dir.join(format!("tb-q-{}.log", std::process::id())), dir.join(format!("tb-h-{}.log", std::process::id())));
        let (q, h) = (q.to_str().unwrap(), h.to_str().unwrap());
        super::mklog(q, 5, 400, false);
        super::mklog(h, 5, 400, true);
        let (rq, cq) = requests(q);
        let (rh, ch) = requests(h);
        let text = std::fs::read_to_string(h).unwrap();
        std::fs::remove_file(q).unwrap();
        std::fs::remove_file(h).unwrap();
        assert_eq!((rq.len(), cq, ch), (5 * 400, 5, 5));
        assert_eq!(rq, rh);
        assert!(rh.iter().any(|r| r.2 == 2 << 20) && rh.iter().any(|r| r.2 == 4 << 10));
        assert!(text.contains(" pmask 0x") && text.contains(" level 0x") && text.contains("bus 0x0 devfn 0x10 high 0x101"));
    }
}
