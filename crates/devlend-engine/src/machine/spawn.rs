//! Threads started and looked at, off the walk of one access: [`Machine::spawn`] (and a service
//! thread that may still wait at the end, [`Machine::spawn_service`]), when a thread started and
//! ended, a thread's name and the host it runs on (`Thread::runs_on`, for a crash), a wait with a
//! deadline (a driver's timeout, [`Thread::wait_for_until`]), and a finished thread's error.

use super::error::{MachineError, ThreadError};
use super::thread::{Block, Wake};
use super::{Machine, Owner, Slot, Thread, Waiting, Watch, World};
use crate::queue::Ps;
use corosensei::{Coroutine, Yielder};
use devlend_fabric::model::HostId;
use std::cell::RefCell;
use std::rc::Rc;

impl<W: World> Machine<W> {
    /// Start a software thread at time `at`. Returns its index.
    pub fn spawn(&mut self, name: &str, at: Ps, body: impl FnOnce(&mut Thread<'_, W>) -> Result<(), ThreadError> + 'static) -> usize {
        self.spawn_thread(name, at, false, body)
    }

    /// Start a service thread at `at`: one that serves others (an interrupt handler waiting for
    /// the next interrupt) and may still be waiting when the run ends, which is then no error.
    pub fn spawn_service(&mut self, name: &str, at: Ps, body: impl FnOnce(&mut Thread<'_, W>) -> Result<(), ThreadError> + 'static) -> usize {
        self.spawn_thread(name, at, true, body)
    }

    fn spawn_thread(&mut self, name: &str, at: Ps, service: bool, body: impl FnOnce(&mut Thread<'_, W>) -> Result<(), ThreadError> + 'static) -> usize {
        let id = self.threads.len();
        let name: Rc<str> = Rc::from(name);
        let (world, core, n, hosts) = (self.world.clone(), self.core.clone(), name.clone(), self.faults.hosts.clone());
        let co = Coroutine::new(move |y: &Yielder<Wake, Block<W>>, _: Wake| {
            let mut t = Thread { y, world, core, id, name: n, hosts };
            body(&mut t)
        });
        self.threads.push(Slot { name, co: Some(co), waiting: Waiting::Start, start: at, service });
        self.core.borrow_mut().set_timer(at, Owner::Thread(id), 0);
        id
    }

    /// When thread `id` finished, if it has.
    pub fn thread_end(&self, id: usize) -> Option<Ps> {
        match self.threads[id].waiting {
            Waiting::Done(t) => Some(t),
            _ => None,
        }
    }

    /// When thread `id` started.
    pub fn thread_start(&self, id: usize) -> Ps {
        self.threads[id].start
    }
}

impl<W: World> Thread<'_, W> {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This thread runs on a CPU of `host`: if the host crashes, the thread stops there
    /// (`Machine::inject`'s `Effects::crashed`).
    pub fn runs_on(&self, host: HostId) {
        self.hosts.borrow_mut().insert(self.id, host);
    }

    /// As [`Thread::wait_for`], but no later than `deadline` (a driver's timeout): whether
    /// `pred` held when the thread woke.
    pub fn wait_for_until(&self, what: impl Into<String>, watch: Watch, deadline: Ps, mut pred: impl FnMut(&mut W) -> bool + 'static) -> bool {
        if pred(&mut self.world.borrow_mut()) {
            return true;
        }
        if deadline <= self.now() {
            return false;
        }
        let pred = Rc::new(RefCell::new(pred));
        let p = pred.clone();
        self.y.suspend(Block::Cond { what: what.into(), watch, pred: Box::new(move |w: &mut W| (p.borrow_mut())(w)), deadline: Some(deadline) });
        let held = (pred.borrow_mut())(&mut self.world.borrow_mut());
        held
    }
}

/// A thread's body.
pub type Body<W> = Box<dyn FnOnce(&mut Thread<'_, W>) -> Result<(), ThreadError>>;

/// Turn a finished thread's result into the machine's error.
pub(crate) fn failed(name: &str, e: ThreadError) -> MachineError {
    MachineError::Thread { thread: name.to_string(), error: Box::new(e) }
}
