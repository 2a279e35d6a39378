//! Replay: the performance model of 002 §IV-C (`sim`) on recorded translations instead of the
//! synthetic tenants: a `.dlt` hyper-trace (`trace`), or QEMU logs (002 §IV-A) put through the
//! Trace Constructor (`construct`, 002 §IV-B) on the fly. Streamed: memory does not grow with
//! the trace. The statistics are the synthetic runs' (`sim::Stats`): bandwidth, hit rates per
//! structure, PTB occupancy, drops, prefetch accuracy and coverage.
//!
//! The trace's page dictionary becomes the gIOVA layout every tenant's tables map (`tables`,
//! 4 KiB and 2 MiB pages). `tables` maps one range of each page size per tenant, so where a
//! trace has no page of one size an unused page of that size is added above the trace's pages
//! (never requested, so it changes no statistic). Belady's oracle reads the trace through
//! `sim::Lookahead`, as synthetic runs do.

use crate::construct::{is_trace, Build, Sources};
use crate::error::{HtError, HtResult};
use crate::params::Config;
use crate::sim::{run_fitting, Stats};
use crate::tables::Tables;
use crate::trace::Reader;
use crate::workload::{Layout, Packet, PageId, PageInfo};

/// A packet stream the replay reads: packets or the error that ends them, and, where the source
/// has one, a path for its common packets that skips `next`'s general decoding and its
/// `Option<HtResult<Packet>>` (the trace reader's one-byte record, `Reader::quick`).
pub trait Source: Iterator<Item = HtResult<Packet>> {
    /// The next packet as (SID, its three pages packed 16 bits each), when it is a common one;
    /// None: ask `next`, which decodes it (or reports the error) as if this were never called.
    #[inline(always)]
    fn quick(&mut self) -> Option<(u32, u64)> {
        None
    }
}

impl<R: std::io::Read> Source for Reader<R> {
    #[inline(always)]
    fn quick(&mut self) -> Option<(u32, u64)> {
        Reader::quick(self)
    }
}

impl Source for Build<'_> {}

/// Yields packets until the source fails, keeping the error; reports progress.
struct Checked<'e, I> {
    inner: I,
    err: &'e mut Option<HtError>,
    n: u64,
    total: u64,
    progress: &'e mut dyn FnMut(u64, u64),
}

/// `Checked::next_raw`'s answer at the end of the stream (or at an error): above the 48 bits
/// of a packet's three pages.
const NO_PACKET: u64 = 1 << 63;

impl<I: Source> Checked<'_, I> {
    /// The next packet as (SID, its three pages packed 16 bits each), or `NO_PACKET`. Out of
    /// line (the reader's decoding), and returned as two integers, so in two registers: an
    /// `Option<Packet>` is returned through memory, written as 4-byte stores that the run loop
    /// read back as an 8-byte load across two of them, which the store buffer cannot forward
    /// (the load waits until the stores commit; BENCHMARKS.md, issue 33, s26-replay).
    #[inline(never)]
    fn next_raw(&mut self) -> (u32, u64) {
        let Some(q) = self.inner.quick() else {
            return self.next_general();
        };
        self.n += 1;
        if self.n & 0xF_FFFF == 0 {
            return self.report(q);
        }
        q
    }

    /// `next_raw` through the source's `next`: out of line, so the common packet's path (`quick`)
    /// saves no registers for the general decoding's.
    #[inline(never)]
    fn next_general(&mut self) -> (u32, u64) {
        match self.inner.next() {
            Some(Ok(p)) => {
                let [a, b, c] = p.pages.map(u64::from);
                self.n += 1;
                if self.n & 0xF_FFFF == 0 {
                    return self.report((p.sid, a | b << 16 | c << 32));
                }
                (p.sid, a | b << 16 | c << 32)
            }
            Some(Err(e)) => {
                *self.err = Some(e);
                (0, NO_PACKET)
            }
            None => (0, NO_PACKET),
        }
    }
}

impl<I> Checked<'_, I> {
    /// Progress, every 2^20 packets; passes the packet `p` on. Out of line and called last (a
    /// tail call), so `next_raw`'s common path keeps nothing across a call.
    #[cold]
    #[inline(never)]
    fn report(&mut self, p: (u32, u64)) -> (u32, u64) {
        (self.progress)(self.n, self.total);
        p
    }
}

impl<I: Source> Iterator for Checked<'_, I> {
    type Item = Packet;
    #[inline(always)]
    fn next(&mut self) -> Option<Packet> {
        let (sid, pages) = self.next_raw();
        (pages != NO_PACKET).then_some(Packet { sid, pages: [pages as PageId, (pages >> 16) as PageId, (pages >> 32) as PageId] })
    }
}

/// The layout for `tables`: the trace's pages, plus an unused page of a size it lacks.
fn layout_of(pages: &[PageInfo]) -> HtResult<Layout> {
    let mut pages = pages.to_vec();
    let top = pages.iter().map(|p| p.iova + p.size).max().unwrap_or(0);
    let mut pad = (top + 0x3f_ffff) & !0x1f_ffff;
    for size in [0x1000, 0x20_0000] {
        if !pages.iter().any(|p| p.size == size) {
            if pad + size > 1 << 48 {
                return Err(HtError::Page {
                    iova: pad,
                    problem: "(an unused page added to a trace that has no page of its size) is above the 48-bit gIOVA space: the trace's pages reach its top"
                        .into(),
                });
            }
            pages.push(PageInfo { iova: pad, size });
            pad += 0x20_0000;
        }
    }
    let data_pages = pages.iter().filter(|p| p.size == 0x20_0000).count() as u32;
    Ok(Layout { pages, ring: 0, data0: 0, data_pages, setup0: 0, setup_pages: 0 })
}

/// Run the model on a packet stream over `pages` with `tenants` tenants.
pub fn run(
    cfg: &Config,
    tenants: u32,
    pages: &[PageInfo],
    packets: impl Source,
    total: u64,
    walk_levels: Option<u32>,
    progress: &mut dyn FnMut(u64, u64),
) -> HtResult<Stats> {
    let layout = layout_of(pages)?;
    let shapes = Tables::shapes(&layout, tenants)?;
    let iovas: Vec<u64> = layout.pages.iter().map(|p| p.iova).collect();
    let mut err = None;
    let it = Checked { inner: packets, err: &mut err, n: 0, total, progress };
    let st = run_fitting(cfg, shapes, tenants, iovas, walk_levels, it)?;
    match err {
        Some(e) => Err(e),
        None => Ok(st),
    }
}

/// Replay a `.dlt` trace file.
pub fn replay_trace(path: &str, cfg: &Config, progress: &mut dyn FnMut(u64, u64)) -> HtResult<Stats> {
    let r = Reader::open(path)?;
    let (tenants, pages) = (r.header.tenants, r.header.pages.clone());
    let total = r.expected_packets.unwrap_or(0);
    let levels = crate::trace::walk_levels(&r.header);
    run(cfg, tenants, &pages, r, total, levels, progress)
}

/// Replay inputs: one `.dlt` trace as it is (when `tenants` and `order` are None), or logs and
/// traces through the constructor (`order` default RR1, `tenants` default one per source).
pub fn replay(inputs: &[String], tenants: Option<u32>, order: Option<&str>, seed: u64, cfg: &Config, progress: &mut dyn FnMut(u64, u64)) -> HtResult<Stats> {
    if let [one] = inputs {
        if tenants.is_none() && order.is_none() && is_trace(one)? {
            return replay_trace(one, cfg, progress);
        }
    }
    let src = Sources::read(inputs, &mut |n| progress(n, 0))?;
    let b = src.build(tenants, order.unwrap_or("RR1"), seed)?;
    let (n, bound) = (b.tenants(), b.packets_bound());
    run(cfg, n, &src.pages, b, bound, src.walk_levels, progress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::construct::{build_file, write_synthetic};
    use crate::params::params;
    use crate::sim::simulate;
    use crate::workload::WorkloadSpec;

    /// `n` packets (SID = position from 1, pages 1, 2, 3): where `i` is a multiple of 3
    /// through `next` only, the rest through `quick`.
    struct Counted {
        i: u64,
        n: u64,
    }
    impl Iterator for Counted {
        type Item = HtResult<Packet>;
        fn next(&mut self) -> Option<Self::Item> {
            (self.i < self.n).then(|| {
                self.i += 1;
                Ok(Packet { sid: self.i as u32, pages: [1, 2, 3] })
            })
        }
    }
    impl Source for Counted {
        fn quick(&mut self) -> Option<(u32, u64)> {
            (self.i < self.n && !self.i.is_multiple_of(3)).then(|| {
                self.i += 1;
                (self.i as u32, 1 | 2 << 16 | 3 << 32)
            })
        }
    }

    #[test]
    fn checked_counts_both_paths_and_reports_progress_every_2_20_packets() {
        let n = (1 << 21) + 7;
        let (mut err, mut calls) = (None, vec![]);
        let mut progress = |k, total| calls.push((k, total));
        let it = Checked { inner: Counted { i: 0, n }, err: &mut err, n: 0, total: 99, progress: &mut progress };
        let mut next_sid = 1;
        for p in it {
            assert_eq!((p.sid, p.pages), (next_sid, [1, 2, 3]));
            next_sid += 1;
        }
        assert_eq!(next_sid as u64, n + 1);
        assert!(err.is_none());
        assert_eq!(calls, [(1 << 20, 99), (1 << 21, 99)]);
    }

    fn tmp(test: &str, name: &str) -> String {
        let d = std::env::temp_dir().join(format!("dlt-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name).to_string_lossy().to_string()
    }

    /// A QEMU log of `tenants` SIDs, each with its own page sequence (4 KiB ring, 2 MiB data).
    fn log(path: &str, tenants: u16, requests: u32, skew: u32) {
        let mut s = String::from("1@1.0:vtd_iotlb_cc_update IOTLB context update bus 0x1 devfn 0x0 high 0x102 low 0x7f0001 gen 0 -> gen 1\n");
        for i in 0..requests {
            for t in 0..tenants {
                if !(i + t as u32).is_multiple_of(skew + 1) && i >= 3 {
                    continue;
                }
                let iova = match i % 3 {
                    0 => 0x3480_0000u64 + 0x40,
                    1 => 0xbbe0_0000 + ((i / 30 + t as u32) % 4) as u64 * 0x20_0000 + 0x800,
                    _ => 0xf000_0000 + ((i / 9) % 5) as u64 * 0x1000,
                };
                let (ev, ps) = if i % 2 == 0 { ("hit", 0x80) } else { ("update", 0) };
                let ps = if i % 3 == 1 { ps | 0x80 } else { 0 };
                s += &format!(
                    "vtd_iotlb_page_{ev} IOTLB page {ev} sid 0x{:x} iova 0x{iova:x} slpte 0x{:x} domain 0x{t:x}\n",
                    0x100 + t * 8,
                    0x1234_5003u64 | ps
                );
            }
        }
        std::fs::write(path, s).unwrap();
    }

    #[test]
    fn synthetic_trace_replays_exactly_like_the_generator() {
        let p = tmp("synth", "synth.dlt");
        for (cfg, order) in [("base", "RR1"), ("hypertrio", "RAND1")] {
            let mut spec = WorkloadSpec::new("mediastream", 40, order).unwrap();
            spec.packets_per_tenant = Some(300);
            write_synthetic(&spec, &p, &mut |_, _| {}).unwrap();
            let c = params().config(cfg).unwrap();
            let a = simulate(&c, &spec).unwrap();
            let b = replay_trace(&p, &c, &mut |_, _| {}).unwrap();
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{cfg} {order}");
            assert!(a.packets > 0);
        }
        let bytes = std::fs::metadata(&p).unwrap().len();
        assert!(bytes < 40 * 300 * 3, "about a byte a packet: {bytes}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_damaged_trace_body_fails_the_replay_instead_of_ending_it_early() {
        // the reader's error reaches the caller through `Checked` (its end-of-stream answer is
        // the same as the error's, so the error must be kept)
        let p = tmp("damaged", "d.dlt");
        let mut spec = WorkloadSpec::new("mediastream", 8, "RR1").unwrap();
        spec.packets_per_tenant = Some(200);
        write_synthetic(&spec, &p, &mut |_, _| {}).unwrap();
        let c = params().config("hypertrio").unwrap();
        assert_eq!(replay_trace(&p, &c, &mut |_, _| {}).unwrap().packets, 1600);
        let mut b = std::fs::read(&p).unwrap();
        let n = b.len();
        b[n - 100] ^= 0x80;
        std::fs::write(&p, &b).unwrap();
        let e = replay_trace(&p, &c, &mut |_, _| {}).expect_err("a damaged trace is an error");
        assert!(e.to_string().contains("d.dlt"), "{e}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn log_replay_equals_replay_of_its_built_trace_and_orders_work() {
        let (la, lb) = (tmp("logs", "a.log"), tmp("logs", "b.log"));
        log(&la, 3, 600, 0);
        log(&lb, 2, 900, 1);
        let ins = vec![la.clone(), lb.clone()];
        let c = params().config("hypertrio").unwrap();
        let out = tmp("logs", "ab.dlt");
        for order in ["RR1", "RR4", "RAND1"] {
            let s = build_file(&ins, Some(12), order, 7, &out, &mut |_, _| {}).unwrap();
            assert_eq!((s.sources, s.tenants), (5, 12));
            let direct = replay(&ins, Some(12), Some(order), 7, &c, &mut |_, _| {}).unwrap();
            let via = replay(std::slice::from_ref(&out), None, None, 0, &c, &mut |_, _| {}).unwrap();
            assert_eq!(format!("{direct:?}"), format!("{via:?}"), "{order}");
            assert_eq!(direct.packets, s.packets);
        }
        let src = Sources::read(&ins, &mut |_| {}).unwrap();
        let sids = |o: &str, seed| -> Vec<u32> { src.build(Some(7), o, seed).unwrap().map(|p| p.unwrap().sid).collect() };
        let rr4 = sids("RR4", 1);
        assert_eq!(&rr4[..12], &[0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
        // sources 3 and 4 (b.log, skewed) hold the fewest packets; tenants 3 and 4 map to them
        let min = src.sources.iter().map(|s| s.packets()).min().unwrap();
        assert_eq!(rr4.len() as u64, (min / 4) * 4 * 7 + 4 * 3 + (min % 4), "RR4 stops at the first tenant with nothing left");
        assert_eq!(sids("RAND1", 3), sids("RAND1", 3));
        assert_ne!(sids("RAND1", 3), sids("RAND1", 4));
        std::fs::remove_dir_all(std::path::Path::new(&out).parent().unwrap()).ok();
    }

    #[test]
    fn log_replay_walks_the_levels_the_log_recorded() {
        let (plain, deep) = (tmp("levels", "plain.log"), tmp("levels", "deep.log"));
        log(&plain, 2, 600, 0);
        log(&deep, 2, 600, 0);
        // The same requests, with one walk the log recorded reading a level-4 (48-bit) table.
        let mut text = std::fs::read_to_string(&deep).unwrap();
        text += "vtd_slpte_fetch slpte fetch high 0x102 low 0x7f0001 iova 0x34800000 level 0x4 addr 0x7f0000 slpte 0x7f1003\n";
        std::fs::write(&deep, text).unwrap();
        let c = params().config("base").unwrap();
        let per_walk = |p: &str| {
            let st = replay(&[p.to_string()], None, None, 0, &c, &mut |_, _| {}).unwrap();
            assert!(st.walks > 0);
            st.walk_accesses as f64 / st.walks as f64
        };
        let (three, four) = (per_walk(&plain), per_walk(&deep));
        // Without a recorded depth: QEMU's default 3-level table; with it: one access more per
        // walk that found nothing cached.
        assert!(four > three, "{four} vs {three}");
        assert!(Sources::read(std::slice::from_ref(&deep), &mut |_| {}).unwrap().walk_levels == Some(4));
        assert!(Sources::read(std::slice::from_ref(&plain), &mut |_| {}).unwrap().walk_levels.is_none());
        std::fs::remove_dir_all(std::path::Path::new(&plain).parent().unwrap()).ok();
    }
}
