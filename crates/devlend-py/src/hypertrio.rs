//! HyperTRIO I/O translation (002).

use crate::FabricError;
use devlend_hypertrio::HtError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_core, HyperTrioError, PyException, "A HyperTRIO point, grid, QEMU log or .dlt trace that cannot be run or read: args (kind, message).");

fn herr(e: HtError) -> PyErr {
    HyperTrioError::new_err((e.kind(), e.to_string()))
}

/// HyperTRIO (002): one simulation point, statistics as JSON. `config`: "base" or "hypertrio"
/// (002 Table IV) with optional JSON field overrides; `order`: RR1, RR4, RAND1, ...;
/// `packets_per_tenant`: None for Table III's length.
#[pyfunction]
#[pyo3(signature = (config, workload, tenants, order, packets_per_tenant=None, overrides=None, seed=1))]
// A #[pyfunction]'s arguments are its Python signature (keywords with defaults): no struct to group them.
#[allow(clippy::too_many_arguments)]
fn hypertrio_simulate(
    py: Python<'_>,
    config: &str,
    workload: &str,
    tenants: u32,
    order: &str,
    packets_per_tenant: Option<u64>,
    overrides: Option<&str>,
    seed: u64,
) -> PyResult<String> {
    let r = py.detach(|| devlend_hypertrio::run_point(config, overrides, workload, tenants, order, packets_per_tenant, seed));
    let st = r.map_err(herr)?;
    serde_json::to_string(&st).map_err(|e| FabricError::new_err(e.to_string()))
}

/// HyperTRIO H1 (002 Fig 9): iperf3 connections x DevTLB configuration; points as JSON.
#[pyfunction]
#[pyo3(signature = (connections, packets_per_tenant=None, threads=None))]
fn hypertrio_h1(py: Python<'_>, connections: Vec<u32>, packets_per_tenant: Option<u64>, threads: Option<usize>) -> PyResult<String> {
    let th = threads.unwrap_or_else(devlend_experiments::hypertrio::default_threads);
    let r = py.detach(|| devlend_experiments::hypertrio::h1(&connections, packets_per_tenant, th)).map_err(herr)?;
    serde_json::to_string(&r).map_err(|e| FabricError::new_err(e.to_string()))
}

/// HyperTRIO H2 (002 Fig 10): tenants x interleaving x workload x configuration; points as JSON.
#[pyfunction]
#[pyo3(signature = (tenants, orders, workloads, configs, packets_per_tenant=None, threads=None))]
fn hypertrio_h2(
    py: Python<'_>,
    tenants: Vec<u32>,
    orders: Vec<String>,
    workloads: Vec<String>,
    configs: Vec<String>,
    packets_per_tenant: Option<u64>,
    threads: Option<usize>,
) -> PyResult<String> {
    let th = threads.unwrap_or_else(devlend_experiments::hypertrio::default_threads);
    let r = py.detach(|| devlend_experiments::hypertrio::h2(&tenants, &orders, &workloads, &configs, packets_per_tenant, th)).map_err(herr)?;
    serde_json::to_string(&r).map_err(|e| FabricError::new_err(e.to_string()))
}

/// HyperTRIO: any grid of points (JSON list of {label, config, overrides, workload, tenants,
/// order, packets_per_tenant}), run on all cores; points as JSON (H3, H4, sweeps).
#[pyfunction]
#[pyo3(signature = (points_json, threads=None))]
fn hypertrio_grid(py: Python<'_>, points_json: &str, threads: Option<usize>) -> PyResult<String> {
    let th = threads.unwrap_or_else(devlend_experiments::hypertrio::default_threads);
    let r = py.detach(|| devlend_experiments::hypertrio::grid(points_json, th)).map_err(herr)?;
    serde_json::to_string(&r).map_err(|e| FabricError::new_err(e.to_string()))
}

/// HyperTRIO: read a QEMU intel-iommu trace log (streamed); its summary as JSON (requests, SIDs,
/// distinct pages, event counts). Errors name the file and line.
#[pyfunction]
fn hypertrio_read_qemu_log(py: Python<'_>, path: &str) -> PyResult<String> {
    let s = py.detach(|| devlend_hypertrio::qemu::read_log_file(path, |_, _| {})).map_err(herr)?;
    serde_json::to_string(&s).map_err(|e| FabricError::new_err(e.to_string()))
}

/// A Rust progress callback `(done, total)` that calls the Python callable, if any.
fn progress_of(cb: &Option<Py<PyAny>>) -> impl FnMut(u64, u64) + '_ {
    move |done, total| {
        if let Some(cb) = cb {
            Python::attach(|py| {
                let _ = cb.call1(py, (done, total));
            });
        }
    }
}

macro_rules! json {
    ($v:expr) => {
        serde_json::to_string(&$v).map_err(|e| FabricError::new_err(e.to_string()))
    };
}

/// HyperTRIO trace constructor (002 §IV-B): QEMU logs and/or .dlt traces -> one .dlt hyper-trace
/// of `tenants` tenants (None: one per source SID), interleaved by `order` (RR1, RR4, RAND1, ...)
/// with `seed`; stops when any tenant runs out. `progress(done, total)` is called now and then.
/// Returns a JSON summary.
#[pyfunction]
#[pyo3(signature = (inputs, output, tenants=None, order="RR1", seed=1, progress=None))]
fn hypertrio_trace_build(
    py: Python<'_>,
    inputs: Vec<String>,
    output: &str,
    tenants: Option<u32>,
    order: &str,
    seed: u64,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let r = py.detach(|| devlend_hypertrio::construct::build_file(&inputs, tenants, order, seed, output, &mut progress_of(&progress)));
    json!(r.map_err(herr)?)
}

/// HyperTRIO: the synthetic workload (002 §IV-D) written as a .dlt trace; returns packets written.
#[pyfunction]
#[pyo3(signature = (output, workload, tenants, order, packets_per_tenant=None, seed=1, progress=None))]
// A #[pyfunction]'s arguments are its Python signature (keywords with defaults): no struct to group them.
#[allow(clippy::too_many_arguments)]
fn hypertrio_trace_synth(
    py: Python<'_>,
    output: &str,
    workload: &str,
    tenants: u32,
    order: &str,
    packets_per_tenant: Option<u64>,
    seed: u64,
    progress: Option<Py<PyAny>>,
) -> PyResult<u64> {
    let mut spec = devlend_hypertrio::WorkloadSpec::new(workload, tenants, order).map_err(herr)?;
    spec.packets_per_tenant = packets_per_tenant;
    spec.seed = seed;
    py.detach(|| devlend_hypertrio::construct::write_synthetic(&spec, output, &mut progress_of(&progress))).map_err(herr)
}

/// HyperTRIO: header and a verifying pass over a .dlt trace, as JSON.
#[pyfunction]
fn hypertrio_trace_info(py: Python<'_>, path: &str) -> PyResult<String> {
    json!(py.detach(|| devlend_hypertrio::trace::info(path)).map_err(herr)?)
}

/// HyperTRIO replay (002 §IV-C model on recorded translations): one .dlt trace as it is, or QEMU
/// logs / traces through the constructor when `tenants` or `order` is given (or the input is a
/// log). `config`: "base" or "hypertrio" with optional JSON overrides. Statistics as JSON.
#[pyfunction]
#[pyo3(signature = (inputs, config, overrides=None, tenants=None, order=None, seed=1, progress=None))]
// A #[pyfunction]'s arguments are its Python signature (keywords with defaults): no struct to group them.
#[allow(clippy::too_many_arguments)]
fn hypertrio_trace_replay(
    py: Python<'_>,
    inputs: Vec<String>,
    config: &str,
    overrides: Option<&str>,
    tenants: Option<u32>,
    order: Option<&str>,
    seed: u64,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let cfg = devlend_hypertrio::params().config_with(config, overrides).map_err(herr)?;
    let r = py.detach(|| devlend_hypertrio::replay::replay(&inputs, tenants, order, seed, &cfg, &mut progress_of(&progress)));
    json!(r.map_err(herr)?)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("HyperTrioError", m.py().get_type::<HyperTrioError>())?;
    m.add_function(wrap_pyfunction!(hypertrio_simulate, m)?)?;
    m.add_function(wrap_pyfunction!(hypertrio_h1, m)?)?;
    m.add_function(wrap_pyfunction!(hypertrio_h2, m)?)?;
    m.add_function(wrap_pyfunction!(hypertrio_grid, m)?)?;
    m.add_function(wrap_pyfunction!(hypertrio_read_qemu_log, m)?)?;
    m.add_function(wrap_pyfunction!(hypertrio_trace_build, m)?)?;
    m.add_function(wrap_pyfunction!(hypertrio_trace_synth, m)?)?;
    m.add_function(wrap_pyfunction!(hypertrio_trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(hypertrio_trace_replay, m)?)?;
    Ok(())
}
