//! RDMA through an NTB (003).

use crate::{steps, FabricError};
use pyo3::prelude::*;

/// 003 Figs 8-9: host B puts into host A's buffer with each method ("memcpy", "block", "sgN") and
/// size, data checked on host A: [(method, size, total ps, [(step, ps)])]. `mapping`: "uc" or "wc"
/// for the CPU stores (None: params' [cpu_store] mapping).
#[pyfunction]
#[pyo3(signature = (topology_json, methods, sizes, mapping=None))]
fn rdma_sweep(py: Python<'_>, topology_json: &str, methods: Vec<String>, sizes: Vec<u64>, mapping: Option<String>) -> PyResult<Vec<(String, u64, u64, Vec<(String, u64)>)>> {
    use devlend_rdma::pio::Mapping;
    let mapping = match mapping.as_deref() {
        None => None,
        Some("uc") => Some(Mapping::Uncached),
        Some("wc") => Some(Mapping::WriteCombining),
        Some(m) => return Err(FabricError::new_err(format!("mapping '{m}': expected 'uc' or 'wc'"))),
    };
    let m: Vec<&str> = methods.iter().map(|s| s.as_str()).collect();
    let r = py.detach(|| devlend_rdma::bench::sweep(topology_json, &m, &sizes, mapping));
    r.map(|rows| rows.into_iter().map(|(m, s, t)| (m, s, t.total_ps, steps(t.steps))).collect()).map_err(|e| FabricError::new_err(e.to_string()))
}

/// The analytic limit (bytes/s) of posted writes along the RDMA testbed's DMA path into host A.
#[pyfunction]
fn rdma_link_limit(topology_json: &str) -> PyResult<f64> {
    devlend_rdma::bench::link_limit(topology_json).map_err(|e| FabricError::new_err(e.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rdma_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(rdma_link_limit, m)?)?;
    Ok(())
}
