//! D5 natively: NVMe block reads as 000 §7.4 measured them, on one machine
//! (`devlend_drivers::nvme_run`): a host (the drive's own, or a borrower) probes the drive and reads blocks through the unmodified driver as a thread; the
//! controller acts on the same clock (doorbell, command fetch, media, data DMA, completion entry,
//! MSI-X), so a read's time is when the thread's read returned less when it began. The data of
//! every read is checked.

use devlend_devices::nvme::BLOCK;
use devlend_drivers::error::{DResult, DeviceError};
use devlend_drivers::nvme_driver::Driver;
use devlend_drivers::nvme_run::machine;
use devlend_engine::machine::ThreadError;
use devlend_host::{Os, ThreadOs};
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Clone, Debug)]
pub struct ReadTiming {
    /// Submission to completion as the host sees it (the driver's `read` call), ps.
    pub total_ps: u64,
    /// The part of it not spent waiting for the media's latency.
    pub fabric_ps: u64,
    /// The controller's steps of the last read, each from its start to its end.
    pub steps: Vec<(&'static str, u64)>,
}

/// Probe the drive from `runner`, read `blocks` at each of `lbas` (each read checked against
/// what the drive holds), and time the last read.
pub fn read_blocks(json: &str, runner: &str, device: &str, lbas: &[u64], blocks: u16) -> DResult<ReadTiming> {
    let (mut m, ctrl, host, dev) = machine(json, runner, device, Some(1 << 24))?;
    let last = Rc::new(RefCell::new((0u64, 0u64)));
    let (c, out, lbas) = (ctrl.clone(), last.clone(), lbas.to_vec());
    m.spawn("nvme-read", 0, move |t| {
        let mut os = ThreadOs::new(t, host);
        let mut drv = Driver::probe(&mut os, dev).map_err(ThreadError::other)?;
        let len = blocks as u64 * BLOCK;
        let buf = os.kmalloc(len).map_err(ThreadError::other)?;
        for &lba in &lbas {
            let pattern: Vec<u8> = (0..len).map(|i| (lba as u8).wrapping_mul(31).wrapping_add(i as u8)).collect();
            c.borrow_mut().preload(lba, &pattern);
            c.borrow_mut().trace = Some(Vec::new());
            let start = t.now();
            drv.read(&mut os, lba, blocks, buf).map_err(ThreadError::other)?;
            *out.borrow_mut() = (start, t.now());
            let got = os.read(buf, len as usize).map_err(ThreadError::other)?;
            if got != pattern {
                return Err(ThreadError::other(DeviceError::Mismatch { what: format!("read of {blocks} blocks at LBA {lba}") }));
            }
        }
        os.kfree(buf).map_err(ThreadError::other)?;
        Ok(())
    });
    m.run().map_err(|error| DeviceError::Machine { what: format!("nvme-read of {device}"), error })?;
    let (start, end) = *last.borrow();
    let trace = ctrl.borrow_mut().trace.take().unwrap_or_default();
    let steps: Vec<(&'static str, u64)> = trace.iter().filter(|s| s.start >= start).map(|s| (s.what, s.end.unwrap_or(end) - s.start)).collect();
    let media: u64 = steps.iter().filter(|s| s.0 == "media latency").map(|s| s.1).sum();
    let total_ps = end - start;
    Ok(ReadTiming { total_ps, fabric_ps: total_ps - media.min(total_ps), steps })
}
