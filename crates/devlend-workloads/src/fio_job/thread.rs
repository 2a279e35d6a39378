//! One fio job thread (fio's `thread_main` / `do_io`): it picks each I/O's direction
//! (`rw`, `rwmixread`), size (`bs`, `bssplit`) and offset (sequential, or random with or without
//! fio's random map), keeps up to `iodepth` in flight on its own queue pair, honours
//! `startdelay`, `thinktime`, `rate_iops`, `runtime`/`time_based` and stops at `size` bytes or
//! `number_ios`, and records every I/O's submission and completion latency (fio's `slat`,
//! `clat`; `lat` is their sum).

use super::{fnv, next, pattern, FioError, Rw, BS};
use devlend_drivers::error::{DResult, DeviceError};
use devlend_drivers::service::block::{BlockQueue, BLOCK};
use devlend_engine::machine::Thread;
use devlend_host::{Cluster, HostError, Os, ThreadKernel};
use std::collections::HashMap;

/// The largest I/O one command carries (the block layer's splitting is not modelled; Linux's
/// NVMe driver caps a request at its max_hw_sectors, commonly 1-2 MiB): assumed 1 MiB.
pub const MAX_BS: u64 = 1 << 20;

/// What one job thread does. Offsets and sizes are bytes on the drive (multiples of 512).
#[derive(Clone, Debug)]
pub struct JobSpec {
    pub rw: Rw,
    /// Percent of a mixed workload's I/Os that are reads (fio's `rwmixread`).
    pub rwmixread: u8,
    /// (block size in bytes, percent): one entry is fio's `bs`, several its `bssplit`.
    pub bssplit: Vec<(u64, u32)>,
    pub iodepth: u32,
    /// The region the job works on (fio's `offset` and `size`).
    pub offset: u64,
    pub size: u64,
    /// Bytes to transfer before the job ends (fio's `io_size`, by default `size`); `None`: until
    /// `runtime` (or `number_ios`).
    pub io_limit: Option<u64>,
    /// I/Os to issue before the job ends (fio's `number_ios`).
    pub ios: Option<u64>,
    /// The job ends submitting this long after its start (fio's `ramp_time` plus `runtime`).
    pub runtime_ps: Option<u64>,
    /// Loop over the region until `runtime_ps` instead of ending at `io_limit` (fio's `time_based`).
    pub time_based: bool,
    pub startdelay_ps: u64,
    /// A pause before each submission after the first (fio's `thinktime` with `thinktime_blocks=1`:
    /// one I/O in flight at a time).
    pub thinktime_ps: u64,
    pub rate_iops: Option<u64>,
    /// Random offsets visit every block of the region once per pass (fio's default), or are drawn
    /// with replacement (`norandommap`).
    pub randommap: bool,
    /// The random generator's state (fio's `randrepeat`/`randseed`).
    pub seed: u64,
    /// The stonewall group: a job starts once every job of the groups before its own has ended.
    pub group: u32,
    /// Read back and compare every block written (the experiments' check; fio's `verify`).
    pub verify: bool,
}

/// One I/O as the job saw it: when it began (ps since the machine's start), its submission and
/// completion latencies, its size and direction.
#[derive(Clone, Copy, Debug)]
pub struct IoRec {
    pub at_ps: u64,
    pub slat_ps: u64,
    pub clat_ps: u64,
    pub bytes: u32,
    pub write: bool,
}

/// What one job thread measured.
#[derive(Default, Debug)]
pub struct JobOut {
    /// When the job began its I/O (after its group and start delay) and reaped its last completion.
    pub start: u64,
    pub end: u64,
    pub ios: Vec<IoRec>,
    pub verified: u64,
    pub mismatches: u64,
}

impl JobSpec {
    /// Check a job before anything is built; `drive` is the drive's size in bytes.
    pub fn check(&self, drive: u64) -> Result<(), FioError> {
        let bad = |reason| Err(FioError::Invalid { reason });
        if self.iodepth == 0 {
            return bad("iodepth must be at least 1");
        }
        if self.bssplit.is_empty() || self.bssplit.iter().any(|&(b, _)| b == 0 || b % BLOCK != 0 || b > MAX_BS) {
            return bad("every block size must be a non-zero multiple of 512 bytes, at most 1 MiB");
        }
        if self.bssplit.iter().map(|&(_, p)| p).sum::<u32>() != 100 {
            return bad("bssplit percentages must add up to 100");
        }
        if self.rwmixread > 100 {
            return bad("rwmixread must be 0 to 100");
        }
        if !self.offset.is_multiple_of(BLOCK) || !self.size.is_multiple_of(BLOCK) {
            return bad("offset and size must be multiples of 512 bytes");
        }
        if self.offset.checked_add(self.size).is_none_or(|e| e > drive) {
            return bad("offset plus size runs past the end of the drive");
        }
        if self.size < self.max_bs() {
            return bad("size must hold at least one block of the largest block size");
        }
        if self.io_limit.is_none() && self.ios.is_none() && self.runtime_ps.is_none() {
            return bad("a job needs an end: size, number_ios or runtime");
        }
        if self.time_based && self.runtime_ps.is_none() {
            return bad("time_based needs a runtime");
        }
        if self.rate_iops == Some(0) {
            return bad("rate_iops must be at least 1");
        }
        Ok(())
    }

    fn max_bs(&self) -> u64 {
        self.bssplit.iter().map(|&(b, _)| b).max().unwrap_or(BS)
    }

    fn min_bs(&self) -> u64 {
        self.bssplit.iter().map(|&(b, _)| b).min().unwrap_or(BS)
    }
}

/// Offsets and sizes, drawn as fio draws them.
struct Picker {
    rng: u64,
    mix_rng: u64,
    /// The next sequential offset of reads and of writes (fio keeps one per direction).
    seq: [u64; 2],
    /// The random map's full-period generator over 2^bits slots (slots past the region are skipped).
    map: (u64, u32),
}

impl Picker {
    fn new(spec: &JobSpec) -> Picker {
        Picker { rng: spec.seed, mix_rng: spec.seed ^ 0x6d69_7872_6561_6400, seq: [0, 0], map: (spec.seed, 0) }
    }

    fn write(&mut self, spec: &JobSpec) -> bool {
        match spec.rw {
            Rw::Read | Rw::RandRead => false,
            Rw::Write | Rw::RandWrite => true,
            Rw::ReadWrite | Rw::RandRw => next(&mut self.mix_rng) % 100 >= spec.rwmixread as u64,
        }
    }

    fn bs(&mut self, spec: &JobSpec) -> u64 {
        if let [(b, _)] = spec.bssplit[..] {
            return b;
        }
        let mut r = (next(&mut self.mix_rng) % 100) as u32;
        for &(b, p) in &spec.bssplit {
            if r < p {
                return b;
            }
            r -= p;
        }
        spec.max_bs()
    }

    /// The byte offset (within the region) of an I/O of `bs` bytes.
    fn offset(&mut self, spec: &JobSpec, write: bool, bs: u64) -> u64 {
        if !spec.rw.random() {
            let pos = &mut self.seq[write as usize];
            if *pos + bs > spec.size {
                *pos = 0;
            }
            let at = *pos;
            *pos += bs;
            return at;
        }
        let grain = spec.min_bs();
        let slots = spec.size / grain;
        let slot = if spec.randommap { self.map_next(slots) } else { next(&mut self.rng) % slots };
        (slot * grain).min(spec.size - bs) / grain * grain
    }

    /// A linear congruential generator modulo 2^bits (a = 5 mod 8, c odd: full period) visits
    /// every slot once per pass, as fio's random map (or its LFSR) does.
    fn map_next(&mut self, slots: u64) -> u64 {
        let bits = 64 - (slots.max(2) - 1).leading_zeros();
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        loop {
            self.map.0 = self.map.0.wrapping_mul(0x5851_f42d_4c95_7f2d).wrapping_add(0x1405_7b7e_f767_814f) & mask;
            if self.map.0 < slots {
                return self.map.0;
            }
        }
    }
}

/// A job thread's state between submissions.
struct Job<'s> {
    spec: &'s JobSpec,
    pick: Picker,
    bufs: Vec<u64>,
    free: Vec<usize>,
    /// Command id -> (buffer, began, submitted, LBA, bytes, write).
    inflight: HashMap<u16, (usize, u64, u64, u64, u64, bool)>,
    written: HashMap<u64, u64>,
    start: u64,
    issued: u64,
    bytes: u64,
    pass: u64,
}

impl Job<'_> {
    /// Whether the job may issue another I/O at `now`.
    fn more(&self, now: u64) -> bool {
        let s = self.spec;
        s.ios.is_none_or(|n| self.issued < n)
            && (s.time_based || s.io_limit.is_none_or(|l| self.bytes < l))
            && s.runtime_ps.is_none_or(|r| now < self.start + r)
    }

    /// Submit one I/O if the job has one to issue and a free slot (after its rate or think time).
    fn submit<O: Os>(&mut self, t: &Thread<'_, Cluster>, os: &mut O, q: &mut dyn BlockQueue) -> DResult<bool> {
        let spec = self.spec;
        if self.free.is_empty() || !self.more(t.now()) {
            return Ok(false);
        }
        let mut due = spec.rate_iops.map_or(0, |r| self.start + self.issued * 1_000_000_000_000 / r);
        if spec.thinktime_ps > 0 && self.issued > 0 {
            due = due.max(t.now() + spec.thinktime_ps);
        }
        if due > t.now() {
            t.sleep(due - t.now());
            if !self.more(t.now()) {
                return Ok(false);
            }
        }
        let write = self.pick.write(spec);
        let bs = self.pick.bs(spec);
        let lba = (spec.offset + self.pick.offset(spec, write, bs)) / BLOCK;
        let b = self.free.pop().unwrap_or_default();
        if spec.verify && write {
            self.pass += 1;
            let data = pattern(lba, self.pass);
            self.written.insert(lba, fnv(&data));
            os.write(self.bufs[b], &data).map_err(oserr("write buffer"))?;
        }
        let at = t.now();
        let cid = q.submit(os, write, lba, (bs / BLOCK) as u16, self.bufs[b])?;
        self.inflight.insert(cid, (b, at, t.now(), lba, bs, write));
        self.issued += 1;
        self.bytes += bs;
        Ok(true)
    }
}

fn oserr(what: &'static str) -> impl Fn(HostError) -> DeviceError {
    move |error| DeviceError::Host { what, device: "the fio job's buffers".into(), error }
}

/// Run job `spec` on queue `q` from `host`'s kernel until its end; `out.start` is set by the
/// caller. Each completion reaped frees its slot for the next submission at once (fio's
/// `io_u_queued_complete` then `td_io_queue`).
pub(super) fn run_thread<K: ThreadKernel>(t: &Thread<'_, Cluster>, host: &K, mut q: Box<dyn BlockQueue>, spec: &JobSpec, mut out: JobOut) -> DResult<JobOut> {
    let mut os = host.on(t).map_err(oserr("kernel"))?;
    let depth = if spec.thinktime_ps > 0 { 1 } else { spec.iodepth } as usize;
    let bufs: Vec<u64> = (0..depth).map(|_| os.kmalloc(spec.max_bs())).collect::<Result<_, _>>().map_err(oserr("kmalloc"))?;
    let free = (0..depth).rev().collect();
    let (inflight, written) = (HashMap::new(), HashMap::new());
    let mut job = Job { spec, pick: Picker::new(spec), bufs, free, inflight, written, start: out.start, issued: 0, bytes: 0, pass: 0 };
    while job.submit(t, &mut os, &mut *q)? {}
    while !job.inflight.is_empty() {
        for (tag, status) in q.reap(&mut os)? {
            let (b, at, sent, lba, bs, write) = job.inflight.remove(&tag).ok_or_else(|| q.unknown_tag(tag))?;
            if status != 0 {
                return Err(q.status_error(write, lba, status));
            }
            out.ios.push(IoRec { at_ps: at, slat_ps: sent - at, clat_ps: t.now() - sent, bytes: bs as u32, write });
            job.free.push(b);
            job.submit(t, &mut os, &mut *q)?;
        }
        if job.inflight.is_empty() {
            // A paced or thinking job may have had nothing to submit while others completed.
            while job.submit(t, &mut os, &mut *q)? {}
        }
    }
    out.end = t.now();
    for (lba, sum) in job.written {
        q.read(&mut os, lba, (BS / BLOCK) as u16, job.bufs[0])?;
        let got = os.read(job.bufs[0], BS as usize).map_err(oserr("read buffer"))?;
        out.verified += 1;
        out.mismatches += (fnv(&got) != sum) as u64;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{JobSpec, Picker};
    use crate::fio_job::Rw;

    fn spec(rw: Rw) -> JobSpec {
        JobSpec {
            rw,
            rwmixread: rw.default_mix(),
            bssplit: vec![(4096, 100)],
            iodepth: 1,
            offset: 0,
            size: 1000 * 4096,
            io_limit: None,
            ios: Some(1),
            runtime_ps: None,
            time_based: false,
            startdelay_ps: 0,
            thinktime_ps: 0,
            rate_iops: None,
            randommap: true,
            seed: 42,
            group: 0,
            verify: false,
        }
    }

    #[test]
    fn the_random_map_visits_every_block_once_per_pass() {
        let s = spec(Rw::RandRead);
        let mut p = Picker::new(&s);
        let mut seen: Vec<u64> = (0..1000).map(|_| p.offset(&s, false, 4096) / 4096).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn sequential_io_walks_the_region_and_wraps() {
        let s = JobSpec { size: 3 * 8192, ..spec(Rw::Read) };
        let mut p = Picker::new(&s);
        let got: Vec<u64> = (0..4).map(|_| p.offset(&s, false, 8192)).collect();
        assert_eq!(got, [0, 8192, 16384, 0]);
    }

    #[test]
    fn mixes_and_splits_draw_in_their_proportions() {
        let s = JobSpec { rwmixread: 70, bssplit: vec![(4096, 25), (65536, 75)], ..spec(Rw::RandRw) };
        let mut p = Picker::new(&s);
        let reads = (0..10_000).filter(|_| !p.write(&s)).count();
        let big = (0..10_000).filter(|_| p.bs(&s) == 65536).count();
        assert!((6_700..7_300).contains(&reads), "{reads}");
        assert!((7_200..7_800).contains(&big), "{big}");
    }
}
