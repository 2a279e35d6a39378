//! The GPU workloads of 000 §7.1-7.2 run as software on the simulated hosts: the GPU model and
//! its unmodified driver on a local GPU, or on GPUs the runner borrows (Device Lending does the
//! programming, `devlend-host`). Each function builds a [`Cluster`] from topology JSON (without a
//! `setup` section), probes the GPUs, then runs the workload on one [`Machine`]: the GPUs as
//! actors (`gpu_actor`), the driver as a thread (`ThreadOs`) whose stores, doorbells and
//! semaphore polls take the time they take on the links the GPUs' DMA is using. It checks the
//! bytes arrived and reports the time the thread spent.
//!
//! - D1 ([`memcpy`]): bandwidthTest, one cudaMemcpy host<->device (000 §7.1, Fig 10). CUDA's
//!   pipelining of bandwidthTest's 10 back-to-back copies (000 footnote 3) is not modelled: one
//!   copy, driver handshake included, as the GPU-to-GPU program of §7.2 measures.
//! - D2 ([`gpu_to_gpu`]): one GPU-to-GPU transfer, peer-to-peer (the source's copy engine writes
//!   the target's BAR 1) or bounced through a buffer in the runner's RAM (000 §7.2, Fig 12). The
//!   bounce is staged in chunks of `gpu_staging.chunk_bytes` through two buffers: the source's
//!   copy engine writes chunk k+1 while the target's reads chunk k (two streams, two engines).
//! - D3 ([`pingpong`]): the ping-pong kernel (`gpu_kernel`) on both GPUs, counters in each
//!   other's memory or in one buffer in the runner's RAM; the round trip is ping's mean over
//!   [`PING_ROUNDS`] rounds after [`WARMUP_ROUNDS`], from the store that starts them to its last
//!   answer. 000 reports the mean of 100,000 ping-pongs, in which the first stores' cold
//!   IOTLB walks (one per direction where an IOMMU translates) weigh nothing; timed from the
//!   first store, 8 rounds would carry them (+80 ns a round for 1L-P2P-IOMMU).
//!
//! The same workloads run in a VM's guest kernel on the machine (devlend-experiments' `vm::d4`, `vm::d6`), with
//! [`staged`], [`launch`] and [`kernel_round_trip`] from here.

use crate::gpu::Gpu;
use crate::gpu_driver::{Driver, GpuError};
use crate::gpu_kernel::*;
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

/// The staging chunk of a GPU-to-GPU copy through RAM (params/hardware.toml `[gpu_staging]`).
pub fn staging_chunk() -> Result<u64, String> {
    let t: toml::Value = toml::from_str(devlend_fabric::params::HARDWARE_TOML).map_err(s)?;
    let v = t.get("gpu_staging").ok_or("params/hardware.toml has no [gpu_staging]")?;
    let st: Staging = v.clone().try_into().map_err(|e| format!("[gpu_staging]: {e}"))?;
    match st.chunk_bytes {
        0 => Err("[gpu_staging] chunk_bytes is 0".into()),
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Device to host: the copy engine's DMA writes.
    DtoH,
    /// Host to device: the copy engine's DMA reads.
    HtoD,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Directly into the peer's memory (peer-to-peer).
    Peer,
    /// Through a buffer in the runner's RAM.
    Ram,
}

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
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

/// The runner's handle of `device`: its own, or borrowed from the host it sits in.
pub fn attach(c: &mut Cluster, runner: &str, device: &str) -> Result<DevId, String> {
    let func = c.fabric.func_id(device).map_err(s)?;
    let owner = c.fabric.hosts[c.fabric.func_host(func) as usize].name.clone();
    if owner == runner {
        c.os(runner).map_err(s)?.find(device).map_err(s)
    } else {
        c.borrow(runner, device).map_err(s)
    }
}

/// Attach `device` to `runner`, create its model and probe it with the driver.
pub fn bind(c: &mut Cluster, runner: &str, device: &str) -> Result<Bound, String> {
    let dev = attach(c, runner, device)?;
    let func = c.fabric.func_id(device).map_err(s)?;
    let gpu = Gpu::new(&mut c.fabric, func)?;
    let drv = Driver::probe(&mut c.os(runner).map_err(s)?, dev).map_err(s)?;
    Ok(Bound { dev, gpu, drv })
}

pub fn fits(len: u64, g: &Bound) -> Result<(), String> {
    match len {
        0 => Err("a copy of zero bytes".into()),
        n if n > g.drv.mem_size => Err(format!("{n} bytes do not fit the GPU's {} bytes of memory", g.drv.mem_size)),
        _ => Ok(()),
    }
}

fn gerr(e: impl std::fmt::Display) -> ThreadError {
    ThreadError::other(GpuError(e.to_string()))
}

/// The probed GPUs on one machine, and a thread of `host` running `body`: the time it ran, and
/// the machine (for its world and the GPUs' records).
pub fn on_machine(c: Cluster, gpus: &[Rc<RefCell<Gpu>>], host: HostId, body: impl FnOnce(&mut ThreadOs) -> Result<(), String> + 'static) -> Result<(Machine<Cluster>, Ps), String> {
    let mut m = Machine::new(c);
    for g in gpus {
        let func = g.borrow().func;
        m.add_device(func, g.clone());
    }
    let span = Rc::new(Cell::new(0));
    let out = span.clone();
    m.spawn("cuda-runner", 0, move |t| {
        let t0 = t.now();
        body(&mut ThreadOs::new(t, host)).map_err(gerr)?;
        out.set(t.now() - t0);
        Ok(())
    });
    m.run().map_err(s)?;
    Ok((m, span.get()))
}

pub fn timing(bytes: u64, total_ps: u64) -> CopyTiming {
    CopyTiming { bytes, total_ps, steps: vec![("cudaMemcpy", total_ps)] }
}

pub fn shared(g: Gpu) -> Rc<RefCell<Gpu>> {
    Rc::new(RefCell::new(g))
}

/// D1: one cudaMemcpy of `len` bytes between `device`'s memory and a buffer in `runner`'s RAM.
pub fn memcpy(json: &str, runner: &str, device: &str, dir: Dir, len: u64) -> Result<CopyTiming, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let g = bind(&mut c, runner, device)?;
    fits(len, &g)?;
    let want = pattern(7, len);
    let host = c.fabric.host_id(runner).map_err(s)?;
    let buf = c.os(runner).map_err(s)?.kmalloc(len).map_err(s)?;
    let gpu = shared(g.gpu);
    match dir {
        Dir::DtoH => gpu.borrow().mem_write(&mut c.fabric, 0, &want)?,
        Dir::HtoD => c.os(runner).map_err(s)?.write(buf, &want).map_err(s)?,
    }
    let mut drv = g.drv;
    let (m, ps) = on_machine(c, &[gpu.clone()], host, move |os| match dir {
        Dir::DtoH => drv.memcpy_dtoh(os, 0, buf, len).map_err(s),
        Dir::HtoD => drv.memcpy_htod(os, 0, buf, len).map_err(s),
    })?;
    let got = match dir {
        Dir::DtoH => m.world().os(runner).map_err(s)?.read(buf, len as usize).map_err(s)?,
        Dir::HtoD => gpu.borrow().mem_read(&m.world().fabric, 0, len as usize)?,
    };
    if got != want {
        return Err(format!("{dir:?} copy of {len} bytes: the destination differs from the source"));
    }
    Ok(timing(len, ps))
}

/// D2: one transfer of `len` bytes from `src`'s memory to `dst`'s, both driven by `runner`.
pub fn gpu_to_gpu(json: &str, runner: &str, src: &str, dst: &str, via: Via, len: u64) -> Result<CopyTiming, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let a = bind(&mut c, runner, src)?;
    let b = bind(&mut c, runner, dst)?;
    fits(len, &a)?;
    fits(len, &b)?;
    let chunk = staging_chunk()?.min(len);
    let host = c.fabric.host_id(runner).map_err(s)?;
    let want = pattern(3, len);
    let (ga, gb) = (shared(a.gpu), shared(b.gpu));
    ga.borrow().mem_write(&mut c.fabric, 0, &want)?;
    let stage = match via {
        Via::Peer => 0,
        Via::Ram => c.os(runner).map_err(s)?.kmalloc(2 * chunk).map_err(s)?,
    };
    let (mut da, mut db, bdev) = (a.drv, b.drv, b.dev);
    let (m, ps) = on_machine(c, &[ga, gb.clone()], host, move |os| match via {
        Via::Peer => da.memcpy_peer(os, 0, bdev, 0, len).map_err(s),
        Via::Ram => staged(os, &mut da, &mut db, stage, chunk, len).map_err(s),
    })
    .map_err(|e| format!("{src} to {dst} ({via:?}): {e}"))?;
    if gb.borrow().mem_read(&m.world().fabric, 0, len as usize)? != want {
        return Err(format!("{src} to {dst} ({via:?}): the target's memory differs from what the source sent"));
    }
    Ok(timing(len, ps))
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
pub fn launch(os: &mut impl Os, bar0: u64, store_at: u64, poll_at: u64, first: bool) -> Result<(), String> {
    let w = |os: &mut _, reg, v: &[u8]| Os::write(os, bar0 + reg, v).map_err(s);
    w(os, K_STORE_AT, &store_at.to_le_bytes())?;
    w(os, K_POLL_AT, &poll_at.to_le_bytes())?;
    w(os, K_OWN_OFF, &0u64.to_le_bytes())?;
    w(os, K_ROUNDS, &(WARMUP_ROUNDS + PING_ROUNDS).to_le_bytes())?;
    w(os, K_FIRST, &(first as u32).to_le_bytes())?;
    w(os, K_LAUNCH, &1u32.to_le_bytes())
}

/// D3: one ping-pong round trip between `a` and `b` (counters in each other's memory, or in a
/// buffer in `runner`'s RAM), in ps: ping's mean over [`PING_ROUNDS`] rounds after
/// [`WARMUP_ROUNDS`], every counter checked by the kernel that waits for it.
pub fn pingpong(json: &str, runner: &str, a: &str, b: &str, via: Via) -> Result<u64, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let mut ga = bind(&mut c, runner, a)?;
    let mut gb = bind(&mut c, runner, b)?;
    let host = c.fabric.host_id(runner).map_err(s)?;
    let mut os = c.os(runner).map_err(s)?;
    let (at_a, at_b) = match via {
        Via::Peer => (ga.drv.map_peer(&mut os, gb.dev, 0, 4).map_err(s)?, gb.drv.map_peer(&mut os, ga.dev, 0, 4).map_err(s)?),
        Via::Ram => {
            let buf = os.kmalloc(4).map_err(s)?;
            (ga.drv.map_host(&mut os, buf, 4).map_err(s)?, gb.drv.map_host(&mut os, buf, 4).map_err(s)?)
        }
    };
    let (bar_a, bar_b) = (os.pci_iomap(ga.dev, 0).map_err(s)?, os.pci_iomap(gb.dev, 0).map_err(s)?);
    drop(os);
    let ram = via == Via::Ram;
    let (pa, pb) = (shared(ga.gpu), shared(gb.gpu));
    let (poll_a, poll_b) = if ram { (at_a.dma, at_b.dma) } else { (0, 0) };
    let (_m, _) = on_machine(c, &[pa.clone(), pb.clone()], host, move |os| {
        launch(os, bar_b, at_b.dma, poll_b, false)?;
        launch(os, bar_a, at_a.dma, poll_a, true)
    })?;
    kernel_round_trip((a, &pa), (b, &pb))
}

/// What the ping-pong kernels of `a` (which began) and `b` measured: ping's mean round trip
/// over [`PING_ROUNDS`] after [`WARMUP_ROUNDS`], or why they did not finish.
pub fn kernel_round_trip((a, pa): (&str, &Rc<RefCell<Gpu>>), (b, pb): (&str, &Rc<RefCell<Gpu>>)) -> Result<u64, String> {
    let (ka, kb) = (pa.borrow().kernel.clone(), pb.borrow().kernel.clone());
    for (name, k) in [(a, &ka), (b, &kb)] {
        if let Some(at) = k.fault {
            return Err(format!("ping-pong: {name}'s kernel faulted at {at:#x}"));
        }
        if let Some(g) = k.gave_up {
            return Err(format!("ping-pong: {name}'s kernel gave up at {} ps after {SPIN_LIMIT} loads without counter {} (last read {})", g.at, g.expected, g.last_read));
        }
        if !k.done {
            return Err(format!("ping-pong: {name}'s kernel saw {} of {} counters", k.seen.len(), WARMUP_ROUNDS + PING_ROUNDS));
        }
    }
    let start = ka.stores[WARMUP_ROUNDS as usize];
    Ok((ka.seen[ka.seen.len() - 1] - start) / PING_ROUNDS as u64)
}
