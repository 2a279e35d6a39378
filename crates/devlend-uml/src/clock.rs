//! The time-travel controller: devlend's engine is the guest's clock.
//!
//! The guest runs without asking up to FREE_UNTIL, which is always the time of the engine's
//! next event: nothing the model does can reach the guest before it, so the guest's CPU work
//! (which costs it no simulated time) cannot overtake an interrupt. An access the guest makes is
//! started on the engine at the guest's time (its UPDATE before the kick says when). When the
//! guest WAITs for the time it REQUESTed (its next timer), the engine runs until then, or until
//! it records an interrupt, which is delivered at that time: MSI messages into virtqueue 1, an
//! in-band call on the backend-request channel, and while the guest takes it (its interrupt
//! handler asks GET and REQUESTs that time) the controller keeps answering; then RUN. A
//! hot-unplug found while the engine runs comes the same way: a call the guest takes at that
//! time, then the channel's end (`Conn::hot_unplug`), so that a guest blocked in a read with no
//! timer due soon meets the unplug when it happens, not at its next timer.
//!
//! Picoseconds on the engine become guest nanoseconds rounded up (an interrupt the engine
//! raises at 1500 ps reaches the guest at 2 ns), so the guest never sees an effect before its cause.
//!
//! Determinism: every exchange is one the guest waits on (its time messages are answered, its
//! kicks acknowledged after FREE_UNTIL, its calls replied to before RUN), so the controller sees
//! the same messages at the same simulated times whatever the host's scheduling; where two
//! sockets can both be ready (a call's reply and the guest's next GET) it reads them in the order
//! the guest wrote them (`Session::await_replies`). What a guest does then depends on its
//! inputs alone as long as the guest itself does: UML sizes its memory from where the host put
//! its heap, so the guest starts with the host's address-space randomization off (Python's
//! `devlend.linux.guest.NO_RANDOMIZE`; BENCHMARKS.md, s24-nondet). `trace.rs` writes what the
//! controller handles, to compare two runs.

use crate::conn::Conn;
use crate::error::{UmlError, UmlResult};
use crate::server::{poll_any, Session};
use crate::timetravel::{self as tt, ns_at_or_after, TtMsg, NEVER_NS};
use crate::trace::op_name;

/// How long (simulated) a guest that waits with no timer is given for an interrupt before the
/// run is ended as one that would never wake: assumed, ten times Linux's NVMe I/O timeout
/// (`nvme_core.io_timeout`, 30 s), so any driver timeout fires well within it.
pub const IDLE_HORIZON_NS: u64 = 300_000_000_000;

/// The guest's time as the controller knows it.
#[derive(Debug, Default)]
pub struct Clock {
    /// The guest's current time and its last request.
    pub time: tt::GuestTime,
    /// The FREE_UNTIL the guest holds (None after a WAIT, which forgets it).
    free_until: Option<u64>,
    seq: u32,
}

impl Clock {
    pub fn now_ps(&self) -> u64 {
        self.time.now.saturating_mul(1000)
    }
}

impl Session {
    fn send_time(&mut self, op: u32, time: u64) -> UmlResult<u32> {
        self.clock.seq = self.clock.seq.wrapping_add(1);
        self.msgs.time += 1;
        let seq = self.clock.seq;
        self.conn.trace.line(|| format!("tt> {} seq={seq} time={time}", op_name(op)))?;
        tt::send(self.time, TtMsg { op, seq, time }, &[])?;
        Ok(self.clock.seq)
    }

    /// One message from the guest. `in_irq`: the guest is taking an interrupt, so it cannot WAIT.
    pub(crate) fn time_message(&mut self, m: TtMsg, in_irq: bool) -> UmlResult<()> {
        self.msgs.time += 1;
        let answered = tt::answer(self.time, &mut self.clock.time, m, &mut self.msgs.time)?;
        let t = self.clock.time;
        // Not the ACKs of RUN and FREE_UNTIL that nothing waits for: when they are read (before
        // or after a kick the guest sent next) is the host's scheduling, and they change nothing.
        if m.op != tt::ACK {
            self.conn
                .trace
                .line(|| format!("tt< {} seq={} time={} now={} requested={:?} in_irq={in_irq}", op_name(m.op), m.seq, m.time as i64, t.now, t.requested))?;
        }
        if answered {
            return Ok(());
        }
        match m.op {
            tt::WAIT if !in_irq => {
                self.msgs.time += 1;
                tt::send(self.time, TtMsg { op: tt::ACK, seq: m.seq, time: 0 }, &[])?;
                self.clock.free_until = None;
                self.msgs.waits += 1;
                self.wait()
            }
            _ => Err(UmlError::TimeTravel { op: m.op, what: "a message the controller does not take here" }),
        }
    }

    /// Tell the guest how far it may run: the engine's next event. `sync`: the guest is waiting
    /// for a vhost-user reply and reads time messages only until that comes, so wait for the ACK.
    pub(crate) fn tell_free_until(&mut self, sync: bool) -> UmlResult<()> {
        let until = self.engine.next_event().map_or(NEVER_NS, ns_at_or_after).max(self.clock.time.now);
        if self.clock.free_until == Some(until) {
            return Ok(());
        }
        self.clock.free_until = Some(until);
        let seq = self.send_time(tt::FREE_UNTIL, until)?;
        if sync {
            self.await_ack(seq)?;
        }
        Ok(())
    }

    /// Read time messages until the ACK of `seq`, answering what comes meanwhile.
    fn await_ack(&mut self, seq: u32) -> UmlResult<()> {
        loop {
            let m = tt::recv(self.time)?.ok_or(UmlError::Closed { during: "a time-travel exchange" })?;
            if m.op == tt::ACK && m.seq == seq {
                self.msgs.time += 1;
                self.conn.trace.line(|| format!("tt< ACK seq={seq}"))?;
                return Ok(());
            }
            self.time_message(m, true)?;
        }
    }

    /// The guest waits for its requested time: run the engine up to it, or to the interrupt
    /// that comes first, then let the guest run.
    fn wait(&mut self) -> UmlResult<()> {
        let target = self.clock.time.requested.filter(|&t| t < NEVER_NS / 1000);
        // A guest with no timer waits for an interrupt: the engine runs at most IDLE_HORIZON_NS
        // for one (its queue may hold periodic events that never raise one, and running it dry
        // would never end).
        let bound = target.unwrap_or(self.clock.time.now.saturating_add(IDLE_HORIZON_NS));
        if !self.deliver()? {
            loop {
                let stopped = self.advance(bound.saturating_mul(1000))?;
                self.conn.finish_reads()?;
                if stopped {
                    let t = ns_at_or_after(self.engine.machine.now()).max(self.clock.time.now);
                    self.clock.time.now = t;
                    if self.unplug()? | self.deliver()? {
                        break;
                    }
                    continue;
                }
                match target {
                    Some(t) => {
                        self.clock.time.now = self.clock.time.now.max(t);
                        break;
                    }
                    None => return Err(UmlError::NothingToWaitFor { at_ns: self.clock.time.now }),
                }
            }
        }
        let run = self.clock.time.requested.unwrap_or(self.clock.time.now).max(self.clock.time.now);
        self.clock.time.now = run;
        self.settle()?;
        self.tell_free_until(false)?;
        self.send_time(tt::RUN, run)?;
        Ok(())
    }

    /// Run the engine through the guest's current nanosecond (its events due at or before it, in
    /// ps), delivering what they raise. FREE_UNTIL then lies past the guest's time, so the guest
    /// runs what it has due now (the interrupt just delivered, which UML schedules at the same
    /// time) without another WAIT; the guest sees nothing earlier than it would have, every such
    /// event being due by its current time.
    fn settle(&mut self) -> UmlResult<()> {
        let end = self.clock.time.now.saturating_mul(1000);
        while self.advance(end)? {
            self.conn.finish_reads()?;
            let _ = self.unplug()? | self.deliver()?;
        }
        self.conn.finish_reads()
    }

    /// Run the engine up to `until` ps ([`crate::engine::Engine::advance`]), traced.
    fn advance(&mut self, until: u64) -> UmlResult<bool> {
        let stopped = self.engine.advance(until)?;
        let (now, next) = (self.engine.machine.now(), self.engine.next_event());
        self.conn.trace.line(|| format!("engine until_ps={until} stopped={stopped} now_ps={now} next_ps={next:?}"))?;
        Ok(stopped)
    }

    /// Deliver the interrupts raised so far, at the guest's current time: MSI messages into
    /// virtqueue 1 and an in-band call for it (and one for virtqueue 0 when posted accesses'
    /// buffers wait to be freed). The guest's interrupt handler asks the time and REQUESTs it;
    /// this answers until the guest has replied to every call. False when nothing was delivered.
    fn deliver(&mut self) -> UmlResult<bool> {
        let events = self.engine.take_events();
        self.conn.take_interrupts(&events);
        let (req, replies) = self.conn.start_calls()?;
        if replies == 0 {
            return Ok(false);
        }
        self.await_replies(req, replies)?;
        Ok(true)
    }

    /// A hot-unplug due now ([`Conn::hot_unplug`]): the guest takes its call, which schedules an
    /// interrupt at its current time, then its backend-request channel closes. True when it
    /// happened now.
    fn unplug(&mut self) -> UmlResult<bool> {
        let Some(req) = self.conn.hot_unplug(&self.engine)? else { return Ok(false) };
        if req >= 0 {
            let replied = self.await_replies(req, 1);
            Conn::end_channel(req);
            replied?;
        }
        Ok(true)
    }

    /// Answer the guest's time messages until it has replied `replies` times on `req`.
    ///
    /// The reply channel is looked at first: the guest's handler (virtio_uml's
    /// `vu_req_read_message`) asks the time of a call (GET, answered before it goes on), replies
    /// without waiting, then asks the time of the next call, so when both sockets are ready the
    /// reply was written first. Taking it first takes the messages in the order the guest wrote
    /// them, whatever the host's scheduling let the controller see (a trace of the run is the
    /// same each time).
    fn await_replies(&mut self, req: std::os::fd::RawFd, mut replies: usize) -> UmlResult<()> {
        while replies > 0 {
            if poll_any(&[req, self.time])? == 0 {
                self.conn.take_reply(req)?;
                replies -= 1;
            } else {
                let m = tt::recv(self.time)?.ok_or(UmlError::Closed { during: "an interrupt" })?;
                self.time_message(m, true)?;
            }
        }
        Ok(())
    }
}
