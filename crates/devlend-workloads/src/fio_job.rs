//! A fio-like workload on the machine: `jobs` threads, each with its own I/O queue pair (as
//! Linux gives each CPU one), keep `iodepth` 4 KiB random reads or writes in flight on an NVMe
//! drive, local or borrowed, for `ios` commands each (fio's `ioengine=libaio`, `direct=1`,
//! `bs=4k`, `rw=randread|randwrite`, `numjobs`, `iodepth`). Each command's latency is from the
//! job's submission to the job reaping its completion after the queue's interrupt.
//!
//! With `verify`, each write carries a pattern unique to its LBA and pass, and at the end every
//! job reads back the LBAs it wrote and compares checksums (fio's `verify=crc32c`, here FNV-1a).

mod error;

pub use error::FioError;

use devlend_devices::nvme::{BLOCK, OP_READ, OP_WRITE};
use devlend_devices::nvme_driver::{Driver, NvmeError, NvmeQueue};
use devlend_devices::nvme_run::machine;
use devlend_engine::machine::{Machine, Thread};
use devlend_engine::queue::Ps;
use devlend_host::{Cluster, DevId, HostError, Os, ThreadKernel};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// The drive's size for the workload: 2^24 blocks of 512 B (8 GiB).
pub const DRIVE_BLOCKS: u64 = 1 << 24;
const BS: u64 = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rw {
    RandRead,
    RandWrite,
}

impl Rw {
    pub fn parse(s: &str) -> Result<Rw, FioError> {
        match s {
            "randread" => Ok(Rw::RandRead),
            "randwrite" => Ok(Rw::RandWrite),
            _ => Err(FioError::UnknownRw { given: s.to_string() }),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Job {
    pub rw: Rw,
    pub iodepth: u32,
    pub numjobs: u16,
    /// Commands each job completes.
    pub ios: u32,
    pub verify: bool,
    /// Blocks the workload spans (fio's `size`), split among the jobs; `None`: the whole drive.
    /// A span past the drive's end gets commands failing with LBA Out of Range.
    pub size_blocks: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct FioResult {
    pub ios: u64,
    /// When the first job began its I/O and the last one reaped its last completion, ps.
    pub start_ps: u64,
    pub end_ps: u64,
    pub elapsed_ps: u64,
    pub iops: f64,
    pub bandwidth: f64,
    pub lat_mean_ps: f64,
    pub lat_p50_ps: u64,
    pub lat_p99_ps: u64,
    /// LBAs read back and checked (verify), and how many differed.
    pub verified: u64,
    pub mismatches: u64,
}

/// What one job measured.
#[derive(Default)]
struct JobOut {
    start: u64,
    end: u64,
    lat: Vec<u64>,
    verified: u64,
    mismatches: u64,
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| (h ^ *x as u64).wrapping_mul(0x100_0000_01b3))
}

/// xorshift64*: the job's random offsets, the same every run.
fn next(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Check a job description before anything is built.
pub fn check(job: &Job) -> Result<(), FioError> {
    if job.iodepth == 0 || job.numjobs == 0 || job.ios == 0 {
        return Err(FioError::Invalid { reason: "iodepth, numjobs and ios must be at least 1" });
    }
    if job.size_blocks.is_some_and(|s| s / (job.numjobs as u64) < BS / BLOCK) {
        return Err(FioError::Invalid { reason: "size must hold at least one 4 KiB block per job" });
    }
    Ok(())
}

/// Run the workload with the driver on host `runner` (borrowing `device` when it sits elsewhere).
pub fn fio(json: &str, runner: &str, device: &str, job: Job) -> Result<FioResult, FioError> {
    check(&job)?;
    let (mut m, _ctrl, host, dev) = machine(json, runner, device, DRIVE_BLOCKS).map_err(FioError::Setup)?;
    let run = FioRun::probe(&mut m, "fio", host, dev, job, 0);
    m.run().map_err(FioError::Machine)?;
    run.take_failure()?;
    let at = m.now();
    run.jobs(&mut m, at);
    m.run().map_err(FioError::Machine)?;
    run.result()
}

/// A fio workload on a machine that may run other workloads too: its probe thread, its job
/// threads (each waits until the probe has given it a queue pair), and what they measured.
pub struct FioRun<K: ThreadKernel = u16> {
    name: String,
    host: K,
    job: Job,
    drv: Rc<RefCell<Option<Driver>>>,
    /// The probe has ended (with a driver, or with a failure).
    probed: Rc<Cell<bool>>,
    outs: Rc<RefCell<Vec<JobOut>>>,
    failed: Rc<RefCell<Option<FioError>>>,
    /// When the first failure was met.
    failed_at: Rc<Cell<Option<Ps>>>,
}

impl<K: ThreadKernel> FioRun<K> {
    /// Start the driver's probe of `dev` (the controller already on `m`) in kernel `host` (a
    /// host's, or a VM's) at `at`.
    pub fn probe(m: &mut Machine<Cluster>, name: &str, host: K, dev: DevId, job: Job, at: Ps) -> FioRun<K> {
        let run = FioRun {
            name: name.into(),
            host: host.clone(),
            job,
            drv: Rc::default(),
            probed: Rc::default(),
            outs: Rc::default(),
            failed: Rc::default(),
            failed_at: Rc::default(),
        };
        let (d, fail, probed, fail_at) = (run.drv.clone(), run.failed.clone(), run.probed.clone(), run.failed_at.clone());
        m.spawn(&format!("{name}/nvme-probe"), at, move |t| {
            let probe = host.on(t).map_err(|error| NvmeError::Os { what: "kernel", error }).and_then(|mut os| {
                let depth = (job.iodepth + 1).max(2);
                Driver::probe_queues(&mut os, dev, job.numjobs, depth)
            });
            match probe {
                Ok(drv) => *d.borrow_mut() = Some(drv),
                Err(error) => {
                    *fail.borrow_mut() = Some(FioError::Probe(error));
                    fail_at.set(Some(t.now()));
                }
            }
            probed.set(true);
            Ok(())
        });
        run
    }

    /// Start the job threads at `at`; each begins once the probe has ended.
    pub fn jobs(&self, m: &mut Machine<Cluster>, at: Ps) {
        let job = self.job;
        for j in 0..job.numjobs {
            let host = self.host.clone();
            let (drv, probed, outs, fail) = (self.drv.clone(), self.probed.clone(), self.outs.clone(), self.failed.clone());
            let fail_at = self.failed_at.clone();
            m.spawn(&format!("{}/fio-job{j}", self.name), at, move |t| {
                t.wait_until("the NVMe driver's probe", move |_: &mut Cluster| probed.get());
                let Some(q) = drv.borrow_mut().as_mut().and_then(|d| d.take_queue(j + 1)) else {
                    fail.borrow_mut().get_or_insert(FioError::NoQueue { job: j });
                    return Ok(());
                };
                match run_job(t, &host, q, job, j) {
                    Ok(out) => outs.borrow_mut().push(out),
                    Err(error) => {
                        fail.borrow_mut().get_or_insert(FioError::Job { job: j, error });
                        fail_at.set(fail_at.get().or(Some(t.now())));
                    }
                }
                Ok(())
            });
        }
    }

    fn take_failure(&self) -> Result<(), FioError> {
        self.failed.borrow_mut().take().map_or(Ok(()), Err)
    }

    /// When the jobs met their first failure, if they did.
    pub fn failed_at(&self) -> Option<Ps> {
        self.failed_at.get()
    }

    /// What the jobs measured, once the machine has run (or the first failure).
    pub fn result(&self) -> Result<FioResult, FioError> {
        self.take_failure()?;
        Ok(summarize(&self.outs.borrow()))
    }
}

fn summarize(outs: &[JobOut]) -> FioResult {
    let mut lat: Vec<u64> = outs.iter().flat_map(|o| o.lat.iter().copied()).collect();
    lat.sort_unstable();
    let n = lat.len().max(1);
    let start = outs.iter().map(|o| o.start).min().unwrap_or(0);
    let end = outs.iter().map(|o| o.end).max().unwrap_or(0);
    let elapsed = (end - start).max(1);
    let ios = lat.len() as u64;
    let iops = ios as f64 / (elapsed as f64 * 1e-12);
    FioResult {
        ios,
        start_ps: start,
        end_ps: end,
        elapsed_ps: elapsed,
        iops,
        bandwidth: iops * BS as f64,
        lat_mean_ps: lat.iter().sum::<u64>() as f64 / n as f64,
        lat_p50_ps: lat.get(n * 50 / 100).copied().unwrap_or(0),
        lat_p99_ps: lat.get((n * 99 / 100).min(n - 1)).copied().unwrap_or(0),
        verified: outs.iter().map(|o| o.verified).sum(),
        mismatches: outs.iter().map(|o| o.mismatches).sum(),
    }
}

/// A 4 KiB pattern unique to (lba, pass).
fn pattern(lba: u64, pass: u64) -> Vec<u8> {
    let mut s = lba.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ pass.wrapping_add(1);
    (0..BS / 8).flat_map(|_| next(&mut s).to_le_bytes()).collect()
}

fn run_job<K: ThreadKernel>(t: &Thread<'_, Cluster>, host: &K, mut q: NvmeQueue, job: Job, j: u16) -> Result<JobOut, NvmeError> {
    let oserr = |what: &'static str| move |e: HostError| NvmeError::Os { what, error: e };
    let mut os = host.on(t).map_err(oserr("kernel"))?;
    // Each job has its own region of the drive, so verified writes are its own.
    let region = job.size_blocks.unwrap_or(DRIVE_BLOCKS) / job.numjobs as u64;
    let slots = region / (BS / BLOCK);
    let lba_of = |r: u64| j as u64 * region + (r % slots) * (BS / BLOCK);
    let mut rng = 0x5eed_0000_0000_0001u64 ^ (j as u64 + 1).wrapping_mul(0x9e37_79b9);
    let bufs: Vec<u64> = (0..job.iodepth).map(|_| os.kmalloc(BS)).collect::<Result<_, _>>().map_err(oserr("kmalloc"))?;
    let opcode = if job.rw == Rw::RandRead { OP_READ } else { OP_WRITE };
    let mut written: HashMap<u64, u64> = HashMap::new();
    let mut inflight: HashMap<u16, (usize, u64, u64)> = HashMap::new();
    let mut out = JobOut { start: t.now(), ..Default::default() };
    let (mut submitted, mut pass) = (0u32, 0u64);
    // A command's latency runs from before its submission (fio's `lat`, not `clat`).
    let mut submit = |os: &mut K::Os<'_, '_>, q: &mut NvmeQueue, b: usize, inflight: &mut HashMap<u16, (usize, u64, u64)>| -> Result<(), NvmeError> {
        let lba = lba_of(next(&mut rng));
        if job.verify && opcode == OP_WRITE {
            pass += 1;
            let data = pattern(lba, pass);
            written.insert(lba, fnv(&data));
            os.write(bufs[b], &data).map_err(oserr("write buffer"))?;
        }
        let at = t.now();
        let cid = q.queue_rq(os, opcode, lba, (BS / BLOCK) as u16, bufs[b])?;
        inflight.insert(cid, (b, at, lba));
        Ok(())
    };
    for b in 0..(job.iodepth.min(job.ios)) as usize {
        submit(&mut os, &mut q, b, &mut inflight)?;
        submitted += 1;
    }
    while !inflight.is_empty() {
        for c in q.reap(&mut os)? {
            let (b, at, lba) = inflight.remove(&c.cid).ok_or(NvmeError::UnknownCommand { qid: q.qid, cid: c.cid })?;
            if c.status != 0 {
                return Err(NvmeError::Status { opcode, lba, status: c.status });
            }
            out.lat.push(t.now() - at);
            if submitted < job.ios {
                submit(&mut os, &mut q, b, &mut inflight)?;
                submitted += 1;
            }
        }
    }
    out.end = t.now();
    for (lba, sum) in written {
        q.read(&mut os, lba, (BS / BLOCK) as u16, bufs[0])?;
        let got = os.read(bufs[0], BS as usize).map_err(oserr("read buffer"))?;
        out.verified += 1;
        out.mismatches += (fnv(&got) != sum) as u64;
    }
    Ok(out)
}
