//! Lending to VMs (000 §5, §7.3).

use crate::{steps, FabricError};
use pyo3::prelude::*;

/// A Rust error as the `FabricError` its message makes (inside `py.detach`: the typed errors of
/// a run on the machine are not `Send`).
pub(crate) fn text(e: impl std::fmt::Display) -> PyErr {
    FabricError::new_err(e.to_string())
}

/// D4 (000 §7.3): one GPU-to-GPU transfer by the guest driver of a VM ("VMLoc": VFIO on the
/// lender; "VMRem": mediated pass-through on the remote host): (total ps, steps).
#[pyfunction]
fn vm_gpu_to_gpu(py: Python<'_>, topology_json: &str, scenario: &str, peer: bool, len: u64) -> PyResult<(u64, Vec<(String, u64)>)> {
    use devlend_drivers::gpu_run::Via;
    let via = if peer { Via::Peer } else { Via::Ram };
    let sc = devlend_vm::fixtures::Scenario::parse(scenario).map_err(text)?;
    let r = py.detach(|| devlend_experiments::vm::d4::gpu_to_gpu(topology_json, sc, via, len).map_err(text));
    r.map(|t| (t.total_ps, steps(t.steps)))
}

/// D4: the ping-pong round trip in a VM (ps).
#[pyfunction]
fn vm_pingpong(py: Python<'_>, topology_json: &str, scenario: &str, peer: bool) -> PyResult<u64> {
    use devlend_drivers::gpu_run::Via;
    let via = if peer { Via::Peer } else { Via::Ram };
    let sc = devlend_vm::fixtures::Scenario::parse(scenario).map_err(text)?;
    py.detach(|| devlend_experiments::vm::d4::pingpong(topology_json, sc, via).map_err(text))
}

/// D4: the RAM-bounce data path in a VM as programmed by the hypervisor: (hops, roots, NTB crossings).
#[pyfunction]
fn vm_ram_bounce_path(topology_json: &str, scenario: &str) -> PyResult<(usize, usize, usize)> {
    let sc = devlend_vm::fixtures::Scenario::parse(scenario).map_err(text)?;
    devlend_experiments::vm::d4::ram_bounce_path(topology_json, sc).map_err(text)
}

/// The VM attack suite's case names (`devlend_vm::attacks`).
#[pyfunction]
fn vm_attack_cases() -> Vec<(String, String)> {
    devlend_vm::attacks::CASES.iter().map(|c| (c.0.to_string(), c.1.to_string())).collect()
}

/// Run one attack case on a topology: {case, blocked_by, record}; a case that was not blocked,
/// recorded and memory-neutral raises.
#[pyfunction]
fn vm_attack(py: Python<'_>, topology_json: &str, name: &str) -> PyResult<std::collections::BTreeMap<String, String>> {
    let o = py.detach(|| devlend_vm::attacks::run(name, topology_json).map_err(text))?;
    Ok([("case", o.case.to_string()), ("blocked_by", o.blocked_by.to_string()), ("record", o.record)].into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// One device interrupt delivered to the guest of a D4 VM ("VMLoc"/"VMRem"), MSI-X or INTx:
/// its modelled latency as (total ps, steps).
#[pyfunction]
fn vm_irq_latency(py: Python<'_>, topology_json: &str, scenario: &str, intx: bool) -> PyResult<(u64, Vec<(String, u64)>)> {
    use devlend_vm::irq::Src;
    let sc = devlend_vm::fixtures::Scenario::parse(scenario).map_err(text)?;
    let src = if intx { Src::Intx } else { Src::Msix(0) };
    let steps = py.detach(|| devlend_experiments::vm::d4::irq_latency(topology_json, sc, src).map_err(text))?;
    Ok((steps.iter().map(|s| s.1).sum(), steps))
}

/// D6's training epoch on one machine (`devlend_experiments::vm::epoch`): the first `steps` steps
/// of set-up `scenario`: (step end times, busy ps of nvme, cpu, input, compute, exchange).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn d6_epoch(
    py: Python<'_>,
    topology_json: &str,
    scenario: &str,
    steps: u32,
    reads: u32,
    read_blocks: u16,
    decode_ps: u64,
    input_bytes: u64,
    compute_ps: u64,
    exchange_bytes: u64,
    max_queue: u32,
) -> PyResult<(Vec<u64>, [u64; 5])> {
    use devlend_experiments::vm::epoch::{epoch, EpochSpec};
    let spec = EpochSpec { steps, reads, read_blocks, decode_ps, input_bytes, compute_ps, exchange_bytes, max_queue };
    let r = py.detach(|| epoch(topology_json, scenario, spec).map_err(text))?;
    Ok((r.step_end_ps, [r.nvme_ps, r.cpu_ps, r.input_ps, r.compute_ps, r.exchange_ps]))
}

/// The `vms` section of a topology's JSON.
pub(crate) fn vm_specs(topology_json: &str) -> PyResult<Vec<devlend_fabric::spec::VmSpec>> {
    let spec: devlend_fabric::spec::TopologySpec = serde_json::from_str(topology_json).map_err(|e| crate::SpecError::new_err(("", e.to_string())))?;
    Ok(spec.vms)
}

/// Start a topology's VMs on a fresh cluster, as a scenario would, and shut them down: a VM the
/// hypervisor refuses is a `SpecError` (pointer into `vms`, message).
#[pyfunction]
fn vms_check(topology_json: &str) -> PyResult<Vec<(String, String)>> {
    let mut c = devlend_host::Cluster::from_json(topology_json).map_err(|e| FabricError::new_err(e.to_string()))?;
    let mut vmm = devlend_vm::Vmm::default();
    let vms = devlend_vm::describe::start(&mut c, &mut vmm, &vm_specs(topology_json)?).map_err(|e| crate::SpecError::new_err((e.path, e.fault.to_string())))?;
    let out = vms.iter().map(|(n, id)| (n.clone(), vmm.vm(*id).map(|v| c.fabric.host(v.host).name.clone()).unwrap_or_default())).collect();
    for (_, id) in vms {
        vmm.shutdown(&mut c, id).map_err(|e| FabricError::new_err(e.to_string()))?;
    }
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(vms_check, m)?)?;
    m.add_function(wrap_pyfunction!(vm_gpu_to_gpu, m)?)?;
    m.add_function(wrap_pyfunction!(vm_pingpong, m)?)?;
    m.add_function(wrap_pyfunction!(vm_ram_bounce_path, m)?)?;
    m.add_function(wrap_pyfunction!(vm_attack_cases, m)?)?;
    m.add_function(wrap_pyfunction!(vm_attack, m)?)?;
    m.add_function(wrap_pyfunction!(vm_irq_latency, m)?)?;
    m.add_function(wrap_pyfunction!(d6_epoch, m)?)?;
    Ok(())
}
