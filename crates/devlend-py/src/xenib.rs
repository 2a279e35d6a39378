//! Xen-IB split driver and bypass (004).

use crate::FabricError;
use pyo3::prelude::*;

/// 004 Figs 7, 10, 12 (Xen-IB): round-trip time (ps) per size between server A (`config`:
/// gen2-native, gen2-idd, xenib-basic, xenib-bypass) and server B; `mode` "rdma" or "sr";
/// `blocking`: wait for completion events instead of polling.
#[pyfunction]
#[pyo3(signature = (topology_json, config, mode, sizes, iters, blocking=false))]
fn xenib_latency(py: Python<'_>, topology_json: &str, config: &str, mode: &str, sizes: Vec<u64>, iters: u64, blocking: bool) -> PyResult<Vec<(u64, u64)>> {
    let m = devlend_xenib::bench::Mode::parse(mode).map_err(FabricError::new_err)?;
    py.detach(|| devlend_xenib::bench::latency(topology_json, config, m, &sizes, iters, blocking)).map_err(FabricError::new_err)
}

/// 004 Figs 8, 11 (Xen-IB): unidirectional throughput A to B (bytes/s) per size, `iters`
/// messages with at most `depth` outstanding.
#[pyfunction]
fn xenib_bandwidth(py: Python<'_>, topology_json: &str, config: &str, mode: &str, sizes: Vec<u64>, iters: u64, depth: u64) -> PyResult<Vec<(u64, f64)>> {
    let m = devlend_xenib::bench::Mode::parse(mode).map_err(FabricError::new_err)?;
    py.detach(|| devlend_xenib::bench::bandwidth(topology_json, config, m, &sizes, iters, depth)).map_err(FabricError::new_err)
}

/// 004 Fig 13 (Xen-IB): registration time (ps) against the number of pages.
#[pyfunction]
fn xenib_registration(py: Python<'_>, topology_json: &str, config: &str, pages: Vec<u64>, reps: u64) -> PyResult<Vec<(u64, u64)>> {
    py.detach(|| devlend_xenib::bench::registration(topology_json, config, &pages, reps)).map_err(FabricError::new_err)
}

/// 004 Fig 9 (Xen-IB): the device channel's one-way latency as a guest measures it (ps).
#[pyfunction]
fn xenib_channel_one_way(topology_json: &str) -> PyResult<u64> {
    devlend_xenib::bench::channel_one_way(topology_json).map_err(FabricError::new_err)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(xenib_latency, m)?)?;
    m.add_function(wrap_pyfunction!(xenib_bandwidth, m)?)?;
    m.add_function(wrap_pyfunction!(xenib_registration, m)?)?;
    m.add_function(wrap_pyfunction!(xenib_channel_one_way, m)?)?;
    Ok(())
}
