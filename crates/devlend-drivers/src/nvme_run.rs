//! An NVMe drive on one machine: the cluster with the drive ready for a host (its own, or
//! borrowed when it sits elsewhere) and the controller as an actor on the machine's clock, for
//! the driver to run on a thread of that host (fio jobs in devlend-workloads, the papers' block reads in
//! devlend-experiments).

use crate::error::{DResult, DeviceError};
use devlend_devices::nvme::{Controller, Media};
use devlend_engine::machine::Machine;
use devlend_host::{Cluster, DevId};
use std::cell::RefCell;
use std::rc::Rc;

/// A machine with the drive's controller on it, the runner's host id and its handle of the drive.
pub type Ready = (Machine<Cluster>, Rc<RefCell<Controller>>, u16, DevId);

/// A cluster with drive `device` ready for host `runner` (borrowed when it sits elsewhere), a
/// machine on it with the controller, and the runner's host id and device handle. The drive
/// holds `blocks` blocks, or with `None` its media's capacity (profile and params).
pub fn machine(json: &str, runner: &str, device: &str, blocks: Option<u64>) -> DResult<Ready> {
    let c = Cluster::from_json(json).map_err(DeviceError::host("topology", device))?;
    let mut m = Machine::new(c);
    let (ctrl, host, dev) = attach(&mut m, runner, device, blocks)?;
    Ok((m, ctrl, host, dev))
}

/// Drive `device` ready for host `runner` on a machine that already runs (several hosts' drives
/// on one clock): found, or borrowed when it sits elsewhere, its controller added to `m`.
pub fn attach(m: &mut Machine<Cluster>, runner: &str, device: &str, blocks: Option<u64>) -> DResult<(Rc<RefCell<Controller>>, u16, DevId)> {
    let (ctrl, host, dev) = {
        let mut w = m.world();
        let c = &mut *w;
        let func = c.fabric.func_id(device).map_err(DeviceError::fabric(device))?;
        let dev = crate::service::attach(c, runner, device)?;
        let media = Media::of_device(&c.fabric, device)?;
        let ctrl = Rc::new(RefCell::new(Controller::new(&mut c.fabric, func, blocks.unwrap_or(media.blocks()), media)));
        let host = c.fabric.host_id(runner).map_err(DeviceError::fabric(runner))?;
        (ctrl, host, dev)
    };
    let func = ctrl.borrow().func;
    m.add_device(func, ctrl.clone());
    Ok((ctrl, host, dev))
}
