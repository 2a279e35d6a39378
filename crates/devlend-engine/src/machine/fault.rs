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

use super::core::Owner;
use super::{Machine, World};
use crate::queue::Ps;
use devlend_fabric::model::FuncId;
use devlend_fabric::route::{Failure, Requester};

/// What a fault action returns: the functions that stopped, and the failure their flows end with.
pub type Halted = Vec<(FuncId, Failure)>;

pub(super) enum Pending<W> {
    Action(Box<dyn FnOnce(&mut W) -> Halted>),
    /// Deliver the end of a flow whose read timed out.
    Expire(u32),
    /// Where `Machine::run_until` stops.
    Stop,
}

impl<W: World> Machine<W> {
    /// Run `action` on the world at time `at` (not before now), as an event on the queue.
    pub fn inject(&mut self, at: Ps, action: impl FnOnce(&mut W) -> Halted + 'static) {
        let i = self.push_pending(Pending::Action(Box::new(action)));
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

    pub(super) fn push_pending(&mut self, p: Pending<W>) -> usize {
        self.pending.push(Some(p));
        self.pending.len() - 1
    }

    pub(super) fn run_pending(&mut self, i: usize) {
        match self.pending[i].take() {
            Some(Pending::Action(act)) => {
                let now = self.now();
                self.struck.push((now, self.moved.clone()));
                let halted = act(&mut self.world.borrow_mut());
                for (func, why) in halted {
                    self.halt(func, why);
                }
                self.check_conds();
            }
            Some(Pending::Expire(flow)) => self.flow_end(flow),
            Some(Pending::Stop) | None => {}
        }
    }

    /// Stop function `func`: its flows end with `why`, its device model is not called again.
    fn halt(&mut self, func: FuncId, why: Failure) {
        self.halted.insert(func);
        let mut core = self.core.borrow_mut();
        let flows: Vec<u32> = core.flows.iter().enumerate().filter_map(|(i, f)| f.as_ref().filter(|f| f.who == Requester::Func(func)).map(|_| i as u32)).collect();
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
            let cto = self.world.borrow_mut().fabric().tuning.timing.completion_timeout_ps;
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

#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;
