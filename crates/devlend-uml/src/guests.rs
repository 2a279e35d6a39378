//! Several guests on one clock: the time-travel controller for two or more UML guests and
//! devlend's engine together. Each guest has its own time socket; nothing in the run keeps time
//! of its own. Simulated time advances only when every guest WAITs: to the earliest of their
//! REQUESTed times and the engine's next event; the guests due then are told RUN (with FREE_UNTIL
//! the earliest time anything else is due, so a lone runner may go on without asking; several
//! runners at one time get FREE_UNTIL = now, so each asks before it moves on). The decisions
//! depend only on what the guests requested, never on which message came first on the wall
//! clock, so two runs give the same simulated times.
//!
//! Devices: each guest may have its own (a drive, an NTB endpoint), one vhost-user socket each
//! (`conn.rs`), all on the one engine. A guest's kick starts its accesses on the engine at its
//! time, and its FREE_UNTIL shrinks to the engine's next event; when every guest waits, the
//! engine runs to the earliest guest due, or stops at the first interrupt it logs, which is
//! delivered then (the guest it is for is woken at that time, as the one-guest clock does).

use crate::clock::IDLE_HORIZON_NS;
use crate::conn::{Conn, Traffic, Turn};
use crate::engine::Engine;
use crate::error::{UmlError, UmlResult};
use crate::pcidev::{Counts, PciFunction};
use crate::server::{poll_any, poll_one};
use crate::timetravel::{self as tt, ns_at_or_after, GuestTime, TtMsg, NEVER_NS};
use crate::trace::op_name;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// A guest to control: its time socket and its devices, each with the socket it is served on.
pub struct GuestSpec {
    pub time_socket: String,
    pub devices: Vec<(String, PciFunction)>,
}

/// One guest as the controller knows it.
struct Guest {
    sock: Option<UnixStream>,
    /// Its time and its last request.
    time: GuestTime,
    /// It WAITs: it moves only when told RUN.
    waiting: bool,
    /// The FREE_UNTIL it holds (None after a WAIT, which forgets it).
    free_until: Option<u64>,
    seq: u32,
    conns: Vec<Conn>,
    summary: GuestSummary,
}

/// What one device of a guest did.
#[derive(Debug, Default, Clone)]
pub struct DeviceSummary {
    pub commands: u64,
    pub counts: Counts,
    pub write_faults: u64,
    pub traffic: Traffic,
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
    pub devices: Vec<DeviceSummary>,
}

/// What a run of several guests did.
#[derive(Debug, Default, Clone)]
pub struct RunSummary {
    /// The engine's time at the end (ps).
    pub simulated_ps: u64,
    pub guests: Vec<GuestSummary>,
    /// Registers of NTB faces the guests touched that the model does not implement.
    pub unimplemented: Vec<devlend_devices::ntb_xeon::Unimplemented>,
    /// Fabric events that were no device's interrupt (faults, failed accesses).
    pub fabric_events: Vec<String>,
    pub wall: Duration,
}

impl Guest {
    fn fd(&self) -> Option<RawFd> {
        self.sock.as_ref().map(|s| s.as_raw_fd())
    }

    fn send(&mut self, op: u32, seq: u32, time: u64) -> UmlResult<()> {
        let fd = self.fd().ok_or(UmlError::Closed { during: "a time-travel exchange" })?;
        self.summary.time_messages += 1;
        if op != tt::ACK {
            self.trace(|| format!("tt> {} seq={seq} time={time}", op_name(op)))?;
        }
        tt::send(fd, TtMsg { op, seq, time }, &[])
    }

    /// A line in its first device's trace (`trace.rs`; a guest without a device has none).
    fn trace(&mut self, line: impl FnOnce() -> String) -> UmlResult<()> {
        self.conns.first_mut().map_or(Ok(()), |c| c.trace.line(line))
    }

    fn tell(&mut self, op: u32, time: u64) -> UmlResult<u32> {
        self.seq = self.seq.wrapping_add(1);
        self.send(op, self.seq, time)?;
        Ok(self.seq)
    }

    /// When it is due: its request, not before its own time.
    fn due(&self) -> Option<u64> {
        self.time.requested.filter(|&t| t < NEVER_NS / 1000).map(|t| t.max(self.time.now))
    }

    /// Until when it holds others back: its due time while it waits, its time while it runs.
    fn holds(&self) -> Option<u64> {
        if self.waiting {
            self.due()
        } else {
            Some(self.time.now)
        }
    }
}

/// Be the time-travel controller of `guests` (each connecting to its time socket, all within
/// `deadline`) and their devices, with `engine` the one engine; returns when every guest has
/// closed its time socket.
pub fn control(guests: Vec<GuestSpec>, engine: Engine, deadline: Duration) -> UmlResult<RunSummary> {
    let mut listeners = Vec::new();
    let mut run = Run { guests: Vec::new(), engine, now: 0, runners: 0 };
    for g in guests {
        let _ = std::fs::remove_file(&g.time_socket);
        let l = UnixListener::bind(&g.time_socket).map_err(|error| UmlError::Io { what: "binding a time socket", error })?;
        listeners.push((l, g.time_socket));
        let conns = g.devices.into_iter().map(|(sock, dev)| Conn::bind(&sock, dev)).collect::<UmlResult<Vec<_>>>()?;
        let summary = GuestSummary::default();
        run.guests.push(Guest { sock: None, time: GuestTime::default(), waiting: false, free_until: None, seq: 0, conns, summary });
    }
    let start = Instant::now();
    for (i, (l, path)) in listeners.iter().enumerate() {
        if !poll_one(l.as_raw_fd(), deadline.saturating_sub(start.elapsed()))? {
            return Err(UmlError::NoGuest { socket: path.clone(), waited: deadline });
        }
        let (sock, _) = l.accept().map_err(|error| UmlError::Io { what: "accepting a guest", error })?;
        run.guests[i].sock = Some(sock);
    }
    // They all start at time 0 together.
    run.runners = run.guests.len();
    run.serve()?;
    for (_, p) in &listeners {
        let _ = std::fs::remove_file(p);
    }
    let guests = run
        .guests
        .iter()
        .map(|g| {
            let devices = g
                .conns
                .iter()
                .map(|c| DeviceSummary {
                    commands: c.dev.commands(),
                    counts: c.dev.counts.clone(),
                    write_faults: c.dev.write_faults(),
                    traffic: c.traffic.clone(),
                })
                .collect();
            GuestSummary { guest_ns: g.time.now, devices, ..g.summary.clone() }
        })
        .collect();
    Ok(RunSummary {
        simulated_ps: run.engine.machine.now(),
        guests,
        unimplemented: run.engine.unimplemented(),
        fabric_events: run.engine.other_events.clone(),
        wall: start.elapsed(),
    })
}

struct Run {
    guests: Vec<Guest>,
    engine: Engine,
    /// The run's time (ns): the last time guests were told RUN.
    now: u64,
    /// How many guests were told RUN then.
    runners: usize,
}

impl Run {
    fn serve(&mut self) -> UmlResult<()> {
        loop {
            // Each open time socket, and the devices of the guests still running.
            let mut at: Vec<(usize, Option<usize>)> = Vec::new();
            let mut fds = Vec::new();
            for (i, g) in self.guests.iter().enumerate() {
                let Some(fd) = g.fd() else { continue };
                at.push((i, None));
                fds.push(fd);
                for (j, c) in g.conns.iter().enumerate() {
                    if let Some(fd) = c.fd() {
                        at.push((i, Some(j)));
                        fds.push(fd);
                    }
                }
            }
            if fds.is_empty() {
                return Ok(());
            }
            match at[poll_any(&fds)?] {
                (i, None) => match tt::recv(self.guests[i].fd().ok_or(UmlError::Closed { during: "a time-travel exchange" })?)? {
                    Some(m) => self.message(i, m, false)?,
                    None => {
                        // It powered off (or was killed): the others no longer wait for it.
                        self.guests[i].sock = None;
                        self.schedule()?;
                    }
                },
                (i, Some(j)) => {
                    let now_ps = self.guests[i].time.now.saturating_mul(1000);
                    if self.guests[i].conns[j].readable(&mut self.engine, now_ps)? == Turn::Kicked {
                        // Its accesses may have put work on the engine: it may not run past it.
                        self.tell_free_until(i, true)?;
                        self.guests[i].conns[j].kick_done()?;
                    }
                }
            }
        }
    }

    /// One message from guest `i`. `in_irq`: it is taking an interrupt (or waiting for a
    /// reply), so it cannot WAIT.
    fn message(&mut self, i: usize, m: TtMsg, in_irq: bool) -> UmlResult<()> {
        let g = &mut self.guests[i];
        g.summary.time_messages += 1;
        let fd = g.fd().ok_or(UmlError::Closed { during: "a time-travel exchange" })?;
        let answered = tt::answer(fd, &mut g.time, m, &mut g.summary.time_messages)?;
        let t = g.time;
        // Not the ACKs nothing waits for (see clock.rs' `time_message`).
        if m.op != tt::ACK {
            g.trace(|| format!("tt< {} seq={} time={} now={} requested={:?} in_irq={in_irq}", op_name(m.op), m.seq, m.time as i64, t.now, t.requested))?;
        }
        if answered {
            return Ok(());
        }
        match m.op {
            tt::WAIT if !g.waiting && !in_irq => {
                g.send(tt::ACK, m.seq, 0)?;
                g.waiting = true;
                g.free_until = None;
                g.summary.waits += 1;
                self.schedule()
            }
            _ => Err(UmlError::TimeTravel { op: m.op, what: "a message the controller does not take here" }),
        }
    }

    /// How far guest `i` may run: the engine's next event and what every other live guest holds.
    /// While several guests run from one time, none may pass it: what the others hold would
    /// depend on which of their messages came first on the wall clock.
    fn free_until_for(&self, i: usize) -> u64 {
        if self.runners > 1 {
            return self.now.max(self.guests[i].time.now);
        }
        let engine = self.engine.next_event().map(ns_at_or_after);
        let others = self.guests.iter().enumerate().filter(|&(j, g)| j != i && g.sock.is_some()).filter_map(|(_, g)| g.holds());
        engine.into_iter().chain(others).min().unwrap_or(NEVER_NS).max(self.guests[i].time.now)
    }

    /// Tell guest `i` its FREE_UNTIL if it changed. `sync`: it waits for a vhost-user reply
    /// and reads time messages only until that comes, so wait for the ACK.
    fn tell_free_until(&mut self, i: usize, sync: bool) -> UmlResult<()> {
        let until = self.free_until_for(i);
        if self.guests[i].free_until == Some(until) {
            return Ok(());
        }
        self.guests[i].free_until = Some(until);
        let seq = self.guests[i].tell(tt::FREE_UNTIL, until)?;
        if !sync {
            return Ok(());
        }
        loop {
            let fd = self.guests[i].fd().ok_or(UmlError::Closed { during: "a time-travel exchange" })?;
            let m = tt::recv(fd)?.ok_or(UmlError::Closed { during: "a time-travel exchange" })?;
            if m.op == tt::ACK && m.seq == seq {
                self.guests[i].summary.time_messages += 1;
                return Ok(());
            }
            self.message(i, m, true)?;
        }
    }

    /// Deliver the interrupts the engine has logged to the guests they are for (each waits);
    /// the guests that took some.
    fn deliver(&mut self) -> UmlResult<Vec<usize>> {
        let events = self.engine.take_events();
        let mut woken = Vec::new();
        for i in 0..self.guests.len() {
            if self.guests[i].sock.is_none() {
                continue;
            }
            // An interrupt reaches it at the run's time, not before the time it ran ahead to
            // (at most its FREE_UNTIL, which no event precedes); its handler asks for it (GET).
            let now = self.now;
            let t = &mut self.guests[i].time;
            t.now = t.now.max(now);
            let mut pending = Vec::new();
            for c in self.guests[i].conns.iter_mut() {
                c.take_interrupts(&events);
                let (req, n) = c.start_calls()?;
                pending.push((req, n));
            }
            if pending.iter().all(|&(_, n)| n == 0) {
                continue;
            }
            // Its interrupt handler asks the time and REQUESTs it; answer until it has replied to every call.
            while pending.iter().any(|&(_, n)| n > 0) {
                // The reply channels first, in the order the guest wrote (see clock.rs' `await_replies`).
                let tfd = self.guests[i].fd().ok_or(UmlError::Closed { during: "an interrupt" })?;
                let live: Vec<usize> = (0..pending.len()).filter(|&j| pending[j].1 > 0).collect();
                let mut fds: Vec<RawFd> = live.iter().map(|&j| pending[j].0).collect();
                fds.push(tfd);
                match poll_any(&fds)? {
                    k if k == live.len() => {
                        let m = tt::recv(tfd)?.ok_or(UmlError::Closed { during: "an interrupt" })?;
                        self.message(i, m, true)?;
                    }
                    k => {
                        let j = live[k];
                        self.guests[i].conns[j].take_reply(pending[j].0)?;
                        pending[j].1 -= 1;
                    }
                }
            }
            // It runs now if its handler asked for now (UML queues the interrupt as an event at
            // the time it asked); a call it took without asking (buffers to free) leaves it
            // waiting for its own time: told RUN at another time, UML finds its event not due.
            if self.guests[i].due().is_some_and(|d| d <= self.now) {
                woken.push(i);
            }
        }
        Ok(woken)
    }

    /// When every guest still running WAITs: deliver what the engine has raised; else run the
    /// engine to the earliest time a guest is due, stopping at the first interrupt it logs, and
    /// tell the guests due then (or woken by an interrupt) to RUN.
    fn schedule(&mut self) -> UmlResult<()> {
        let live = |r: &Run| r.guests.iter().filter(|g| g.sock.is_some()).count();
        if live(self) == 0 || self.guests.iter().any(|g| g.sock.is_some() && !g.waiting) {
            return Ok(());
        }
        loop {
            let woken = self.deliver()?;
            if !woken.is_empty() {
                return self.wake(woken);
            }
            let due = self.guests.iter().filter(|g| g.sock.is_some()).filter_map(Guest::due).min().map(|t| t.max(self.now));
            // A guest with no timer waits for an interrupt: the engine runs at most IDLE_HORIZON_NS for one.
            let bound = due.unwrap_or(self.now.saturating_add(IDLE_HORIZON_NS));
            let stopped = self.engine.advance(bound.saturating_mul(1000))?;
            for c in self.guests.iter_mut().flat_map(|g| g.conns.iter_mut()) {
                c.finish_reads()?;
            }
            if stopped {
                self.now = ns_at_or_after(self.engine.machine.now()).max(self.now);
                continue;
            }
            let t = due.ok_or(UmlError::NothingToWaitFor { at_ns: self.now })?;
            self.now = t;
            let due_now: Vec<usize> =
                (0..self.guests.len()).filter(|&i| self.guests[i].sock.is_some() && self.guests[i].due().is_some_and(|d| d <= t)).collect();
            return self.wake(due_now);
        }
    }

    /// Guests `woken` run from the run's time: each told FREE_UNTIL (the others' times, the
    /// engine's next event; several runners at one time may not move on without asking) and RUN.
    fn wake(&mut self, woken: Vec<usize>) -> UmlResult<()> {
        self.runners = woken.len();
        for &i in &woken {
            let g = &mut self.guests[i];
            g.time.now = g.time.now.max(self.now);
            g.waiting = false;
        }
        for &i in &woken {
            self.tell_free_until(i, false)?;
            let t = self.guests[i].time.now;
            self.guests[i].tell(tt::RUN, t)?;
        }
        Ok(())
    }
}
