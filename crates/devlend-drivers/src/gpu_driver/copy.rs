//! The GPU driver behind the device-copy service ([`crate::service::copy`]): a copy each way is
//! a cudaMemcpy on copy engine 0 ([`Driver::memcpy_dtoh`], [`Driver::memcpy_htod`]), and a
//! device of kind `gpu` is the GPU model, its memory BAR 1.

use super::Driver;
use crate::error::{DResult, DeviceError};
use crate::service::copy::{CopyDevice, CopyDriver, CopyType};
use crate::service::kernel::{AnyOs, DynOs};
use devlend_devices::gpu::Gpu;
use devlend_engine::machine::Device;
use devlend_fabric::model::FuncId;
use devlend_fabric::Fabric;
use devlend_host::{Cluster, DevId};
use std::cell::RefCell;
use std::rc::Rc;

impl CopyDriver for Driver {
    fn mem_size(&self) -> u64 {
        self.mem_size
    }

    fn copy_dtoh(&mut self, os: &mut dyn DynOs, dev_off: u64, host_buf: u64, len: u64) -> DResult<()> {
        self.memcpy_dtoh(&mut AnyOs(os), dev_off, host_buf, len).map_err(DeviceError::Gpu)
    }

    fn copy_htod(&mut self, os: &mut dyn DynOs, dev_off: u64, host_buf: u64, len: u64) -> DResult<()> {
        self.memcpy_htod(&mut AnyOs(os), dev_off, host_buf, len).map_err(DeviceError::Gpu)
    }
}

impl CopyDevice for Rc<RefCell<Gpu>> {
    fn model(&self) -> Rc<RefCell<dyn Device<Cluster>>> {
        self.clone()
    }

    fn mem_write(&self, fabric: &mut Fabric, off: u64, data: &[u8]) -> DResult<()> {
        Ok(self.borrow().mem_write(fabric, off, data)?)
    }

    fn mem_read(&self, fabric: &Fabric, off: u64, len: usize) -> DResult<Vec<u8>> {
        Ok(self.borrow().mem_read(fabric, off, len)?)
    }
}

fn model(fabric: &mut Fabric, func: FuncId) -> DResult<Box<dyn CopyDevice>> {
    Ok(Box::new(Rc::new(RefCell::new(Gpu::new(fabric, func)?))))
}

fn probe(os: &mut dyn DynOs, dev: DevId) -> DResult<Box<dyn CopyDriver>> {
    Ok(Box::new(Driver::probe(&mut AnyOs(os), dev).map_err(DeviceError::Gpu)?))
}

/// The registry's device-copy entry for kind `gpu`.
pub const COPY: CopyType = CopyType { model, probe };
