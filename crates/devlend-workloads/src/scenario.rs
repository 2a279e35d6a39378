//! A scenario: workloads started at given times on one `Machine<Cluster>`, run together.

use crate::attach::Guests;
use crate::error::{BadSpec, Missing, Unreached, WResult, WorkloadError};
use crate::fio::{FioJobs, FioSpec};
use crate::fio_job::FioResult;
use crate::fio_job::JobSpec;
use crate::ntb_perf::{NtbPerf, NtbPerfResult, NtbPerfSpec};
use crate::pingpong::{PingPong, RoundTrips, Via};
use crate::stats::engine_params;
use devlend_drivers::service::copy::Dir;
use devlend_engine::machine::LinkStat;
use devlend_engine::machine::{Machine, MachineError};
use devlend_engine::queue::Ps;
use devlend_fabric::spec::VmSpec;
use devlend_host::Cluster;
use devlend_vm::describe::{VmSpecError, VmSpecFault};
use devlend_vm::Vmm;
use devlend_wire::Access;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Stream,
    GpuCopy,
    GpuPingPong,
    Fio,
    NtbPerf,
    Nic,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Stream => "stream",
            Kind::GpuCopy => "gpu-copy",
            Kind::GpuPingPong => "gpu-pingpong",
            Kind::Fio => "fio",
            Kind::NtbPerf => "ntb-perf",
            Kind::Nic => "nic",
        }
    }
}

enum Track {
    Stream(usize),
    Gpu(crate::gpu::GpuCopy),
    PingPong(PingPong),
    Fio(crate::fio::Fio),
    NtbPerf(NtbPerf),
    Nic(Rc<RefCell<crate::nic::Nic>>),
}

pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) kind: Kind,
    pub(crate) at: Ps,
    pub(crate) bytes: u64,
    track: Track,
    /// The device it drives, whose bytes moved a result reports.
    pub(crate) device: Option<String>,
}

/// What one workload did. Times in ps; `start` is when it began moving data (a fio job: its
/// first submission, after the driver's probe), `end` when its last byte or completion arrived.
#[derive(Clone, Debug)]
pub struct WorkloadResult {
    pub name: String,
    pub kind: Kind,
    /// When it was asked to start.
    pub at: Ps,
    pub start: Ps,
    pub end: Option<Ps>,
    pub bytes: u64,
    /// IOPS and latencies, for a fio job.
    pub fio: Option<FioResult>,
    /// Round trips, for a GPU ping-pong.
    pub round_trips: Option<RoundTrips>,
    /// Each thread's bytes and time, for ntb_perf.
    pub ntb_perf: Option<NtbPerfResult>,
    /// Packets, translation round trips and the coupling's iterations, for the hyper-tenant NIC.
    pub nic: Option<crate::nic::NicResult>,
    /// How it ended (always `Completed` unless the run kept going past failures, `keep_going`).
    pub outcome: crate::outcome::Outcome,
    /// Bytes its device moved as a requester (a GPU copy's GPU, an fio job's drive: data, and
    /// for a drive its queue entries), for a workload that did not complete.
    pub moved: Option<u64>,
}

impl WorkloadResult {
    /// Bytes per second from start to end.
    pub fn bandwidth(&self) -> Option<f64> {
        self.end.filter(|e| *e > self.start).map(|e| self.bytes as f64 / ((e - self.start) as f64 * 1e-12))
    }
}

/// A run's outcome: every workload, every loaded link direction over the workloads' span, and
/// the time it all took.
#[derive(Clone, Debug)]
pub struct Report {
    pub workloads: Vec<WorkloadResult>,
    /// What each link direction carried from the first workload's start on (`span`).
    pub links: Vec<LinkStat>,
    /// From the first workload's start (when it was asked to start) to the last one's end:
    /// what link utilisation is over, never the clock, which timers may move on after the work.
    pub span: Option<(Ps, Ps)>,
    pub elapsed: Ps,
}

impl Report {
    /// `link`'s busy time over the workloads' span (0 without a span).
    pub fn utilisation(&self, link: &LinkStat) -> f64 {
        self.span.map_or(0.0, |(a, b)| link.utilisation(b - a))
    }
}

pub struct Scenario {
    pub(crate) m: Machine<Cluster>,
    pub(crate) entries: Vec<Entry>,
    /// Device name -> the workload that drives it (until the device is returned, `lend_at`).
    pub(crate) users: HashMap<String, String>,
    /// Results of the workloads whose device was returned, taken at the return.
    pub(crate) done: HashMap<String, WorkloadResult>,
    /// Per drive in use: its type's effective parameters (an NVMe drive's media), (name, value).
    media: Vec<(String, Vec<(String, String)>)>,
    /// The topology's VMs, runners as hosts are.
    pub(crate) guests: Guests,
    /// Faults injected (`fault`).
    pub(crate) faults: Vec<crate::fault::FaultEntry>,
    /// Go on past a workload's failure (`outcome`), and each failed workload's first failure.
    pub(crate) keep_going: bool,
    pub(crate) failures: HashMap<String, crate::outcome::Outcome>,
    /// Devices the lender scrubs after a return: until when, and how (`devlend_host::hygiene`).
    pub(crate) scrubbing: HashMap<String, (Ps, devlend_host::ScrubHow)>,
    /// Simulated memory the workloads hold (GPU copies' buffers), against `limits.memory_bytes`.
    memory: u64,
}

impl Scenario {
    /// A scenario on `cluster` (built without a Device Lending `setup` section: borrowing is done here).
    pub fn new(cluster: Cluster) -> Scenario {
        Scenario {
            m: Machine::new(cluster),
            entries: Vec::new(),
            users: HashMap::new(),
            done: HashMap::new(),
            media: Vec::new(),
            guests: Guests::default(),
            faults: Vec::new(),
            keep_going: false,
            failures: HashMap::new(),
            scrubbing: HashMap::new(),
            memory: 0,
        }
    }

    /// A scenario on `cluster` with the VMs of a topology's `vms` section started (their
    /// interrupt paths on the machine, `devlend_vm::irq_clock`); a workload's runner may name
    /// one, and it drives the devices its description gives it.
    pub fn with_vms(mut cluster: Cluster, vms: &[VmSpec]) -> Result<Scenario, VmSpecError> {
        let mut vmm = Vmm::default();
        let names = devlend_vm::describe::start(&mut cluster, &mut vmm, vms)?;
        let mut s = Scenario::new(cluster);
        s.guests = Guests { vmm: Rc::new(RefCell::new(vmm)), names };
        for &(_, vm) in &s.guests.names {
            devlend_vm::irq_clock::spawn(&mut s.m, &s.guests.vmm, vm).map_err(|e| VmSpecError::at("/vms", VmSpecFault::IrqClock(e)))?;
        }
        Ok(s)
    }

    /// The VMs: (name, host), in the description's order.
    pub fn vms(&self) -> Vec<(String, String)> {
        let vmm = self.guests.vmm.borrow();
        let c = self.m.world();
        self.guests.names.iter().filter_map(|(n, id)| vmm.vm(*id).ok().map(|v| (n.clone(), c.fabric.host(v.host).name.clone()))).collect()
    }

    pub fn now(&self) -> Ps {
        self.m.now()
    }

    /// The cluster, between runs (to look up addresses, lends...).
    pub fn cluster(&self) -> std::cell::RefMut<'_, Cluster> {
        self.m.world()
    }

    fn admit(&mut self, name: &str, at: Ps) -> WResult<()> {
        if self.entries.iter().any(|e| e.name == name) {
            return Err(WorkloadError::DuplicateName { workload: name.into() });
        }
        if at < self.now() {
            return Err(WorkloadError::StartInPast { workload: name.into(), at, now: self.now() });
        }
        self.m.mark_stats_at(at);
        Ok(())
    }

    fn claim(&mut self, name: &str, device: &str) -> WResult<()> {
        if let Some(by) = self.users.get(device) {
            return Err(WorkloadError::InUse { workload: name.into(), device: device.into(), by: by.clone() });
        }
        self.users.insert(device.into(), name.into());
        Ok(())
    }

    /// Borrow `device` for host `borrower` now, with a DMA window of `dma_window` bytes (default:
    /// a whole NTB memory window); its workloads then use this lend.
    pub fn borrow(&mut self, borrower: &str, device: &str, dma_window: Option<u64>) -> WResult<()> {
        let w = format!("borrow of {device}");
        let opts = devlend_host::BorrowOptions { dma_window, ..Default::default() };
        let mut c = self.m.world();
        let host = c.fabric.host_id(borrower).map_err(|e| WorkloadError::no_such(&w, "host", Missing::Fabric(e)))?;
        c.borrow_with(host, device, opts).map(|_| ()).map_err(|e| crate::attach::host_error(&w, device, e))
    }

    /// A timing-only stream: `bytes` written or read at `addr` by `requester` ("HOST:cpu" or a
    /// function name), from `at`.
    pub fn add_stream(&mut self, name: &str, requester: &str, addr: u64, bytes: u64, access: Access, at: Ps) -> WResult<()> {
        self.admit(name, at)?;
        let who = self.m.world().fabric.requester(requester).map_err(|e| WorkloadError::no_such(name, "requester", Missing::Fabric(e)))?;
        let id = self.m.stream(name, who, addr, bytes, access, at).map_err(|e| match e {
            MachineError::Unreachable { addr, failure, .. } => {
                WorkloadError::Unreachable { workload: name.into(), target: Box::new(Unreached::Addr { addr, failure }) }
            }
            MachineError::Invalid { why, .. } => WorkloadError::invalid(name, BadSpec::Stream(why)),
            other => WorkloadError::Machine(Box::new(other)),
        })?;
        self.entries.push(Entry { name: name.into(), kind: Kind::Stream, at, bytes, track: Track::Stream(id), device: None });
        Ok(())
    }

    /// A cudaMemcpy of `bytes` between `gpu`'s memory and a buffer in `runner`'s RAM, by the
    /// runner's driver thread from `at`; the runner borrows the GPU if it sits elsewhere.
    pub fn add_gpu_copy(&mut self, name: &str, runner: &str, gpu: &str, dir: Dir, bytes: u64, at: Ps) -> WResult<()> {
        self.admit(name, at)?;
        self.claim(name, gpu)?;
        let budget = self.m.world().fabric.tuning().limits.memory_bytes;
        let copy = crate::gpu::start(&mut self.m, &self.guests, name, (runner, gpu), (dir, bytes), (self.memory, budget), at).inspect_err(|_| {
            self.users.remove(gpu);
        })?;
        self.memory += crate::gpu::copy_memory(bytes);
        self.entries.push(Entry { name: name.into(), kind: Kind::GpuCopy, at, bytes, track: Track::Gpu(copy), device: Some(gpu.into()) });
        Ok(())
    }

    /// A ping-pong of `rounds` round trips between `gpus[0]` (it stores first) and `gpus[1]`,
    /// launched by `runner` (which borrows the GPUs that sit elsewhere) at `at`; the counters
    /// meet in each other's memory or in a buffer in the runner's RAM (`via`).
    pub fn add_gpu_pingpong(&mut self, name: &str, runner: &str, gpus: [&str; 2], via: Via, rounds: u32, at: Ps) -> WResult<()> {
        self.admit(name, at)?;
        self.claim(name, gpus[0])?;
        if let Err(e) = self.claim(name, gpus[1]) {
            self.users.remove(gpus[0]);
            return Err(e);
        }
        let run = crate::pingpong::start(&mut self.m, &self.guests, name, (runner, gpus), via, rounds, at).inspect_err(|_| {
            self.users.retain(|_, w| w != name);
        })?;
        self.entries.push(Entry { name: name.into(), kind: Kind::GpuPingPong, at, bytes: 4 * 2 * rounds as u64, track: Track::PingPong(run), device: None });
        Ok(())
    }

    /// ntb_perf from host `runner` into host `peer`'s memory through the NTB joining them, from
    /// `at`, with the tool's knobs (`spec`).
    pub fn add_ntb_perf(&mut self, name: &str, runner: &str, peer: &str, spec: &NtbPerfSpec, at: Ps) -> WResult<()> {
        self.admit(name, at)?;
        let dma = crate::ntb_perf::dma_name(&self.m.world().fabric, name, runner, spec)?;
        if let Some(d) = &dma {
            self.claim(name, d)?;
        }
        let run = crate::ntb_perf::start(&mut self.m, name, runner, peer, spec, dma.as_deref(), at).inspect_err(|_| {
            self.users.retain(|_, w| w != name);
        })?;
        let bytes = (1u64 << spec.total_order) / (1u64 << spec.chunk_order) * (1u64 << spec.chunk_order) * spec.threads as u64;
        self.entries.push(Entry { name: name.into(), kind: Kind::NtbPerf, at, bytes, track: Track::NtbPerf(run), device: None });
        Ok(())
    }

    /// An fio job on `drive` by `runner` from `at` (the driver's probe first, then the jobs).
    pub fn add_fio(&mut self, name: &str, runner: &str, drive: &str, spec: FioSpec, at: Ps) -> WResult<()> {
        let bytes = spec.ios as u64 * spec.numjobs as u64 * spec.bs;
        self.add_fio_jobs(name, runner, drive, FioJobs::Spec(spec), bytes, at)
    }

    /// A job file's fio threads (fio's options, numjobs expanded: `fio_job::JobSpec`) on `drive`
    /// by `runner` from `at`; their region is checked against the drive's capacity first.
    pub fn add_fio_threads(&mut self, name: &str, runner: &str, drive: &str, threads: Vec<JobSpec>, at: Ps) -> WResult<()> {
        self.add_fio_jobs(name, runner, drive, FioJobs::Threads(threads), 0, at)
    }

    fn add_fio_jobs(&mut self, name: &str, runner: &str, drive: &str, jobs: FioJobs, bytes: u64, at: Ps) -> WResult<()> {
        self.admit(name, at)?;
        self.claim(name, drive)?;
        let (run, media) = crate::fio::start(&mut self.m, &self.guests, name, (runner, drive), jobs, at).inspect_err(|_| {
            self.users.remove(drive);
        })?;
        self.media.push((drive.into(), media));
        self.entries.push(Entry { name: name.into(), kind: Kind::Fio, at, bytes, track: Track::Fio(run), device: Some(drive.into()) });
        Ok(())
    }

    /// The hyper-tenant NIC `nic` serving `spec.tenants` tenants of `runner` (its root complex
    /// holds their IOMMU; it borrows the NIC if it sits elsewhere), its driver ringing the NIC
    /// at `at` (`nic` module: the pipeline's rates, fed back with the loaded round trip).
    pub fn add_nic(&mut self, name: &str, runner: &str, nic: &str, spec: &crate::nic::NicSpec, at: Ps) -> WResult<()> {
        self.admit(name, at)?;
        self.claim(name, nic)?;
        let run = crate::nic::start(&mut self.m, &self.guests, name, (runner, nic), spec, at).inspect_err(|_| {
            self.users.remove(nic);
        })?;
        self.entries.push(Entry { name: name.into(), kind: Kind::Nic, at, bytes: 0, track: Track::Nic(run), device: None });
        Ok(())
    }

    /// Run until nothing is left to happen; every workload's result and the links' statistics.
    pub fn run(&mut self) -> WResult<Report> {
        self.drive(None)?;
        let workloads = if self.keep_going {
            self.results_with_outcomes()?
        } else {
            self.entries.iter().map(|e| self.done.get(&e.name).cloned().map_or_else(|| self.result(e), Ok)).collect::<WResult<Vec<_>>>()?
        };
        let span = self.span(&workloads);
        Ok(Report { workloads, links: self.m.link_stats_since_mark(), span, elapsed: self.now() })
    }

    /// Run at most `events` more events, for a caller that shows progress between slices (then
    /// [`Scenario::run`] for the results); false once nothing is left to happen. Failures are
    /// handled as `run` handles them.
    pub fn run_events(&mut self, events: u64) -> WResult<bool> {
        self.drive_to(crate::outcome::Until::Events(events))
    }

    /// How far the workloads are, 0 to 1: the mean over workloads of 1 for one that ended (or
    /// failed), else the share of its bytes its device has moved (0 where it has no device).
    pub fn progress(&self) -> f64 {
        if self.entries.is_empty() {
            return 1.0;
        }
        let share = |e: &Entry| -> f64 {
            let ended = self.done.contains_key(&e.name)
                || self.failures.contains_key(&e.name)
                || match &e.track {
                    Track::Stream(i) => self.m.streams()[*i].end.is_some(),
                    Track::Gpu(copy) => self.m.thread_end(copy.thread).is_some(),
                    _ => false,
                };
            match (&e.device, e.bytes) {
                _ if ended => 1.0,
                (Some(d), bytes) if bytes > 0 => self.moved(d).map_or(0.0, |(m, _)| (m as f64 / bytes as f64).min(1.0)),
                _ => 0.0,
            }
        };
        self.entries.iter().map(share).sum::<f64>() / self.entries.len() as f64
    }

    /// From the mark (the first workload's start) to the last workload's end; a workload without
    /// an end (a fault stopped it) counts until its threads had ended.
    fn span(&self, workloads: &[WorkloadResult]) -> Option<(Ps, Ps)> {
        let from = self.m.marked_at()?;
        let open = workloads.iter().any(|w| w.end.is_none());
        let ends = workloads.iter().filter_map(|w| w.end).chain(open.then(|| self.m.threads_ended_at()).flatten());
        ends.max().filter(|&to| to > from).map(|to| (from, to))
    }

    pub(crate) fn result(&self, e: &Entry) -> WResult<WorkloadResult> {
        let mut r = self.unfinished(e, crate::outcome::Outcome::Completed, None);
        match &e.track {
            Track::Stream(i) => {
                let s = &self.m.streams()[*i];
                (r.start, r.end) = (s.start, s.end);
            }
            Track::Gpu(copy) => {
                copy.check(&self.m, &e.name)?;
                (r.start, r.end) = (self.m.thread_start(copy.thread), self.m.thread_end(copy.thread));
            }
            Track::PingPong(p) => {
                let (trips, start, end) = p.result(&e.name)?;
                (r.start, r.end, r.round_trips) = (start, Some(end), Some(trips));
            }
            Track::NtbPerf(p) => {
                let (perf, start, end) = p.result(&self.m, &e.name)?;
                (r.start, r.end, r.ntb_perf) = (start, end, Some(perf));
            }
            Track::Nic(nic) => {
                let (res, start, end, bytes) = crate::nic::result(&nic.borrow(), &e.name)?;
                (r.start, r.end, r.bytes, r.nic) = (start, end, bytes, Some(res));
            }
            Track::Fio(run) => {
                let f = run.result().map_err(WorkloadError::failed(&e.name))?;
                (r.start, r.end, r.bytes) = (f.start_ps, Some(f.end_ps), f.bytes);
                r.fio = Some(f);
            }
        }
        Ok(r)
    }

    /// When workload `e`'s own failure was met (its driver's error), where it keeps one.
    pub(crate) fn failed_at(&self, e: &Entry) -> Option<Ps> {
        match &e.track {
            Track::Fio(run) => run.failed_at(),
            Track::Gpu(copy) => self.m.thread_end(copy.thread),
            _ => None,
        }
    }

    /// The effective parameters: the engine's, devlend's version, and each drive's own (an NVMe
    /// drive's media), as `DRIVE.NAME`.
    pub fn params(&self) -> Vec<(String, String)> {
        let mut p = engine_params(&self.m.world().fabric);
        p.push(("topology".into(), self.m.world().fabric.name().to_string()));
        for (d, own) in &self.media {
            p.extend(own.iter().map(|(k, v)| (format!("{d}.{k}"), v.clone())));
        }
        p
    }
}

/// A machine error as the runner's: a thread's failure names its workload (threads are named
/// "WORKLOAD" or "WORKLOAD/part").
pub(crate) fn machine_error(e: MachineError) -> WorkloadError {
    let of = |t: &str| t.split('/').next().unwrap_or(t).to_string();
    match &e {
        MachineError::Thread { thread, .. } | MachineError::Stuck { thread, .. } => WorkloadError::Failed { workload: of(thread), cause: e.into() },
        _ => WorkloadError::Machine(Box::new(e)),
    }
}
