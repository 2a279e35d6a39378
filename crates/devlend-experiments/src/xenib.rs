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
    pub fn parse(s: &str) -> Result<Mode, String> {
        match s {
            "rdma" => Ok(Mode::Rdma),
            "sr" | "send" => Ok(Mode::SendRecv),
            _ => Err(format!("mode '{s}': expected 'rdma' or 'sr'")),
        }
    }
}

/// The world and server A's verbs for a configuration, and server B's native verbs.
pub fn testbed(json: &str, config: &str) -> Result<(World, Box<dyn Verbs>, Native), String> {
    let (xen, guests) = match config {
        "gen2-native" => (false, 0),
        "gen2-idd" => (true, 0),
        "xenib-basic" | "xenib-bypass" => (true, 1),
        _ => return Err(format!("configuration '{config}': expected one of {}", CONFIGS.join(", "))),
    };
    let w = World::new(json, xen, guests)?;
    let a: Box<dyn Verbs> = match config {
        "gen2-native" => Box::new(Native::new(&w, w.dom("linux-a").unwrap())),
        "gen2-idd" => Box::new(Native::new(&w, w.dom("dom0").unwrap())),
        "xenib-basic" => Box::new(Basic::new(&w, w.dom("guest1").unwrap())),
        _ => Box::new(Bypass::new(&w, w.dom("guest1").unwrap())),
    };
    let b = Native::new(&w, w.dom("linux-b").unwrap());
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

/// Poll until `n` completions arrived; a failed completion is returned as an error.
pub fn poll_until(w: &mut World, v: &mut dyn Verbs, cq: Cq, n: usize) -> VResult<Vec<Wc>> {
    let mut got = Vec::new();
    let mut spins = 0u64;
    while got.len() < n {
        let wcs = v.poll_cq(w, cq, n - got.len())?;
        if let Some(bad) = wcs.iter().find(|c| c.status != WcStatus::Success) {
            let _ = bad;
            return Err(Status::Inval);
        }
        got.extend(wcs);
        spins += 1;
        if spins > 50_000_000 {
            return Err(Status::TimedOut);
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
fn wait_incoming(w: &mut World, v: &mut dyn Verbs, e: &End, mode: Mode, blocking: bool) -> VResult<()> {
    match mode {
        Mode::Rdma => v.wait_for_data(w, e.buf + e.half),
        Mode::SendRecv => {
            if blocking {
                v.wait_cq_event(w, e.rcq)?;
            }
            poll_until(w, v, e.rcq, 1)?;
            v.post_recv(w, e.qp, recv_wr(0, e, e.half))
        }
    }
}

/// Round-trip time (ps) per size, averaged over `iters` after `iters / 10 + 2` warm-up rounds.
/// Message sizes and repetition counts a benchmark can run with: sizes 1 B to 16 MiB, counts >= 1.
pub(crate) fn check_args(sizes: &[u64], counts: &[(&str, u64)]) -> Result<(), String> {
    if let Some(bad) = sizes.iter().find(|s| **s == 0 || **s > 16 << 20) {
        return Err(format!("message size {bad}: expected 1 byte to 16 MiB"));
    }
    match counts.iter().find(|(_, n)| *n == 0) {
        Some((what, _)) => Err(format!("{what} must be at least 1")),
        None => Ok(()),
    }
}

pub fn latency(json: &str, config: &str, mode: Mode, sizes: &[u64], iters: u64, blocking: bool) -> Result<Vec<(u64, u64)>, String> {
    check_args(sizes, &[("iterations", iters)])?;
    let (w, a, b) = testbed(json, config)?;
    latency_on(config, w, a, b, mode, sizes, iters, blocking)
}

/// [`latency`] on a testbed already built (`config` names it in errors).
#[allow(clippy::too_many_arguments)]
pub fn latency_on(config: &str, mut w: World, mut a: Box<dyn Verbs>, mut b: Native, mode: Mode, sizes: &[u64], iters: u64, blocking: bool) -> Result<Vec<(u64, u64)>, String> {
    let e = |s: Status| format!("{config}: {s}");
    let half = sizes.iter().copied().max().unwrap_or(1).max(4096);
    let depth = 64;
    let ea = setup_end(&mut w, a.as_mut(), half, depth).map_err(e)?;
    let eb = setup_end(&mut w, &mut b, half, depth).map_err(e)?;
    connect(&mut w, a.as_mut(), &ea, &mut b, &eb).map_err(e)?;
    if mode == Mode::SendRecv {
        a.post_recv(&mut w, ea.qp, recv_wr(0, &ea, half)).map_err(e)?;
        b.post_recv(&mut w, eb.qp, recv_wr(0, &eb, half)).map_err(e)?;
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
                b.req_notify_cq(&mut w, eb.rcq).map_err(e)?;
                a.req_notify_cq(&mut w, ea.rcq).map_err(e)?;
            }
            a.post_send(&mut w, ea.qp, wr(it, &ea, size, mode, &eb)).map_err(e)?;
            wait_incoming(&mut w, &mut b, &eb, mode, blocking).map_err(e)?;
            b.post_send(&mut w, eb.qp, wr(it, &eb, size, mode, &ea)).map_err(e)?;
            wait_incoming(&mut w, a.as_mut(), &ea, mode, blocking).map_err(e)?;
            poll_until(&mut w, a.as_mut(), ea.scq, 1).map_err(e)?;
            poll_until(&mut w, &mut b, eb.scq, 1).map_err(e)?;
        }
        out.push((size, (a.now() - t0) / iters));
    }
    Ok(out)
}

/// Unidirectional throughput A -> B (bytes per second) per size, `iters` messages, at most
/// `depth` outstanding.
pub fn bandwidth(json: &str, config: &str, mode: Mode, sizes: &[u64], iters: u64, depth: u64) -> Result<Vec<(u64, f64)>, String> {
    check_args(sizes, &[("iterations", iters), ("depth", depth)])?;
    let (w, a, b) = testbed(json, config)?;
    bandwidth_on(config, w, a, b, mode, sizes, iters, depth)
}

/// [`bandwidth`] on a testbed already built (`config` names it in errors).
#[allow(clippy::too_many_arguments)]
pub fn bandwidth_on(config: &str, mut w: World, mut a: Box<dyn Verbs>, mut b: Native, mode: Mode, sizes: &[u64], iters: u64, depth: u64) -> Result<Vec<(u64, f64)>, String> {
    let e = |s: Status| format!("{config}: {s}");
    let half = sizes.iter().copied().max().unwrap_or(1).max(4096);
    let qdepth = (iters + depth).max(64);
    let ea = setup_end(&mut w, a.as_mut(), half, qdepth).map_err(e)?;
    let eb = setup_end(&mut w, &mut b, half, qdepth).map_err(e)?;
    connect(&mut w, a.as_mut(), &ea, &mut b, &eb).map_err(e)?;
    let mut out = Vec::new();
    for &size in sizes {
        if mode == Mode::SendRecv {
            for i in 0..iters {
                b.post_recv(&mut w, eb.qp, recv_wr(i, &eb, size)).map_err(e)?;
            }
        }
        sync(a.as_mut(), &mut b);
        let t0 = a.now();
        let (mut posted, mut done) = (0u64, 0u64);
        while done < iters {
            while posted < iters && posted - done < depth {
                a.post_send(&mut w, ea.qp, wr(posted, &ea, size, mode, &eb)).map_err(e)?;
                posted += 1;
            }
            let wcs = a.poll_cq(&mut w, ea.scq, 16).map_err(e)?;
            if wcs.iter().any(|c| c.status != WcStatus::Success) {
                return Err(format!("{config}: a write completed in error: {wcs:?}"));
            }
            done += wcs.len() as u64;
        }
        let t = a.now() - t0;
        if mode == Mode::SendRecv {
            poll_until(&mut w, &mut b, eb.rcq, iters as usize).map_err(e)?;
        }
        w.nodes[SERVER_B].landed.clear();
        out.push((size, (iters * size) as f64 / (t as f64 * 1e-12)));
    }
    Ok(out)
}

/// Registration time (ps) of a buffer of `pages` pages, averaged over `reps` register+deregister
/// rounds (the deregistration is not counted).
pub fn registration(json: &str, config: &str, pages: &[u64], reps: u64) -> Result<Vec<(u64, u64)>, String> {
    if pages.contains(&0) || reps == 0 {
        return Err("pages and repetitions must be at least 1".into());
    }
    let e = |s: Status| format!("{config}: {s}");
    let (mut w, mut a, _b) = testbed(json, config)?;
    a.open_device(&mut w).map_err(e)?;
    let pd = a.alloc_pd(&mut w).map_err(e)?;
    let pb = params().page_bytes;
    let mut out = Vec::new();
    for &n in pages {
        let buf = a.alloc_buf(&mut w, n * pb).map_err(e)?;
        let mut total = 0;
        for _ in 0..reps {
            let t = a.now();
            let mr = a.reg_mr(&mut w, pd, buf, n * pb, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE).map_err(e)?;
            total += a.now() - t;
            a.dereg_mr(&mut w, mr).map_err(e)?;
        }
        out.push((n, total / reps));
    }
    Ok(out)
}

/// The device channel's one-way latency as a guest sees it: half the round trip of a request the
/// back-end answers at once (poll of an empty CQ), less the back-end's own work.
pub fn channel_one_way(json: &str) -> Result<u64, String> {
    let e = |s: Status| format!("channel: {s}");
    let (mut w, mut a, _b) = testbed(json, "xenib-basic")?;
    a.open_device(&mut w).map_err(e)?;
    let cq = a.create_cq(&mut w, 16).map_err(e)?;
    let t = a.now();
    a.poll_cq(&mut w, cq, 1).map_err(e)?;
    let rt = a.now() - t;
    Ok((rt - params().backend_verb_ps - params().cpu_poll_ps) / 2)
}

#[cfg(test)]
mod tests;
