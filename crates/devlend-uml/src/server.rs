//! The session: one guest, its time-travel socket (the controller, `clock.rs`), one vhost-user
//! socket and one device (`conn.rs`), on the session's engine, served by one single-threaded
//! event loop. Several guests, each with its devices, on one engine: `guests.rs`.

use crate::conn::{Conn, Turn};
use crate::engine::{Engine, Struck};
use crate::error::{UmlError, UmlResult};
use crate::pcidev::PciFunction;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

/// The messages a session exchanged, by kind.
#[derive(Debug, Default, Clone)]
pub struct Messages {
    /// Time-travel messages both ways (ACKs included).
    pub time: u64,
    /// vhost-user messages from the guest (in-band kicks included) and replies.
    pub vhost: u64,
    pub kicks: u64,
    /// In-band calls (interrupts) sent to the guest.
    pub calls: u64,
    /// The guest's WAITs: each a turn of the engine.
    pub waits: u64,
}

/// What a session did.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub simulated_ps: u64,
    /// The guest's simulated time when it ended (ns).
    pub guest_ns: u64,
    pub commands: u64,
    pub counts: crate::pcidev::Counts,
    pub messages: Messages,
    /// Stores the fabric refused (dropped, as posted writes are).
    pub write_faults: u64,
    pub struck: Vec<Struck>,
    /// Fabric events that were no interrupt of the device (faults, failed accesses).
    pub fabric_events: Vec<String>,
    /// When the guest was told that the device is gone and its connection ended (ns).
    pub unplugged_ns: Option<u64>,
    pub wall: Duration,
}

pub(crate) struct Session {
    pub(crate) time: RawFd,
    pub(crate) engine: Engine,
    pub(crate) conn: Conn,
    pub(crate) clock: crate::clock::Clock,
    pub(crate) msgs: Messages,
}

/// Serve `dev` (a function on `engine`) to the one guest that connects to `time_socket` (its
/// time-travel controller) and `socket` (the device) within `deadline`; returns when the guest
/// closes the connections (it powered off or was killed).
pub fn serve(socket: &str, time_socket: &str, engine: Engine, dev: PciFunction, deadline: Duration) -> UmlResult<Summary> {
    serve_with_faults(socket, time_socket, engine, dev, deadline, &[])
}

/// As [`serve`], with faults `(at ns, kind, target)` injected on the engine at those simulated times.
pub fn serve_with_faults(
    socket: &str,
    time_socket: &str,
    mut engine: Engine,
    dev: PciFunction,
    deadline: Duration,
    faults: &[(u64, String, String)],
) -> UmlResult<Summary> {
    for (at, kind, target) in faults {
        engine.fault_at(at.saturating_mul(1000), kind, target)?;
    }
    let _ = std::fs::remove_file(time_socket);
    let time_l = UnixListener::bind(time_socket).map_err(|error| UmlError::Io { what: "binding a socket", error })?;
    let conn = Conn::bind(socket, dev)?;
    let start = Instant::now();
    if !poll_one(time_l.as_raw_fd(), deadline)? {
        return Err(UmlError::NoGuest { socket: time_socket.into(), waited: deadline });
    }
    let (time, _) = time_l.accept().map_err(|error| UmlError::Io { what: "accepting the guest", error })?;
    let mut s = Session { time: time.as_raw_fd(), engine, conn, clock: Default::default(), msgs: Messages::default() };
    let ran = s.run();
    drop(time);
    ran?;
    let _ = std::fs::remove_file(time_socket);
    let t = s.conn.traffic.clone();
    Ok(Summary {
        simulated_ps: s.engine.machine.now(),
        guest_ns: s.clock.time.now,
        commands: s.conn.dev.commands(),
        counts: s.conn.dev.counts.clone(),
        messages: Messages { vhost: t.vhost, kicks: t.kicks, calls: t.calls, ..s.msgs.clone() },
        write_faults: s.conn.dev.write_faults(),
        struck: s.engine.struck(),
        fabric_events: s.engine.other_events.clone(),
        unplugged_ns: s.conn.unplugged_at(&s.engine).map(crate::timetravel::ns_at_or_after),
        wall: start.elapsed(),
    })
}

pub(crate) fn poll_one(fd: RawFd, timeout: Duration) -> UmlResult<bool> {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let n = unsafe { libc::poll(&mut p, 1, timeout.as_millis().min(i32::MAX as u128) as i32) };
    if n < 0 {
        return Err(UmlError::Io { what: "poll", error: std::io::Error::last_os_error() });
    }
    Ok(n > 0)
}

/// Wait until one of `fds` is readable; the index of the first that is.
pub(crate) fn poll_any(fds: &[RawFd]) -> UmlResult<usize> {
    let mut p: Vec<libc::pollfd> = fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    loop {
        let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(UmlError::Io { what: "poll", error: std::io::Error::last_os_error() });
        }
        if let Some(i) = p.iter().position(|q| q.revents != 0) {
            return Ok(i);
        }
    }
}

impl Session {
    /// The event loop: the time socket and the device's socket (its listener until the guest
    /// connects). Ends when the guest closes its time socket.
    fn run(&mut self) -> UmlResult<()> {
        loop {
            let mut fds = vec![self.time];
            fds.extend(self.conn.fd());
            match poll_any(&fds)? {
                0 => match crate::timetravel::recv(self.time)? {
                    Some(m) => self.time_message(m, false)?,
                    None => return Ok(()),
                },
                // The device going away (the guest is powering off) is not the end: its time socket is.
                _ => {
                    if self.conn.readable(&mut self.engine, self.clock.now_ps())? == Turn::Kicked {
                        // The accesses may have put work on the engine: the guest may not run past it.
                        self.tell_free_until(true)?;
                        self.conn.kick_done()?;
                    }
                }
            }
        }
    }
}
