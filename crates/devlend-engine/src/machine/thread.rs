//! Software as threads on the one clock.
//!
//! A thread is a stackful coroutine (corosensei): its body is ordinary, synchronous code (a
//! driver, a benchmark loop), and every call that takes simulated time suspends it until the
//! machine reaches the moment it ends. A register read blocks the thread until its completion
//! returns; a posted store costs its issue time (until its TLP has left the CPU's root port);
//! waiting for an interrupt or a memory value suspends it until a landing makes the condition
//! true. Only one thread runs at a time, resumed in the order of the simulation's events, so
//! several threads interleave deterministically.

use super::core::{Core, FlowDone, FlowStart, Owner};
use super::error::{MachineError, ThreadError};
use super::World;
use crate::queue::Ps;
use corosensei::Yielder;
use devlend_fabric::model::HostId;
use devlend_fabric::route::{Failure, Requester, Target};
use devlend_wire::Access;
use std::cell::{RefCell, RefMut};
use std::rc::Rc;

/// Why a thread is suspended.
pub(crate) enum Block<W> {
    /// Until flow `.0` has left its source (a posted store) or ended.
    Flow {
        flow: u32,
        sent: bool,
        what: String,
    },
    Until(Ps),
    /// Until the predicate holds; evaluated after the landings it watches and every flow's end.
    /// With a deadline, also until then (a driver's timeout).
    Cond {
        what: String,
        watch: Watch,
        pred: Box<dyn FnMut(&mut W) -> bool>,
        deadline: Option<Ps>,
    },
}

/// The token of a thread's timer that is a wait's deadline (its other timers use 0).
pub(crate) const DEADLINE: u64 = 1;

/// Which landings may make a waiting thread's condition true.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watch {
    Any,
    /// Writes into `len` bytes of host `host`'s RAM at `addr`.
    Ram {
        host: HostId,
        addr: u64,
        len: u64,
    },
    /// Interrupts (MSI writes) to host `host`.
    Msi {
        host: HostId,
    },
}

impl Watch {
    /// Whether a write of `len` bytes reaching `t` may matter.
    pub(crate) fn covers(&self, t: &Target, len: u64) -> bool {
        match (*self, *t) {
            (Watch::Any, _) => true,
            (Watch::Ram { host, addr, len: n }, Target::Ram { host: h, addr: a }) => h == host && a < addr + n && addr < a + len,
            (Watch::Msi { host }, Target::Msi { host: h, .. }) => h == host,
            _ => false,
        }
    }
}

/// What a suspended thread is resumed with.
pub(crate) enum Wake {
    Go,
    Flow(Box<FlowDone>),
}

/// The handle a thread's body acts through.
pub struct Thread<'y, W: World> {
    pub(crate) y: &'y Yielder<Wake, Block<W>>,
    pub(crate) world: Rc<RefCell<W>>,
    pub(crate) core: Rc<RefCell<Core>>,
    pub(crate) id: usize,
    pub(crate) name: Rc<str>,
    /// The host each thread runs on, where it said (`runs_on`): a crash of that host stops it.
    pub(crate) hosts: super::fault::ThreadHosts,
}

/// Reads and writes of more than this go as one flow each; the machine splits them into TLPs.
const MAX_ACCESS: u64 = 1 << 30;

impl<W: World> Thread<'_, W> {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This thread runs on a CPU of `host`: if the host crashes, the thread stops there
    /// (`Machine::inject`'s `Effects::crashed`).
    pub fn runs_on(&self, host: HostId) {
        self.hosts.borrow_mut().insert(self.id, host);
    }

    /// The time now, for this thread.
    pub fn now(&self) -> Ps {
        self.core.borrow().now()
    }

    /// Timeless access to the world: program tables, look at memory, allocate. Do not hold it
    /// across a call that takes time.
    pub fn world(&self) -> RefMut<'_, W> {
        self.world.borrow_mut()
    }

    /// Spend `ps` of CPU time (software cost).
    pub fn sleep(&self, ps: Ps) {
        if ps > 0 {
            let at = self.now() + ps;
            self.y.suspend(Block::Until(at));
        }
    }

    /// Suspend until `pred` holds (checked now, then after every landing, timer and flow end).
    /// `what` names the wait in the error if it never comes.
    pub fn wait_until(&self, what: impl Into<String>, pred: impl FnMut(&mut W) -> bool + 'static) {
        self.wait_for(what, Watch::Any, pred)
    }

    /// As [`Thread::wait_until`], but the predicate is looked at again only after landings that
    /// `watch` covers (and after timers and flow ends): a driver spinning on a word in RAM is
    /// not re-checked for every TLP of a copy into a BAR.
    pub fn wait_for(&self, what: impl Into<String>, watch: Watch, mut pred: impl FnMut(&mut W) -> bool + 'static) {
        if pred(&mut self.world.borrow_mut()) {
            return;
        }
        self.y.suspend(Block::Cond { what: what.into(), watch, pred: Box::new(pred), deadline: None });
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

    /// A CPU store of `data` at `addr` by a CPU of `host`: posted, so the thread goes on once
    /// the store has left the CPU (the bytes land later, in order behind earlier stores).
    pub fn cpu_write(&self, host: HostId, addr: u64, data: &[u8]) -> Result<(), ThreadError> {
        self.fits(addr, data.len() as u64)?;
        self.access(host, addr, Access::Write, data.len() as u64, data.to_vec()).map(|_| ())
    }

    /// A CPU load of `len` bytes at `addr`: the thread waits for the data.
    pub fn cpu_read(&self, host: HostId, addr: u64, len: usize) -> Result<Vec<u8>, ThreadError> {
        self.fits(addr, len as u64)?;
        self.access(host, addr, Access::Read, len as u64, vec![0; len])
    }

    /// One call moves at most `MAX_ACCESS` bytes, inside the address space (checked before any
    /// buffer is made).
    fn fits(&self, addr: u64, len: u64) -> Result<(), ThreadError> {
        if len > MAX_ACCESS || addr.checked_add(len).is_none() {
            return Err(ThreadError::TooLarge { thread: self.name.to_string(), addr, len });
        }
        Ok(())
    }

    fn access(&self, host: HostId, addr: u64, access: Access, len: u64, data: Vec<u8>) -> Result<Vec<u8>, ThreadError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let who = Requester::Cpu(host);
        let started = {
            let mut w = self.world.borrow_mut();
            let mut core = self.core.borrow_mut();
            core.start(w.fabric(), FlowStart { owner: Owner::Thread(self.id), who, addr, access, len, data: data.clone(), carries_data: true, token: 0, at: 0 })
        };
        let fail = |addr: u64, f: Failure| {
            let failure = Box::new(self.world.borrow_mut().fabric().failure_report(&f));
            ThreadError::Access { thread: self.name.to_string(), addr, failure }
        };
        match started {
            Err(f) => {
                let cto = self.world.borrow_mut().fabric().tuning().timing.completion_timeout_ps;
                self.world.borrow_mut().fabric().record(f);
                if access == Access::Read && matches!(f, Failure::Unresponsive { .. }) {
                    // A completer that never answers: the load fails when the timeout expires (PCIe §2.8).
                    self.sleep(cto);
                }
                Err(fail(addr, f))
            }
            Ok(Err(local)) => {
                // The CPU's own RAM: no link to cross; the bytes move now.
                let out = {
                    let mut w = self.world.borrow_mut();
                    match access {
                        Access::Write => {
                            let (_, e) = w.fabric().write(who, addr, &data);
                            e.map(|e| (Vec::new(), Some(e))).unwrap_or((Vec::new(), None))
                        }
                        Access::Read => {
                            let (d, e) = w.fabric().read(who, addr, len as usize);
                            (d, e)
                        }
                    }
                };
                self.sleep(local.latency);
                match out {
                    (_, Some(e)) => Err(fail(addr, e)),
                    (d, None) => Ok(d),
                }
            }
            Ok(Ok(flow)) => {
                let what = format!("the {} of {len} bytes at {addr:#x}", if access == Access::Read { "read" } else { "store" });
                let wake = self.y.suspend(Block::Flow { flow, sent: access == Access::Write, what });
                match wake {
                    Wake::Flow(done) => match done.fault {
                        Some((a, f)) => Err(fail(a, f)),
                        None => Ok(done.data),
                    },
                    Wake::Go => Ok(Vec::new()),
                }
            }
        }
    }
}

/// A thread's body.
pub type Body<W> = Box<dyn FnOnce(&mut Thread<'_, W>) -> Result<(), ThreadError>>;

/// Turn a finished thread's result into the machine's error.
pub(crate) fn failed(name: &str, e: ThreadError) -> MachineError {
    MachineError::Thread { thread: name.to_string(), error: Box::new(e) }
}
