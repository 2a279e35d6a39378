//! `uml_serve`: devlend-uml's device server for one real Linux guest, run without the GIL.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::time::Duration;

pyo3::create_exception!(_core, UmlError, pyo3::exceptions::PyException);

/// Serve drive `device` (borrowed when it sits elsewhere than `host`) to the UML guest of host
/// `host` on unix socket `socket`, and be its time-travel controller on `time_socket` (the guest
/// runs with `time-travel=ext:TIME_SOCKET`: the engine is its clock), until the guest
/// disconnects; `connect_s` bounds the wait for it. Returns the session's summary: simulated
/// time, NVMe commands, accesses, interrupts, messages.
#[pyfunction]
#[pyo3(signature = (topology_json, host, device, socket, time_socket, blocks, connect_s=60.0, faults=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn uml_serve<'py>(
    py: Python<'py>,
    topology_json: &str,
    host: &str,
    device: &str,
    socket: &str,
    time_socket: &str,
    blocks: u64,
    connect_s: f64,
    faults: Vec<(u64, String, String)>,
) -> PyResult<Bound<'py, PyDict>> {
    // The error is rendered before the GIL is taken back: the model's errors it carries are not Send.
    let r = py.detach(|| {
        let served = devlend_uml::NvmeDevice::new(topology_json, host, device, blocks)
            .and_then(|dev| devlend_uml::serve_with_faults(socket, time_socket, dev, Duration::from_secs_f64(connect_s), &faults));
        served.map_err(|e| e.to_string())
    });
    let s = r.map_err(PyErr::new::<UmlError, _>)?;
    let d = PyDict::new(py);
    d.set_item("simulated_ps", s.simulated_ps)?;
    d.set_item("commands", s.commands)?;
    d.set_item("cfg_reads", s.counts.cfg_reads)?;
    d.set_item("cfg_writes", s.counts.cfg_writes)?;
    d.set_item("mmio_reads", s.counts.mmio_reads)?;
    d.set_item("mmio_writes", s.counts.mmio_writes)?;
    d.set_item("msis", s.counts.msis)?;
    d.set_item("read_faults", s.counts.read_faults)?;
    d.set_item("guest_ns", s.guest_ns)?;
    d.set_item("write_faults", s.write_faults)?;
    let struck: Vec<(&str, String, bool)> = s.struck.iter().map(|f| (f.kind, f.target.clone(), f.failed)).collect();
    d.set_item("faults_struck", struck)?;
    d.set_item("unplugged_ns", s.unplugged_ns)?;
    d.set_item("time_messages", s.messages.time)?;
    d.set_item("vhost_messages", s.messages.vhost)?;
    d.set_item("kicks", s.messages.kicks)?;
    d.set_item("calls", s.messages.calls)?;
    d.set_item("waits", s.messages.waits)?;
    d.set_item("fabric_events", s.counts.faults.clone())?;
    d.set_item("wall_s", s.wall.as_secs_f64())?;
    Ok(d)
}

/// Be the time-travel controller of several UML guests of the topology, one on each of
/// `time_sockets` (each guest runs with `time-travel=ext:SOCKET`), the topology's engine their
/// one clock, until every guest disconnects; `connect_s` bounds the wait for them. Returns the
/// simulated time (ps) and, per guest, its final time, time messages and WAITs.
#[pyfunction]
#[pyo3(signature = (topology_json, time_sockets, connect_s=60.0))]
fn uml_control<'py>(py: Python<'py>, topology_json: &str, time_sockets: Vec<String>, connect_s: f64) -> PyResult<Bound<'py, PyDict>> {
    let r = py.detach(|| {
        let cluster = devlend_host::Cluster::from_json(topology_json).map_err(|e| format!("the topology: {e}"))?;
        let machine = devlend_engine::machine::Machine::new(cluster);
        devlend_uml::control(&time_sockets, machine, Duration::from_secs_f64(connect_s)).map_err(|e| e.to_string())
    });
    let s = r.map_err(PyErr::new::<UmlError, _>)?;
    let d = PyDict::new(py);
    d.set_item("simulated_ps", s.simulated_ps)?;
    let guests: Vec<(u64, u64, u64)> = s.guests.iter().map(|g| (g.guest_ns, g.time_messages, g.waits)).collect();
    d.set_item("guests", guests)?;
    d.set_item("wall_s", s.wall.as_secs_f64())?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(uml_serve, m)?)?;
    m.add_function(wrap_pyfunction!(uml_control, m)?)?;
    m.add("UmlError", m.py().get_type::<UmlError>())?;
    Ok(())
}
