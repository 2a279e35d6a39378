//! Several guests on one clock: the time-travel controller for two or more UML guests and
//! devlend's engine together. Each guest has its own time socket; nothing in the run keeps time
//! of its own. Simulated time advances only when every guest WAITs: to the earliest of their
//! REQUESTed times and the engine's next event; the guests due then are told RUN (with FREE_UNTIL
//! the earliest time anything else is due, so a lone runner may go on without asking; several
//! runners at one time get FREE_UNTIL = now, so each asks before it moves on). The decisions
//! depend only on what the guests requested, never on which message came first on the wall
//! clock, so two runs give the same simulated times.
//!
//! The guests here carry no device (the one-guest device server is `server.rs`); the engine is
//! the topology's machine, run up to every time the guests move to.

use crate::error::{UmlError, UmlResult};
use crate::server::{poll_any, poll_one};
use crate::timetravel::{self as tt, ns_at_or_after, GuestTime, TtMsg, NEVER_NS};
use devlend_engine::machine::Machine;
use devlend_host::Cluster;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// One guest as the controller knows it.
#[derive(Debug)]
struct Guest {
    sock: Option<UnixStream>,
    /// Its time and its last request.
    time: GuestTime,
    /// It WAITs: it moves only when told RUN.
    waiting: bool,
    seq: u32,
    summary: GuestSummary,
}

/// What one guest did.
#[derive(Debug, Default, Clone)]
pub struct GuestSummary {
    /// Its simulated time when it ended (ns).
    pub guest_ns: u64,
    /// Time-travel messages both ways (ACKs included).
    pub time_messages: u64,
    /// Its WAITs.
    pub waits: u64,
}

/// What a run of several guests did.
#[derive(Debug, Default, Clone)]
pub struct RunSummary {
    /// The engine's time at the end (ps).
    pub simulated_ps: u64,
    pub guests: Vec<GuestSummary>,
    pub wall: Duration,
}

impl Guest {
    fn fd(&self) -> Option<RawFd> {
        self.sock.as_ref().map(|s| s.as_raw_fd())
    }

    fn send(&mut self, op: u32, seq: u32, time: u64, fds: &[RawFd]) -> UmlResult<()> {
        let fd = self.fd().ok_or(UmlError::Closed { during: "a time-travel exchange" })?;
        self.summary.time_messages += 1;
        tt::send(fd, TtMsg { op, seq, time }, fds)
    }

    fn tell(&mut self, op: u32, time: u64) -> UmlResult<()> {
        self.seq = self.seq.wrapping_add(1);
        self.send(op, self.seq, time, &[])
    }

    /// When it is due: its request, not before its own time.
    fn due(&self) -> Option<u64> {
        self.time.requested.filter(|&t| t < NEVER_NS / 1000).map(|t| t.max(self.time.now))
    }
}

/// Be the time-travel controller of the guests that connect to `time_sockets` (one each, all
/// within `deadline`), with `machine` the engine; returns when every guest has closed its socket.
pub fn control(time_sockets: &[String], machine: Machine<Cluster>, deadline: Duration) -> UmlResult<RunSummary> {
    let listeners: Vec<UnixListener> = time_sockets
        .iter()
        .map(|p| {
            let _ = std::fs::remove_file(p);
            UnixListener::bind(p).map_err(|error| UmlError::Io { what: "binding a time socket", error })
        })
        .collect::<UmlResult<_>>()?;
    let start = Instant::now();
    let mut guests = Vec::new();
    for (l, path) in listeners.iter().zip(time_sockets) {
        if !poll_one(l.as_raw_fd(), deadline.saturating_sub(start.elapsed()))? {
            return Err(UmlError::NoGuest { socket: path.clone(), waited: deadline });
        }
        let (sock, _) = l.accept().map_err(|error| UmlError::Io { what: "accepting a guest", error })?;
        guests.push(Guest { sock: Some(sock), time: GuestTime::default(), waiting: false, seq: 0, summary: Default::default() });
    }
    let mut run = Run { guests, machine, now: 0 };
    run.serve()?;
    for p in time_sockets {
        let _ = std::fs::remove_file(p);
    }
    Ok(RunSummary {
        simulated_ps: run.machine.now(),
        guests: run.guests.iter().map(|g| GuestSummary { guest_ns: g.time.now, ..g.summary.clone() }).collect(),
        wall: start.elapsed(),
    })
}

struct Run {
    guests: Vec<Guest>,
    machine: Machine<Cluster>,
    /// The run's time (ns): the last time guests were told RUN.
    now: u64,
}

impl Run {
    fn serve(&mut self) -> UmlResult<()> {
        loop {
            let open: Vec<(usize, RawFd)> = self.guests.iter().enumerate().filter_map(|(i, g)| g.fd().map(|fd| (i, fd))).collect();
            if open.is_empty() {
                return Ok(());
            }
            let fds: Vec<RawFd> = open.iter().map(|&(_, fd)| fd).collect();
            let (i, fd) = open[poll_any(&fds)?];
            match tt::recv(fd)? {
                Some(m) => self.message(i, m)?,
                None => {
                    // It powered off (or was killed): the others no longer wait for it.
                    self.guests[i].sock = None;
                    self.schedule()?;
                }
            }
        }
    }

    fn message(&mut self, i: usize, m: TtMsg) -> UmlResult<()> {
        let g = &mut self.guests[i];
        g.summary.time_messages += 1;
        let fd = g.fd().ok_or(UmlError::Closed { during: "a time-travel exchange" })?;
        if tt::answer(fd, &mut g.time, m, &mut g.summary.time_messages)? {
            return Ok(());
        }
        match m.op {
            tt::WAIT if !g.waiting => {
                g.send(tt::ACK, m.seq, 0, &[])?;
                g.waiting = true;
                g.summary.waits += 1;
                self.schedule()
            }
            _ => Err(UmlError::TimeTravel { op: m.op, what: "a message the controller does not take here" }),
        }
    }

    /// When every guest still running WAITs: move the run to the earliest time a guest is due
    /// (the engine's events before it happen on the way: none of them reaches a guest here), and
    /// tell the guests due then to RUN. No guest with a timer: nothing would ever wake them.
    fn schedule(&mut self) -> UmlResult<()> {
        let live = || self.guests.iter().filter(|g| g.sock.is_some());
        if live().count() == 0 || live().any(|g| !g.waiting) {
            return Ok(());
        }
        let t = live().filter_map(Guest::due).min().ok_or(UmlError::NothingToWaitFor { at_ns: self.now })?.max(self.now);
        self.machine.run_until(t.saturating_mul(1000)).map_err(|e| UmlError::Model { during: "the engine", error: Box::new(e) })?;
        self.now = t;
        let due: Vec<usize> = (0..self.guests.len()).filter(|&i| self.guests[i].sock.is_some() && self.guests[i].due().is_some_and(|d| d <= t)).collect();
        // Anything else due: the engine's next event, the other guests' requests.
        let later = self.machine.next_event_at().map(ns_at_or_after).into_iter();
        let others = (0..self.guests.len()).filter(|i| !due.contains(i)).filter_map(|i| self.guests[i].sock.as_ref().and(self.guests[i].due()));
        let free_until = if due.len() > 1 { t } else { later.chain(others).min().unwrap_or(NEVER_NS).max(t) };
        for i in due {
            let g = &mut self.guests[i];
            g.time.now = t;
            g.waiting = false;
            g.tell(tt::FREE_UNTIL, free_until)?;
            g.tell(tt::RUN, t)?;
        }
        Ok(())
    }
}
