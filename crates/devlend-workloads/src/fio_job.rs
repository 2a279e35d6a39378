//! A fio-like workload on the machine: `jobs` threads, each with its own I/O queue pair (as
//! Linux gives each CPU one), keep `iodepth` 4 KiB random reads or writes in flight on an NVMe
//! drive, local or borrowed, for `ios` commands each (fio's `ioengine=libaio`, `direct=1`,
//! `bs=4k`, `rw=randread|randwrite`, `numjobs`, `iodepth`). Each command's latency is from the
//! job's submission to the job reaping its completion after the queue's interrupt.
//!
//! With `verify`, each write carries a pattern unique to its LBA and pass, and at the end every
//! job reads back the LBAs it wrote and compares checksums (fio's `verify=crc32c`, here FNV-1a).
//!
//! The job is written against the block-I/O service (`devlend_drivers::service::block`), not
//! the NVMe driver: the drive is whatever device type the registry says serves block I/O
//! (`registry::block_io` of the device's kind), which gives its capacity and queue limits, its
//! model for the machine, and its driver's probe; each thread drives a `BlockQueue`.

mod error;
mod thread;

pub use error::FioError;
pub use thread::{IoRec, JobOut, JobSpec, MAX_BS};

use devlend_drivers::error::{DResult, DeviceError};
use devlend_drivers::registry;
use devlend_drivers::service::block::{BlockDriver, Drive, BLOCK};
use devlend_engine::machine::Machine;
use devlend_engine::queue::Ps;
use devlend_host::{Cluster, DevId, ThreadKernel};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

const BS: u64 = 4096;

/// fio's `rw`: sequential or random, reads, writes or a mix of both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
    /// fio's `rw` / `readwrite`: sequential mixed.
    ReadWrite,
    RandRw,
}

impl Rw {
    pub fn parse(s: &str) -> Result<Rw, FioError> {
        match s {
            "read" => Ok(Rw::Read),
            "write" => Ok(Rw::Write),
            "randread" => Ok(Rw::RandRead),
            "randwrite" => Ok(Rw::RandWrite),
            "rw" | "readwrite" => Ok(Rw::ReadWrite),
            "randrw" => Ok(Rw::RandRw),
            _ => Err(FioError::UnknownRw { given: s.to_string() }),
        }
    }

    pub fn random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite | Rw::RandRw)
    }

    /// fio's default `rwmixread` for this `rw`: 100 for reads, 0 for writes, 50 for a mix.
    pub fn default_mix(self) -> u8 {
        match self {
            Rw::Read | Rw::RandRead => 100,
            Rw::Write | Rw::RandWrite => 0,
            Rw::ReadWrite | Rw::RandRw => 50,
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
    /// A span past the drive's end is refused before the run (`FioError::PastDrive`).
    pub size_blocks: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct FioResult {
    pub ios: u64,
    /// Bytes the completed I/Os moved.
    pub bytes: u64,
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

impl Job {
    /// The job's threads on a drive of `drive` bytes: `numjobs` 4 KiB jobs, each on its own share
    /// of the span (so that verified writes are its own) with its own random sequence, issuing
    /// `ios` commands.
    pub fn threads(&self, drive: u64) -> Vec<JobSpec> {
        let region = self.size_blocks.unwrap_or(drive / BLOCK) / self.numjobs as u64 * BLOCK;
        (0..self.numjobs as u64)
            .map(|j| JobSpec {
                rw: self.rw,
                rwmixread: self.rw.default_mix(),
                bssplit: vec![(BS, 100)],
                iodepth: self.iodepth,
                offset: j * region,
                size: region,
                io_limit: None,
                ios: Some(self.ios as u64),
                runtime_ps: None,
                time_based: false,
                startdelay_ps: 0,
                thinktime_ps: 0,
                rate_iops: None,
                randommap: false,
                seed: 0x5eed_0000_0000_0001u64 ^ (j + 1).wrapping_mul(0x9e37_79b9),
                group: 0,
                verify: self.verify,
            })
            .collect()
    }
}

/// Check the threads of a job file against `drive` (its capacity and queue limits) before any runs.
pub fn check_threads(threads: &[JobSpec], drive: &dyn Drive) -> Result<(), FioError> {
    if threads.is_empty() || threads.len() > drive.max_queues() as usize {
        return Err(FioError::Jobs { max: drive.max_queues() });
    }
    if threads.iter().any(|t| t.iodepth > drive.max_depth()) {
        return Err(FioError::Depth { max: drive.max_depth() });
    }
    let drive = drive.capacity();
    for (j, t) in threads.iter().enumerate() {
        if t.offset.checked_add(t.size).is_none_or(|e| e > drive) {
            return Err(FioError::PastDrive { job: j as u16, offset: t.offset, size: t.size, capacity: drive });
        }
    }
    threads.iter().try_for_each(|t| t.check(drive))
}

/// Run the workload with the driver on host `runner` (borrowing `device` when it sits elsewhere).
/// A span past the drive's end is refused before the run, naming the drive's capacity.
pub fn fio(json: &str, runner: &str, device: &str, job: Job) -> Result<FioResult, FioError> {
    check(&job)?;
    let run = run_threads(json, runner, device, |drive| job.threads(drive))?;
    run.result()
}

/// Run job threads (a job file's, numjobs expanded) with the driver on host `runner`, borrowing
/// `device` when it sits elsewhere; the probe runs first, the jobs start once it has ended.
pub fn fio_threads(json: &str, runner: &str, device: &str, threads: Vec<JobSpec>) -> Result<FioRun, FioError> {
    run_threads(json, runner, device, |_| threads)
}

/// The threads `make` gives for the drive's capacity, checked against it, then run.
fn run_threads(json: &str, runner: &str, device: &str, make: impl FnOnce(u64) -> Vec<JobSpec>) -> Result<FioRun, FioError> {
    let c = Cluster::from_json(json).map_err(|error| FioError::Setup(DeviceError::Host { what: "topology", device: device.into(), error }))?;
    let mut m = Machine::new(c);
    let drive = describe(&m.world().fabric, device).map_err(FioError::Setup)?;
    let (host, dev) = attach(&mut m, runner, device, &*drive).map_err(FioError::Setup)?;
    let threads = make(drive.capacity());
    check_threads(&threads, &*drive)?;
    let run = FioRun::probe(&mut m, "fio", (host, dev, drive), threads, 0);
    m.run().map_err(FioError::Machine)?;
    run.take_failure()?;
    let at = m.now();
    run.jobs(&mut m, at);
    m.run().map_err(FioError::Machine)?;
    run.take_failure()?;
    Ok(run)
}

/// Drive `device` as the registry's block-I/O entry for its kind describes it.
pub fn describe(f: &devlend_fabric::Fabric, device: &str) -> DResult<Rc<dyn Drive>> {
    f.func_id(device).map_err(DeviceError::fabric(device))?;
    registry::block_io_of(f, device)?(f, device)
}

/// Drive `device` ready for host `runner` (found, or borrowed when it sits elsewhere) and its
/// model on `m`: the runner's host id and handle of it.
fn attach(m: &mut Machine<Cluster>, runner: &str, device: &str, drive: &dyn Drive) -> DResult<(u16, DevId)> {
    let (model, func, host, dev) = {
        let mut w = m.world();
        let c = &mut *w;
        let func = c.fabric.func_id(device).map_err(DeviceError::fabric(device))?;
        let dev = devlend_drivers::service::attach(c, runner, device)?;
        let model = drive.model(&mut c.fabric, func)?;
        let host = c.fabric.host_id(runner).map_err(DeviceError::fabric(runner))?;
        (model, func, host, dev)
    };
    m.add_device(func, model);
    Ok((host, dev))
}

/// A fio workload on a machine that may run other workloads too: its probe thread, its job
/// threads (each waits until the probe has given it a queue pair and the stonewall groups before
/// its own have ended), and what they measured.
pub struct FioRun<K: ThreadKernel = u16> {
    name: String,
    host: K,
    threads: Rc<Vec<JobSpec>>,
    drv: Rc<RefCell<Option<Box<dyn BlockDriver>>>>,
    /// The probe has ended (with a driver, or with a failure).
    probed: Rc<Cell<bool>>,
    /// Each thread's measurements, by its index (empty until it ends).
    outs: Rc<RefCell<Vec<Option<JobOut>>>>,
    failed: Rc<RefCell<Option<FioError>>>,
    /// When the first failure was met.
    failed_at: Rc<Cell<Option<Ps>>>,
}

impl<K: ThreadKernel> FioRun<K> {
    /// Start the driver's probe of `drive`, `dev` in kernel `host` (a host's, or a VM's; its
    /// model already on `m`) at `at`: one queue per thread, deep enough for the deepest.
    pub fn probe(m: &mut Machine<Cluster>, name: &str, (host, dev, drive): (K, DevId, Rc<dyn Drive>), threads: Vec<JobSpec>, at: Ps) -> FioRun<K> {
        let n = threads.len();
        let run = FioRun {
            name: name.into(),
            host: host.clone(),
            threads: Rc::new(threads),
            drv: Rc::default(),
            probed: Rc::default(),
            outs: Rc::new(RefCell::new((0..n).map(|_| None).collect())),
            failed: Rc::default(),
            failed_at: Rc::default(),
        };
        let (d, fail, probed, fail_at) = (run.drv.clone(), run.failed.clone(), run.probed.clone(), run.failed_at.clone());
        let depth = run.threads.iter().map(|t| t.iodepth).max().unwrap_or(1);
        m.spawn(&format!("{name}/nvme-probe"), at, move |t| {
            let kernel = |error| DeviceError::Host { what: "kernel", device: format!("the driver of device handle {}", dev.0), error };
            let probe = host.on(t).map_err(kernel).and_then(|mut os| drive.probe(&mut os, dev, n as u16, depth));
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

    /// Start the job threads at `at`; each begins once the probe and the groups before its own
    /// have ended, then waits its `startdelay`.
    pub fn jobs(&self, m: &mut Machine<Cluster>, at: Ps) {
        let groups = self.threads.iter().map(|t| t.group).max().unwrap_or(0) as usize + 1;
        let mut left = vec![0u32; groups];
        self.threads.iter().for_each(|t| left[t.group as usize] += 1);
        let left = Rc::new(RefCell::new(left));
        for j in 0..self.threads.len() {
            let host = self.host.clone();
            let (drv, probed, outs, fail, threads, left) =
                (self.drv.clone(), self.probed.clone(), self.outs.clone(), self.failed.clone(), self.threads.clone(), left.clone());
            let fail_at = self.failed_at.clone();
            m.spawn(&format!("{}/fio-job{j}", self.name), at, move |t| {
                t.wait_until("the NVMe driver's probe", move |_: &mut Cluster| probed.get());
                let spec = &threads[j];
                let g = spec.group as usize;
                if g > 0 {
                    let before = left.clone();
                    t.wait_until("the stonewall before this job", move |_: &mut Cluster| before.borrow()[..g].iter().all(|&n| n == 0));
                }
                if spec.startdelay_ps > 0 {
                    t.sleep(spec.startdelay_ps);
                }
                let q = drv.borrow_mut().as_mut().and_then(|d| d.take_queue(j as u16 + 1));
                let out = match q {
                    None => Err(FioError::NoQueue { job: j as u16 }),
                    Some(q) => thread::run_thread(t, &host, q, spec, JobOut { start: t.now(), ..Default::default() })
                        .map_err(|error| FioError::Job { job: j as u16, error }),
                };
                match out {
                    Ok(out) => outs.borrow_mut()[j] = Some(out),
                    Err(e) => {
                        fail.borrow_mut().get_or_insert(e);
                        fail_at.set(fail_at.get().or(Some(t.now())));
                    }
                }
                left.borrow_mut()[g] -= 1;
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
        Ok(summarize(&self.outs.borrow().iter().flatten().collect::<Vec<_>>()))
    }

    /// Each thread's spec and measurements, in order, once the machine has run.
    pub fn outputs(&self) -> Vec<(JobSpec, JobOut)> {
        let outs = std::mem::take(&mut *self.outs.borrow_mut());
        self.threads.iter().cloned().zip(outs.into_iter().map(Option::unwrap_or_default)).collect()
    }
}

fn summarize(outs: &[&JobOut]) -> FioResult {
    let mut lat: Vec<u64> = outs.iter().flat_map(|o| o.ios.iter().map(|i| i.slat_ps + i.clat_ps)).collect();
    lat.sort_unstable();
    let n = lat.len().max(1);
    let start = outs.iter().map(|o| o.start).min().unwrap_or(0);
    let end = outs.iter().map(|o| o.end).max().unwrap_or(0);
    let elapsed = (end - start).max(1);
    let ios = lat.len() as u64;
    let bytes: u64 = outs.iter().flat_map(|o| o.ios.iter().map(|i| i.bytes as u64)).sum();
    let iops = ios as f64 / (elapsed as f64 * 1e-12);
    FioResult {
        ios,
        bytes,
        start_ps: start,
        end_ps: end,
        elapsed_ps: elapsed,
        iops,
        bandwidth: bytes as f64 / (elapsed as f64 * 1e-12),
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
