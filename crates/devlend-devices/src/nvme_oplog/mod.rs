//! The NVMe controller and driver as they were before the one clock: the controller is a
//! functional model the driver runs by hand (`os.run_hardware(|f| ctrl.process(f))`), and a read
//! is timed afterwards by replaying the logged accesses in program order (`crate::time_ops`).
//! Kept only for D5's VM rows (`devlend_vm::d5`), whose guest kernel does not yet run as a
//! thread on a `Machine`; everything else uses [`crate::nvme`] and [`crate::nvme_driver`].

pub mod controller;
pub mod driver;

use crate::bench::ReadTiming;
use crate::nvme::Media;
use crate::nvme::BLOCK;
use crate::{time_ops, Op};
use controller::Controller;
use devlend_fabric::Fabric;
use devlend_host::Os;
use driver::Driver;

/// Under any kernel (a host's or a guest's): read `blocks` at each of `lbas` with the driver,
/// check each read's data against what the drive holds, and return the driver's and the
/// controller's accesses of the last read.
pub fn read_checked(os: &mut impl Os, drv: &mut Driver, ctrl: &mut Controller, lbas: &[u64], blocks: u16) -> Result<(Vec<Op>, Vec<Op>), String> {
    let len = blocks as u64 * BLOCK;
    let buf = os.kmalloc(len).map_err(|e| e.to_string())?;
    let mut last = (Vec::new(), Vec::new());
    for &lba in lbas {
        let pattern: Vec<u8> = (0..len).map(|i| (lba as u8).wrapping_mul(31).wrapping_add(i as u8)).collect();
        ctrl.preload(lba, &pattern);
        drv.ops.clear();
        ctrl.ops.clear();
        drv.read(os, ctrl, lba, blocks, buf).map_err(|e| e.to_string())?;
        let got = os.read(buf, len as usize).map_err(|e| e.to_string())?;
        if got != pattern {
            return Err(format!("data read from LBA {lba} differs from what the drive holds"));
        }
        last = (drv.ops.clone(), ctrl.ops.clone());
    }
    os.kfree(buf).map_err(|e| e.to_string())?;
    Ok(last)
}

/// Time one read of `blocks` from drive `device` from the accesses it made (host-physical
/// addresses): the critical path is the driver's SQE store and doorbell, then everything the
/// controller did; the completion-queue head doorbell comes after the host has seen the
/// completion. The media adds its latency and streams while the data DMA runs.
pub fn time_read(f: &mut Fabric, device: &str, drv_ops: &[Op], ctrl_ops: &[Op], blocks: u16) -> Result<ReadTiming, String> {
    let media = Media::of_device(f, device)?;
    let len = blocks as u64 * BLOCK;
    let path: Vec<_> = drv_ops.iter().take(2).chain(ctrl_ops.iter()).cloned().collect();
    let mut steps = Vec::new();
    for op in &path {
        steps.push((op.what, time_ops(f, std::slice::from_ref(op))?));
    }
    let fabric_ps = time_ops(f, &path)?;
    let without_data: Vec<_> = path.iter().filter(|o| o.what != "read data").cloned().collect();
    let data_phase = fabric_ps - time_ops(f, &without_data)?.min(fabric_ps);
    let media_stream = (len as u128 * 1_000_000_000_000 / media.media_bandwidth as u128) as u64;
    // The media streams while the data DMA runs; only the slower of the two counts.
    let total_ps = fabric_ps + media_stream.saturating_sub(data_phase) + media.media_read_latency_ps;
    Ok(ReadTiming { total_ps, fabric_ps, steps })
}
