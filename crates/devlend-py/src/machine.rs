//! Several workloads at once on one clock: `devlend._core.Machine` binds the engine's
//! `Machine<Fabric>` (timing-only DMA streams that contend on shared links). The machine runs on
//! a copy of the fabric as it is when the machine is made; the Python `Fabric` stays usable.

use crate::{Fabric, PyAddr};
use devlend_engine::machine::{LinkStat, Machine as CoreMachine, MachineError as CoreMachineError};
use devlend_engine::{analytic, plan, port_table};
use devlend_fabric::Fabric as CoreFabric;
use devlend_wire::Access;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_core, MachineError, PyException, "A workload the machine cannot run: args (kind, message, failure JSON or None).");

/// The one place a machine error becomes a Python exception: (kind, message, failure JSON).
fn merr(f: &CoreFabric, e: CoreMachineError) -> PyErr {
    let (kind, failure) = match &e {
        CoreMachineError::Unreachable { failure, .. } => ("unreachable", Some(f.failure_json(&failure.failure).to_string())),
        CoreMachineError::Invalid { .. } => ("invalid", None),
        CoreMachineError::Stuck { .. } => ("stuck", None),
        CoreMachineError::Thread { .. } => ("thread", None),
    };
    MachineError::new_err((kind, e.to_string(), failure))
}

/// One stream as Python sees it: (name, addr, bytes, write, start ps, end ps or None).
type StreamRow = (String, u64, u64, bool, u64, Option<u64>);
/// One link direction: (link, towards_down, from "component.port", to "component.port", tlps,
/// wire bytes, payload bytes, busy ps, queue ps, credit stall ps).
pub(crate) type PortRow = (u32, bool, String, String, u64, u64, u64, u64, u64, u64);

/// A link direction's statistics as a [`PortRow`] (the Machine's `port_stats`, a Scenario's `link_stats`).
pub(crate) fn port_row(l: &LinkStat) -> PortRow {
    let s = &l.stats;
    (l.link, l.towards_down, l.from.clone(), l.to.clone(), s.tlps, s.wire_bytes, s.payload_bytes, s.busy_ps, s.queue_ps, s.credit_stall_ps)
}

#[pyclass(module = "devlend._core", unsendable)]
struct Machine {
    inner: CoreMachine<CoreFabric>,
}

#[pymethods]
impl Machine {
    #[new]
    fn new(fabric: PyRef<'_, Fabric>) -> Machine {
        Machine { inner: CoreMachine::new(fabric.inner.clone()) }
    }

    /// Start a timing-only stream of `bytes` by `requester` at `addr` at `at_ps`; returns its index.
    #[pyo3(signature = (name, requester, addr, bytes, write=true, at_ps=0))]
    fn stream(&mut self, name: &str, requester: &str, addr: PyAddr, bytes: u64, write: bool, at_ps: u64) -> PyResult<usize> {
        let (who, a) = {
            let w = self.inner.world();
            let who = w.requester(requester).map_err(crate::ferr)?;
            (who, crate::resolve_for(&w, who, addr)?)
        };
        let access = if write { Access::Write } else { Access::Read };
        let r = self.inner.stream(name, who, a, bytes, access, at_ps);
        r.map_err(|e| merr(&self.inner.world(), e))
    }

    /// Run until nothing is left to happen.
    fn run(&mut self) -> PyResult<()> {
        let r = self.inner.run();
        r.map_err(|e| merr(&self.inner.world(), e))
    }

    fn now_ps(&self) -> u64 {
        self.inner.now()
    }

    /// The fabric's effective parameters (defaults merged with the topology's overrides) and
    /// devlend's version, as (name, value) pairs.
    fn params(&self) -> Vec<(String, String)> {
        devlend_workloads::engine_params(&self.inner.world())
    }

    fn streams(&self) -> Vec<StreamRow> {
        self.inner.streams().iter().map(|s| (s.name.clone(), s.addr, s.bytes, s.access == Access::Write, s.start, s.end)).collect()
    }

    /// Every link direction that carried at least one TLP.
    fn port_stats(&self) -> Vec<PortRow> {
        self.inner.link_stats().iter().map(port_row).collect()
    }

    /// TLP-hops and events simulated so far, and the most TLP records alive at once.
    fn sim_stats(&self) -> (u64, u64, usize) {
        let s = self.inner.stats();
        (s.tlp_hops, s.events, s.peak_tlps)
    }

    /// The analytic model (devlend_engine::analytic) for one stream of `requester` at `addr` on
    /// an idle fabric: (its saturated bandwidth, its bottleneck link's capacity), bytes/s.
    #[pyo3(signature = (requester, addr, write=true))]
    fn analytic(&mut self, requester: &str, addr: PyAddr, write: bool) -> PyResult<(f64, f64)> {
        let mut w = self.inner.world();
        let who = w.requester(requester).map_err(crate::ferr)?;
        let a = crate::resolve_for(&w, who, addr)?;
        let access = if write { Access::Write } else { Access::Read };
        let p = plan(&mut w, who, a, access).map_err(|f| crate::FabricError::new_err(w.describe_failure(&f)))?;
        let ports = port_table(&w);
        let stream = if write { analytic::write_bandwidth(&p, &ports) } else { analytic::read_bandwidth(&p, &ports) };
        Ok((stream, analytic::link_bandwidth(&p, &ports, access)))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Machine>()?;
    m.add("MachineError", m.py().get_type::<MachineError>())?;
    Ok(())
}
