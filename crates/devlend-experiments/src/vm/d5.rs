//! D5's VM rows (000 §7.4, Fig 19; 001 §7.2, Fig 7): the NVMe drive passed to a VM (VFIO when
//! the drive is in the VM's host, else the mediated path), read by the unmodified NVMe driver of
//! devlend-devices running in the guest kernel on the machine: the controller acts on the same
//! clock, and the interrupt that completes each read takes the VM's path as events on the
//! hypervisor's threads (`irq_clock`: lender-side handler, notification through the NTB,
//! eventfd/irqfd, VM entry and the guest handler's entry). Every read is checked; the time of the
//! last one is when the guest's read returned less when it began.
//!
//! The mediated path maps guest-physical addresses in the lender's IOMMU (000 §5), so the lender
//! runs with its IOMMU on here; the guest has [`devlend_vm::fixtures::GUEST_RAM`] of memory.

use super::error::{guest, setup, stopped, RunCause, VResult, VmRunError};
use crate::nvme::ReadTiming;
use devlend_devices::nvme::{Controller, Media, BLOCK};
use devlend_drivers::nvme_driver::Driver;
use devlend_host::{Cluster, Os};
use devlend_vm::fixtures::GUEST_RAM;
use devlend_vm::irq::Src;
use devlend_vm::timed::on_machine;
use devlend_vm::vmm::Vmm;
use std::cell::RefCell;
use std::rc::Rc;

/// NVMe MSI-X entry of the I/O queue (the driver's choice, as in Linux: entry 1).
const IO_ENTRY: u16 = 1;

/// Read `blocks` at each of `lbas` from `device` in a VM on host `runner` (VFIO when the drive
/// is local to it, else the mediated path), check the data, and time the last read.
pub fn read_blocks(json: &str, runner: &str, device: &str, lbas: &[u64], blocks: u16) -> VResult<ReadTiming> {
    let mut c = Cluster::from_json(json).map_err(setup("the cluster"))?;
    let mut vmm = Vmm::default();
    let vm = vmm.create_vm(&mut c, runner, "guest", GUEST_RAM).map_err(setup("the VM"))?;
    let func = c.fabric.func_id(device).map_err(setup("the drive"))?;
    let local = c.fabric.host(c.fabric.func_host(func)).name == runner;
    let dev = if local {
        vmm.assign_vfio(&mut c, vm, device).map_err(setup("VFIO pass-through"))?
    } else {
        vmm.register_mdev(&c, device).map_err(setup("the mediated device"))?;
        vmm.assign_mdev(&mut c, vm, device).map_err(setup("the mediated path"))?
    };
    let media = Media::of_device(&c.fabric, device).map_err(setup("the drive's media"))?;
    let ctrl = Rc::new(RefCell::new(Controller::new(&mut c.fabric, func, 1 << 24, media)));
    let last = Rc::new(RefCell::new((0u64, 0u64)));
    let (cx, out, lbas) = (ctrl.clone(), last.clone(), lbas.to_vec());
    let scenario = format!("VM on {runner} reading {device}");
    let (_m, vmm, _) = on_machine(c, vmm, vm, vec![(func, ctrl.clone())], move |os| -> VResult<()> {
        let mut drv = Driver::probe(os, dev)?;
        let len = blocks as u64 * BLOCK;
        let buf = os.kmalloc(len).map_err(guest("kmalloc"))?;
        for &lba in &lbas {
            let pattern: Vec<u8> = (0..len).map(|i| (lba as u8).wrapping_mul(31).wrapping_add(i as u8)).collect();
            cx.borrow_mut().preload(lba, &pattern);
            cx.borrow_mut().trace = Some(Vec::new());
            let start = os.now();
            drv.read(os, lba, blocks, buf)?;
            *out.borrow_mut() = (start, os.now());
            if os.read(buf, len as usize).map_err(guest("read"))? != pattern {
                return Err(VmRunError::Mismatch {
                    scenario: "VM".into(),
                    what: format!("data read from LBA {lba} in the VM differs from what the drive holds"),
                });
            }
        }
        os.kfree(buf).map_err(guest("kfree"))
    })
    .map_err(stopped(scenario.clone(), RunCause::Guest))?;
    let (start, end) = *last.borrow();
    let trace = ctrl.borrow_mut().trace.take().unwrap_or_default();
    let mut steps: Vec<(&'static str, u64)> = trace.iter().filter(|s| s.start >= start).map(|s| (s.what, s.end.unwrap_or(end) - s.start)).collect();
    let media: u64 = steps.iter().filter(|s| s.0 == "media latency").map(|s| s.1).sum();
    let vmm = vmm.borrow();
    let route = vmm.irq_route(vm, dev, Src::Msix(IO_ENTRY)).ok_or(VmRunError::NoInterrupt { scenario })?;
    let path = route.latency_ps();
    steps.push(("VM interrupt path, first host's handler to the guest's", path));
    let total_ps = end - start;
    Ok(ReadTiming { total_ps, fabric_ps: total_ps.saturating_sub(media + path), steps })
}
