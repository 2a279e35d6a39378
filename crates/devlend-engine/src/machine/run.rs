//! Running the clock other than to the end ([`Machine::run`]): up to a time
//! ([`Machine::run_until`], [`Machine::run_until_or`]), in slices of events
//! ([`Machine::run_events`]), and when the next event is due ([`Machine::next_event_at`]).

use super::error::MachineError;
use super::fault::Pending;
use super::{Machine, Owner, World};
use crate::queue::Ps;

impl<W: World> Machine<W> {
    /// Run up to time `at` (not before now): everything due before it, and what was due at it
    /// when this was called; then the clock reads `at` and the world can be changed timelessly
    /// (a borrow or a return at a simulated time) before the run goes on. Threads still waiting
    /// are no error here.
    pub fn run_until(&mut self, at: Ps) -> Result<(), MachineError> {
        self.run_until_or(at, |_| false).map(|_| ())
    }

    /// Run at most `events` more events (a caller that shows progress runs in slices, then
    /// [`Machine::run`] for the end's checks); false once nothing is left to happen. A thread
    /// still waiting is no error here.
    pub fn run_events(&mut self, events: u64) -> Result<bool, MachineError> {
        for _ in 0..events {
            if !self.step()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// When the next event is due (None: nothing is left to happen). Nothing can change before
    /// it unless someone outside starts something: a guest synchronised to this clock may run
    /// freely up to it.
    pub fn next_event_at(&self) -> Option<Ps> {
        self.core.borrow().sim.next_time()
    }

    /// As [`Machine::run_until`], but stop early, at the time of the event after which `stop`
    /// holds (true then). The clock never passes `at`, so what is started at `at` or later
    /// afterwards is in order.
    /// A run that stops early takes its stop marker out of the queue, so what is pending next
    /// ([`Machine::next_event_at`]) and where a later [`Machine::run`] leaves the clock are as if
    /// it had never been set.
    pub fn run_until_or(&mut self, at: Ps, mut stop: impl FnMut(&mut W) -> bool) -> Result<bool, MachineError> {
        let i = self.push_pending(Pending::Stop);
        let at = at.max(self.now());
        let timer = self.core.borrow_mut().set_timer(at, Owner::Machine(i), 0);
        let ran = loop {
            if self.pending[i].is_none() {
                break Ok(false);
            }
            match self.step() {
                Ok(true) if stop(&mut self.world.borrow_mut()) => break Ok(true),
                Ok(true) => {}
                Ok(false) => break Ok(false),
                Err(e) => break Err(e),
            }
        };
        if self.pending[i].is_some() {
            self.core.borrow_mut().cancel_timer(timer);
            self.drop_pending(i);
        }
        ran
    }
}
