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
//! drivers, the channel, the PCI-X buses, the HCAs and the link do.

use devlend_xenib::error::{XResult, XenIbError};
use devlend_xenib::hca::{World, SERVER_B};
use devlend_xenib::params::params;
use devlend_xenib::types::*;
use devlend_xenib::verbs::{Basic, Bypass, Native, Verbs};

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

pub fn setup_end(w: &mut World, v: &mut dyn Verbs, half: u64, depth: u64) -> VResult<End> {
    v.open_device(w)?;
    let pd = v.alloc_pd(w)?;
    let buf = v.alloc_buf(w, 2 * half)?;
    let mr = v.reg_mr(w, pd, buf, 2 * half, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE)?;
    let scq = v.create_cq(w, 2 * depth)?;
    let rcq = v.create_cq(w, 2 * depth)?;
    let qp = v.create_qp(w, pd, scq, rcq, depth)?;
    v.modify_qp(w, qp, QpAttr { state: QpState::Init, remote: None })?;
    Ok(End { pd, scq, rcq, qp, buf, half, mr })
}

/// Bring both QPs to RTS, each pointing at the other (QP numbers exchanged out of band).
pub fn connect(w: &mut World, a: &mut dyn Verbs, ea: &End, b: &mut dyn Verbs, eb: &End) -> VResult<()> {
    let (na, nb) = (a.ctx().node, b.ctx().node);
    a.modify_qp(w, ea.qp, QpAttr { state: QpState::Rtr, remote: Some((nb, eb.qp.0)) })?;
    a.modify_qp(w, ea.qp, QpAttr { state: QpState::Rts, remote: None })?;
    b.modify_qp(w, eb.qp, QpAttr { state: QpState::Rtr, remote: Some((na, ea.qp.0)) })?;
    b.modify_qp(w, eb.qp, QpAttr { state: QpState::Rts, remote: None })?;
    Ok(())
}

/// Poll until `n` completions arrived; a failed completion is returned as an error naming it.
pub fn poll_until(w: &mut World, v: &mut dyn Verbs, cq: Cq, n: usize) -> XResult<Vec<Wc>> {
    let config = v.driver();
    let mut got = Vec::new();
    let mut spins = 0u64;
    while got.len() < n {
        let wcs = v.poll_cq(w, cq, n - got.len()).map_err(XenIbError::verb(config, "poll CQ"))?;
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

fn sync(a: &mut dyn Verbs, b: &mut dyn Verbs) {
    let t = a.now().max(b.now());
    a.ctx_mut().now = t;
    b.ctx_mut().now = t;
}

/// Wait for an incoming message on `e`: the RDMA data in memory, or the receive completion
/// (busy polling or, `blocking`, armed CQ + completion event).
fn wait_incoming(w: &mut World, v: &mut dyn Verbs, e: &End, mode: Mode, blocking: bool) -> XResult<()> {
    let config = v.driver();
    match mode {
        Mode::Rdma => v.wait_for_data(w, e.buf + e.half).map_err(XenIbError::verb(config, "wait for the data")),
        Mode::SendRecv => {
            if blocking {
                v.wait_cq_event(w, e.rcq).map_err(XenIbError::verb(config, "wait for the completion event"))?;
            }
            poll_until(w, v, e.rcq, 1)?;
            v.post_recv(w, e.qp, recv_wr(0, e, e.half)).map_err(XenIbError::verb(config, "post receive"))
        }
    }
}

/// Round-trip time (ps) per size, averaged over `iters` after `iters / 10 + 2` warm-up rounds.
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

pub fn latency(json: &str, config: &str, mode: Mode, sizes: &[u64], iters: u64, blocking: bool) -> XResult<Vec<(u64, u64)>> {
    check_args(sizes, &[("iterations", iters)])?;
    let (w, a, b) = testbed(json, config)?;
    latency_on(config, w, a, b, mode, sizes, iters, blocking)
}

/// [`latency`] on a testbed already built (`config` names it in errors).
#[allow(clippy::too_many_arguments)]
pub fn latency_on(config: &str, mut w: World, mut a: Box<dyn Verbs>, mut b: Native, mode: Mode, sizes: &[u64], iters: u64, blocking: bool) -> XResult<Vec<(u64, u64)>> {
    let v = |step| XenIbError::verb(config, step);
    let half = sizes.iter().copied().max().unwrap_or(1).max(4096);
    let depth = 64;
    let ea = setup_end(&mut w, a.as_mut(), half, depth).map_err(v("set up a QP end"))?;
    let eb = setup_end(&mut w, &mut b, half, depth).map_err(v("set up a QP end"))?;
    connect(&mut w, a.as_mut(), &ea, &mut b, &eb).map_err(v("connect the QPs"))?;
    if mode == Mode::SendRecv {
        a.post_recv(&mut w, ea.qp, recv_wr(0, &ea, half)).map_err(v("post receive"))?;
        b.post_recv(&mut w, eb.qp, recv_wr(0, &eb, half)).map_err(v("post receive"))?;
    }
    let mut out = Vec::new();
    for &size in sizes {
        let warm = iters / 10 + 2;
        sync(a.as_mut(), &mut b);
        let mut t0 = a.now();
        for it in 0..warm + iters {
            if it == warm {
                t0 = a.now();
            }
            if blocking {
                b.req_notify_cq(&mut w, eb.rcq).map_err(v("arm the CQ"))?;
                a.req_notify_cq(&mut w, ea.rcq).map_err(v("arm the CQ"))?;
            }
            a.post_send(&mut w, ea.qp, wr(it, &ea, size, mode, &eb)).map_err(v("post send"))?;
            wait_incoming(&mut w, &mut b, &eb, mode, blocking)?;
            b.post_send(&mut w, eb.qp, wr(it, &eb, size, mode, &ea)).map_err(v("post send"))?;
            wait_incoming(&mut w, a.as_mut(), &ea, mode, blocking)?;
            poll_until(&mut w, a.as_mut(), ea.scq, 1)?;
            poll_until(&mut w, &mut b, eb.scq, 1)?;
        }
        out.push((size, (a.now() - t0) / iters));
    }
    Ok(out)
}

/// Unidirectional throughput A -> B (bytes per second) per size, `iters` messages, at most
/// `depth` outstanding.
pub fn bandwidth(json: &str, config: &str, mode: Mode, sizes: &[u64], iters: u64, depth: u64) -> XResult<Vec<(u64, f64)>> {
    check_args(sizes, &[("iterations", iters), ("depth", depth)])?;
    let (w, a, b) = testbed(json, config)?;
    bandwidth_on(config, w, a, b, mode, sizes, iters, depth)
}

/// [`bandwidth`] on a testbed already built (`config` names it in errors).
#[allow(clippy::too_many_arguments)]
pub fn bandwidth_on(config: &str, mut w: World, mut a: Box<dyn Verbs>, mut b: Native, mode: Mode, sizes: &[u64], iters: u64, depth: u64) -> XResult<Vec<(u64, f64)>> {
    let v = |step| XenIbError::verb(config, step);
    let half = sizes.iter().copied().max().unwrap_or(1).max(4096);
    let qdepth = (iters + depth).max(64);
    let ea = setup_end(&mut w, a.as_mut(), half, qdepth).map_err(v("set up a QP end"))?;
    let eb = setup_end(&mut w, &mut b, half, qdepth).map_err(v("set up a QP end"))?;
    connect(&mut w, a.as_mut(), &ea, &mut b, &eb).map_err(v("connect the QPs"))?;
    let mut out = Vec::new();
    for &size in sizes {
        if mode == Mode::SendRecv {
            for i in 0..iters {
                b.post_recv(&mut w, eb.qp, recv_wr(i, &eb, size)).map_err(v("post receive"))?;
            }
        }
        sync(a.as_mut(), &mut b);
        let t0 = a.now();
        let (mut posted, mut done) = (0u64, 0u64);
        while done < iters {
            while posted < iters && posted - done < depth {
                a.post_send(&mut w, ea.qp, wr(posted, &ea, size, mode, &eb)).map_err(v("post send"))?;
                posted += 1;
            }
            let wcs = a.poll_cq(&mut w, ea.scq, 16).map_err(v("poll CQ"))?;
            if wcs.iter().any(|c| c.status != WcStatus::Success) {
                let bad = wcs.iter().find(|c| c.status != WcStatus::Success).copied();
                return Err(XenIbError::Completion { config: config.into(), wc: bad.unwrap_or(wcs[0]) });
            }
            done += wcs.len() as u64;
        }
        let t = a.now() - t0;
        if mode == Mode::SendRecv {
            poll_until(&mut w, &mut b, eb.rcq, iters as usize)?;
        }
        w.nodes[SERVER_B].landed.clear();
        out.push((size, (iters * size) as f64 / (t as f64 * 1e-12)));
    }
    Ok(out)
}

/// Registration time (ps) of a buffer of `pages` pages, averaged over `reps` register+deregister
/// rounds (the deregistration is not counted).
pub fn registration(json: &str, config: &str, pages: &[u64], reps: u64) -> XResult<Vec<(u64, u64)>> {
    check_args(&[], &[("pages", pages.iter().copied().min().unwrap_or(1)), ("repetitions", reps)])?;
    let v = |step| XenIbError::verb(config, step);
    let (mut w, mut a, _b) = testbed(json, config)?;
    a.open_device(&mut w).map_err(v("open the device"))?;
    let pd = a.alloc_pd(&mut w).map_err(v("allocate a PD"))?;
    let pb = params().page_bytes;
    let mut out = Vec::new();
    for &n in pages {
        let buf = a.alloc_buf(&mut w, n * pb).map_err(v("allocate a buffer"))?;
        let mut total = 0;
        for _ in 0..reps {
            let t = a.now();
            let mr = a.reg_mr(&mut w, pd, buf, n * pb, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE).map_err(v("register memory"))?;
            total += a.now() - t;
            a.dereg_mr(&mut w, mr).map_err(v("deregister memory"))?;
        }
        out.push((n, total / reps));
    }
    Ok(out)
}

/// The device channel's one-way latency as a guest sees it: half the round trip of a request the
/// back-end answers at once (poll of an empty CQ), less the back-end's own work.
pub fn channel_one_way(json: &str) -> XResult<u64> {
    let v = |step| XenIbError::verb("xenib-basic", step);
    let (mut w, mut a, _b) = testbed(json, "xenib-basic")?;
    a.open_device(&mut w).map_err(v("open the device"))?;
    let cq = a.create_cq(&mut w, 16).map_err(v("create a CQ"))?;
    let t = a.now();
    a.poll_cq(&mut w, cq, 1).map_err(v("poll CQ"))?;
    let rt = a.now() - t;
    Ok((rt - params().backend_verb_ps - params().cpu_poll_ps) / 2)
}

#[cfg(test)]
mod tests;
