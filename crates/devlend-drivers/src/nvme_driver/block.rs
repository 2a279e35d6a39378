//! The NVMe driver behind the block-I/O service ([`crate::service::block`]): an I/O queue pair
//! is a [`BlockQueue`], the probed driver a [`BlockDriver`], and a drive of kind `nvme` a
//! [`Drive`] whose capacity and media come from its profile and the topology's `params`
//! (`Media::of_device`), whose model is the controller, and whose probe creates one I/O queue
//! pair per job thread, one entry deeper than the deepest job (a ring keeps one entry empty).

use super::{Driver, NvmeError, NvmeQueue};
use crate::error::{DResult, DeviceError};
use crate::service::block::{BlockDriver, BlockQueue, Drive};
use crate::service::kernel::{AnyOs, DynOs};
use devlend_devices::nvme::{Controller, Media, MAX_QUEUES, MAX_QUEUE_ENTRIES, OP_READ, OP_WRITE};
use devlend_engine::machine::Device;
use devlend_fabric::model::FuncId;
use devlend_fabric::Fabric;
use devlend_host::{Cluster, DevId};
use std::cell::RefCell;
use std::rc::Rc;

fn opcode(write: bool) -> u8 {
    if write {
        OP_WRITE
    } else {
        OP_READ
    }
}

impl BlockQueue for NvmeQueue {
    fn id(&self) -> u16 {
        self.qid
    }

    fn submit(&mut self, os: &mut dyn DynOs, write: bool, lba: u64, blocks: u16, buf: u64) -> DResult<u16> {
        self.queue_rq(&mut AnyOs(os), opcode(write), lba, blocks, buf).map_err(DeviceError::Nvme)
    }

    fn reap(&mut self, os: &mut dyn DynOs) -> DResult<Vec<(u16, u16)>> {
        let done = NvmeQueue::reap(self, &mut AnyOs(os)).map_err(DeviceError::Nvme)?;
        Ok(done.into_iter().map(|c| (c.cid, c.status)).collect())
    }

    fn read(&mut self, os: &mut dyn DynOs, lba: u64, blocks: u16, buf: u64) -> DResult<()> {
        NvmeQueue::read(self, &mut AnyOs(os), lba, blocks, buf).map_err(DeviceError::Nvme)
    }

    fn status_error(&self, write: bool, lba: u64, status: u16) -> DeviceError {
        DeviceError::Nvme(NvmeError::Status { opcode: opcode(write), lba, status })
    }

    fn unknown_tag(&self, tag: u16) -> DeviceError {
        DeviceError::Nvme(NvmeError::UnknownCommand { qid: self.qid, cid: tag })
    }
}

impl BlockDriver for Driver {
    fn take_queue(&mut self, q: u16) -> Option<Box<dyn BlockQueue>> {
        Driver::take_queue(self, q).map(|q| Box::new(q) as Box<dyn BlockQueue>)
    }
}

/// An NVMe drive of the fabric, by its media.
pub struct NvmeDrive(pub Media);

/// The registry's block-I/O entry for kind `nvme`.
pub fn drive(fabric: &Fabric, device: &str) -> DResult<Rc<dyn Drive>> {
    Ok(Rc::new(NvmeDrive(Media::of_device(fabric, device)?)))
}

impl Drive for NvmeDrive {
    fn capacity(&self) -> u64 {
        self.0.capacity
    }

    fn max_queues(&self) -> u16 {
        MAX_QUEUES as u16 - 1
    }

    fn max_depth(&self) -> u32 {
        MAX_QUEUE_ENTRIES - 1
    }

    fn params(&self) -> Vec<(String, String)> {
        let m = &self.0;
        vec![
            ("media_read_latency_ns".into(), (m.media_read_latency_ps as f64 / 1e3).to_string()),
            ("media_write_latency_ns".into(), (m.media_write_latency_ps as f64 / 1e3).to_string()),
            ("media_bandwidth_Bps".into(), m.media_bandwidth.to_string()),
            ("media_parallelism".into(), m.media_parallelism.to_string()),
        ]
    }

    fn model(&self, fabric: &mut Fabric, func: FuncId) -> DResult<Rc<RefCell<dyn Device<Cluster>>>> {
        Ok(Rc::new(RefCell::new(Controller::new(fabric, func, self.0.blocks(), self.0))))
    }

    fn probe(&self, os: &mut dyn DynOs, dev: DevId, queues: u16, iodepth: u32) -> DResult<Box<dyn BlockDriver>> {
        let d = Driver::probe_queues(&mut AnyOs(os), dev, queues, (iodepth + 1).max(2)).map_err(DeviceError::Nvme)?;
        Ok(Box::new(d))
    }
}
