//! Xen-IB split driver and bypass (004).

use devlend_xenib::XenIbError as CoreXenIbError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _core,
    XenIbError,
    PyException,
    "A Xen-IB testbed or benchmark that cannot be built or run: args (kind, message, errno name of a failed verb or None)."
);

fn xerr(e: CoreXenIbError) -> PyErr {
    XenIbError::new_err((e.kind(), e.to_string(), e.status().map(|s| s.name())))
}

/// 004 Figs 7, 10, 12 (Xen-IB): round-trip time (ps) per size between server A (`config`:
/// gen2-native, gen2-idd, xenib-basic, xenib-bypass) and server B; `mode` "rdma" or "sr";
/// `blocking`: wait for completion events instead of polling.
#[pyfunction]
#[pyo3(signature = (topology_json, config, mode, sizes, iters, blocking=false))]
fn xenib_latency(py: Python<'_>, topology_json: &str, config: &str, mode: &str, sizes: Vec<u64>, iters: u64, blocking: bool) -> PyResult<Vec<(u64, u64)>> {
    let m = devlend_experiments::xenib::Mode::parse(mode).map_err(xerr)?;
    py.detach(|| devlend_experiments::xenib::latency(topology_json, config, m, &sizes, iters, blocking)).map_err(xerr)
}

/// 004 Figs 8, 11 (Xen-IB): unidirectional throughput A to B (bytes/s) per size, `iters`
/// messages with at most `depth` outstanding.
#[pyfunction]
fn xenib_bandwidth(py: Python<'_>, topology_json: &str, config: &str, mode: &str, sizes: Vec<u64>, iters: u64, depth: u64) -> PyResult<Vec<(u64, f64)>> {
    let m = devlend_experiments::xenib::Mode::parse(mode).map_err(xerr)?;
    py.detach(|| devlend_experiments::xenib::bandwidth(topology_json, config, m, &sizes, iters, depth)).map_err(xerr)
}

/// 004 Fig 13 (Xen-IB): registration time (ps) against the number of pages.
#[pyfunction]
fn xenib_registration(py: Python<'_>, topology_json: &str, config: &str, pages: Vec<u64>, reps: u64) -> PyResult<Vec<(u64, u64)>> {
    py.detach(|| devlend_experiments::xenib::registration(topology_json, config, &pages, reps)).map_err(xerr)
}

/// 004 Fig 9 (Xen-IB): the device channel's one-way latency as a guest measures it (ps).
#[pyfunction]
fn xenib_channel_one_way(topology_json: &str) -> PyResult<u64> {
    devlend_experiments::xenib::channel_one_way(topology_json).map_err(xerr)
}

fn topologies<'a>(local: &'a str, vfio: &'a str, lending: &'a str) -> devlend_experiments::xcmp::Topologies<'a> {
    devlend_experiments::xcmp::Topologies { local, vfio, lending }
}

/// Beyond 004 (xcmp): RDMA-write round trip (ps) per size with server A's HCA reached by `access`
/// (native, basic, bypass, vfio, lending); the three testbeds as JSON.
#[pyfunction]
fn xenib_cmp_latency(
    py: Python<'_>,
    local_json: &str,
    vfio_json: &str,
    lending_json: &str,
    access: &str,
    sizes: Vec<u64>,
    iters: u64,
) -> PyResult<Vec<(u64, u64)>> {
    let t = topologies(local_json, vfio_json, lending_json);
    py.detach(|| devlend_experiments::xcmp::latency(&t, access, &sizes, iters)).map_err(xerr)
}

/// Beyond 004 (xcmp): RDMA-write throughput A to B (bytes/s) per size, at most `depth` outstanding.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn xenib_cmp_bandwidth(
    py: Python<'_>,
    local_json: &str,
    vfio_json: &str,
    lending_json: &str,
    access: &str,
    sizes: Vec<u64>,
    iters: u64,
    depth: u64,
) -> PyResult<Vec<(u64, f64)>> {
    let t = topologies(local_json, vfio_json, lending_json);
    py.detach(|| devlend_experiments::xcmp::bandwidth(&t, access, &sizes, iters, depth)).map_err(xerr)
}

/// Beyond 004 (xcmp): what the engine measured on server A's HCA routes for `access`: doorbell
/// store, DMA read round trip and write (ps), streaming read and write (fs per byte).
#[pyfunction]
fn xenib_cmp_costs(py: Python<'_>, local_json: &str, vfio_json: &str, lending_json: &str, access: &str) -> PyResult<std::collections::BTreeMap<String, u64>> {
    let t = topologies(local_json, vfio_json, lending_json);
    let c = py.detach(|| devlend_experiments::xcmp::costs(&t, access)).map_err(xerr)?;
    Ok([
        ("doorbell_ps", c.doorbell_ps),
        ("read_rtt_ps", c.read_rtt_ps),
        ("write_ps", c.write_ps),
        ("read_fs_per_byte", c.read_fs_per_byte),
        ("write_fs_per_byte", c.write_fs_per_byte),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("XenIbError", m.py().get_type::<XenIbError>())?;
    m.add_function(wrap_pyfunction!(xenib_latency, m)?)?;
    m.add_function(wrap_pyfunction!(xenib_bandwidth, m)?)?;
    m.add_function(wrap_pyfunction!(xenib_registration, m)?)?;
    m.add_function(wrap_pyfunction!(xenib_channel_one_way, m)?)?;
    m.add_function(wrap_pyfunction!(xenib_cmp_latency, m)?)?;
    m.add_function(wrap_pyfunction!(xenib_cmp_bandwidth, m)?)?;
    m.add_function(wrap_pyfunction!(xenib_cmp_costs, m)?)?;
    Ok(())
}
