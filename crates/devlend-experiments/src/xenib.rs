//! The micro-benchmarks of 004 §4, written once against [`Verbs`] and run with each driver on
//! server A (server B always runs the native driver on native Linux, 004 §4.1):
//! - `gen2-native`: native driver, native Linux on server A;
//! - `gen2-idd`: native driver in Xen's device domain;
//! - `xenib-basic`: basic split driver in a guest;
//! - `xenib-bypass`: device-domain-bypass driver in a guest.
//!
//! Latency (Figs 7, 10, 12): server A writes (or sends) to B; B waits for the data (polling memory,
//! or its CQ, or blocking on the completion event) and answers with the same size; the round trip
//! is averaged after warm-up. Throughput (Figs 8, 11): A posts back to back with at most `depth`
//! outstanding, polling its CQ for completions. Registration (Fig 13): register and deregister a
//! buffer of N pages repeatedly. Nothing here is a result: every time is the sum of what the
//! drivers, the channel, the PCI-X buses, the HCAs and the link do, on the engine's one clock.

use devlend_engine::machine::Machine;
use devlend_xenib::error::{XResult, XenIbError};
use devlend_xenib::hca::{World, SERVER_B};
use devlend_xenib::params::params;
use devlend_xenib::types::*;
use devlend_xenib::verbs::{Basic, Bypass, Cpu, Native, Verbs};
use std::cell::RefCell;
use std::rc::Rc;

pub const CONFIGS: [&str; 4] = ["gen2-native", "gen2-idd", "xenib-basic", "xenib-bypass"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Rdma,
    SendRecv,
}

impl Mode {
    pub fn parse(s: &str) -> XResult<Mode> {
        match s {
            "rdma" => Ok(Mode::Rdma),
            "sr" | "send" => Ok(Mode::SendRecv),
            _ => Err(XenIbError::UnknownName { kind: "mode", name: s.into(), expected: "'rdma' or 'sr'".into() }),
        }
    }
}

/// The world and server A's verbs for a configuration, and server B's native verbs.
pub fn testbed(json: &str, config: &str) -> XResult<(World, Box<dyn Verbs>, Native)> {
    let (xen, guests) = match config {
        "gen2-native" => (false, 0),
        "gen2-idd" => (true, 0),
        "xenib-basic" | "xenib-bypass" => (true, 1),
        _ => return Err(XenIbError::unknown("configuration", config, &CONFIGS)),
    };
    let w = World::new(json, xen, guests)?;
    let dom = |name: &str| w.dom(name).ok_or_else(|| XenIbError::NoDomain { name: name.into() });
    let a: Box<dyn Verbs> = match config {
        "gen2-native" => Box::new(Native::new(&w, dom("linux-a")?)),
        "gen2-idd" => Box::new(Native::new(&w, dom("dom0")?)),
        "xenib-basic" => Box::new(Basic::new(&w, dom("guest1")?)),
        _ => Box::new(Bypass::new(&w, dom("guest1")?)),
    };
    let b = Native::new(&w, dom("linux-b")?);
    Ok((w, a, b))
}

/// One side's resources: a buffer whose first half is the source and second half the target.
#[derive(Debug, Clone, Copy)]
pub struct End {
    pub pd: Pd,
    pub scq: Cq,
    pub rcq: Cq,
    pub qp: Qp,
    pub buf: u64,
    pub half: u64,
    pub mr: Mr,
}

pub fn setup_end(t: &Cpu, v: &mut dyn Verbs, half: u64, depth: u64) -> VResult<End> {
    v.open_device(t)?;
    let pd = v.alloc_pd(t)?;
    let buf = v.alloc_buf(t, 2 * half)?;
    let mr = v.reg_mr(t, pd, buf, 2 * half, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE)?;
    let scq = v.create_cq(t, 2 * depth)?;
    let rcq = v.create_cq(t, 2 * depth)?;
    let qp = v.create_qp(t, pd, scq, rcq, depth)?;
    v.modify_qp(t, qp, QpAttr { state: QpState::Init, remote: None })?;
    Ok(End { pd, scq, rcq, qp, buf, half, mr })
}

/// Bring both QPs to RTS, each pointing at the other (QP numbers exchanged out of band).
pub fn connect(t: &Cpu, a: &mut dyn Verbs, ea: &End, b: &mut dyn Verbs, eb: &End) -> VResult<()> {
    let (na, nb) = (a.ctx().node, b.ctx().node);
    a.modify_qp(t, ea.qp, QpAttr { state: QpState::Rtr, remote: Some((nb, eb.qp.0)) })?;
    a.modify_qp(t, ea.qp, QpAttr { state: QpState::Rts, remote: None })?;
    b.modify_qp(t, eb.qp, QpAttr { state: QpState::Rtr, remote: Some((na, ea.qp.0)) })?;
    b.modify_qp(t, eb.qp, QpAttr { state: QpState::Rts, remote: None })?;
    Ok(())
}

/// Poll until `n` completions arrived; a failed completion is returned as an error naming it.
pub fn poll_until(t: &Cpu, v: &mut dyn Verbs, cq: Cq, n: usize) -> XResult<Vec<Wc>> {
    let config = v.driver();
    let mut got = Vec::new();
    let mut spins = 0u64;
    while got.len() < n {
        let wcs = v.poll_cq(t, cq, n - got.len()).map_err(XenIbError::verb(config, "poll CQ"))?;
        if let Some(bad) = wcs.iter().find(|c| c.status != WcStatus::Success) {
            return Err(XenIbError::Completion { config: config.into(), wc: *bad });
        }
        got.extend(wcs);
        spins += 1;
        if spins > 50_000_000 {
            return Err(XenIbError::Verb { config: config.into(), step: "poll CQ", status: Status::TimedOut });
        }
    }
    Ok(got)
}

fn wr(id: u64, from: &End, len: u64, mode: Mode, to: &End) -> SendWr {
    let sge = Sge { addr: from.buf, length: len, lkey: from.mr.lkey };
    let op = match mode {
        Mode::Rdma => SendOp::RdmaWrite { remote_addr: to.buf + to.half, rkey: to.mr.rkey },
        Mode::SendRecv => SendOp::Send,
    };
    SendWr { wr_id: id, sge, op, signaled: true }
}

fn recv_wr(id: u64, e: &End, len: u64) -> RecvWr {
    RecvWr { wr_id: id, sge: Sge { addr: e.buf + e.half, length: len.max(1), lkey: e.mr.lkey } }
}

/// Wait for an incoming message on `e`: the RDMA data in memory, or the receive completion
/// (busy polling or, `blocking`, the completion event of the armed CQ, which is armed again
/// before the poll, as libibverbs' event loop does).
fn wait_incoming(t: &Cpu, v: &mut dyn Verbs, e: &End, mode: Mode, blocking: bool) -> XResult<()> {
    let config = v.driver();
    match mode {
        Mode::Rdma => v.wait_for_data(t, e.buf + e.half).map_err(XenIbError::verb(config, "wait for the data")),
        Mode::SendRecv => {
            if blocking {
                v.wait_cq_event(t, e.rcq).map_err(XenIbError::verb(config, "wait for the completion event"))?;
                v.req_notify_cq(t, e.rcq).map_err(XenIbError::verb(config, "arm the CQ"))?;
            }
            poll_until(t, v, e.rcq, 1)?;
            v.post_recv(t, e.qp, recv_wr(0, e, e.half)).map_err(XenIbError::verb(config, "post receive"))
        }
    }
}

/// Message sizes and repetition counts a benchmark can run with: sizes 1 B to 16 MiB, counts >= 1.
pub(crate) fn check_args(sizes: &[u64], counts: &[(&'static str, u64)]) -> XResult<()> {
    if let Some(&size) = sizes.iter().find(|s| **s == 0 || **s > 16 << 20) {
        return Err(XenIbError::BadSize { size });
    }
    match counts.iter().find(|(_, n)| *n == 0) {
        Some(&(what, _)) => Err(XenIbError::ZeroCount { what }),
        None => Ok(()),
    }
}

// ----- running on the engine ------------------------------------------------------------------

/// What a thread of a benchmark hands back when it ends.
pub type Slot<R> = Rc<RefCell<Option<XResult<R>>>>;

/// A thread of the machine from its time now, running `body`; its result comes in the slot.
pub fn spawn<R: 'static>(m: &mut Machine<World>, name: &str, body: impl FnOnce(&Cpu) -> XResult<R> + 'static) -> Slot<R> {
    let slot: Slot<R> = Rc::new(RefCell::new(None));
    let out = slot.clone();
    let at = m.now();
    m.spawn(name, at, move |t| {
        *out.borrow_mut() = Some(body(t));
        Ok(())
    });
    slot
}

/// Run the machine until nothing is left to happen, then take each slot's result: a thread's
/// own error first (the other threads may wait for what it never did), then the engine's.
pub fn run<R>(config: &str, m: &mut Machine<World>, slots: Vec<Slot<R>>) -> XResult<Vec<R>> {
    let ran = m.run();
    let mut out = Vec::new();
    for s in slots {
        match s.borrow_mut().take() {
            Some(Ok(r)) => out.push(r),
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    ran.map_err(|e| match e.into_run_failure() {
        Ok((thread, failure)) => XenIbError::Run { config: config.into(), thread, failure },
        // The benchmarks' threads hand their own errors back in their slots and run no workload.
        Err(e) => unreachable!("{config}: neither a thread's own error nor a workload's reaches the run: {e}"),
    })?;
    Ok(out)
}

/// Run `body` as the one thread of a machine on `w`; the world comes back with its result.
pub fn on_machine<R: 'static>(config: &str, w: World, body: impl FnOnce(&Cpu) -> XResult<R> + 'static) -> XResult<(World, R)> {
    let mut m = devlend_xenib::machine(w);
    let slot = spawn(&mut m, config, body);
    let r = run(config, &mut m, vec![slot])?.pop();
    let w = m.into_world().unwrap_or_else(|_| unreachable!("no device model holds the world after the run"));
    match r {
        Some(r) => Ok((w, r)),
        None => Err(XenIbError::NotEnded { config: config.into(), thread: "benchmark" }),
    }
}

type Side = Rc<RefCell<Box<dyn Verbs>>>;

/// Both ends set up and connected, by one set-up thread (server A's and server B's verbs in turn).
fn set_up(config: &str, m: &mut Machine<World>, a: &Side, b: &Side, half: u64, depth: u64, recv: bool) -> XResult<(End, End)> {
    let (a, b) = (a.clone(), b.clone());
    let cfg = config.to_string();
    let slot = spawn(m, "set-up", move |t| {
        let v = |step| XenIbError::verb(&cfg, step);
        let (mut a, mut b) = (a.borrow_mut(), b.borrow_mut());
        let ea = setup_end(t, a.as_mut(), half, depth).map_err(v("set up a QP end"))?;
        let eb = setup_end(t, b.as_mut(), half, depth).map_err(v("set up a QP end"))?;
        connect(t, a.as_mut(), &ea, b.as_mut(), &eb).map_err(v("connect the QPs"))?;
        if recv {
            a.post_recv(t, ea.qp, recv_wr(0, &ea, half)).map_err(v("post receive"))?;
            b.post_recv(t, eb.qp, recv_wr(0, &eb, half)).map_err(v("post receive"))?;
        }
        Ok((ea, eb))
    });
    run(config, m, vec![slot])?.pop().ok_or_else(|| XenIbError::NotEnded { config: config.into(), thread: "set-up" })
}

pub fn latency(json: &str, config: &str, mode: Mode, sizes: &[u64], iters: u64, blocking: bool) -> XResult<Vec<(u64, u64)>> {
    check_args(sizes, &[("iterations", iters)])?;
    let (w, a, b) = testbed(json, config)?;
    latency_on(config, w, a, b, mode, sizes, iters, blocking)
}

/// Round-trip time (ps) per size, averaged over `iters` after `iters / 10 + 2` warm-up rounds,
/// on a testbed already built (`config` names it in errors): server A's and server B's programs
/// are two threads of the machine, each on its own server's CPU.
#[allow(clippy::too_many_arguments)]
pub fn latency_on(config: &str, w: World, a: Box<dyn Verbs>, b: Native, mode: Mode, sizes: &[u64], iters: u64, blocking: bool) -> XResult<Vec<(u64, u64)>> {
    let half = sizes.iter().copied().max().unwrap_or(1).max(4096);
    let mut m = devlend_xenib::machine(w);
    let (a, b): (Side, Side) = (Rc::new(RefCell::new(a)), Rc::new(RefCell::new(Box::new(b))));
    let (ea, eb) = set_up(config, &mut m, &a, &b, half, 64, mode == Mode::SendRecv)?;
    let (sizes_a, sizes_b, warm) = (sizes.to_vec(), sizes.to_vec(), iters / 10 + 2);
    let (ca, cb) = (config.to_string(), config.to_string());
    let sa = spawn(&mut m, "server-a", move |t| {
        let v = |step| XenIbError::verb(&ca, step);
        let mut a = a.borrow_mut();
        if blocking {
            a.req_notify_cq(t, ea.rcq).map_err(v("arm the CQ"))?;
        }
        let mut out = Vec::new();
        for size in sizes_a {
            let mut t0 = t.now();
            for it in 0..warm + iters {
                if it == warm {
                    t0 = t.now();
                }
                a.post_send(t, ea.qp, wr(it, &ea, size, mode, &eb)).map_err(v("post send"))?;
                wait_incoming(t, a.as_mut(), &ea, mode, blocking)?;
                poll_until(t, a.as_mut(), ea.scq, 1)?;
            }
            out.push((size, (t.now() - t0) / iters));
        }
        Ok(out)
    });
    let sb = spawn(&mut m, "server-b", move |t| {
        let v = |step| XenIbError::verb(&cb, step);
        let mut b = b.borrow_mut();
        if blocking {
            b.req_notify_cq(t, eb.rcq).map_err(v("arm the CQ"))?;
        }
        for size in sizes_b {
            for it in 0..warm + iters {
                wait_incoming(t, b.as_mut(), &eb, mode, blocking)?;
                b.post_send(t, eb.qp, wr(it, &eb, size, mode, &ea)).map_err(v("post send"))?;
                poll_until(t, b.as_mut(), eb.scq, 1)?;
            }
        }
        Ok(Vec::new())
    });
    Ok(run(config, &mut m, vec![sa, sb])?.swap_remove(0))
}

/// Unidirectional throughput A -> B (bytes per second) per size, `iters` messages, at most
/// `depth` outstanding.
pub fn bandwidth(json: &str, config: &str, mode: Mode, sizes: &[u64], iters: u64, depth: u64) -> XResult<Vec<(u64, f64)>> {
    check_args(sizes, &[("iterations", iters), ("depth", depth)])?;
    let (w, a, b) = testbed(json, config)?;
    bandwidth_on(config, w, a, b, mode, sizes, iters, depth)
}

/// [`bandwidth`] on a testbed already built (`config` names it in errors): one thread posts on
/// server A and polls its CQ; server B's receives are posted before each size is timed.
#[allow(clippy::too_many_arguments)]
pub fn bandwidth_on(config: &str, w: World, a: Box<dyn Verbs>, b: Native, mode: Mode, sizes: &[u64], iters: u64, depth: u64) -> XResult<Vec<(u64, f64)>> {
    let half = sizes.iter().copied().max().unwrap_or(1).max(4096);
    let qdepth = (iters + depth).max(64);
    let mut m = devlend_xenib::machine(w);
    let (a, b): (Side, Side) = (Rc::new(RefCell::new(a)), Rc::new(RefCell::new(Box::new(b))));
    let (ea, eb) = set_up(config, &mut m, &a, &b, half, qdepth, false)?;
    let (sizes, cfg) = (sizes.to_vec(), config.to_string());
    let slot = spawn(&mut m, "server-a", move |t| {
        let v = |step| XenIbError::verb(&cfg, step);
        let (mut a, mut b) = (a.borrow_mut(), b.borrow_mut());
        let mut out = Vec::new();
        for size in sizes {
            if mode == Mode::SendRecv {
                for i in 0..iters {
                    b.post_recv(t, eb.qp, recv_wr(i, &eb, size)).map_err(v("post receive"))?;
                }
            }
            let t0 = t.now();
            let (mut posted, mut done) = (0u64, 0u64);
            while done < iters {
                while posted < iters && posted - done < depth {
                    a.post_send(t, ea.qp, wr(posted, &ea, size, mode, &eb)).map_err(v("post send"))?;
                    posted += 1;
                }
                let wcs = a.poll_cq(t, ea.scq, 16).map_err(v("poll CQ"))?;
                if let Some(bad) = wcs.iter().find(|c| c.status != WcStatus::Success) {
                    return Err(XenIbError::Completion { config: cfg.clone(), wc: *bad });
                }
                done += wcs.len() as u64;
            }
            let dt = t.now() - t0;
            if mode == Mode::SendRecv {
                poll_until(t, b.as_mut(), eb.rcq, iters as usize)?;
            }
            t.world().nodes[SERVER_B].hca.landed.clear();
            out.push((size, (iters * size) as f64 / (dt as f64 * 1e-12)));
        }
        Ok(out)
    });
    Ok(run(config, &mut m, vec![slot])?.swap_remove(0))
}

/// Registration time (ps) of a buffer of `pages` pages, averaged over `reps` register+deregister
/// rounds (the deregistration is not counted).
pub fn registration(json: &str, config: &str, pages: &[u64], reps: u64) -> XResult<Vec<(u64, u64)>> {
    check_args(&[], &[("pages", pages.iter().copied().min().unwrap_or(1)), ("repetitions", reps)])?;
    let (w, mut a, _b) = testbed(json, config)?;
    let (pages, cfg) = (pages.to_vec(), config.to_string());
    let (_, out) = on_machine(config, w, move |t| {
        let v = |step| XenIbError::verb(&cfg, step);
        a.open_device(t).map_err(v("open the device"))?;
        let pd = a.alloc_pd(t).map_err(v("allocate a PD"))?;
        let pb = devlend_devices::ib_hca::params::params().page_bytes;
        let mut out = Vec::new();
        for n in pages {
            let buf = a.alloc_buf(t, n * pb).map_err(v("allocate a buffer"))?;
            let mut total = 0;
            for _ in 0..reps {
                let t0 = t.now();
                let mr = a.reg_mr(t, pd, buf, n * pb, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE).map_err(v("register memory"))?;
                total += t.now() - t0;
                a.dereg_mr(t, mr).map_err(v("deregister memory"))?;
            }
            out.push((n, total / reps));
        }
        Ok(out)
    })?;
    Ok(out)
}

/// The device channel's one-way latency as a guest sees it: half the round trip of a request the
/// back-end answers at once (poll of an empty CQ), less the back-end's own work.
pub fn channel_one_way(json: &str) -> XResult<u64> {
    let (w, mut a, _b) = testbed(json, "xenib-basic")?;
    let (_, rt) = on_machine("xenib-basic", w, move |t| {
        let v = |step| XenIbError::verb("xenib-basic", step);
        a.open_device(t).map_err(v("open the device"))?;
        let cq = a.create_cq(t, 16).map_err(v("create a CQ"))?;
        let t0 = t.now();
        a.poll_cq(t, cq, 1).map_err(v("poll CQ"))?;
        Ok(t.now() - t0)
    })?;
    Ok((rt - params().backend_verb_ps - params().cpu_poll_ps) / 2)
}

#[cfg(test)]
mod tests;
