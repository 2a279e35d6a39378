//! Block I/O: what a block workload (fio's job threads, devlend-workloads' `fio_job`) needs of a
//! device and its driver, whatever the device type. A type that serves block I/O registers a
//! [`BlockType`] beside its kind (`registry::block_io`); the workload asks the registry for
//! the device's kind and gets, without naming the type: the drive as its profile describes it
//! ([`Drive`]: capacity, queue limits, effective parameters, its model for the machine), and its
//! driver's probe, which gives each job thread a queue ([`BlockQueue`]: submit, reap, read).
//!
//! Blocks are [`BLOCK`] bytes (the logical block of NVMe's namespace format 0, and Linux's
//! sector): LBAs and block counts are in them. A queue's command is named by the tag
//! [`BlockQueue::submit`] returns, and its completion by that tag and the device's status (0:
//! success; what another status means, the driver says: [`BlockQueue::status_error`]).

use super::kernel::DynOs;
use crate::error::{DResult, DeviceError};
use devlend_engine::machine::Device;
use devlend_fabric::model::FuncId;
use devlend_fabric::Fabric;
use devlend_host::{Cluster, DevId};
use std::cell::RefCell;
use std::rc::Rc;

/// Bytes per block.
pub const BLOCK: u64 = 512;

/// One queue a job thread owns: commands submitted without waiting, completions reaped.
pub trait BlockQueue {
    /// The queue's number (1.. as the driver counts them).
    fn id(&self) -> u16;
    /// Start a read (or a write, `write`) of `blocks` blocks at `lba` into (from) the kernel
    /// buffer at CPU address `buf`; returns the command's tag.
    fn submit(&mut self, os: &mut dyn DynOs, write: bool, lba: u64, blocks: u16, buf: u64) -> DResult<u16>;
    /// Wait for completions (at least one while commands are in flight): (tag, status) each.
    fn reap(&mut self, os: &mut dyn DynOs) -> DResult<Vec<(u16, u16)>>;
    /// Read `blocks` blocks at `lba` into `buf` and wait for them.
    fn read(&mut self, os: &mut dyn DynOs, lba: u64, blocks: u16, buf: u64) -> DResult<()>;
    /// The error a command (a write if `write`, at `lba`) that completed with `status` is.
    fn status_error(&self, write: bool, lba: u64, status: u16) -> DeviceError;
    /// A completion for tag `tag`, which this queue's user has not in flight.
    fn unknown_tag(&self, tag: u16) -> DeviceError;
}

/// A probed driver that hands out its queues.
pub trait BlockDriver {
    /// Queue `q` (1..) for a job thread; `None` if there is none or it is taken.
    fn take_queue(&mut self, q: u16) -> Option<Box<dyn BlockQueue>>;
}

/// A block device as its type describes it, before anything is attached.
pub trait Drive {
    /// Bytes the drive holds.
    fn capacity(&self) -> u64;
    /// The most queues its driver gives (one per job thread).
    fn max_queues(&self) -> u16;
    /// The most commands one queue holds in flight (a job's `iodepth`).
    fn max_depth(&self) -> u32;
    /// Its type's own effective parameters, (name, value), for a run's record.
    fn params(&self) -> Vec<(String, String)>;
    /// Its model, function `func` of the fabric, for the machine.
    fn model(&self, fabric: &mut Fabric, func: FuncId) -> DResult<Rc<RefCell<dyn Device<Cluster>>>>;
    /// Probe it as `dev` with `queues` queues, each holding `iodepth` commands in flight.
    fn probe(&self, os: &mut dyn DynOs, dev: DevId, queues: u16, iodepth: u32) -> DResult<Box<dyn BlockDriver>>;
}

/// A device type's block I/O entry in the registry: the drive `device` of `fabric` described.
pub type BlockType = fn(fabric: &Fabric, device: &str) -> DResult<Rc<dyn Drive>>;
