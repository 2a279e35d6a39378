//! The fio-style NVMe workload (devlend-workloads' `fio_job`), local or through Device Lending.

use crate::{FabricError, NvmeStatusError};
use devlend_drivers::nvme_driver::NvmeError;
use devlend_workloads::fio_job::{fio as run, fio_threads, FioError, FioResult, Job, JobOut, JobSpec, Rw};
use pyo3::exceptions::PyValueError;
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

/// A job thread from its dict (the keys are `JobSpec`'s fields; python/devlend/fio/run.py builds them).
pub(crate) fn spec(d: &Bound<'_, PyDict>) -> PyResult<JobSpec> {
    fn get<'py, T: pyo3::conversion::FromPyObjectOwned<'py>>(d: &Bound<'py, PyDict>, k: &str) -> PyResult<T> {
        d.get_item(k)?.ok_or_else(|| PyValueError::new_err(format!("fio job thread: missing {k}")))?.extract().map_err(Into::into)
    }
    let rw: String = get(d, "rw")?;
    Ok(JobSpec {
        rw: Rw::parse(&rw).map_err(err)?,
        rwmixread: get(d, "rwmixread")?,
        bssplit: get(d, "bssplit")?,
        iodepth: get(d, "iodepth")?,
        offset: get(d, "offset")?,
        size: get(d, "size")?,
        io_limit: get(d, "io_limit")?,
        ios: get(d, "ios")?,
        runtime_ps: get(d, "runtime_ps")?,
        time_based: get(d, "time_based")?,
        startdelay_ps: get(d, "startdelay_ps")?,
        thinktime_ps: get(d, "thinktime_ps")?,
        rate_iops: get(d, "rate_iops")?,
        randommap: get(d, "randommap")?,
        seed: get(d, "seed")?,
        group: get(d, "group")?,
        verify: false,
    })
}

fn out_dict<'py>(py: Python<'py>, o: &JobOut) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("start_ps", o.start)?;
    d.set_item("end_ps", o.end)?;
    d.set_item("at_ps", o.ios.iter().map(|i| i.at_ps).collect::<Vec<_>>())?;
    d.set_item("slat_ps", o.ios.iter().map(|i| i.slat_ps).collect::<Vec<_>>())?;
    d.set_item("clat_ps", o.ios.iter().map(|i| i.clat_ps).collect::<Vec<_>>())?;
    d.set_item("bytes", o.ios.iter().map(|i| i.bytes).collect::<Vec<_>>())?;
    d.set_item("write", o.ios.iter().map(|i| i.write).collect::<Vec<_>>())?;
    Ok(d)
}

/// Run a job file's threads (numjobs expanded; each a dict of `JobSpec`'s fields) with the driver
/// on host `runner`, borrowing `device` when it sits elsewhere. Returns, per thread, when it
/// started and ended and every I/O it completed (start, slat, clat in ps, bytes, write).
#[pyfunction]
fn fio_jobs<'py>(py: Python<'py>, topology_json: &str, runner: &str, device: &str, threads: Vec<Bound<'py, PyDict>>) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let specs = threads.iter().map(spec).collect::<PyResult<Vec<_>>>()?;
    let (json, runner, device) = (topology_json.to_string(), runner.to_string(), device.to_string());
    let outs = py.detach(move || fio_threads(&json, &runner, &device, specs).map(|r| r.outputs()).map_err(err))?;
    outs.iter().map(|(_, o)| out_dict(py, o)).collect()
}

/// The capacity in bytes of NVMe drive `device` of a topology: its profile's, or what the
/// topology's `params` sets (`devices.NAME.capacity`); 8 GiB for a profile that gives none.
#[pyfunction]
fn nvme_capacity(topology_json: &str, device: &str) -> PyResult<u64> {
    let c = devlend_host::Cluster::from_json(topology_json).map_err(|e| FabricError::new_err(e.to_string()))?;
    devlend_devices::nvme::Media::of_device(&c.fabric, device).map(|m| m.capacity).map_err(|e| FabricError::new_err(e.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fio, m)?)?;
    m.add_function(wrap_pyfunction!(fio_jobs, m)?)?;
    m.add_function(wrap_pyfunction!(nvme_capacity, m)?)?;
    m.add("FIO_DEFAULT_CAPACITY", devlend_devices::nvme::DEFAULT_CAPACITY)?;
    Ok(())
}
