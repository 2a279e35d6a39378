//! A GPU ping-pong (000 §7.2, Fig 14, as a workload): the ping-pong kernel of
//! `devlend_devices::gpu_kernel` on two GPUs, passing a counter `rounds` times, the counters in
//! each other's memory (peer-to-peer stores) or in a buffer in the runner's RAM (each GPU stores
//! there and spins on it with loads). The runner's thread programs both kernels through their BAR 0
//! with CPU stores at the workload's time, the waiting GPU ("pong") first; the kernels then act on
//! the machine's clock alone, so their stores and loads contend with every other workload.
//! A round trip is the time from one of the first GPU's ("ping") stores to its seeing the answer.

use crate::attach::{attach, with_os, Guests, Runner};
use crate::error::{BadSpec, WResult, WorkloadError};
use devlend_devices::gpu::Gpu;
use devlend_devices::gpu_kernel::{Kernel, KernelStop, K_FIRST, K_LAUNCH, K_OWN_OFF, K_POLL_AT, K_ROUNDS, K_STORE_AT};
use devlend_drivers::error::{DResult, DeviceError};
use devlend_drivers::gpu_driver::{Driver, Mapping};
use devlend_drivers::registry::Serves;
use devlend_engine::machine::{Machine, ThreadError};
use devlend_engine::queue::Ps;
use devlend_host::{Cluster, Os, ThreadKernel};
use std::cell::RefCell;
use std::rc::Rc;

/// Where the two kernels meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Each GPU stores into the other's memory (BAR 1) and spins on its own.
    Peer,
    /// Both store into, and spin with loads on, one 4-byte buffer in the runner's RAM.
    Ram,
}

impl Via {
    pub fn parse(s: &str) -> Option<Via> {
        match s.to_ascii_lowercase().as_str() {
            "peer" | "p2p" => Some(Via::Peer),
            "ram" | "host" => Some(Via::Ram),
            _ => None,
        }
    }
}

/// What the round trips took: every one of them, and their mean and percentiles (ps).
#[derive(Clone, Debug, PartialEq)]
pub struct RoundTrips {
    pub rounds: u32,
    pub mean_ps: f64,
    pub p50_ps: Ps,
    pub p99_ps: Ps,
    pub max_ps: Ps,
    pub each_ps: Vec<Ps>,
}

impl RoundTrips {
    /// From each round trip's time (at least one).
    pub fn of(each_ps: Vec<Ps>) -> RoundTrips {
        let mut sorted = each_ps.clone();
        sorted.sort_unstable();
        let pct = |p: usize| sorted[((sorted.len() * p).div_ceil(100)).max(1) - 1];
        let mean_ps = each_ps.iter().sum::<u64>() as f64 / each_ps.len() as f64;
        RoundTrips { rounds: each_ps.len() as u32, mean_ps, p50_ps: pct(50), p99_ps: pct(99), max_ps: sorted[sorted.len() - 1], each_ps }
    }
}

/// A ping-pong started on the machine: the two GPUs, whose kernels record what happened.
pub(crate) struct PingPong {
    ping: (String, Rc<RefCell<Gpu>>),
    pong: (String, Rc<RefCell<Gpu>>),
    rounds: u32,
}

struct Side {
    gpu: Gpu,
    func: devlend_fabric::model::FuncId,
    dev: devlend_host::DevId,
    drv: Driver,
}

fn side(c: &mut Cluster, guests: &Guests, w: &str, runner: &str, device: &str) -> WResult<(Side, Runner)> {
    let a = attach(c, guests, w, runner, device, Serves::DeviceCopy)?;
    let gpu = Gpu::new(&mut c.fabric, a.func).map_err(WorkloadError::setup(w))?;
    let drv = with_os!(&a.runner, *c, |os| Ok(Driver::probe(os, a.dev)))
        .map_err(WorkloadError::host_setup(w, "the runner's kernel"))?
        .map_err(WorkloadError::setup(w))?;
    Ok((Side { gpu, func: a.func, dev: a.dev, drv }, a.runner))
}

/// Map each GPU's store target (the other's BAR 1, or one buffer in the runner's RAM) and find
/// both BAR 0s, in the runner's kernel: ((to_b, to_a), (bar_a, bar_b)).
fn map<O: Os>(os: &mut O, via: Via, (a, b): (&mut Side, &mut Side)) -> DResult<((Mapping, Mapping), (u64, u64))> {
    let maps = match via {
        Via::Peer => (a.drv.map_peer(os, b.dev, 0, 4)?, b.drv.map_peer(os, a.dev, 0, 4)?),
        Via::Ram => {
            let buf = os.kmalloc(4).map_err(DeviceError::host("kmalloc", "the counter buffer"))?;
            os.write(buf, &[0; 4]).map_err(DeviceError::host("write", "the counter buffer"))?;
            (a.drv.map_host(os, buf, 4)?, b.drv.map_host(os, buf, 4)?)
        }
    };
    let iomap = |os: &mut O, s: &Side| {
        os.pci_iomap(s.dev, 0).map_err(|error| DeviceError::Host { what: "pci_iomap BAR 0", device: format!("function #{}", s.func), error })
    };
    Ok((maps, (iomap(os, a)?, iomap(os, b)?)))
}

/// The kernel's registers: (offset, value) stores, launch last.
fn program(store_at: u64, poll_at: u64, rounds: u32, first: bool) -> Vec<(u64, Vec<u8>)> {
    vec![
        (K_STORE_AT, store_at.to_le_bytes().to_vec()),
        (K_POLL_AT, poll_at.to_le_bytes().to_vec()),
        (K_OWN_OFF, 0u64.to_le_bytes().to_vec()),
        (K_ROUNDS, rounds.to_le_bytes().to_vec()),
        (K_FIRST, (first as u32).to_le_bytes().to_vec()),
        (K_LAUNCH, 1u32.to_le_bytes().to_vec()),
    ]
}

/// Attach both GPUs for `runner`, map each one's store target, and start the launching thread.
pub(crate) fn start(m: &mut Machine<Cluster>, guests: &Guests, w: &str, (runner, gpus): (&str, [&str; 2]), via: Via, rounds: u32, at: Ps) -> WResult<PingPong> {
    if rounds == 0 {
        return Err(WorkloadError::invalid(w, BadSpec::NoRounds));
    }
    if gpus[0] == gpus[1] {
        return Err(WorkloadError::invalid(w, BadSpec::SameGpu { gpu: gpus[0].into() }));
    }
    let mut c = m.world();
    let (mut a, runner_k) = side(&mut c, guests, w, runner, gpus[0])?;
    let (mut b, _) = side(&mut c, guests, w, runner, gpus[1])?;
    let mapped = with_os!(&runner_k, c, |os| Ok(map(os, via, (&mut a, &mut b))));
    let ((to_b, to_a), (bar_a, bar_b)) = mapped.map_err(WorkloadError::host_setup(w, "the runner's kernel"))?.map_err(WorkloadError::setup(w))?;
    drop(c);
    let (Side { gpu: gpu_a, func: func_a, .. }, Side { gpu: gpu_b, func: func_b, .. }) = (a, b);
    let (poll_a, poll_b) = if via == Via::Ram { (to_b.dma, to_a.dma) } else { (0, 0) };
    let stores: Vec<(u64, Vec<u8>)> = program(to_a.dma, poll_b, rounds, false)
        .into_iter()
        .map(|(o, v)| (bar_b + o, v))
        .chain(program(to_b.dma, poll_a, rounds, true).into_iter().map(|(o, v)| (bar_a + o, v)))
        .collect();
    let (ga, gb) = (Rc::new(RefCell::new(gpu_a)), Rc::new(RefCell::new(gpu_b)));
    m.add_device(func_a, ga.clone());
    m.add_device(func_b, gb.clone());
    match runner_k {
        Runner::Host(h) => launch(m, w, at, h, stores),
        Runner::Vm(g) => launch(m, w, at, g, stores),
    }
    Ok(PingPong { ping: (gpus[0].into(), ga), pong: (gpus[1].into(), gb), rounds })
}

/// The runner's thread that programs both kernels with CPU stores, at `at`.
fn launch<K: ThreadKernel>(m: &mut Machine<Cluster>, w: &str, at: Ps, k: K, stores: Vec<(u64, Vec<u8>)>) {
    m.spawn(&format!("{w}/launch"), at, move |t| {
        let mut os = k.on(t).map_err(ThreadError::other)?;
        for (addr, v) in &stores {
            Os::write(&mut os, *addr, v).map_err(ThreadError::other)?;
        }
        Ok(())
    });
}

impl PingPong {
    /// After the run: both kernels done without a fault; the ping side's round trips and the
    /// time from its first store to its last answer.
    pub(crate) fn result(&self, w: &str) -> WResult<(RoundTrips, Ps, Ps)> {
        let failed = WorkloadError::failed(w);
        for (name, gpu) in [&self.ping, &self.pong] {
            let k = &gpu.borrow().kernel;
            check(k, name, self.rounds).map_err(&failed)?;
        }
        let k = &self.ping.1.borrow().kernel;
        let each: Vec<Ps> = k.stores.iter().zip(&k.seen).map(|(s, e)| e - s).collect();
        Ok((RoundTrips::of(each), k.stores[0], k.seen[k.seen.len() - 1]))
    }
}

/// A kernel that faulted, gave up spinning, or did not see every counter.
fn check(k: &Kernel, name: &str, rounds: u32) -> DResult<()> {
    let stop = if let Some(at) = k.fault {
        KernelStop::Faulted { at }
    } else if let Some(g) = k.gave_up {
        KernelStop::GaveUp(g)
    } else if !k.done || k.seen.len() < rounds as usize {
        KernelStop::Short { seen: k.seen.len(), rounds }
    } else {
        return Ok(());
    };
    Err(DeviceError::Kernel { gpu: name.into(), stop })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_order_statistics_of_the_round_trips() {
        let r = RoundTrips::of((1..=100).rev().collect());
        assert_eq!((r.p50_ps, r.p99_ps, r.max_ps, r.rounds), (50, 99, 100, 100));
        assert!((r.mean_ps - 50.5).abs() < 1e-9);
        let one = RoundTrips::of(vec![7]);
        assert_eq!((one.p50_ps, one.p99_ps), (7, 7));
    }
}
