//! NVMe block reads as 000 §7.4 measured them: a host (the drive's own, or a borrower) reads
//! blocks through the unmodified driver; the data is checked, and the accesses the driver and the
//! controller made are timed by the engine. The drive's media adds its read latency, and streams
//! at its media bandwidth, overlapping the data DMA (params: `device.<profile>.media_*`).

use crate::nvme::{Controller, BLOCK};
use crate::nvme_driver::Driver;
use crate::{time_ops, Op};
use devlend_fabric::Fabric;
use devlend_host::{Cluster, Os};
use serde::Deserialize;

#[derive(Deserialize)]
struct Media {
    media_read_latency_ps: u64,
    media_bandwidth: u64,
}

#[derive(Clone, Debug)]
pub struct ReadTiming {
    /// Submission to completion as the host sees it, ps.
    pub total_ps: u64,
    /// The fabric's share: SQE store and doorbell, command fetch, data, completion entry, with
    /// posted writes pipelined as PCIe ordering allows (`time_ops`).
    pub fabric_ps: u64,
    /// Each access timed alone.
    pub steps: Vec<(&'static str, u64)>,
}

fn media(profile: &str) -> Result<Media, String> {
    let t: toml::Value = toml::from_str(devlend_fabric::params::HARDWARE_TOML).map_err(|e| e.to_string())?;
    let v = t.get("device").and_then(|d| d.get(profile)).ok_or(format!("no device profile {profile}"))?;
    v.clone().try_into().map_err(|e| format!("device profile {profile} lacks media timing: {e}"))
}

/// Probe the drive from `runner` (borrowing it first when it sits in another host), read `blocks`
/// at `lba` `reps` times at the given LBAs, check the data, and time the last read.
pub fn read_blocks(json: &str, runner: &str, device: &str, lbas: &[u64], blocks: u16) -> Result<ReadTiming, String> {
    let mut c = Cluster::from_json(json).map_err(|e| e.to_string())?;
    let owner = {
        let f = c.fabric.func_id(device).map_err(|e| e.to_string())?;
        c.fabric.hosts[c.fabric.func_host(f) as usize].name.clone()
    };
    let dev = if owner == runner {
        c.os(runner).map_err(|e| e.to_string())?.find(device).map_err(|e| e.to_string())?
    } else {
        c.borrow(runner, device).map_err(|e| e.to_string())?
    };
    let func = c.fabric.func_id(device).map_err(|e| e.to_string())?;
    let mut ctrl = Controller::new(&mut c.fabric, func, 1 << 24);
    let mut os = c.os(runner).map_err(|e| e.to_string())?;
    let mut drv = Driver::probe(&mut os, dev, &mut ctrl).map_err(|e| e.to_string())?;
    let (drv_ops, ctrl_ops) = read_checked(&mut os, &mut drv, &mut ctrl, lbas, blocks)?;
    drop(os);
    time_read(&mut c.fabric, device, &drv_ops, &ctrl_ops, blocks)
}

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
    let profile = f.devices.iter().find(|d| d.name == device).and_then(|d| d.profile.clone()).unwrap_or_default();
    let media = media(&profile)?;
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
