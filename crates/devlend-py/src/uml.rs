//! `uml_serve`: devlend-uml's device server for one real Linux guest, run without the GIL.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
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
        let served = devlend_uml::Engine::from_json(topology_json).and_then(|mut engine| {
            let dev = devlend_uml::PciFunction::nvme(&mut engine, host, device, blocks)?;
            devlend_uml::serve_with_faults(socket, time_socket, engine, dev, Duration::from_secs_f64(connect_s), &faults)
        });
        served.map_err(|e| e.to_string())
    });
    let s = r.map_err(PyErr::new::<UmlError, _>)?;
    let d = PyDict::new(py);
    d.set_item("simulated_ps", s.simulated_ps)?;
    d.set_item("commands", s.commands)?;
    set_counts(&d, &s.counts)?;
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
    d.set_item("fabric_events", s.fabric_events.clone())?;
    d.set_item("wall_s", s.wall.as_secs_f64())?;
    Ok(d)
}

/// Be the time-travel controller of several UML guests of the topology and their devices, the
/// topology's engine their one clock, until every guest disconnects. `guests`: per guest, its
/// host, its time socket (the guest runs with `time-travel=ext:SOCKET`) and its devices as
/// (socket, kind, name): kind "nvme" (a drive of `blocks` blocks, borrowed when it sits
/// elsewhere) or "xeon-ntb" (the host's NTB adapter as an Intel Xeon gen1 NTB). `connect_s`
/// bounds the wait for them. Returns the simulated time (ps), per guest its final time, time
/// messages, WAITs and devices, and the NTB registers guests touched that are not modelled.
/// `faults`: (at ns, kind, target) injected on the engine at those simulated times.
#[pyfunction]
#[pyo3(signature = (topology_json, guests, blocks=1 << 21, connect_s=60.0, faults=Vec::new()))]
fn uml_control<'py>(
    py: Python<'py>,
    topology_json: &str,
    guests: Vec<GuestArg>,
    blocks: u64,
    connect_s: f64,
    faults: Vec<(u64, String, String)>,
) -> PyResult<Bound<'py, PyDict>> {
    let r = py.detach(|| {
        let run = || -> devlend_uml::UmlResult<devlend_uml::RunSummary> {
            let mut engine = devlend_uml::Engine::from_json(topology_json)?;
            let mut specs = Vec::new();
            for (host, time_socket, devices) in guests {
                let mut devs = Vec::new();
                for (sock, kind, name) in devices {
                    let f = match kind.as_str() {
                        "nvme" => devlend_uml::PciFunction::nvme(&mut engine, &host, &name, blocks)?,
                        "xeon-ntb" => devlend_uml::PciFunction::xeon_ntb(&mut engine, &host, &name)?,
                        other => return Err(devlend_uml::UmlError::UnknownKind { kind: other.to_string(), device: name }),
                    };
                    devs.push((sock, f));
                }
                specs.push(devlend_uml::GuestSpec { time_socket, devices: devs });
            }
            for (at, kind, target) in &faults {
                engine.fault_at(at.saturating_mul(1000), kind, target)?;
            }
            devlend_uml::control(specs, engine, Duration::from_secs_f64(connect_s))
        };
        run().map_err(|e| e.to_string())
    });
    let s = r.map_err(PyErr::new::<UmlError, _>)?;
    let d = PyDict::new(py);
    d.set_item("simulated_ps", s.simulated_ps)?;
    let guests = PyList::empty(py);
    for g in &s.guests {
        let gd = PyDict::new(py);
        gd.set_item("guest_ns", g.guest_ns)?;
        gd.set_item("time_messages", g.time_messages)?;
        gd.set_item("waits", g.waits)?;
        let devs = PyList::empty(py);
        for dv in &g.devices {
            let dd = PyDict::new(py);
            dd.set_item("commands", dv.commands)?;
            set_counts(&dd, &dv.counts)?;
            dd.set_item("write_faults", dv.write_faults)?;
            dd.set_item("kicks", dv.traffic.kicks)?;
            dd.set_item("calls", dv.traffic.calls)?;
            devs.append(dd)?;
        }
        gd.set_item("devices", devs)?;
        guests.append(gd)?;
    }
    d.set_item("guests", guests)?;
    let unimpl: Vec<(String, &str, u64, usize, &str)> = s
        .unimplemented
        .iter()
        .map(|u| (u.ntb.clone(), u.space, u.offset, u.len, if u.access == devlend_devices::ntb_xeon::Access::Read { "read" } else { "write" }))
        .collect();
    d.set_item("unimplemented_registers", unimpl)?;
    d.set_item("fabric_events", s.fabric_events.clone())?;
    d.set_item("wall_s", s.wall.as_secs_f64())?;
    Ok(d)
}

/// A guest for `uml_control`: host, time socket, devices (socket, kind, name).
type GuestArg = (String, String, Vec<(String, String, String)>);

/// A device's access counts into `d`, under the same keys for one guest and several.
fn set_counts(d: &Bound<'_, PyDict>, c: &devlend_uml::pcidev::Counts) -> PyResult<()> {
    d.set_item("cfg_reads", c.cfg_reads)?;
    d.set_item("cfg_writes", c.cfg_writes)?;
    d.set_item("mmio_reads", c.mmio_reads)?;
    d.set_item("mmio_writes", c.mmio_writes)?;
    d.set_item("msis", c.msis)?;
    d.set_item("read_faults", c.read_faults)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(uml_serve, m)?)?;
    m.add_function(wrap_pyfunction!(uml_control, m)?)?;
    m.add("UmlError", m.py().get_type::<UmlError>())?;
    Ok(())
}
