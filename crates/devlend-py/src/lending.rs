//! Bare-metal Device Lending runs (000, 001): NVMe reads, GPU copies and ping-pong.

use crate::vm::text;
use crate::{steps, DeviceError, Steps};
use pyo3::prelude::*;

/// A device error becomes `DeviceError(message, kind)` (built inside `detach`: the error may hold
/// a machine's thread error, which is not `Send`).
fn derr(e: devlend_drivers::error::DeviceError) -> PyErr {
    DeviceError::new_err((e.to_string(), e.kind()))
}

/// Read `blocks` 512-byte blocks at each of `lbas` from NVMe drive `device` with the unmodified
/// driver on host `runner` (borrowing the drive when it sits elsewhere), check the data, and time
/// the last read: (total ps, fabric ps, [(step, ps)]).
#[pyfunction]
fn nvme_read(py: Python<'_>, topology_json: &str, runner: &str, device: &str, lbas: Vec<u64>, blocks: u16) -> PyResult<(u64, u64, Steps)> {
    let r = py.detach(|| devlend_experiments::nvme::read_blocks(topology_json, runner, device, &lbas, blocks).map_err(derr))?;
    Ok((r.total_ps, r.fabric_ps, r.steps.into_iter().map(|(w, p)| (w.to_string(), p)).collect()))
}

/// One cudaMemcpy between GPU `device`'s memory and a host buffer, by the GPU driver on `runner`
/// (borrowing the GPU when it sits elsewhere): (total ps, [(step, ps)]). `dtoh`: device to host.
#[pyfunction]
fn gpu_memcpy(py: Python<'_>, topology_json: &str, runner: &str, device: &str, dtoh: bool, len: u64) -> PyResult<(u64, Vec<(String, u64)>)> {
    use devlend_drivers::gpu_run::Dir;
    use devlend_experiments::gpu::memcpy;
    let dir = if dtoh { Dir::DtoH } else { Dir::HtoD };
    let t = py.detach(|| memcpy(topology_json, runner, device, dir, len).map_err(derr))?;
    Ok((t.total_ps, steps(t.steps)))
}

/// One GPU-to-GPU transfer, peer-to-peer or bounced through the runner's RAM: (total ps, steps).
#[pyfunction]
fn gpu_to_gpu(py: Python<'_>, topology_json: &str, runner: &str, src: &str, dst: &str, peer: bool, len: u64) -> PyResult<(u64, Vec<(String, u64)>)> {
    use devlend_drivers::gpu_run::Via;
    use devlend_experiments::gpu::gpu_to_gpu as g2g;
    let via = if peer { Via::Peer } else { Via::Ram };
    let t = py.detach(|| g2g(topology_json, runner, src, dst, via, len).map_err(derr))?;
    Ok((t.total_ps, steps(t.steps)))
}

/// The ping-pong kernel's round trip between GPUs `a` and `b`, counters in GPU memory or RAM (ps).
#[pyfunction]
fn gpu_pingpong(py: Python<'_>, topology_json: &str, runner: &str, a: &str, b: &str, peer: bool) -> PyResult<u64> {
    use devlend_drivers::gpu_run::Via;
    use devlend_experiments::gpu::pingpong;
    let via = if peer { Via::Peer } else { Via::Ram };
    py.detach(|| pingpong(topology_json, runner, a, b, via).map_err(derr))
}

/// D6 (000 §7.5): one host-to-device copy of `len` bytes into gpu0 by the guest driver of a VM
/// ("VMLoc" or "VMRem" on the expansion-chassis testbed): (total ps, steps).
#[pyfunction]
fn vm_gpu_memcpy_htod(py: Python<'_>, topology_json: &str, scenario: &str, len: u64) -> PyResult<(u64, Vec<(String, u64)>)> {
    let sc = devlend_vm::fixtures::Scenario::parse(scenario).map_err(text)?;
    let r = py.detach(|| devlend_experiments::vm::d6::memcpy_htod(topology_json, sc, len).map_err(text));
    r.map(|t| (t.total_ps, steps(t.steps)))
}

/// D5's VM rows: `nvme_read` with the driver in a VM on `runner` (VFIO when the drive is local to
/// it, else the mediated path): (total ps, fabric ps, steps).
#[pyfunction]
fn vm_nvme_read(py: Python<'_>, topology_json: &str, runner: &str, device: &str, lbas: Vec<u64>, blocks: u16) -> PyResult<(u64, u64, Steps)> {
    let r = py.detach(|| devlend_experiments::vm::d5::read_blocks(topology_json, runner, device, &lbas, blocks).map_err(text));
    r.map(|t| (t.total_ps, t.fabric_ps, steps(t.steps)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(nvme_read, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_memcpy, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_to_gpu, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_pingpong, m)?)?;
    m.add_function(wrap_pyfunction!(vm_gpu_memcpy_htod, m)?)?;
    m.add_function(wrap_pyfunction!(vm_nvme_read, m)?)?;
    Ok(())
}
