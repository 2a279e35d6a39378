//! One trait per service a device type serves (`registry::Serves`), so that a workload is
//! written against the service and not a device type: [`block`] (block I/O: NVMe's driver, for
//! fio) and [`copy`] (DMA copies between host and device memory: the GPU's driver, for
//! `gpu_copy`). The registry keeps, beside each kind, the function that makes its device and
//! driver ready for a service (`registry::block_io`, `registry::device_copy`); a workload looks
//! the device's kind up and never names the type, so a new type that serves block I/O or copies
//! is driven by the existing workloads unchanged (the test-only device type of devlend-workloads'
//! `tests/it/service.rs` and `service_copy.rs` is: a RAM disk that `fio` drives, a copy engine
//! that `gpu_copy` drives). The drivers stay written against `devlend_host::Os`; a service call
//! reaches them through [`kernel::DynOs`].
//!
//! Not behind a trait (they drive what only one type has, and stay written against it): the
//! GPU ping-pong (the GPU model's kernel, its registers and records), the staged and
//! asynchronous GPU copies of D1-D3, D4 and D6 (`gpu_run::staged`, several copy engines), D5's
//! block reads, native and in a VM (devlend-experiments' `nvme`, `vm/d5.rs`: the controller's
//! preloaded data and trace), and the real-Linux device server (devlend-uml's `pcidev`: Linux's
//! own NVMe driver). Not moved yet: D6's epoch (`vm/epoch.rs`: a drive of its own size,
//! peer-to-peer GPU copies).

pub mod block;
pub mod copy;
pub mod kernel;

use crate::error::{DResult, DeviceError};
use devlend_host::{Cluster, DevId};

/// The runner's handle of `device`: its own, or borrowed from the host it sits in.
pub fn attach(c: &mut Cluster, runner: &str, device: &str) -> DResult<DevId> {
    let func = c.fabric.func_id(device).map_err(DeviceError::fabric(device))?;
    let owner = c.fabric.host(c.fabric.func_host(func)).name.clone();
    if owner == runner {
        c.os(runner).map_err(DeviceError::host("host", device))?.find(device).map_err(DeviceError::host("find", device))
    } else {
        c.borrow(runner, device).map_err(DeviceError::host("borrow", device))
    }
}
