//! An fio-style job ([`crate::fio_job`]) started on a shared machine: the drive (any device
//! type that serves block I/O: `registry::block_io` of its kind) is attached (borrowed when it
//! sits elsewhere), its model put on the machine, and the driver's probe and the job threads
//! start at the workload's time.

use crate::attach::{attach, Guests, Runner};
use crate::error::{BadSpec, WResult, WorkloadError};
use crate::fio_job::{check, check_threads, describe, FioRun, Job, JobSpec, Rw};
use devlend_drivers::registry::Serves;
use devlend_drivers::service::block::Drive;
use devlend_engine::machine::Machine;
use devlend_engine::queue::Ps;
use devlend_host::Cluster;
use std::rc::Rc;

/// The block size the fio job model issues (fio's `bs`).
pub const FIO_BS: u64 = 4096;

/// An fio job: fio's `rw`, `bs`, `iodepth`, `numjobs` and the commands each job completes.
#[derive(Clone, Copy, Debug)]
pub struct FioSpec {
    pub rw: Rw,
    pub bs: u64,
    pub iodepth: u32,
    pub numjobs: u16,
    pub ios: u32,
}

/// A job's threads in a host's kernel or a VM's.
pub(crate) enum Fio {
    Host(FioRun),
    Vm(FioRun<devlend_vm::GuestKernel>),
}

impl Fio {
    pub(crate) fn failed_at(&self) -> Option<Ps> {
        match self {
            Fio::Host(r) => r.failed_at(),
            Fio::Vm(r) => r.failed_at(),
        }
    }

    pub(crate) fn result(&self) -> Result<crate::fio_job::FioResult, crate::fio_job::FioError> {
        match self {
            Fio::Host(r) => r.result(),
            Fio::Vm(r) => r.result(),
        }
    }
}

/// What an fio workload runs: the scenario's short form, or a job file's threads (numjobs expanded).
pub enum FioJobs {
    Spec(FioSpec),
    Threads(Vec<JobSpec>),
}

impl FioJobs {
    /// Checked before anything is attached.
    fn check(&self, w: &str) -> WResult<()> {
        let invalid = |why| WorkloadError::invalid(w, why);
        let FioJobs::Spec(spec) = self else { return Ok(()) };
        if spec.bs != FIO_BS {
            return Err(invalid(BadSpec::BlockSize { bs: spec.bs }));
        }
        check(&spec.job()).map_err(|e| invalid(BadSpec::Fio(e)))
    }

    /// Checked against the drive's queue limits before anything is attached.
    fn fit(&self, w: &str, drive: &dyn Drive) -> WResult<()> {
        let invalid = |why| WorkloadError::invalid(w, why);
        let FioJobs::Spec(spec) = self else { return Ok(()) };
        if spec.numjobs > drive.max_queues() {
            return Err(invalid(BadSpec::Jobs { numjobs: spec.numjobs, queues: drive.max_queues() as usize }));
        }
        if spec.iodepth > drive.max_depth() {
            return Err(invalid(BadSpec::IoDepth { iodepth: spec.iodepth, max: drive.max_depth() }));
        }
        Ok(())
    }

    /// The threads on `drive`, checked against it.
    fn threads(self, w: &str, drive: &dyn Drive) -> WResult<Vec<JobSpec>> {
        let threads = match self {
            FioJobs::Spec(spec) => spec.job().threads(drive.capacity()),
            FioJobs::Threads(t) => t,
        };
        check_threads(&threads, drive).map_err(|e| WorkloadError::invalid(w, BadSpec::Fio(e)))?;
        Ok(threads)
    }
}

impl FioSpec {
    fn job(&self) -> Job {
        Job { rw: self.rw, iodepth: self.iodepth, numjobs: self.numjobs, ios: self.ios, verify: false, size_blocks: None }
    }
}

/// Start the jobs on `device` for `runner`: the drive's run and its type's effective parameters.
pub(crate) fn start(
    m: &mut Machine<Cluster>,
    guests: &Guests,
    w: &str,
    (runner, device): (&str, &str),
    jobs: FioJobs,
    at: Ps,
) -> WResult<(Fio, Vec<(String, String)>)> {
    jobs.check(w)?;
    let mut c = m.world();
    crate::attach::check_kind(&c, w, device, Serves::BlockIo)?;
    let drive = describe(&c.fabric, device).map_err(WorkloadError::setup(w))?;
    jobs.fit(w, &*drive)?;
    let threads = jobs.threads(w, &*drive)?;
    let a = attach(&mut c, guests, w, runner, device, Serves::BlockIo)?;
    let model = drive.model(&mut c.fabric, a.func).map_err(WorkloadError::setup(w))?;
    drop(c);
    m.add_device(a.func, model);
    let params = drive.params();
    let run = match a.runner {
        Runner::Host(h) => {
            let run = FioRun::probe(m, w, (h, a.dev, Rc::clone(&drive)), threads, at);
            run.jobs(m, at);
            Fio::Host(run)
        }
        Runner::Vm(g) => {
            let run = FioRun::probe(m, w, (g, a.dev, drive), threads, at);
            run.jobs(m, at);
            Fio::Vm(run)
        }
    };
    Ok((run, params))
}
