//! The fio-style NVMe workload (devlend-workloads' `fio_job`), local or through Device Lending.

use crate::{FabricError, NvmeStatusError};
use devlend_devices::nvme_driver::NvmeError;
use devlend_workloads::fio_job::{fio as run, FioError, FioResult, Job, Rw};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// An NVMe status becomes `NvmeStatusError(message, opcode, lba, status)`; anything else `FabricError`.
fn err(e: FioError) -> PyErr {
    match e.nvme() {
        Some(NvmeError::Status { opcode, lba, status }) => NvmeStatusError::new_err((e.to_string(), *opcode, *lba, *status)),
        _ => FabricError::new_err(e.to_string()),
    }
}

fn to_dict<'py>(py: Python<'py>, r: &FioResult) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("ios", r.ios)?;
    d.set_item("elapsed_ps", r.elapsed_ps)?;
    d.set_item("iops", r.iops)?;
    d.set_item("bandwidth_Bps", r.bandwidth)?;
    d.set_item("lat_mean_ps", r.lat_mean_ps)?;
    d.set_item("lat_p50_ps", r.lat_p50_ps)?;
    d.set_item("lat_p99_ps", r.lat_p99_ps)?;
    d.set_item("verified", r.verified)?;
    d.set_item("mismatches", r.mismatches)?;
    Ok(d)
}

/// Run `numjobs` jobs on host `runner` (borrowing `device` when it sits elsewhere), each keeping
/// `iodepth` 4 KiB random reads or writes (`rw`: "randread" or "randwrite") in flight on its own
/// queue pair for `ios` commands; `verify` reads written blocks back and compares checksums;
/// `size_blocks` limits the span (fio's size). Returns a dict of IOPS, bandwidth and latencies.
#[pyfunction]
#[pyo3(signature = (topology_json, runner, device, rw, iodepth, numjobs, ios, verify=false, size_blocks=None))]
#[allow(clippy::too_many_arguments)]
fn fio<'py>(
    py: Python<'py>,
    topology_json: &str,
    runner: &str,
    device: &str,
    rw: &str,
    iodepth: u32,
    numjobs: u16,
    ios: u32,
    verify: bool,
    size_blocks: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let rw = Rw::parse(rw).map_err(err)?;
    let job = Job { rw, iodepth, numjobs, ios, verify, size_blocks };
    let r = py.detach(|| run(topology_json, runner, device, job).map_err(err))?;
    to_dict(py, &r)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fio, m)?)?;
    Ok(())
}
