//! `devlend._core.Scenario`: devlend-workloads' runner (streams, GPU copies and ping-pongs, fio
//! jobs, ntb_perf, the hyper-tenant NIC on one `Machine<Cluster>`). Errors become `MachineError(kind, message, None)`.

use crate::machine::{port_row, MachineError, PortRow};
use crate::PyAddr;

/// A lend: (device, lender, borrower, [(bar, size, borrower CPU address)]).
type LendRow = (String, String, String, Vec<(u8, u64, u64)>);
use devlend_host::Cluster;
use devlend_workloads::{Access, BadSpec, Dir, FioSpec, NicSpec, NtbPerfSpec, Rw, Scenario as Core, Via, WorkloadError};
use pyo3::prelude::*;

fn werr(e: WorkloadError) -> PyErr {
    MachineError::new_err((e.kind(), e.to_string(), None::<String>))
}

fn invalid(workload: &str, why: BadSpec) -> PyErr {
    werr(WorkloadError::invalid(workload, why))
}

/// A fio job's (ios, iops, mean, p50, p99 ps).
type Fio = (u64, f64, f64, u64, u64);
/// A ping-pong's (rounds, mean, p50, p99, max ps).
type Trips = (u32, f64, u64, u64, u64);
/// One workload: (name, kind, at ps, start ps, end ps or None, bytes, fio, round trips, ntb_perf's
/// (bytes, ps) per thread), the last three None where they do not apply.
type Row = (String, String, u64, u64, Option<u64>, u64, Option<Fio>, Option<Trips>, Option<Vec<(u64, u64)>>);
/// How one workload ended: (status, error, noticed ps, bytes its device moved).
type OutcomeRow = (String, Option<String>, Option<u64>, Option<u64>);
/// One NIC's epoch: (end ps, mean round trip ps or None, the pipeline's Gb/s after it).
type NicEpochRow = (u64, Option<f64>, f64);
/// One NIC: (name, packets, drops, translations, first round trip ps, mean round trip ps, the pipeline's
/// last round trip ps and Gb/s, pipeline runs, converged at ps or None, epochs).
type NicRow = (String, u64, u64, u64, u64, f64, u64, f64, u32, Option<u64>, Vec<NicEpochRow>);

#[pyclass(module = "devlend._core", unsendable)]
struct Scenario {
    inner: Core,
    rows: Vec<Row>,
    links: Vec<PortRow>,
    span: Option<(u64, u64)>,
    nics: Vec<NicRow>,
    outcomes: Vec<OutcomeRow>,
}

#[pymethods]
impl Scenario {
    /// A scenario on the topology (JSON, without a `setup` section: borrowing is done here).
    /// Its `vms` are started; a VM the hypervisor refuses is a `SpecError` (pointer, message).
    #[new]
    #[pyo3(signature = (topology_json, hygiene="scrub"))]
    fn new(topology_json: &str, hygiene: &str) -> PyResult<Scenario> {
        let policy = devlend_host::Hygiene::parse(hygiene).map_err(|error| werr(WorkloadError::Cluster { step: "choosing the hygiene policy", error }))?;
        let mut c = Cluster::from_json(topology_json).map_err(|error| werr(WorkloadError::Cluster { step: "building the cluster", error }))?;
        c.set_hygiene(policy);
        let vms = crate::vm::vm_specs(topology_json)?;
        let inner = Core::with_vms(c, &vms).map_err(|e| crate::SpecError::new_err((e.path, e.fault.to_string())))?;
        Ok(Scenario { inner, rows: Vec::new(), links: Vec::new(), span: None, nics: Vec::new(), outcomes: Vec::new() })
    }

    /// The VMs: (name, host).
    fn vms(&self) -> Vec<(String, String)> {
        self.inner.vms()
    }

    #[pyo3(signature = (borrower, device, dma_window=None, at_ps=None))]
    fn borrow(&mut self, borrower: &str, device: &str, dma_window: Option<u64>, at_ps: Option<u64>) -> PyResult<()> {
        match at_ps {
            Some(at) => self.inner.borrow_at(borrower, device, dma_window, at),
            None => self.inner.borrow(borrower, device, dma_window),
        }
        .map_err(werr)
    }

    /// Return `device` at `at_ps` (its workloads must have ended by then).
    #[pyo3(signature = (device, at_ps, borrower=None))]
    fn return_device(&mut self, device: &str, at_ps: u64, borrower: Option<&str>) -> PyResult<()> {
        self.inner.return_at(device, borrower, at_ps).map_err(werr)
    }

    #[pyo3(signature = (name, requester, addr, bytes, write=true, at_ps=0))]
    fn stream(&mut self, name: &str, requester: &str, addr: PyAddr, bytes: u64, write: bool, at_ps: u64) -> PyResult<()> {
        let a = {
            let fabric = &self.inner.cluster().fabric;
            match fabric.requester(requester) {
                Ok(who) => crate::resolve_for(fabric, who, addr)?,
                Err(_) => crate::resolve(fabric, addr)?, // the workload reports the unknown requester itself
            }
        };
        let access = if write { Access::Write } else { Access::Read };
        self.inner.add_stream(name, requester, a, bytes, access, at_ps).map_err(werr)
    }

    #[pyo3(signature = (name, runner, gpu, dir, bytes, at_ps=0))]
    fn gpu_copy(&mut self, name: &str, runner: &str, gpu: &str, dir: &str, bytes: u64, at_ps: u64) -> PyResult<()> {
        let d = match dir.to_ascii_lowercase().as_str() {
            "htod" => Dir::HtoD,
            "dtoh" => Dir::DtoH,
            _ => return Err(invalid(name, BadSpec::Direction { given: dir.into() })),
        };
        self.inner.add_gpu_copy(name, runner, gpu, d, bytes, at_ps).map_err(werr)
    }

    #[pyo3(signature = (name, runner, drive, rw, iodepth, numjobs, ios, bs=4096, at_ps=0))]
    #[allow(clippy::too_many_arguments)]
    fn fio(&mut self, name: &str, runner: &str, drive: &str, rw: &str, iodepth: u32, numjobs: u16, ios: u32, bs: u64, at_ps: u64) -> PyResult<()> {
        let rw = Rw::parse(rw).map_err(|e| invalid(name, BadSpec::Fio(e)))?;
        self.inner.add_fio(name, runner, drive, FioSpec { rw, bs, iodepth, numjobs, ios }, at_ps).map_err(werr)
    }

    /// A job file's threads (dicts of `fio_job::JobSpec`'s fields, as python/devlend/fio/run.py
    /// builds them for `devlend fio`) on `drive` by `runner` from `at_ps`.
    fn fio_jobs(&mut self, name: &str, runner: &str, drive: &str, threads: Vec<Bound<'_, pyo3::types::PyDict>>, at_ps: u64) -> PyResult<()> {
        let specs = threads.iter().map(crate::fio::spec).collect::<PyResult<Vec<_>>>()?;
        self.inner.add_fio_threads(name, runner, drive, specs, at_ps).map_err(werr)
    }

    #[pyo3(signature = (name, runner, gpu_a, gpu_b, via="peer", rounds=100, at_ps=0))]
    #[allow(clippy::too_many_arguments)]
    fn gpu_pingpong(&mut self, name: &str, runner: &str, gpu_a: &str, gpu_b: &str, via: &str, rounds: u32, at_ps: u64) -> PyResult<()> {
        let v = Via::parse(via).ok_or_else(|| invalid(name, BadSpec::Via { given: via.into() }))?;
        self.inner.add_gpu_pingpong(name, runner, [gpu_a, gpu_b], v, rounds, at_ps).map_err(werr)
    }

    #[pyo3(signature = (name, runner, peer, use_dma=false, threads=1, chunk_order=19, total_order=20, max_mw_size=None, dma=None, at_ps=0))]
    #[allow(clippy::too_many_arguments)]
    fn ntb_perf(
        &mut self,
        name: &str,
        runner: &str,
        peer: &str,
        use_dma: bool,
        threads: u32,
        chunk_order: u32,
        total_order: u32,
        max_mw_size: Option<u64>,
        dma: Option<String>,
        at_ps: u64,
    ) -> PyResult<()> {
        let spec = NtbPerfSpec { use_dma, threads, chunk_order, total_order, max_mw_size, dma };
        self.inner.add_ntb_perf(name, runner, peer, &spec, at_ps).map_err(werr)
    }

    /// The hyper-tenant NIC `nic` serving `tenants` tenants of `runner` (devlend-workloads' `nic`).
    #[pyo3(signature = (name, runner, nic, config, tenants, duration_ps, profile="iperf3", order="RR1", packets_per_tenant=None, epoch_ps=5_000_000, at_ps=0))]
    #[allow(clippy::too_many_arguments)]
    fn nic(
        &mut self,
        name: &str,
        runner: &str,
        nic: &str,
        config: &str,
        tenants: u32,
        duration_ps: u64,
        profile: &str,
        order: &str,
        packets_per_tenant: Option<u64>,
        epoch_ps: u64,
        at_ps: u64,
    ) -> PyResult<()> {
        let spec = NicSpec {
            config: config.into(),
            tenants,
            profile: profile.into(),
            order: order.into(),
            packets_per_tenant,
            duration: duration_ps,
            epoch: epoch_ps,
        };
        self.inner.add_nic(name, runner, nic, &spec, at_ps).map_err(werr)
    }

    /// Inject fault `kind` at `target` at `at_ps` (devlend-host's fault kinds).
    fn fault(&mut self, at_ps: u64, kind: &str, target: &str) -> PyResult<()> {
        self.inner.add_fault(at_ps, kind, target).map_err(werr)
    }

    /// Per fault: (at ps, kind, target, struck, error or None, [(device, lender, borrower, why)] lends it ended).
    #[allow(clippy::type_complexity)]
    fn faults(&self) -> Vec<(u64, String, String, bool, Option<String>, Vec<(String, String, String, String)>)> {
        self.inner
            .faults()
            .iter()
            .map(|f| {
                let r = f.report.borrow();
                let (struck, err, ended) = match &*r {
                    None => (false, None, Vec::new()),
                    Some(Err(e)) => (true, Some(e.to_string()), Vec::new()),
                    Some(Ok(rep)) => {
                        (true, None, rep.ended.iter().map(|e| (e.device.clone(), e.lender.clone(), e.borrower.clone(), e.why.to_string())).collect())
                    }
                };
                (f.at, f.kind.name().to_string(), f.target.clone(), struck, err, ended)
            })
            .collect()
    }

    /// Bytes `device` moved as a requester: in all, and (time ps, bytes) when each fault struck.
    fn moved(&self, device: &str) -> PyResult<(u64, Vec<(u64, u64)>)> {
        self.inner.moved(device).map_err(werr)
    }

    /// End every lend still held; what Device Lending left programmed (must be 0).
    fn end_lends_and_count_leftovers(&mut self) -> PyResult<usize> {
        self.inner.end_lends_and_count_leftovers().map_err(werr)
    }

    /// What is programmed that no live lend owns (devlend-host's leftover checker), as messages.
    fn leftovers(&self) -> Vec<String> {
        self.inner.cluster().leftovers().iter().map(|l| l.to_string()).collect()
    }

    /// When the last of the scenario's threads ended, ps (None before any has).
    fn threads_ended_ps(&self) -> Option<u64> {
        self.inner.threads_ended_at()
    }

    /// The fabric's event log as JSON (failures, interrupts, AER messages, hot-plug steps).
    fn events(&self) -> String {
        self.inner.cluster().fabric.events_json().to_string()
    }

    /// Run until nothing is left to happen; with `keep_going`, past workloads' failures (each
    /// result then says how its workload ended, `outcomes`).
    #[pyo3(signature = (keep_going=false))]
    fn run(&mut self, py: Python<'_>, keep_going: bool) -> PyResult<()> {
        let _ = py;
        if keep_going {
            self.inner.keep_going(true);
        }
        let r = self.inner.run().map_err(werr)?;
        self.outcomes =
            r.workloads.iter().map(|w| (w.outcome.name().to_string(), w.outcome.error().map(|e| e.to_string()), w.outcome.noticed(), w.moved)).collect();
        self.rows = r
            .workloads
            .iter()
            .map(|w| {
                let fio = w.fio.as_ref().map(|f| (f.ios, f.iops, f.lat_mean_ps, f.lat_p50_ps, f.lat_p99_ps));
                let trips = w.round_trips.as_ref().map(|r| (r.rounds, r.mean_ps, r.p50_ps, r.p99_ps, r.max_ps));
                let perf = w.ntb_perf.as_ref().map(|p| p.threads.clone());
                (w.name.clone(), w.kind.name().to_string(), w.at, w.start, w.end, w.bytes, fio, trips, perf)
            })
            .collect();
        self.nics = r
            .workloads
            .iter()
            .filter_map(|w| {
                let n = w.nic.as_ref()?;
                let epochs = n.epochs.iter().map(|e| (e.end, e.round_trip_ps, e.gbps)).collect();
                Some((
                    w.name.clone(),
                    n.packets,
                    n.drops,
                    n.translations,
                    n.first_round_trip_ps,
                    n.round_trip_ps,
                    n.model_round_trip_ps,
                    n.model_gbps,
                    n.iterations,
                    n.converged_at,
                    epochs,
                ))
            })
            .collect();
        self.links = r.links.iter().map(port_row).collect();
        self.span = r.span;
        Ok(())
    }

    fn now_ps(&self) -> u64 {
        self.inner.now()
    }

    /// Run at most `events` more events (progress between slices; `run` then for the results):
    /// false once nothing is left to happen.
    fn run_events(&mut self, events: u64) -> PyResult<bool> {
        self.inner.run_events(events).map_err(werr)
    }

    /// How far the workloads are, 0 to 1 (`Scenario::progress`).
    fn progress(&self) -> f64 {
        self.inner.progress()
    }

    fn results(&self) -> Vec<Row> {
        self.rows.clone()
    }

    /// Go on past workloads' failures from now on: in `run` and in the machine's runs up to a
    /// borrow or return at a time.
    fn keep_going(&mut self) {
        self.inner.keep_going(true);
    }

    /// Per workload, in `results`' order: how it ended ("completed", "failed", "cut short"), the
    /// error its application saw, when the failure was noticed (ps), the bytes its device moved.
    fn outcomes(&self) -> Vec<OutcomeRow> {
        self.outcomes.clone()
    }

    fn nic_results(&self) -> Vec<NicRow> {
        self.nics.clone()
    }

    fn link_stats(&self) -> Vec<PortRow> {
        self.links.clone()
    }

    /// (first workload's start, last workload's end) in ps, what link statistics cover; None
    /// before a run or when no workload ran.
    fn span_ps(&self) -> Option<(u64, u64)> {
        self.span
    }

    fn params(&self) -> Vec<(String, String)> {
        self.inner.params()
    }

    /// Devices lent so far: (device, lender, borrower, [(bar, size, borrower CPU address)]).
    fn lends(&self) -> Vec<LendRow> {
        self.inner
            .cluster()
            .lends()
            .into_iter()
            .map(|l| (l.device, l.lender, l.borrower, l.bars.iter().map(|b| (b.index, b.size, b.cpu_addr)).collect()))
            .collect()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Scenario>()
}
