//! A GPU ping-pong (000 §7.2, Fig 14, as a workload): the ping-pong kernel of
//! `devlend_devices::gpu_kernel` on two GPUs, passing a counter `rounds` times, the counters in
//! each other's memory (peer-to-peer stores) or in a buffer in the runner's RAM (each GPU stores
//! there and spins on it with loads). The runner's thread programs both kernels through their BAR 0
//! with CPU stores at the workload's time, the waiting GPU ("pong") first; the kernels then act on
//! the machine's clock alone, so their stores and loads contend with every other workload.
//! A round trip is the time from one of the first GPU's ("ping") stores to its seeing the answer.

use crate::attach::attach;
use crate::error::{WResult, WorkloadError};
use devlend_devices::gpu::Gpu;
use devlend_devices::gpu_driver::{Driver, Mapping};
use devlend_devices::gpu_kernel::{Kernel, K_FIRST, K_LAUNCH, K_OWN_OFF, K_POLL_AT, K_ROUNDS, K_STORE_AT};
use devlend_engine::machine::{Machine, ThreadError};
use devlend_engine::queue::Ps;
use devlend_host::{Cluster, Os, ThreadOs};
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

fn setup(w: &str) -> impl Fn(String) -> WorkloadError + '_ {
    move |message| WorkloadError::Setup { workload: w.into(), message }
}

fn side(c: &mut Cluster, w: &str, runner: &str, device: &str) -> WResult<Side> {
    let a = attach(c, w, runner, device, "gpu")?;
    let gpu = Gpu::new(&mut c.fabric, a.func).map_err(setup(w))?;
    let mut os = c.os(a.host).map_err(|e| setup(w)(e.to_string()))?;
    let drv = Driver::probe(&mut os, a.dev).map_err(|e| setup(w)(e.to_string()))?;
    Ok(Side { gpu, func: a.func, dev: a.dev, drv })
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
pub(crate) fn start(m: &mut Machine<Cluster>, w: &str, runner: &str, gpus: [&str; 2], via: Via, rounds: u32, at: Ps) -> WResult<PingPong> {
    if rounds == 0 {
        return Err(WorkloadError::Invalid { workload: w.into(), why: "rounds: expected at least one round trip".into() });
    }
    if gpus[0] == gpus[1] {
        return Err(WorkloadError::Invalid { workload: w.into(), why: format!("gpus: {} plays both ends; a ping-pong takes two GPUs", gpus[0]) });
    }
    let mut c = m.world();
    let Side { gpu: gpu_a, func: func_a, dev: dev_a, drv: mut drv_a } = side(&mut c, w, runner, gpus[0])?;
    let Side { gpu: gpu_b, func: func_b, dev: dev_b, drv: mut drv_b } = side(&mut c, w, runner, gpus[1])?;
    let host = c.fabric.host_id(runner).map_err(|e| setup(w)(e.to_string()))?;
    let mut os = c.os(host).map_err(|e| setup(w)(e.to_string()))?;
    let map_err = |e: devlend_devices::gpu_driver::GpuError| setup(w)(e.0);
    let (to_b, to_a): (Mapping, Mapping) = match via {
        Via::Peer => (drv_a.map_peer(&mut os, dev_b, 0, 4).map_err(map_err)?, drv_b.map_peer(&mut os, dev_a, 0, 4).map_err(map_err)?),
        Via::Ram => {
            let buf = os.kmalloc(4).map_err(|e| setup(w)(e.to_string()))?;
            os.write(buf, &[0; 4]).map_err(|e| setup(w)(e.to_string()))?;
            (drv_a.map_host(&mut os, buf, 4).map_err(map_err)?, drv_b.map_host(&mut os, buf, 4).map_err(map_err)?)
        }
    };
    let bar = |os: &mut devlend_host::HostOs<'_>, dev| os.pci_iomap(dev, 0).map_err(|e| setup(w)(e.to_string()));
    let (bar_a, bar_b) = (bar(&mut os, dev_a)?, bar(&mut os, dev_b)?);
    drop(os);
    drop(c);
    let (poll_a, poll_b) = if via == Via::Ram { (to_b.dma, to_a.dma) } else { (0, 0) };
    let stores: Vec<(u64, Vec<u8>)> = program(to_a.dma, poll_b, rounds, false).into_iter().map(|(o, v)| (bar_b + o, v)).chain(program(to_b.dma, poll_a, rounds, true).into_iter().map(|(o, v)| (bar_a + o, v))).collect();
    let (ga, gb) = (Rc::new(RefCell::new(gpu_a)), Rc::new(RefCell::new(gpu_b)));
    m.add_device(func_a, ga.clone());
    m.add_device(func_b, gb.clone());
    m.spawn(&format!("{w}/launch"), at, move |t| {
        let mut os = ThreadOs::new(t, host);
        for (addr, v) in &stores {
            Os::write(&mut os, *addr, v).map_err(ThreadError::other)?;
        }
        Ok(())
    });
    Ok(PingPong { ping: (gpus[0].into(), ga), pong: (gpus[1].into(), gb), rounds })
}

impl PingPong {
    /// After the run: both kernels done without a fault; the ping side's round trips and the
    /// time from its first store to its last answer.
    pub(crate) fn result(&self, w: &str) -> WResult<(RoundTrips, Ps, Ps)> {
        let failed = |message: String| WorkloadError::Failed { workload: w.into(), message };
        for (name, gpu) in [&self.ping, &self.pong] {
            let k = &gpu.borrow().kernel;
            check(k, name, self.rounds).map_err(failed)?;
        }
        let k = &self.ping.1.borrow().kernel;
        let each: Vec<Ps> = k.stores.iter().zip(&k.seen).map(|(s, e)| e - s).collect();
        Ok((RoundTrips::of(each), k.stores[0], k.seen[k.seen.len() - 1]))
    }
}

/// A kernel that faulted, gave up spinning, or did not see every counter.
fn check(k: &Kernel, name: &str, rounds: u32) -> Result<(), String> {
    if let Some(at) = k.fault {
        return Err(format!("{name}'s kernel faulted at {at:#x}"));
    }
    if let Some(g) = k.gave_up {
        return Err(format!("{name}'s kernel gave up at {} ps without counter {} (last read {})", g.at, g.expected, g.last_read));
    }
    if !k.done || k.seen.len() < rounds as usize {
        return Err(format!("{name}'s kernel saw {} of {rounds} counters", k.seen.len()));
    }
    Ok(())
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
