//! The ping-pong kernel of 000 §7.2 (Fig 14) as a small actor inside the GPU model: CUDA code on
//! each GPU "writing [a counter] to the other GPU's memory pointer" (or to a buffer in RAM) and
//! spinning until the other GPU's answer arrives. Launched by stores to BAR 0's kernel block:
//!
//! | offset | register     | size | meaning                                                       |
//! |--------|--------------|------|---------------------------------------------------------------|
//! | 0x1000 | `K_STORE_AT` | 8    | DMA address the kernel stores its counter to (peer BAR 1, RAM) |
//! | 0x1008 | `K_POLL_AT`  | 8    | DMA address it spins on with 4-byte loads; 0: its own memory   |
//! | 0x1010 | `K_OWN_OFF`  | 8    | device-memory offset of its counter when it polls its memory  |
//! | 0x1018 | `K_ROUNDS`   | 4    | round trips                                                   |
//! | 0x101c | `K_FIRST`    | 4    | 1: this GPU stores first (ping); 0: it waits first (pong)     |
//! | 0x1020 | `K_LAUNCH`   | 4    | any store launches the kernel                                 |
//!
//! The counter goes 1, 2, 3...: ping stores odd values and waits for the next even one, pong the
//! reverse. The kernel's accesses go through the GPU's memory system, the device's effective
//! parameters (`devlend_fabric::tuning`):
//! - a store leaves the SM through L1/L2 and the crossbar before it is a 4-byte DMA write on PCIe,
//!   `sm_to_pcie_ps` after the kernel executed it;
//! - a kernel polling its own memory spins on volatile loads, one at a time, each `sm_poll_ps`
//!   long and sampling memory half-way (when it reaches L2). A store arriving in BAR 1 is in
//!   memory one BAR access (`endpoint_latency_ps`) after it landed; the first load sampling after
//!   that sees it, when it returns: half a period later on average over the loop's phase, plus
//!   the half a load takes to return, so one period after it is in memory. The
//!   mean, as 000 reports means of 100,000 round trips: a single round trip's phase would make
//!   the result jump by whole periods with the path, which a fit of `sm_poll_ps` could not use;
//! - a kernel polling RAM keeps one 4-byte DMA read in flight at a time, each issued
//!   `sm_to_pcie_ps` after the kernel's load and its data reaching the SM `sm_to_pcie_ps` after
//!   it returned; it notices the value with the first load served after it landed.
//!
//! The kernel records when it stored and when it saw each answer.
//!
//! A kernel polling RAM gives up after [`SPIN_LIMIT`] loads in a row that did not bring the value
//! it waits for, and records what it last read ([`Kernel::gave_up`]): a GPU kernel spins without
//! end, but a simulation must end, and a counter that never arrives (a store lost on the fabric,
//! reads answered with other bytes) would otherwise keep the machine's queue busy forever. The
//! limit is the simulator's, not the hardware's; a run that keeps to the protocol needs a few
//! loads per answer.

use crate::gpu::{Gpu, Token};
use devlend_engine::machine::{Cx, FlowDone, World};
use devlend_engine::queue::Ps;

pub const K_STORE_AT: u64 = 0x1000;
pub const K_POLL_AT: u64 = 0x1008;
pub const K_OWN_OFF: u64 = 0x1010;
pub const K_ROUNDS: u64 = 0x1018;
pub const K_FIRST: u64 = 0x101c;
pub const K_LAUNCH: u64 = 0x1020;

const STORE: u8 = 0;
const LOAD: u8 = 1;
const NOTICE: u8 = 2;
/// A RAM load's data has come back to the SM.
const LOADED: u8 = 3;

/// Loads in a row without the awaited value after which a kernel polling RAM gives up.
pub const SPIN_LIMIT: u32 = 1 << 16;

/// A kernel that stopped spinning: the value it waited for, the value it last read, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GaveUp {
    pub expected: u32,
    pub last_read: u32,
    pub at: Ps,
}

/// Why a ping-pong kernel did not finish its rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelStop {
    /// A load or store of the kernel at `at` faulted.
    Faulted { at: u64 },
    /// It stopped spinning after [`SPIN_LIMIT`] loads without the value it waited for.
    GaveUp(GaveUp),
    /// It saw `seen` of its `rounds` counters.
    Short { seen: usize, rounds: u32 },
}

impl std::fmt::Display for KernelStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelStop::Faulted { at } => write!(f, "faulted at {at:#x}"),
            KernelStop::GaveUp(g) => write!(f, "gave up at {} ps after {SPIN_LIMIT} loads without counter {} (last read {})", g.at, g.expected, g.last_read),
            KernelStop::Short { seen, rounds } => write!(f, "saw {seen} of {rounds} counters"),
        }
    }
}

/// A running (or finished) ping-pong kernel and what it recorded.
#[derive(Clone, Debug, Default)]
pub struct Kernel {
    store_at: u64,
    poll_at: u64,
    own: u64,
    rounds: u32,
    /// The counter value this kernel waits for next.
    expect: u32,
    loading: bool,
    /// Loads since the last value it waited for.
    spins: u32,
    /// The data of its last RAM load, on its way back to the SM.
    loaded: Vec<u8>,
    pub done: bool,
    /// When each of its stores was issued.
    pub stores: Vec<Ps>,
    /// When it saw each value it waited for.
    pub seen: Vec<Ps>,
    pub fault: Option<u64>,
    /// Set when it stopped after [`SPIN_LIMIT`] loads without its value.
    pub gave_up: Option<GaveUp>,
}

impl Gpu {
    pub(crate) fn kernel_launch<W: World>(&mut self, cx: &mut Cx<W>) {
        let f = cx.fabric();
        let first = self.reg(f, K_FIRST, 4) == 1;
        self.kernel = Kernel {
            store_at: self.reg(f, K_STORE_AT, 8),
            poll_at: self.reg(f, K_POLL_AT, 8),
            own: self.reg(f, K_OWN_OFF, 8),
            rounds: self.reg(f, K_ROUNDS, 4) as u32,
            expect: if first { 2 } else { 1 },
            ..Kernel::default()
        };
        if first {
            self.kernel_store(cx, 1);
        }
        self.kernel_poll(cx);
    }

    /// The SM's side of the GPU's memory system: (to or from PCIe one way, a load from its own memory).
    fn sm_ps<W: World>(&self, cx: &mut Cx<W>) -> (Ps, Ps) {
        let t = devlend_fabric::tuning::of_func(cx.fabric(), self.func);
        (t.sm_to_pcie_ps, t.sm_poll_ps)
    }

    fn kernel_store<W: World>(&mut self, cx: &mut Cx<W>, v: u32) {
        self.kernel.stores.push(cx.now());
        let out = self.sm_ps(cx).0;
        if cx.dma_write_after(out, self.kernel.store_at, v.to_le_bytes().to_vec(), Token::Kernel(STORE).encode()).is_err() {
            self.kernel.fault = Some(self.kernel.store_at);
            self.kernel.done = true;
        }
    }

    /// Spin: with a load in flight (RAM), or waiting for a store into its memory.
    fn kernel_poll<W: World>(&mut self, cx: &mut Cx<W>) {
        let out = self.sm_ps(cx).0;
        let k = &mut self.kernel;
        if k.done || k.poll_at == 0 || k.loading {
            return;
        }
        k.loading = true;
        if cx.dma_read_after(out, k.poll_at, 4, Token::Kernel(LOAD).encode()).is_err() {
            k.fault = Some(k.poll_at);
            k.done = true;
        }
    }

    /// A store landed in BAR 1 at `offset`: in memory one BAR access later, and seen by the
    /// polling loop one load period after that (half a period to the next load's sample, on
    /// average over the loop's phase, and half for that load to return).
    pub(crate) fn kernel_sees<W: World>(&mut self, cx: &mut Cx<W>, offset: u64) {
        if !self.kernel.done && self.kernel.poll_at == 0 && offset == self.kernel.own {
            let memory = devlend_fabric::tuning::endpoint_latency_ps(cx.fabric(), self.func);
            let period = self.sm_ps(cx).1;
            cx.set_timer(memory + period, Token::Kernel(NOTICE).encode());
        }
    }

    pub(crate) fn kernel_timer<W: World>(&mut self, cx: &mut Cx<W>, step: u8) {
        if step == NOTICE {
            let v = self.mem_read(cx.fabric(), self.kernel.own, 4).unwrap_or_default();
            self.kernel_check(cx, &v);
        } else if step == LOADED {
            self.kernel.loading = false;
            let v = std::mem::take(&mut self.kernel.loaded);
            if !self.kernel_check(cx, &v) {
                self.kernel_spun(cx.now(), &v);
            }
            self.kernel_poll(cx);
        }
    }

    pub(crate) fn kernel_dma_done<W: World>(&mut self, cx: &mut Cx<W>, step: u8, done: FlowDone) {
        if let Some((a, _)) = done.fault {
            self.kernel.fault = Some(a);
            self.kernel.done = true;
            return;
        }
        if step == LOAD {
            self.kernel.loaded = done.data;
            let back = self.sm_ps(cx).0;
            cx.set_timer(back, Token::Kernel(LOADED).encode());
        }
    }

    /// Count a load that did not bring the awaited value; stop at [`SPIN_LIMIT`].
    fn kernel_spun(&mut self, now: Ps, v: &[u8]) {
        let k = &mut self.kernel;
        if k.done {
            return;
        }
        k.spins += 1;
        if k.spins >= SPIN_LIMIT {
            let last_read = v.get(..4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()));
            k.gave_up = Some(GaveUp { expected: k.expect, last_read, at: now });
            k.done = true;
        }
    }

    /// The kernel reads its counter: the value it waits for means its turn (true).
    fn kernel_check<W: World>(&mut self, cx: &mut Cx<W>, v: &[u8]) -> bool {
        let k = &mut self.kernel;
        if k.done || v.len() < 4 || u32::from_le_bytes(v[..4].try_into().unwrap()) != k.expect {
            return false;
        }
        k.seen.push(cx.now());
        k.spins = 0;
        let answer = k.expect + 1;
        k.expect += 2;
        // Ping finishes on its last answer; pong after its last store.
        let ping = k.expect.is_multiple_of(2);
        if ping && k.seen.len() as u32 >= k.rounds {
            k.done = true;
            return true;
        }
        if !ping && k.seen.len() as u32 >= k.rounds {
            k.done = true;
        }
        self.kernel_store(cx, answer);
        true
    }
}
