//! HyperSIO's Trace Constructor (002 §IV-B) in bounded memory: per-tenant logs in, one
//! hyper-tenant trace out.
//!
//! What 002 does and what is taken here:
//! - §IV-A: a log collector run records up to 24 tenants (QEMU's 24 root-complex slots), so
//!   1024 tenants come from many runs' logs, read together (§IV-B). Inputs here are QEMU
//!   intel-iommu logs (`qemu`, one source tenant per SID in each file) or `.dlt` traces (one
//!   source per tenant), in any mix. Source tenants are numbered in input order, then by SID.
//!   Output tenant i replays source i mod S, so fewer logs than tenants are reused, as copies,
//!   with their own SID (002's tenants share gIOVAs anyway, §IV-D).
//! - §IV-C: every packet needs three translations; a source's requests, in log order, are
//!   grouped three at a time into its packets (a last one or two left over are dropped).
//! - §IV-B / §V-A: tenants are interleaved round robin or at random, `burst` consecutive packets
//!   per turn (RR1, RR4, RAND1; random draws are seeded, so a seed gives one trace), and the
//!   trace stops as soon as the tenant whose turn it is has no packet left ("to avoid the edge
//!   effect when only a subset of all tenants is active", §V-A).
//!
//! Memory does not grow with the trace: each input is read once, its requests (page indices of
//! one shared page dictionary, 2 bytes each) are spooled per source to an unlinked temporary
//! file in 4096-request chunks, and the constructor keeps one chunk per active output tenant.
//! All tenants share one gIOVA layout in the model (`tables`), so a page seen with two sizes
//! (a 4 KiB page inside a 2 MiB one) is an error; 1 GiB pages are not modelled.

use crate::error::{HtError, HtResult};
use crate::qemu;
use crate::trace::{self, Header, MAX_PAGES, MAX_TENANTS};
use crate::workload::{Interleave, Order, Packet, PageId, PageInfo, Trace, WorkloadSpec};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::FileExt;

const CHUNK: usize = 4096;

/// One input as read.
#[derive(Clone, Debug, Serialize)]
pub struct InputSummary {
    pub path: String,
    pub kind: String,
    pub lines: u64,
    pub requests: u64,
    pub tenants: usize,
}

/// A source tenant: its requests in the spool.
#[derive(Clone, Debug)]
pub struct Source {
    pub input: String,
    pub sid: u32,
    pub requests: u64,
    chunks: Vec<(u64, u32)>,
}

impl Source {
    pub fn packets(&self) -> u64 {
        self.requests / 3
    }
}

struct PageDict {
    pages: Vec<PageInfo>,
    ids: FxHashMap<u64, PageId>,
    small_regions: FxHashSet<u64>,
}

impl PageDict {
    fn id(&mut self, base: u64, size: u64) -> HtResult<PageId> {
        let err = |problem: String| Err(HtError::Page { iova: base, problem });
        if let Some(&id) = self.ids.get(&base) {
            let have = self.pages[id as usize].size;
            return if have == size {
                Ok(id)
            } else {
                err(format!("seen as {} and as {} (the model gives all tenants one page layout)", kib(have), kib(size)))
            };
        }
        let big = base & !0x1f_ffff;
        let clash = if size == 0x1000 {
            self.ids.get(&big).is_some_and(|&i| self.pages[i as usize].size == 0x20_0000)
        } else {
            self.small_regions.contains(&(base >> 21))
        };
        if size == 0x4000_0000 {
            return err("is a 1 GiB page; the HyperTRIO tables model 4 KiB and 2 MiB pages".into());
        }
        if clash {
            return err(format!("({}) overlaps a page of the other size seen earlier (the model gives all tenants one page layout)", kib(size)));
        }
        if self.pages.len() == MAX_PAGES {
            return Err(HtError::range("pages", format_args!("more than {MAX_PAGES} distinct gIOVA pages in the inputs"), format!("at most {MAX_PAGES}")));
        }
        let id = self.pages.len() as PageId;
        self.pages.push(PageInfo { iova: base, size });
        self.ids.insert(base, id);
        if size == 0x1000 {
            self.small_regions.insert(base >> 21);
        }
        Ok(id)
    }
}

fn kib(size: u64) -> String {
    if size >= 0x10_0000 {
        format!("{} MiB", size >> 20)
    } else {
        format!("{} KiB", size >> 10)
    }
}

/// Every input read once into the spool.
pub struct Sources {
    spool: std::fs::File,
    pub pages: Vec<PageInfo>,
    pub sources: Vec<Source>,
    pub inputs: Vec<InputSummary>,
    /// The deepest page-table level the logs' walks read (`vtd_slpte_fetch`), if they record any.
    pub walk_levels: Option<u32>,
}

/// Appends per-source requests to the spool in chunks.
struct Spooler {
    w: BufWriter<std::fs::File>,
    at: u64,
    bufs: Vec<Vec<PageId>>,
}

impl Spooler {
    fn push(&mut self, src: &mut Source, slot: usize, page: PageId) -> HtResult<()> {
        let b = &mut self.bufs[slot];
        b.push(page);
        src.requests += 1;
        if b.len() == CHUNK {
            self.flush(src, slot)?;
        }
        Ok(())
    }
    fn flush(&mut self, src: &mut Source, slot: usize) -> HtResult<()> {
        let b = &mut self.bufs[slot];
        if b.is_empty() {
            return Ok(());
        }
        let bytes: Vec<u8> = b.iter().flat_map(|p| p.to_le_bytes()).collect();
        self.w.write_all(&bytes).map_err(HtError::io(SPOOL, "write"))?;
        src.chunks.push((self.at, b.len() as u32));
        self.at += bytes.len() as u64;
        b.clear();
        Ok(())
    }
}

/// How errors name the constructor's temporary (unlinked) file.
const SPOOL: &str = "spool file";

fn spool_file() -> HtResult<std::fs::File> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = std::env::temp_dir().join(format!("devlend-spool-{}-{n}", std::process::id()));
    let f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&p).map_err(HtError::io(&p.to_string_lossy(), "create"))?;
    // unlinked at once: the space is freed when the file is closed, whatever happens
    std::fs::remove_file(&p).map_err(HtError::io(&p.to_string_lossy(), "unlink"))?;
    Ok(f)
}

/// Is this file a binary trace? Its magic says so; a `.dlt` name or a NUL among the first
/// bytes (never in a text log) also makes it one, so a damaged trace is reported by the trace
/// reader ("bad magic") rather than as a log line QEMU never prints.
pub fn is_trace(path: &str) -> HtResult<bool> {
    let mut m = [0u8; 8];
    let mut f = HtError::open_regular(path)?;
    let mut n = 0;
    while n < 8 {
        match f.read(&mut m[n..]).map_err(HtError::io(path, "read"))? {
            0 => break,
            k => n += k,
        }
    }
    Ok((n == 8 && m == trace::MAGIC) || path.ends_with(".dlt") || m[..n].contains(&0))
}

impl Sources {
    /// Read every input once; `progress(lines_or_packets_read)` now and then.
    pub fn read(paths: &[String], progress: &mut dyn FnMut(u64)) -> HtResult<Sources> {
        if paths.is_empty() {
            return Err(HtError::NoInputs);
        }
        let spool = spool_file()?;
        let mut sp = Spooler { w: BufWriter::with_capacity(1 << 16, spool.try_clone().map_err(HtError::io(SPOOL, "open"))?), at: 0, bufs: Vec::new() };
        let mut dict = PageDict { pages: Vec::new(), ids: FxHashMap::default(), small_regions: FxHashSet::default() };
        let mut sources: Vec<Source> = Vec::new();
        let mut inputs = Vec::new();
        let mut done = 0u64;
        let mut walk_levels = None;
        for path in paths {
            let first = sources.len();
            let mut slot_of: FxHashMap<u32, usize> = FxHashMap::default();
            let mut add = |sid: u32, sources: &mut Vec<Source>, sp: &mut Spooler| {
                *slot_of.entry(sid).or_insert_with(|| {
                    sources.push(Source { input: path.clone(), sid, requests: 0, chunks: Vec::new() });
                    sp.bufs.push(Vec::with_capacity(CHUNK));
                    sources.len() - 1 - first
                })
            };
            let summary = if is_trace(path)? {
                let mut r = trace::Reader::open(path)?;
                walk_levels = walk_levels.max(trace::walk_levels(&r.header));
                let mut local = Vec::with_capacity(r.header.pages.len());
                for p in &r.header.pages {
                    local.push(dict.id(p.iova, p.size).map_err(|e| e.in_file(path))?);
                }
                let mut n = 0u64;
                for p in r.by_ref() {
                    let p = p?;
                    let slot = add(p.sid, &mut sources, &mut sp);
                    for &pg in &p.pages {
                        sp.push(&mut sources[first + slot], slot, local[pg as usize])?;
                    }
                    n += 1;
                    if n & 0xF_FFFF == 0 {
                        progress(done + n);
                    }
                }
                done += n;
                InputSummary { path: path.clone(), kind: "trace".into(), lines: 0, requests: n * 3, tenants: r.header.tenants as usize }
            } else {
                let f = HtError::open_regular(path)?;
                let mut n = 0u64;
                let s = qemu::read_log_events(path, std::io::BufReader::with_capacity(1 << 16, f), |ev| {
                    n += 1;
                    if n & 0xF_FFFF == 0 {
                        progress(done + n);
                    }
                    if let qemu::Event::SlpteFetch { level, .. } = ev {
                        walk_levels = walk_levels.max(Some(*level as u32));
                    }
                    let Some((sid, base, size)) = ev.page() else {
                        return Ok(());
                    };
                    let pg = dict.id(base, size)?;
                    let slot = add(sid as u32, &mut sources, &mut sp);
                    sp.push(&mut sources[first + slot], slot, pg)
                })?;
                done += s.lines;
                InputSummary { path: path.clone(), kind: "qemu-log".into(), lines: s.lines, requests: s.requests, tenants: s.sids.len() }
            };
            for slot in 0..sp.bufs.len() {
                sp.flush(&mut sources[first + slot], slot)?;
            }
            sp.bufs.clear();
            inputs.push(summary);
        }
        sp.w.flush().map_err(HtError::io(SPOOL, "write"))?;
        if sources.is_empty() {
            return Err(HtError::NoRequests { inputs: paths.join(", ") });
        }
        if let Some(s) = sources.iter().find(|s| s.packets() == 0) {
            return Err(HtError::ShortSource { input: s.input.clone(), sid: s.sid, requests: s.requests });
        }
        Ok(Sources { spool, pages: dict.pages, sources, inputs, walk_levels })
    }

    /// The hyper-trace of `tenants` tenants (None: one per source) interleaved by `order`.
    pub fn build(&self, tenants: Option<u32>, order: &str, seed: u64) -> HtResult<Build<'_>> {
        let (order, burst) = WorkloadSpec::parse_order(order)?;
        let n = tenants.unwrap_or(self.sources.len().min(MAX_TENANTS as usize) as u32);
        if n == 0 || n > MAX_TENANTS {
            return Err(HtError::range("tenants", n, format!("1..={MAX_TENANTS}")));
        }
        let s = self.sources.len();
        Ok(Build {
            s: self,
            cursors: (0..n as usize).map(|i| Cursor { src: i % s, chunk: 0, buf: Vec::new(), pos: 0, left: self.sources[i % s].packets() }).collect(),
            turns: Interleave::new(order, burst, n, seed),
            done: false,
        })
    }

    fn chunk(&self, src: usize, k: usize, out: &mut Vec<PageId>) -> HtResult<()> {
        let (at, len) = self.sources[src].chunks[k];
        let mut b = vec![0u8; len as usize * 2];
        self.spool.read_exact_at(&mut b, at).map_err(HtError::io(SPOOL, "read"))?;
        out.clear();
        out.extend(b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])));
        Ok(())
    }
}

struct Cursor {
    src: usize,
    chunk: usize,
    buf: Vec<PageId>,
    pos: usize,
    left: u64,
}

/// The constructed hyper-trace, streamed.
pub struct Build<'a> {
    s: &'a Sources,
    cursors: Vec<Cursor>,
    turns: Interleave,
    done: bool,
}

impl Build<'_> {
    pub fn tenants(&self) -> u32 {
        self.cursors.len() as u32
    }

    /// Packets the trace will hold at most (every tenant stops at the shortest one's length).
    pub fn packets_bound(&self) -> u64 {
        let min = self.cursors.iter().map(|c| c.left).min().unwrap_or(0);
        min * self.cursors.len() as u64
    }

    fn packet(&mut self, t: u32) -> HtResult<Packet> {
        let c = &mut self.cursors[t as usize];
        c.left -= 1;
        let mut pages = [0; 3];
        for pg in &mut pages {
            if c.pos == c.buf.len() {
                self.s.chunk(c.src, c.chunk, &mut c.buf)?;
                c.chunk += 1;
                c.pos = 0;
            }
            *pg = c.buf[c.pos];
            c.pos += 1;
        }
        Ok(Packet { sid: t, pages })
    }
}

impl Iterator for Build<'_> {
    type Item = HtResult<Packet>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let cur = self.turns.next_tenant();
        if self.cursors[cur as usize].left == 0 {
            // 002 §V-A: stop when any tenant runs out
            self.done = true;
            return None;
        }
        let r = self.packet(cur);
        self.done = r.is_err();
        Some(r)
    }
}

/// What `build_file` wrote.
#[derive(Clone, Debug, Serialize)]
pub struct BuildSummary {
    pub output: String,
    pub tenants: u32,
    pub sources: usize,
    pub order: String,
    pub seed: u64,
    pub packets: u64,
    pub translations: u64,
    pub pages: usize,
    pub bytes: u64,
    pub inputs: Vec<InputSummary>,
}

/// `devlend trace build`: inputs -> one `.dlt` hyper-trace. `progress(done, total)`: input
/// lines/packets read (total 0 while reading), then packets written against their bound.
pub fn build_file(inputs: &[String], tenants: Option<u32>, order: &str, seed: u64, output: &str, progress: &mut dyn FnMut(u64, u64)) -> HtResult<BuildSummary> {
    let src = Sources::read(inputs, &mut |n| progress(n, 0))?;
    let b = src.build(tenants, order, seed)?;
    let (n, bound) = (b.tenants(), b.packets_bound());
    let meta = serde_json::json!({
        "made_by": "devlend trace build",
        "inputs": inputs,
        "order": order.to_ascii_uppercase(),
        "seed": seed,
        "tenants": n,
        "sources": src.sources.len(),
        "source_of_tenant": "i mod sources (002 §IV-B: logs of several runs; fewer logs are reused)",
        "walk_levels": src.walk_levels,
    });
    let h = Header { tenants: n, pages: src.pages.clone(), meta: meta.to_string() };
    let packets = trace::write_file(output, &h, b, &mut |k| progress(k, bound))?;
    Ok(BuildSummary {
        output: output.to_string(),
        tenants: n,
        sources: src.sources.len(),
        order: order.to_ascii_uppercase(),
        seed,
        packets,
        translations: packets * 3,
        pages: src.pages.len(),
        bytes: std::fs::metadata(output).map(|m| m.len()).unwrap_or(0),
        inputs: src.inputs.clone(),
    })
}

/// The synthetic workload (`workload`, 002 §IV-D) written as a `.dlt` trace.
pub fn write_synthetic(spec: &WorkloadSpec, output: &str, progress: &mut dyn FnMut(u64, u64)) -> HtResult<u64> {
    let tr = Trace::new(spec)?;
    let per = match spec.packets_per_tenant {
        Some(n) => n,
        None => crate::params::params().profile(&spec.profile)?.translations_min / 3,
    };
    let bound = per * spec.tenants as u64;
    let meta = serde_json::json!({
        "made_by": "devlend trace synth",
        "workload": spec.profile,
        "tenants": spec.tenants,
        "order": format!("{}{}", if spec.order == Order::Random { "RAND" } else { "RR" }, spec.burst),
        "packets_per_tenant": spec.packets_per_tenant,
        "seed": spec.seed,
    });
    let h = Header { tenants: spec.tenants, pages: tr.layout.pages.clone(), meta: meta.to_string() };
    trace::write_file(output, &h, tr.map(Ok), &mut |k| progress(k, bound))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_damaged_trace_is_read_as_a_trace_and_its_magic_blamed() {
        let dir = std::env::temp_dir().join(format!("devlend-magic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dlt = dir.join("t.dlt");
        std::fs::write(&dlt, b"XXXXXXXX\0\0\0\0").unwrap();
        let bin = dir.join("t.bin");
        std::fs::write(&bin, b"\x89DLX\0\x01\0\0").unwrap();
        let log = dir.join("t.log");
        std::fs::write(&log, b"vtd_iotlb_cc_hit bus 0x0 devfn 0x8 high 0x1 low 0x2 gen 1\n").unwrap();
        let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
        assert!(super::is_trace(&s(&dlt)).unwrap() && super::is_trace(&s(&bin)).unwrap());
        assert!(!super::is_trace(&s(&log)).unwrap());
        let err = super::Sources::read(&[s(&dlt)], &mut |_| {}).err().unwrap().to_string();
        assert!(err.contains("magic"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
