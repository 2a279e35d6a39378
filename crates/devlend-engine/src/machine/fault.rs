//! Faults at a simulated time: an action on the world (a cable pulled, a device removed, a host
//! gone) runs as an event on the machine's one queue at its time, between TLPs. What it changes
//! in the fabric stops in-flight flows where they are: every later TLP of a flow is routed again
//! when it lands or is served, fails, and the flow stops there (nothing lands after the fault
//! that the fault should stop). The functions the action names as gone (removed, hung, powered
//! off) stop at once: their flows end with that failure, and their device models are no longer
//! called.
//!
//! A read whose completer never answers (`Failure::Unresponsive`) ends only when the
//! requester's completion timeout expires (`timing.completion_timeout_ps`, PCIe Base 4.0 §2.8),
//! counted from the moment the request reached the completer (the request's one-way latency
//! earlier is not added back).
//!
//! An action returns its [`Effects`]: besides the functions it stopped, the hosts that crashed
//! (every thread that said it runs there, `Thread::runs_on`, stops at once: it issues nothing
//! more, its in-flight accesses are left to the fabric, and the run ends with
//! `ThreadError::HostCrashed` for it once nothing else is left to happen, so threads elsewhere
//! that wait on it meet their own timeouts first), the links that went down (their downstream
//! port reports a Surprise Down through AER, `aer`), and follow-up actions after a delay each
//! (a hot-plug event reaching a driver step by step). Every action is followed by a look at the
//! conditions threads wait on, so a driver waiting for its device learns of its removal at the
//! step that tells it.

use super::core::Owner;
use super::{Machine, Waiting, World};
use crate::queue::Ps;
use devlend_fabric::aer::AerDetect;
use devlend_fabric::model::{FuncId, HostId, NodeId};
use devlend_fabric::route::{Failure, Requester};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// What a fault action returns: the functions that stopped, and the failure their flows end with.
pub type Halted = Vec<(FuncId, Failure)>;

/// A follow-up action: run on the world at its time (given).
pub type Later<W> = Box<dyn FnOnce(&mut W, Ps) -> Effects<W>>;

/// What a fault action did that the machine acts on (see the module docs).
pub struct Effects<W> {
    pub halted: Halted,
    pub crashed: Vec<HostId>,
    pub links_down: Vec<NodeId>,
    /// Actions to run this many ps later.
    pub later: Vec<(Ps, Later<W>)>,
}

impl<W> Default for Effects<W> {
    fn default() -> Self {
        Effects { halted: Vec::new(), crashed: Vec::new(), links_down: Vec::new(), later: Vec::new() }
    }
}

impl<W> From<Halted> for Effects<W> {
    fn from(halted: Halted) -> Self {
        Effects { halted, ..Effects::default() }
    }
}

/// The host each thread runs on (shared with the threads, which say it themselves).
pub(crate) type ThreadHosts = Rc<RefCell<HashMap<usize, HostId>>>;

#[derive(Default)]
pub(super) struct Faults {
    pub hosts: ThreadHosts,
    /// Threads stopped by their host's crash: (thread, host, when).
    pub crashed: Vec<(usize, HostId, Ps)>,
    /// Events of the fabric's log looked at for AER so far (`aer`).
    pub aer_seen: u64,
    /// AER messages under way to their host's driver, with the count of like errors since.
    pub aer_pending: HashMap<(HostId, NodeId, devlend_fabric::aer::AerError), u32>,
}

pub(super) enum Pending<W> {
    /// An action; `injected` for one given to `inject` (not a follow-up).
    Action { act: Later<W>, injected: bool },
    /// Deliver the end of a flow whose read timed out.
    Expire(u32),
    /// An AER message reaching its host's AER driver.
    Aer(AerDetect),
    /// Where `Machine::run_until` stops.
    Stop,
    /// Take the link statistics' mark (`window`) at this time.
    Mark(Ps),
}

impl<W: World> Machine<W> {
    /// Run `action` on the world at time `at` (not before now), as an event on the queue; it
    /// returns what stopped (`Halted`) or all its [`Effects`].
    pub fn inject<R: Into<Effects<W>>>(&mut self, at: Ps, action: impl FnOnce(&mut W) -> R + 'static) {
        let act: Later<W> = Box::new(move |w: &mut W, _| action(w).into());
        let i = self.push_pending(Pending::Action { act, injected: true });
        let at = at.max(self.now());
        self.core.borrow_mut().set_timer(at, Owner::Machine(i), 0);
    }

    /// Bytes that have landed (writes) or been served (reads) for `who` so far.
    pub fn moved(&self, who: Requester) -> u64 {
        self.moved.get(&who).copied().unwrap_or(0)
    }

    /// The faults that have struck so far: when, and the bytes `who` had moved by then.
    pub fn struck(&self, who: Requester) -> Vec<(Ps, u64)> {
        self.struck.iter().map(|(t, m)| (*t, m.get(&who).copied().unwrap_or(0))).collect()
    }

    /// Whether function `func` was stopped by a fault.
    pub fn halted(&self, func: FuncId) -> bool {
        self.halted.contains(&func)
    }

    /// When the last finished thread (not a service) ended: after a fault, when the software had
    /// noticed it (a wait's stale deadline may move the clock on later).
    pub fn threads_ended_at(&self) -> Option<Ps> {
        self.threads.iter().filter(|t| !t.service).filter_map(|t| if let Waiting::Done(at) = t.waiting { Some(at) } else { None }).max()
    }

    /// When and on which host thread `id` was stopped by a crash, if it was.
    pub fn crashed(&self, id: usize) -> Option<(HostId, Ps)> {
        self.faults.crashed.iter().find(|(t, _, _)| *t == id).map(|(_, h, at)| (*h, *at))
    }

    /// Keep `p` until its timer fires; its number names it to [`Owner::Machine`]. Numbers of
    /// pending entries that have run are used again, so a long co-simulation's many
    /// `run_until` stops do not grow the list.
    pub(super) fn push_pending(&mut self, p: Pending<W>) -> usize {
        match self.free_pending.pop() {
            Some(i) => {
                self.pending[i] = Some(p);
                i
            }
            None => {
                self.pending.push(Some(p));
                self.pending.len() - 1
            }
        }
    }

    /// Entry `i` will not run (its timer was taken out): its number is free again.
    pub(super) fn drop_pending(&mut self, i: usize) {
        self.pending[i] = None;
        self.free_pending.push(i);
    }

    pub(super) fn run_pending(&mut self, i: usize) {
        let taken = self.pending[i].take();
        if taken.is_some() {
            self.free_pending.push(i);
        }
        match taken {
            Some(Pending::Action { act, injected }) => {
                let now = self.now();
                if injected {
                    self.struck.push((now, self.moved.clone()));
                }
                let effects = act(&mut self.world.borrow_mut(), now);
                self.apply(effects);
            }
            Some(Pending::Expire(flow)) => self.flow_end(flow),
            Some(Pending::Aer(d)) => self.aer_deliver(d),
            Some(Pending::Mark(at)) => self.take_mark(at),
            Some(Pending::Stop) | None => {}
        }
    }

    fn apply(&mut self, e: Effects<W>) {
        for (func, why) in e.halted {
            self.halt(func, why);
        }
        for node in e.links_down {
            let d = self.world.borrow_mut().fabric().surprise_down(node);
            if let Some(d) = d {
                self.aer_detect(d);
            }
        }
        for h in e.crashed {
            self.crash_threads(h);
        }
        let now = self.now();
        for (delay, act) in e.later {
            let i = self.push_pending(Pending::Action { act, injected: false });
            self.core.borrow_mut().set_timer(now + delay, Owner::Machine(i), 0);
        }
        self.aer_scan();
        self.check_conds();
    }

    /// Stop every unfinished thread that runs on `host`: its body is unwound where it waits.
    fn crash_threads(&mut self, host: HostId) {
        let now = self.now();
        let mut ids: Vec<usize> = self.faults.hosts.borrow().iter().filter(|(_, h)| **h == host).map(|(t, _)| *t).collect();
        ids.sort_unstable();
        for t in ids {
            match self.threads[t].waiting {
                Waiting::Done(_) => continue,
                Waiting::Cond { .. } => self.conds -= 1,
                _ => {}
            }
            self.threads[t].waiting = Waiting::Done(now);
            self.threads[t].co = None;
            self.faults.crashed.push((t, host, now));
        }
    }

    /// The error of the first thread a crash stopped (services stop silently).
    pub(super) fn crashed_error(&self) -> Option<super::MachineError> {
        let (t, h, at) = *self.faults.crashed.iter().find(|(t, _, _)| !self.threads[*t].service)?;
        let host = self.world.borrow_mut().fabric().host(h).name.clone();
        let thread = self.threads[t].name.to_string();
        Some(super::spawn::failed(&thread, super::ThreadError::HostCrashed { thread: thread.clone(), host, at }))
    }

    /// Stop function `func`: its flows end with `why`, its device model is not called again.
    fn halt(&mut self, func: FuncId, why: Failure) {
        self.halted.insert(func);
        let mut core = self.core.borrow_mut();
        let flows: Vec<u32> =
            core.flows.iter().enumerate().filter_map(|(i, f)| f.as_ref().filter(|f| f.who == Requester::Func(func)).map(|_| i as u32)).collect();
        for flow in flows {
            if let Some(f) = core.flows[flow as usize].as_mut() {
                let addr = f.addr;
                f.fault.get_or_insert((addr, why));
            }
            core.sim.stop_flow(flow);
        }
    }

    /// A read that failed because its completer never answers: its end waits for the timeout.
    pub(super) fn arm_timeout(&mut self, flow: u32, e: &Failure) {
        if matches!(e, Failure::Unresponsive { .. }) {
            let cto = self.world.borrow_mut().fabric().tuning().timing.completion_timeout_ps;
            let now = self.now();
            self.timeouts.insert(flow, now + cto);
        }
    }

    /// Whether the end of `flow` must wait for its completion timeout (then it is scheduled).
    pub(super) fn defer_end(&mut self, flow: u32) -> bool {
        match self.timeouts.remove(&flow) {
            Some(at) if at > self.now() => {
                let i = self.push_pending(Pending::Expire(flow));
                self.core.borrow_mut().set_timer(at, Owner::Machine(i), 0);
                true
            }
            _ => false,
        }
    }
}

impl<W: World> Machine<W> {
    pub(super) fn fault(&mut self, flow: u32, addr: u64, e: devlend_fabric::route::Failure) {
        let mut core = self.core.borrow_mut();
        if let Some(f) = core.flows[flow as usize].as_mut() {
            f.fault.get_or_insert((addr, e));
        }
        core.sim.stop_flow(flow);
        drop(core);
        self.aer_scan();
    }
}

#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;
