//! The GPU workloads of 000 §7.1-7.2 run as software on the simulated hosts: the GPU model and
//! its unmodified driver on a local GPU, or on GPUs the runner borrows (Device Lending does the
//! programming, `devlend-host`). Each function builds a [`Cluster`] from topology JSON (without a
//! `setup` section), checks the bytes arrived, and times the accesses the driver and the GPUs
//! made with `time_ops`.
//!
//! - D1 ([`memcpy`]): bandwidthTest, one cudaMemcpy host<->device (000 §7.1, Fig 10). CUDA's
//!   pipelining of bandwidthTest's 10 back-to-back copies (000 footnote 3) is not modelled: one
//!   copy, driver handshake included, as the GPU-to-GPU program of §7.2 measures.
//! - D2 ([`gpu_to_gpu`]): one GPU-to-GPU transfer, peer-to-peer (the source's copy engine writes
//!   the target's BAR 1) or bounced through a buffer in the runner's RAM (000 §7.2, Fig 12).
//! - D3 ([`pingpong`]): the ping-pong kernel's round trip (000 §7.2, Fig 14): GPU-initiated
//!   4-byte stores, each timed alone in steady state. A GPU polling its own memory notices a store
//!   one device-memory access (`timing.endpoint_latency_ps`) after it lands; one polling RAM
//!   notices it one read round trip later (its load in flight at a random phase: half a round
//!   trip on average, plus the completion's way back), as python/devlend/experiments/pingpong.py.

use crate::gpu::Gpu;
use crate::gpu_driver::Driver;
use crate::{time_ops, Op};
use devlend_host::{Cluster, DevId, Os};

#[derive(Clone, Debug)]
pub struct CopyTiming {
    pub bytes: u64,
    /// From the first register store to the driver seeing the semaphore, ps.
    pub total_ps: u64,
    /// Each access timed alone, in program order.
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

fn pattern(seed: u8, len: u64) -> Vec<u8> {
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

fn fits(len: u64, g: &Bound) -> Result<(), String> {
    match len {
        0 => Err("a copy of zero bytes".into()),
        n if n > g.drv.mem_size => Err(format!("{n} bytes do not fit the GPU's {} bytes of memory", g.drv.mem_size)),
        _ => Ok(()),
    }
}

/// Time a program-ordered list of accesses: the whole, and each step alone.
pub fn time_steps(c: &mut Cluster, ops: &[Op], bytes: u64) -> Result<CopyTiming, String> {
    let mut steps = Vec::with_capacity(ops.len());
    for op in ops {
        steps.push((op.what, time_ops(&mut c.fabric, std::slice::from_ref(op))?));
    }
    Ok(CopyTiming { bytes, total_ps: time_ops(&mut c.fabric, ops)?, steps })
}

/// D1: one cudaMemcpy of `len` bytes between `device`'s memory and a buffer in `runner`'s RAM.
pub fn memcpy(json: &str, runner: &str, device: &str, dir: Dir, len: u64) -> Result<CopyTiming, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let mut g = bind(&mut c, runner, device)?;
    fits(len, &g)?;
    let want = pattern(7, len);
    let mut os = c.os(runner).map_err(s)?;
    let buf = os.kmalloc(len).map_err(s)?;
    g.drv.ops.clear();
    let got = match dir {
        Dir::DtoH => {
            os.run_hardware(|f| g.gpu.mem_write(f, 0, &want))?;
            g.drv.memcpy_dtoh(&mut os, &mut g.gpu, 0, buf, len).map_err(s)?;
            os.read(buf, len as usize).map_err(s)?
        }
        Dir::HtoD => {
            os.write(buf, &want).map_err(s)?;
            g.drv.memcpy_htod(&mut os, &mut g.gpu, 0, buf, len).map_err(s)?;
            os.run_hardware(|f| g.gpu.mem_read(f, 0, len as usize))?
        }
    };
    if got != want {
        return Err(format!("{dir:?} copy of {len} bytes: the destination differs from the source"));
    }
    time_steps(&mut c, &g.drv.ops, len)
}

/// D2: one transfer of `len` bytes from `src`'s memory to `dst`'s, both driven by `runner`.
pub fn gpu_to_gpu(json: &str, runner: &str, src: &str, dst: &str, via: Via, len: u64) -> Result<CopyTiming, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let mut a = bind(&mut c, runner, src)?;
    let mut b = bind(&mut c, runner, dst)?;
    fits(len, &a)?;
    fits(len, &b)?;
    let mut os = c.os(runner).map_err(s)?;
    let ops = transfer(&mut os, &mut a, &mut b, via, len).map_err(|e| format!("{src} to {dst} ({via:?}): {e}"))?;
    drop(os);
    time_steps(&mut c, &ops, len)
}

/// Copy `len` bytes from `a`'s memory to `b`'s (peer-to-peer, or through a kernel buffer), under
/// any kernel (a host's or a guest's), check they arrived, and return every access made.
pub fn transfer(os: &mut impl Os, a: &mut Bound, b: &mut Bound, via: Via, len: u64) -> Result<Vec<Op>, String> {
    let want = pattern(3, len);
    os.run_hardware(|f| a.gpu.mem_write(f, 0, &want))?;
    a.drv.ops.clear();
    b.drv.ops.clear();
    match via {
        Via::Peer => a.drv.memcpy_peer(os, &mut a.gpu, 0, b.dev, 0, len).map_err(s)?,
        Via::Ram => {
            let buf = os.kmalloc(len).map_err(s)?;
            a.drv.memcpy_dtoh(os, &mut a.gpu, 0, buf, len).map_err(s)?;
            b.drv.memcpy_htod(os, &mut b.gpu, 0, buf, len).map_err(s)?;
        }
    }
    if os.run_hardware(|f| b.gpu.mem_read(f, 0, len as usize))? != want {
        return Err("the target's memory differs from what the source sent".into());
    }
    Ok(a.drv.ops.iter().chain(&b.drv.ops).cloned().collect())
}

/// One half of a ping-pong: `from` stores `value` at `store_at`; `to` sees it in its own memory
/// (peer-to-peer) or by loading it from `poll_at` (RAM). Returns the accesses.
pub fn half(os: &mut impl Os, from: &mut Bound, to: &mut Bound, store_at: u64, poll_at: Option<u64>, value: u32) -> Result<Vec<Op>, String> {
    os.run_hardware(|f| from.gpu.store(f, store_at, &value.to_le_bytes()))?;
    let seen = match poll_at {
        None => os.run_hardware(|f| to.gpu.mem_read(f, 0, 4))?,
        Some(at) => os.run_hardware(|f| to.gpu.load(f, at, 4))?,
    };
    if seen != value.to_le_bytes() {
        return Err(format!("ping-pong: counter {value} did not arrive (read {seen:?})"));
    }
    Ok(from.gpu.ops.drain(..).chain(to.gpu.ops.drain(..)).collect())
}

/// D3: one ping-pong round trip between `a` and `b` (counters in each other's memory, or in a
/// buffer in `runner`'s RAM), in ps; every counter is checked where it lands.
pub fn pingpong(json: &str, runner: &str, a: &str, b: &str, via: Via) -> Result<u64, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let mut ga = bind(&mut c, runner, a)?;
    let mut gb = bind(&mut c, runner, b)?;
    let mut os = c.os(runner).map_err(s)?;
    // Where each GPU stores: the other's memory, or its own mapping of one RAM buffer.
    let (at_a, at_b) = match via {
        Via::Peer => (ga.drv.map_peer(&mut os, gb.dev, 0, 4).map_err(s)?, gb.drv.map_peer(&mut os, ga.dev, 0, 4).map_err(s)?),
        Via::Ram => {
            let buf = os.kmalloc(4).map_err(s)?;
            (ga.drv.map_host(&mut os, buf, 4).map_err(s)?, gb.drv.map_host(&mut os, buf, 4).map_err(s)?)
        }
    };
    let ram = via == Via::Ram;
    let mut ops = half(&mut os, &mut ga, &mut gb, at_a.dma, ram.then_some(at_b.dma), 1)?;
    ops.extend(half(&mut os, &mut gb, &mut ga, at_b.dma, ram.then_some(at_a.dma), 2)?);
    let mut total = 0;
    for op in &ops {
        total += time_ops(&mut c.fabric, std::slice::from_ref(op))?;
    }
    let notice = devlend_engine::params::timing().endpoint_latency_ps;
    Ok(total + if ram { 0 } else { 2 * notice })
}
