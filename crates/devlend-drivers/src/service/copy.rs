//! DMA copies between host memory and device memory: what a copy workload (devlend-workloads'
//! `gpu_copy`, a bandwidthTest-style cudaMemcpy) needs of a device and its driver, whatever the
//! device type. A type that serves device copies registers a [`CopyType`] beside its kind
//! (`registry::device_copy`); the workload gets from it the device's model ([`CopyDevice`]: on
//! the machine, and its memory read and written directly to fill a source or check a
//! destination) and its driver's probe ([`CopyDriver`]: its memory's size, and a copy each way
//! that returns once the device has finished it).

use super::kernel::DynOs;
use crate::error::DResult;
use devlend_engine::machine::Device;
use devlend_fabric::model::FuncId;
use devlend_fabric::Fabric;
use devlend_host::{Cluster, DevId};
use std::cell::RefCell;
use std::rc::Rc;

/// A copy's direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Device to host: the copy engine's DMA writes.
    DtoH,
    /// Host to device: the copy engine's DMA reads.
    HtoD,
}

/// A probed driver of a device with memory and a copy engine.
pub trait CopyDriver {
    /// Bytes of device memory, as the device reports them.
    fn mem_size(&self) -> u64;
    /// Copy `len` bytes of device memory at `dev_off` into the kernel buffer at `host_buf`, and wait.
    fn copy_dtoh(&mut self, os: &mut dyn DynOs, dev_off: u64, host_buf: u64, len: u64) -> DResult<()>;
    /// Copy `len` bytes of the kernel buffer at `host_buf` into device memory at `dev_off`, and wait.
    fn copy_htod(&mut self, os: &mut dyn DynOs, dev_off: u64, host_buf: u64, len: u64) -> DResult<()>;
}

/// A device model with memory, created for the machine.
pub trait CopyDevice {
    /// The model, for `Machine::add_device`.
    fn model(&self) -> Rc<RefCell<dyn Device<Cluster>>>;
    /// Write `data` into device memory at `off` (not a DMA: the model's memory, set up before a run).
    fn mem_write(&self, fabric: &mut Fabric, off: u64, data: &[u8]) -> DResult<()>;
    /// Read `len` bytes of device memory at `off` (after a run).
    fn mem_read(&self, fabric: &Fabric, off: u64, len: usize) -> DResult<Vec<u8>>;
}

/// A device type's device-copy entry in the registry: its model, function `func` of the fabric,
/// and its driver's probe.
#[derive(Clone, Copy, Debug)]
pub struct CopyType {
    pub model: fn(fabric: &mut Fabric, func: FuncId) -> DResult<Box<dyn CopyDevice>>,
    pub probe: fn(os: &mut dyn DynOs, dev: DevId) -> DResult<Box<dyn CopyDriver>>,
}
