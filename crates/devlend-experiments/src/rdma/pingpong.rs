//! The ntb_pingpong figure of issue 6: the doorbell and scratchpad bounce of Linux's
//! drivers/ntb/test/ntb_pingpong, as two threads on the session's machine (003 §2.2 doorbells and
//! scratchpads, Fig 6), between the two ends of any NTB.
//!
//! Semantics taken from the Linux tool (Documentation/driver-api/ntb.rst): the two peers interrupt
//! each other with a doorbell bit mask that is shifted by one each round, starting again from
//! `init_db` once every bit has been shifted out of the NT port's valid doorbell bits; before
//! ringing, each side reads its first scratchpad and writes that value plus one into the peer's
//! first scratchpad; `delay` is the pause between taking the doorbell interrupt and ringing back.
//!
//! On the machine (devlend-devices' `plx_ntregs`): each side is a thread; a scratchpad read is a CPU
//! load of its NT endpoint's register, blocking for the round trip; the peer-scratchpad write and
//! the doorbell are UC stores into its own NT endpoint's BAR, which act when they land there; the
//! rung endpoint sends its MSI into its host, and the waiting thread wakes when it lands, pays the
//! interrupt entry (`[rdma_sw] irq_entry_ps`), reads its doorbell register (a round trip), clears
//! it (a UC store) and waits `delay` before pinging back. The counter travels in the registers.
//! A link that goes down stops the bounce with [`RdmaError::LinkDown`] naming the ping.

use devlend_devices::plx_ntregs::{doorbell_irq_count, CpuRegs};
use devlend_engine::machine::{Machine, Thread, ThreadError, Watch};
use devlend_engine::queue::Ps;
use devlend_fabric::Fabric;
use devlend_rdma::error::ToolError;
use devlend_rdma::node::Node;
use devlend_rdma::params::params;
use devlend_rdma::pio::uc_store;
use devlend_rdma::{RResult, RdmaError, Shmem};
use std::cell::RefCell;
use std::rc::Rc;

/// The scratchpad the counter travels in (the Linux tool's first scratchpad).
pub const SPAD: usize = 0;

/// The parts of one ping, in order.
pub const STEPS: [&str; 6] = [
    "read own scratchpad",
    "write peer scratchpad (UC store)",
    "doorbell store, MSI, interrupt entry",
    "handler reads doorbell",
    "handler clears doorbell (UC store)",
    "delay before ringing back",
];

#[derive(Clone, Debug)]
pub struct PingPong {
    pub pings: u32,
    /// The counter as the last receiver read it (one per ping, starting from the first value).
    pub counter: u32,
    /// Doorbell bits of every ping, in order.
    pub bits: Vec<u64>,
    /// The first ping (from `a` to `b`), by part (ps).
    pub steps: Vec<(&'static str, u64)>,
    /// The first two pings, there and back.
    pub round_trip_ps: u64,
    pub total_ps: u64,
}

/// What the two threads note: each ping's moments (its start and the ends of its parts), the
/// bits each receiver saw.
#[derive(Default)]
struct Log {
    marks: Vec<[Ps; 7]>,
    bits: Vec<u64>,
}

/// The doorbell masks of `pings` pings from `init_db`, within `valid`.
fn masks(pings: u32, init_db: u64, valid: u64) -> Vec<u64> {
    let mut db = init_db;
    (0..pings)
        .map(|_| {
            let this = db;
            db = (db << 1) & valid;
            if db == 0 {
                db = init_db;
            }
            this
        })
        .collect()
}

/// Bounce `pings` doorbells between `a` and `b` (a rings first) on the session's machine.
pub fn run(s: &mut Shmem, a: &Node, b: &Node, pings: u32, init_db: u64, delay_ps: u64) -> RResult<PingPong> {
    let mut held = s.fabric();
    let f = &mut *held;
    let valid_bits = f.ntb(a.ntb).doorbell_bits.min(f.ntb(b.ntb).doorbell_bits);
    let valid = if valid_bits >= 64 { u64::MAX } else { (1u64 << valid_bits) - 1 };
    if init_db == 0 || init_db & !valid != 0 {
        return Err(ToolError::InitDb { init_db, valid_bits, valid }.into());
    }
    if pings == 0 {
        return Err(ToolError::NoPings.into());
    }
    a.check_link(f)?;
    let regs = [CpuRegs::of(f, a.ntb)?, CpuRegs::of(f, b.ntb)?];
    // The counter starts from zero on both sides.
    for n in [a, b] {
        f.spad_write(n.ntb, SPAD, 0)?;
        f.db_clear(n.ntb, u64::MAX);
    }
    drop(held);
    s.nt_regs(a.ntb)?;
    let start = s.now();
    let plan = Rc::new(masks(pings, init_db, valid));
    let log = Rc::new(RefCell::new(Log { marks: vec![[0; 7]; pings as usize], ..Log::default() }));
    for side in 0..2 {
        spawn_side(s.machine(), side, start, regs, plan.clone(), log.clone(), delay_ps);
    }
    s.run()?;
    let log = log.take();
    let last = if pings % 2 == 1 { b } else { a };
    let counter = s.fabric().spad_read(last.ntb, SPAD)?;
    let one = |i: usize| log.marks[i][6] - log.marks[i][0];
    let m0 = log.marks[0];
    let steps = STEPS.iter().enumerate().map(|(k, s)| (*s, m0[k + 1] - m0[k])).collect();
    let round_trip_ps = if pings > 1 { one(0) + one(1) } else { 2 * one(0) };
    let total_ps = log.marks[pings as usize - 1][6] - start;
    Ok(PingPong { pings, counter, bits: log.bits, steps, round_trip_ps, total_ps })
}

/// Side `me` (0: `a`, rings first): send its pings, take the other's.
fn spawn_side(m: &mut Machine<Fabric>, me: usize, at: Ps, regs: [CpuRegs; 2], plan: Rc<Vec<u64>>, log: Rc<RefCell<Log>>, delay_ps: u64) {
    let r = regs[me];
    m.spawn(&format!("ntb_pingpong side {me}"), at, move |t| {
        let since = t.world().events().total();
        let mut taken = 0;
        for i in 0..plan.len() {
            if i % 2 == me {
                send(t, &r, i, plan[i], &log)?;
            } else {
                taken += 1;
                receive(t, &r, i, plan[i], since, taken, delay_ps, &log)?;
            }
        }
        Ok(())
    });
}

fn fail(e: RdmaError) -> ThreadError {
    ThreadError::Other(Box::new(e))
}

fn u32_of(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().expect("a 4-byte register"))
}

/// Ping `i`: read the own scratchpad, write it plus one into the peer's, ring the peer.
fn send(t: &mut Thread<'_, Fabric>, r: &CpuRegs, i: usize, bits: u64, log: &RefCell<Log>) -> Result<(), ThreadError> {
    let mut marks = [t.now(); 7];
    let ntb = r.own.ntb;
    let up = |t: &Thread<'_, Fabric>| -> Result<(), ThreadError> {
        let w = t.world();
        let n = w.ntb(ntb);
        if !w.ntb_link_is_up(ntb) {
            return Err(fail(RdmaError::LinkDown { ntb: n.name.clone(), cabled: n.peer.is_some(), ping: Some(i) }));
        }
        Ok(())
    };
    up(t)?;
    let v = u32_of(&t.cpu_read(r.host, r.spad(SPAD), 4)?);
    marks[1] = t.now();
    uc_store(t, r.host, r.peer_spad(SPAD), v.wrapping_add(1))?;
    marks[2] = t.now();
    up(t)?;
    uc_store(t, r.host, r.peer_db(), bits as u32)?;
    let mut l = log.borrow_mut();
    l.marks[i][..3].copy_from_slice(&marks[..3]);
    Ok(())
}

/// Take ping `i` (the `nth` doorbell interrupt since `since`): interrupt entry, read and clear
/// the doorbell, wait `delay`.
#[allow(clippy::too_many_arguments)]
fn receive(t: &mut Thread<'_, Fabric>, r: &CpuRegs, i: usize, bits: u64, since: u64, nth: usize, delay_ps: u64, log: &RefCell<Log>) -> Result<(), ThreadError> {
    let host = r.host;
    t.wait_for(format!("the doorbell of ping {i}"), Watch::Msi { host }, move |f: &mut Fabric| doorbell_irq_count(f, host, since) >= nth);
    t.sleep(params().rdma_sw.irq_entry_ps);
    let mut marks = [0; 4];
    marks[0] = t.now();
    let got = u32_of(&t.cpu_read(host, r.db(), 4)?) as u64;
    marks[1] = t.now();
    if got & bits != bits {
        return Err(fail(ToolError::Doorbell { ping: i, rang: bits, arrived: got }.into()));
    }
    uc_store(t, host, r.clear(), got as u32)?;
    marks[2] = t.now();
    t.sleep(delay_ps);
    marks[3] = t.now();
    let mut l = log.borrow_mut();
    l.marks[i][3..].copy_from_slice(&marks);
    l.bits.push(got & bits);
    Ok(())
}
