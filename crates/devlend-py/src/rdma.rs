//! RDMA through an NTB (003).

use crate::{steps, FabricError, Steps};
use pyo3::prelude::*;

/// 003 Figs 8-9: host B puts into host A's buffer with each method ("memcpy", "block", "sgN") and
/// size, data checked on host A: [(method, size, total ps, [(step, ps)])]. `mapping`: "uc" or "wc"
/// for the CPU stores (None: params' [cpu_store] mapping).
#[pyfunction]
#[pyo3(signature = (topology_json, methods, sizes, mapping=None))]
fn rdma_sweep(py: Python<'_>, topology_json: &str, methods: Vec<String>, sizes: Vec<u64>, mapping: Option<String>) -> PyResult<Vec<(String, u64, u64, Steps)>> {
    use devlend_rdma::pio::Mapping;
    let mapping = match mapping.as_deref() {
        None => None,
        Some("uc") => Some(Mapping::Uncached),
        Some("wc") => Some(Mapping::WriteCombining),
        Some(m) => return Err(FabricError::new_err(format!("mapping '{m}': expected 'uc' or 'wc'"))),
    };
    let m: Vec<&str> = methods.iter().map(|s| s.as_str()).collect();
    let r = py.detach(|| devlend_experiments::rdma::sweep(topology_json, &m, &sizes, mapping));
    r.map(|rows| rows.into_iter().map(|(m, s, t)| (m, s, t.total_ps, steps(t.steps))).collect()).map_err(|e| FabricError::new_err(e.to_string()))
}

/// The analytic limit (bytes/s) of posted writes along the RDMA testbed's DMA path into host A.
#[pyfunction]
fn rdma_link_limit(topology_json: &str) -> PyResult<f64> {
    devlend_experiments::rdma::link_limit(topology_json).map_err(|e| FabricError::new_err(e.to_string()))
}

/// ntb_perf (Linux drivers/ntb/test semantics) from host `runner` into host `peer`'s window over
/// the NTB joining them: `threads_count` workers each copy 2^`total_order` bytes in chunks of
/// 2^`chunk_order` with CPU stores (WC) or DMA, one channel each; `max_mw_size` caps the window.
/// `channels`/`outstanding_reads`: the DMA engine's (None: params' [ntb_dma]).
/// Returns (bytes copied, total ps, busiest link ps, [(bytes, ps) per thread]).
type PerfRow = (u64, u64, u64, Vec<(u64, u64)>);

#[pyfunction]
#[pyo3(signature = (topology_json, runner, peer, chunk_order, total_order, use_dma, threads_count=1, max_mw_size=None, channels=None, outstanding_reads=None))]
#[allow(clippy::too_many_arguments)]
fn rdma_ntb_perf(
    py: Python<'_>,
    topology_json: &str,
    runner: &str,
    peer: &str,
    chunk_order: u32,
    total_order: u32,
    use_dma: bool,
    threads_count: u32,
    max_mw_size: Option<u64>,
    channels: Option<u32>,
    outstanding_reads: Option<u64>,
) -> PyResult<PerfRow> {
    let spec = devlend_experiments::rdma::PerfSpec { use_dma, threads_count, chunk_order, total_order, max_mw_size, channels, outstanding_reads };
    let r = py.detach(|| devlend_experiments::rdma::ntb_perf(topology_json, runner, peer, &spec));
    r.map(|p| (p.copied, p.total_ps, p.link_ps, p.threads)).map_err(|e| FabricError::new_err(e.to_string()))
}

/// ntb_pingpong (Linux drivers/ntb/test semantics) between host `a` (it rings first) and host `b`
/// over the NTB joining them: `pings` doorbells, the mask starting at `init_db` and shifted each
/// ping, `delay_ns` before ringing back. Returns (final counter, doorbell bits per ping,
/// round-trip ps, total ps, [(step, ps)] of the first ping).
#[pyfunction]
#[pyo3(signature = (topology_json, a, b, pings, init_db=1, delay_ns=0))]
fn rdma_ntb_pingpong(
    py: Python<'_>,
    topology_json: &str,
    a: &str,
    b: &str,
    pings: u32,
    init_db: u64,
    delay_ns: u64,
) -> PyResult<(u32, Vec<u64>, u64, u64, Steps)> {
    let r = py.detach(|| devlend_experiments::rdma::ntb_pingpong(topology_json, a, b, pings, init_db, delay_ns.saturating_mul(1000)));
    r.map(|p| (p.counter, p.bits, p.round_trip_ps, p.total_ps, steps(p.steps))).map_err(|e| FabricError::new_err(e.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rdma_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(rdma_link_limit, m)?)?;
    m.add_function(wrap_pyfunction!(rdma_ntb_perf, m)?)?;
    m.add_function(wrap_pyfunction!(rdma_ntb_pingpong, m)?)?;
    Ok(())
}
