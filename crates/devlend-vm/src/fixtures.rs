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

use crate::vm::VmId;
use crate::vmm::Vmm;
use devlend_devices::gpu::Gpu;
use devlend_devices::gpu_driver::Driver;
use devlend_host::Cluster;

pub const GUEST_RAM: u64 = 256 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    VmLoc,
    VmRem,
}

impl Scenario {
    pub fn parse(s: &str) -> Result<Scenario, String> {
        match s {
            "VMLoc" => Ok(Scenario::VmLoc),
            "VMRem" => Ok(Scenario::VmRem),
            _ => Err(format!("unknown VM scenario '{s}' (VMLoc or VMRem)")),
        }
    }
}

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The testbed with the GPUs' BAR 1 at the K40c's default size (see the module docs).
pub use devlend_devices::gpu_run::Bound as GBound;

/// A VM with gpu0 and gpu1 passed through and probed by the guest's driver.
pub struct Testbed {
    pub c: Cluster,
    pub vmm: Vmm,
    pub vm: VmId,
    pub a: GBound,
    pub b: GBound,
}

/// Start the VM for a scenario and let the guest driver probe both GPUs.
pub fn testbed(json: &str, sc: Scenario) -> Result<Testbed, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let mut vmm = Vmm::default();
    let host = if sc == Scenario::VmLoc { "lender" } else { "remote" };
    let vm = vmm.create_vm(&mut c, host, "guest", GUEST_RAM).map_err(s)?;
    let bind = |c: &mut Cluster, vmm: &mut Vmm, name: &str| -> Result<GBound, String> {
        let dev = match sc {
            Scenario::VmLoc => vmm.assign_vfio(c, vm, name).map_err(s)?,
            Scenario::VmRem => {
                vmm.register_mdev(c, name).map_err(s)?;
                vmm.assign_mdev(c, vm, name).map_err(s)?
            }
        };
        let func = c.fabric.func_id(name).map_err(s)?;
        let gpu = Gpu::new(&mut c.fabric, func)?;
        let drv = Driver::probe(&mut vmm.guest(c, vm).map_err(s)?, dev).map_err(s)?;
        Ok(GBound { dev, gpu, drv })
    };
    let a = bind(&mut c, &mut vmm, "gpu0")?;
    let b = bind(&mut c, &mut vmm, "gpu1")?;
    Ok(Testbed { c, vmm, vm, a, b })
}
