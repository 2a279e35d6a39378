//! # devlend-devices: devices and their drivers
//!
//! Layer 4 of devlend. A device model reads its registers from its BARs, moves data with DMA
//! through the fabric as its own requester (so IOMMUs, NTBs and Device Lending apply), and posts
//! completions and MSI-X interrupts the same way. Every access a device or driver makes is logged
//! as an [`Op`], which the timing engine turns into time ([`time_ops`]).
//!
//! The NVMe controller ([`nvme::Controller`]) and driver ([`nvme_driver::Driver`]) follow the
//! NVM Express 1.3 specification; the GPU ([`gpu::Gpu`], [`gpu_driver::Driver`]) has a copy
//! engine, semaphores and device-initiated stores and loads, enough for 000 §7.1-7.2. Drivers see
//! the host only through `devlend_host::HostOs`: the same driver code runs against a local device
//! and a borrowed one (000 §4: the driver does not know the DMA addresses it hands out are
//! far-side). [`bench`] and [`gpu_bench`] run the papers' workloads on them.

pub mod nvme;
pub mod nvme_driver;
pub mod nvme_oplog;
pub mod fio;
pub mod bench;
pub mod gpu;
pub mod gpu_actor;
pub mod gpu_functional;
pub mod gpu_kernel;
pub mod gpu_bench;
pub mod gpu_driver;

use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_wire::Access;

/// One access on the fabric, in program order: a CPU store to a register, a device's DMA read...
/// A device's access carries the timed plan of its route as it was when issued, since the mapping
/// it went through may be gone by the time the sequence is timed.
#[derive(Clone, Debug)]
pub struct Op {
    pub who: Requester,
    pub addr: u64,
    pub len: u64,
    pub access: Access,
    pub what: &'static str,
    pub plan: Option<std::sync::Arc<devlend_engine::Plan>>,
}

/// Time a sequence of accesses in program order, with PCIe's ordering: a requester may issue its
/// next access once its posted writes have left it (they land in order behind one another), but
/// waits for a read's data; an access by a different requester (a device acting on a doorbell)
/// starts only when everything before it has landed. Returns when the last access is complete.
pub fn time_ops(f: &mut Fabric, ops: &[Op]) -> Result<u64, String> {
    Ok(landings(f, ops)?.into_iter().max().unwrap_or(0))
}

/// As [`time_ops`], but when each access is complete (landed, or its data returned), in order.
pub fn landings(f: &mut Fabric, ops: &[Op]) -> Result<Vec<u64>, String> {
    let (mut cursor, mut end) = (0u64, 0u64);
    let mut done = Vec::with_capacity(ops.len());
    let mut last: Option<Requester> = None;
    for op in ops {
        let time = |f: &mut Fabric, len: u64| -> Result<u64, String> {
            Ok(match &op.plan {
                Some(p) => devlend_engine::time_plan(f, p, len, op.access, true).time_ps,
                None => devlend_engine::dma(f, op.who, op.addr, len, op.access, true)
                    .map_err(|e| format!("{}: {}", op.what, f.failure_json(&e.failure)["message"]))?
                    .time_ps,
            })
        };
        let start = if last == Some(op.who) { cursor } else { end };
        let t = time(f, op.len)?;
        let landed = start + t;
        if op.access == Access::Write {
            // Pipeline fill: how long one small write takes to land; the rest is issue time.
            let fill = time(f, 4.min(op.len))?;
            cursor = start + t.saturating_sub(fill);
        } else {
            cursor = landed;
        }
        done.push(landed);
        end = end.max(landed);
        last = Some(op.who);
    }
    Ok(done)
}
