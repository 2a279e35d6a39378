//! The expansion-chassis VM testbed (000 §7.3): a VM with gpu0 and gpu1 passed through and probed
//! by the unmodified GPU driver in the guest kernel. VMLoc: the VM runs on the lender, the GPUs
//! are passed through with VFIO. VMRem: the VM runs on the remote host, the GPUs come through the
//! mediated path (borrowed when the guest enables bus mastering). Not a figure: the D4-D6
//! procedures (`devlend-experiments`), the attack suite ([`crate::attacks`]) and the interrupt
//! tests build on it.
//!
//! Stated assumptions: the guest has 256 MiB of RAM (the paper does not say; the assumed PXH830
//! windows are 512 MiB, which bounds what a remote VM can map, see `Vmm`), and the K40c's BAR 1
//! is its default 256 MiB (profile `tesla-k40c`; the 16 GiB large-BAR1 profile could not be
//! mapped through a 512 MiB NTB window, so neither NatRem nor VMRem could borrow it).

use crate::error::SetupError;
use crate::vm::VmId;
use crate::vmm::Vmm;
use devlend_devices::gpu::Gpu;
use devlend_drivers::gpu_driver::Driver;
use devlend_host::Cluster;

pub const GUEST_RAM: u64 = 256 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    VmLoc,
    VmRem,
}

impl Scenario {
    pub fn parse(s: &str) -> Result<Scenario, SetupError> {
        match s {
            "VMLoc" => Ok(Scenario::VmLoc),
            "VMRem" => Ok(Scenario::VmRem),
            _ => Err(SetupError::UnknownScenario { given: s.to_string() }),
        }
    }
}

/// The testbed with the GPUs' BAR 1 at the K40c's default size (see the module docs).
pub use devlend_drivers::gpu_run::Bound as GBound;

/// A VM with gpu0 and gpu1 passed through and probed by the guest's driver.
pub struct Testbed {
    pub c: Cluster,
    pub vmm: Vmm,
    pub vm: VmId,
    pub a: GBound,
    pub b: GBound,
}

/// Start the VM for a scenario and let the guest driver probe both GPUs.
pub fn testbed(json: &str, sc: Scenario) -> Result<Testbed, SetupError> {
    let mut c = Cluster::from_json(json).map_err(SetupError::host("building the cluster", ""))?;
    let mut vmm = Vmm::default();
    let host = if sc == Scenario::VmLoc { "lender" } else { "remote" };
    let vm = vmm.create_vm(&mut c, host, "guest", GUEST_RAM).map_err(SetupError::host("creating the VM", ""))?;
    let a = bind(&mut c, &mut vmm, vm, "gpu0", sc == Scenario::VmRem)?;
    let b = bind(&mut c, &mut vmm, vm, "gpu1", sc == Scenario::VmRem)?;
    Ok(Testbed { c, vmm, vm, a, b })
}

/// GPU `name` passed to `vm` (through the mediated parent when `mediated`, else VFIO), its model
/// built and the guest's driver probed on it.
pub(crate) fn bind(c: &mut Cluster, vmm: &mut Vmm, vm: VmId, name: &str, mediated: bool) -> Result<GBound, SetupError> {
    let dev = if mediated {
        vmm.register_mdev(c, name).map_err(SetupError::host("registering with the mediated parent", name))?;
        vmm.assign_mdev(c, vm, name).map_err(SetupError::host("assigning through the mediated parent", name))?
    } else {
        vmm.assign_vfio(c, vm, name).map_err(SetupError::host("passing through with VFIO", name))?
    };
    let func = c.fabric.func_id(name).map_err(|error| SetupError::Fabric { device: name.to_string(), error })?;
    let gpu = Gpu::new(&mut c.fabric, func).map_err(|error| SetupError::Device { device: name.to_string(), error: Box::new(error.into()) })?;
    let mut os = vmm.guest(c, vm).map_err(SetupError::host("entering the guest kernel", name))?;
    let drv = Driver::probe(&mut os, dev).map_err(|error| SetupError::Driver { device: name.to_string(), error })?;
    Ok(GBound { dev, gpu, drv })
}
