//! Lending to VMs (000 §5, §7.3).

use crate::{steps, FabricError};
use pyo3::prelude::*;

/// D4 (000 §7.3): one GPU-to-GPU transfer by the guest driver of a VM ("VMLoc": VFIO on the
/// lender; "VMRem": mediated pass-through on the remote host): (total ps, steps).
#[pyfunction]
fn vm_gpu_to_gpu(py: Python<'_>, topology_json: &str, scenario: &str, peer: bool, len: u64) -> PyResult<(u64, Vec<(String, u64)>)> {
    use devlend_devices::gpu_bench::Via;
    let via = if peer { Via::Peer } else { Via::Ram };
    let sc = devlend_vm::d4::Scenario::parse(scenario).map_err(FabricError::new_err)?;
    let r = py.detach(|| devlend_vm::d4::gpu_to_gpu(topology_json, sc, via, len));
    r.map(|t| (t.total_ps, steps(t.steps))).map_err(FabricError::new_err)
}

/// D4: the ping-pong round trip in a VM (ps).
#[pyfunction]
fn vm_pingpong(py: Python<'_>, topology_json: &str, scenario: &str, peer: bool) -> PyResult<u64> {
    use devlend_devices::gpu_bench::Via;
    let via = if peer { Via::Peer } else { Via::Ram };
    let sc = devlend_vm::d4::Scenario::parse(scenario).map_err(FabricError::new_err)?;
    py.detach(|| devlend_vm::d4::pingpong(topology_json, sc, via)).map_err(FabricError::new_err)
}

/// D4: the RAM-bounce data path in a VM as programmed by the hypervisor: (hops, roots, NTB crossings).
#[pyfunction]
fn vm_ram_bounce_path(topology_json: &str, scenario: &str) -> PyResult<(usize, usize, usize)> {
    let sc = devlend_vm::d4::Scenario::parse(scenario).map_err(FabricError::new_err)?;
    devlend_vm::d4::ram_bounce_path(topology_json, sc).map_err(FabricError::new_err)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(vm_gpu_to_gpu, m)?)?;
    m.add_function(wrap_pyfunction!(vm_pingpong, m)?)?;
    m.add_function(wrap_pyfunction!(vm_ram_bounce_path, m)?)?;
    Ok(())
}
