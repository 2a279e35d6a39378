//! D5's VM rows (000 §7.4, Fig 19; 001 §7.2, Fig 7): the NVMe drive passed to a VM on the
//! borrower through the mediated path (VMRem), read by the unmodified NVMe driver of
//! devlend-devices running in the guest kernel. The reads are checked like the bare-metal ones
//! and timed by replaying their accesses (`devlend_devices::nvme_oplog::time_read`: this guest kernel does not run on the machine yet, the guest's CPU accesses
//! translated to host-physical addresses); the interrupt that completes each read takes the
//! VM's path (lender-side handler, notification through the NTB, eventfd/irqfd, VM entry and the
//! guest's handler entry), counted from when the device's MSI lands at the lender; its steps
//! beyond a bare-metal host's interrupt entry are added (params `[vm]`).
//!
//! The mediated path maps guest-physical addresses in the lender's IOMMU (000 §5), so the lender
//! runs with its IOMMU on here; the guest has [`crate::d4::GUEST_RAM`] of memory.

use crate::d4::{host_ops, GUEST_RAM};
use crate::irq::Src;
use crate::vmm::Vmm;
use devlend_devices::bench::ReadTiming;
use devlend_devices::nvme_oplog::controller::Controller;
use devlend_devices::nvme_oplog::driver::Driver;
use devlend_devices::nvme_oplog::{read_checked, time_read};
use devlend_devices::{landings, Op};
use devlend_host::Cluster;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// NVMe MSI-X entry of the I/O queue (the driver's choice, as in Linux: entry 1).
const IO_ENTRY: u16 = 1;
/// What the controller model calls its interrupt write (`devlend_devices::nvme`).
const MSI_OP: &str = "MSI-X interrupt";

/// Read `blocks` at each of `lbas` from `device` in a VM on host `runner` (VFIO when the drive
/// is local to it, else the mediated path), check the data, and time the last read.
pub fn read_blocks(json: &str, runner: &str, device: &str, lbas: &[u64], blocks: u16) -> Result<ReadTiming, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let mut vmm = Vmm::default();
    let vm = vmm.create_vm(&mut c, runner, "guest", GUEST_RAM).map_err(s)?;
    let func = c.fabric.func_id(device).map_err(s)?;
    let local = c.fabric.hosts[c.fabric.func_host(func) as usize].name == runner;
    let dev = if local {
        vmm.assign_vfio(&mut c, vm, device).map_err(s)?
    } else {
        vmm.register_mdev(&c, device).map_err(s)?;
        vmm.assign_mdev(&mut c, vm, device).map_err(s)?
    };
    let mut ctrl = Controller::new(&mut c.fabric, func, 1 << 24);
    let mut os = vmm.guest(&mut c, vm).map_err(s)?;
    let mut drv = Driver::probe(&mut os, dev, &mut ctrl).map_err(s)?;
    let (drv_ops, ctrl_ops) = read_checked(&mut os, &mut drv, &mut ctrl, lbas, blocks)?;
    drop(os);
    let drv_ops = host_ops(vmm.vm(vm).map_err(s)?, &drv_ops)?;
    let mut t = time_read(&mut c.fabric, device, &drv_ops, &ctrl_ops, blocks)?;
    let route = vmm.irq_route(vm, dev, Src::Msix(IO_ENTRY)).ok_or("the I/O queue's interrupt has no route to the guest")?;
    // The forwarding starts when the MSI lands at the lender, which is before the completion entry
    // has crossed the NTB to the guest's memory (the end of the fabric's share). A bare-metal
    // host's interrupt entry is not counted in the bare-metal rows, so the borrower's entry is
    // not counted here either: what the VM adds is the rest of its path (`irq::Vmm::steps`).
    let msi_landed = msi_landed(&mut c.fabric, &drv_ops, &ctrl_ops)?;
    let host_entry = crate::params::params().host_irq_entry_ps;
    let path: u64 = route.steps.iter().skip(1).map(|(_, ps)| ps).sum::<u64>().saturating_sub(host_entry);
    let extra = (msi_landed + path).saturating_sub(t.fabric_ps);
    t.total_ps += extra;
    t.steps.push(("VM interrupt path beyond a host's entry", extra));
    Ok(t)
}

/// When the completion's MSI lands (at the lender), on the timed path of `time_read`: the driver's
/// SQE store and doorbell, then everything the controller did.
fn msi_landed(f: &mut devlend_fabric::Fabric, drv_ops: &[Op], ctrl_ops: &[Op]) -> Result<u64, String> {
    let path: Vec<Op> = drv_ops.iter().take(2).chain(ctrl_ops).cloned().collect();
    let at = path.iter().rposition(|o| o.what == MSI_OP).ok_or("the read raised no MSI-X interrupt")?;
    Ok(landings(f, &path)?[at])
}
