//! Software on GPUs, on one machine: a host attaches a GPU (its own, or one it borrows: Device
//! Lending does the programming, `devlend-host`), creates its model and probes it with the
//! unmodified driver ([`bind`]); [`on_machine`] then runs a thread of the host with the GPUs as
//! actors (`devlend_devices::gpu`) on one [`Machine`], the driver's stores, doorbells and semaphore polls
//! taking the time they take on the links the GPUs' DMA is using.
//!
//! The pieces the papers' GPU workloads share, wherever they run (natively in devlend-experiments'
//! `gpu` (D1-D3), in a VM's guest kernel in its `vm::d4` and `vm::d6`, and in devlend-workloads):
//! a copy staged through RAM in chunks ([`staged`]), the ping-pong kernel's launch ([`launch`]) and
//! what its kernels measured ([`kernel_round_trip`]: ping's mean over [`PING_ROUNDS`] rounds after
//! [`WARMUP_ROUNDS`]).

use crate::error::{DResult, DeviceError};
use crate::gpu_driver::{Driver, GpuError};
use devlend_devices::error::{ModelError, ParamsProblem};
use devlend_devices::gpu::Gpu;
use devlend_devices::gpu_kernel::*;
use devlend_engine::machine::{Machine, ThreadError};
use devlend_engine::queue::Ps;
use devlend_fabric::model::HostId;
use devlend_host::{Cluster, DevId, Os, ThreadOs};
use serde::Deserialize;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Round trips the ping-pong kernel runs; the result is their mean.
pub const PING_ROUNDS: u32 = 8;
/// Round trips the ping-pong kernel runs before the timed ones (they warm the IOTLBs).
pub const WARMUP_ROUNDS: u32 = 1;

#[derive(Deserialize)]
struct Staging {
    chunk_bytes: u64,
}

/// The staging chunk of a GPU-to-GPU copy through RAM (params/hardware.toml `[gpu_staging]`, from
/// the file's one parse per process, `devlend_fabric::params::hardware_table`).
pub fn staging_chunk() -> DResult<u64> {
    let bad = |problem| DeviceError::Model(ModelError::Params { field: "[gpu_staging] chunk_bytes".into(), problem });
    let t = devlend_fabric::params::hardware_table();
    let v = t.get("gpu_staging").ok_or_else(|| bad(ParamsProblem::NoTable { table: "gpu_staging" }))?;
    let st: Staging = v.clone().try_into().map_err(|e| bad(ParamsProblem::Toml(Box::new(e))))?;
    match st.chunk_bytes {
        0 => Err(bad(ParamsProblem::Zero)),
        n => Ok(n),
    }
}

#[derive(Clone, Debug)]
pub struct CopyTiming {
    pub bytes: u64,
    /// From the first register store to the driver seeing the semaphore, ps.
    pub total_ps: u64,
    /// The steps timed (one: the whole copy, on the machine).
    pub steps: Vec<(&'static str, u64)>,
}

impl CopyTiming {
    /// Bytes per second.
    pub fn bandwidth(&self) -> f64 {
        self.bytes as f64 / (self.total_ps as f64 * 1e-12)
    }
}

pub use crate::service::copy::Dir;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Directly into the peer's memory (peer-to-peer).
    Peer,
    /// Through a buffer in the runner's RAM.
    Ram,
}

/// The bytes a workload copies: a pattern that differs from page to page.
pub fn pattern(seed: u8, len: u64) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed).wrapping_add((i >> 12) as u8)).collect()
}

/// A GPU the runner drives: its handle in the runner, its model, and its driver.
pub struct Bound {
    pub dev: DevId,
    pub gpu: Gpu,
    pub drv: Driver,
}

pub use crate::service::attach;

/// Attach `device` to `runner`, create its model and probe it with the driver.
pub fn bind(c: &mut Cluster, runner: &str, device: &str) -> DResult<Bound> {
    let dev = attach(c, runner, device)?;
    let func = c.fabric.func_id(device).map_err(DeviceError::fabric(device))?;
    let gpu = Gpu::new(&mut c.fabric, func)?;
    let drv = Driver::probe(&mut c.os(runner).map_err(DeviceError::host("host", device))?, dev)?;
    Ok(Bound { dev, gpu, drv })
}

pub fn fits(len: u64, g: &Bound) -> DResult<()> {
    match len {
        n if n == 0 || n > g.drv.mem_size => Err(DeviceError::CopySize { len, mem_size: g.drv.mem_size }),
        _ => Ok(()),
    }
}

/// The probed GPUs on one machine, and a thread of `host` running `body`: the time it ran, and
/// the machine (for its world and the GPUs' records).
pub fn on_machine<E>(
    c: Cluster,
    gpus: &[Rc<RefCell<Gpu>>],
    host: HostId,
    body: impl FnOnce(&mut ThreadOs) -> Result<(), E> + 'static,
) -> DResult<(Machine<Cluster>, Ps)>
where
    E: Into<Box<dyn std::error::Error>>,
{
    let mut m = Machine::new(c);
    for g in gpus {
        let func = g.borrow().func;
        m.add_device(func, g.clone());
    }
    let span = Rc::new(Cell::new(0));
    let out = span.clone();
    m.spawn("cuda-runner", 0, move |t| {
        let t0 = t.now();
        body(&mut ThreadOs::new(t, host)).map_err(|e| ThreadError::Other(e.into()))?;
        out.set(t.now() - t0);
        Ok(())
    });
    m.run().map_err(|error| DeviceError::Machine { what: "cuda-runner".into(), error })?;
    Ok((m, span.get()))
}

pub fn timing(bytes: u64, total_ps: u64) -> CopyTiming {
    CopyTiming { bytes, total_ps, steps: vec![("cudaMemcpy", total_ps)] }
}

pub fn shared(g: Gpu) -> Rc<RefCell<Gpu>> {
    Rc::new(RefCell::new(g))
}

/// A GPU-to-GPU copy through two staging buffers of `chunk` bytes at `stage` in the runner's RAM:
/// `a`'s copy engine 1 writes chunk k+1 into one while `b`'s copy engine 0 reads chunk k from the
/// other. Chunk k+1 is written once chunk k is in its buffer and chunk k-1 (the other buffer's
/// last content) has been read; chunk k is read once it is written and `b`'s engine has finished
/// chunk k-1 (an engine runs one copy at a time).
pub fn staged(os: &mut impl Os, a: &mut Driver, b: &mut Driver, stage: u64, chunk: u64, len: u64) -> Result<(), GpuError> {
    let (ma, mb) = (a.map_host(os, stage, 2 * chunk)?, b.map_host(os, stage, 2 * chunk)?);
    let n = len.div_ceil(chunk);
    let part = |k: u64| (k * chunk, chunk.min(len - k * chunk), (k % 2) * chunk);
    let (off, size, buf) = part(0);
    let mut write = Some(a.memcpy_dtoh_async(os, 1, off, ma.dma + buf, size)?);
    let mut read = None;
    for k in 0..n {
        a.sync(os, write.take().expect("chunk k is being written"))?;
        if let Some(p) = read.take() {
            b.sync(os, p)?;
        }
        let (off, size, buf) = part(k);
        read = Some(b.memcpy_htod_async(os, 0, mb.dma + buf, off, size)?);
        if k + 1 < n {
            let (off, size, buf) = part(k + 1);
            write = Some(a.memcpy_dtoh_async(os, 1, off, ma.dma + buf, size)?);
        }
    }
    if let Some(p) = read {
        b.sync(os, p)?;
    }
    a.unmap(os, ma)?;
    b.unmap(os, mb)
}

/// Program GPU `gpu`'s ping-pong kernel through its BAR 0 at `bar0` and launch it.
pub fn launch(os: &mut impl Os, bar0: u64, store_at: u64, poll_at: u64, first: bool) -> DResult<()> {
    let w = |os: &mut _, reg, v: &[u8]| {
        Os::write(os, bar0 + reg, v).map_err(|error| DeviceError::Host { what: "kernel launch", device: format!("BAR 0 at {bar0:#x}"), error })
    };
    w(os, K_STORE_AT, &store_at.to_le_bytes())?;
    w(os, K_POLL_AT, &poll_at.to_le_bytes())?;
    w(os, K_OWN_OFF, &0u64.to_le_bytes())?;
    w(os, K_ROUNDS, &(WARMUP_ROUNDS + PING_ROUNDS).to_le_bytes())?;
    w(os, K_FIRST, &(first as u32).to_le_bytes())?;
    w(os, K_LAUNCH, &1u32.to_le_bytes())
}

/// What the ping-pong kernels of `a` (which began) and `b` measured: ping's mean round trip
/// over [`PING_ROUNDS`] after [`WARMUP_ROUNDS`], or why they did not finish.
pub fn kernel_round_trip((a, pa): (&str, &Rc<RefCell<Gpu>>), (b, pb): (&str, &Rc<RefCell<Gpu>>)) -> DResult<u64> {
    let (ka, kb) = (pa.borrow().kernel.clone(), pb.borrow().kernel.clone());
    for (name, k) in [(a, &ka), (b, &kb)] {
        let stop = if let Some(at) = k.fault {
            KernelStop::Faulted { at }
        } else if let Some(g) = k.gave_up {
            KernelStop::GaveUp(g)
        } else if !k.done {
            KernelStop::Short { seen: k.seen.len(), rounds: WARMUP_ROUNDS + PING_ROUNDS }
        } else {
            continue;
        };
        return Err(DeviceError::Kernel { gpu: name.into(), stop });
    }
    let start = ka.stores[WARMUP_ROUNDS as usize];
    Ok((ka.seen[ka.seen.len() - 1] - start) / PING_ROUNDS as u64)
}
