//! Timers on the one clock, off the walk of one access: the machine's table of who owns each
//! timer the simulation holds (`Core::set_timer`, `cancel_timer`, `take_timer`), a device's own
//! timers ([`Cx::set_timer`]) and signals between device models that are not PCIe
//! ([`Cx::signal`], [`Machine::signal`]).

use super::core::{Core, Owner};
use super::{Cx, Machine, World};
use crate::queue::Ps;
use devlend_fabric::model::FuncId;

impl Core {
    /// A timer for `owner` at `at`; the number it returns cancels it ([`Core::cancel_timer`]).
    pub fn set_timer(&mut self, at: Ps, owner: Owner, token: u64) -> u32 {
        let id = match self.free_timers.pop() {
            Some(i) => {
                self.timers[i as usize] = Some((owner, token));
                i
            }
            None => {
                self.timers.push(Some((owner, token)));
                self.timers.len() as u32 - 1
            }
        };
        self.sim.set_timer(at, id as u64)
    }

    /// Take a timer [`Core::set_timer`] set out before it fires (nothing if it has fired).
    pub fn cancel_timer(&mut self, timer: u32) {
        if let Some(id) = self.sim.cancel_timer(timer) {
            self.take_timer(id);
        }
    }

    pub fn take_timer(&mut self, id: u64) -> (Owner, u64) {
        self.free_timers.push(id as u32);
        self.timers[id as usize].take().expect("a timer fires once")
    }
}

impl<W: World> Cx<'_, W> {
    /// Call the [`Device::timer`](super::Device::timer) of the device model that is function `func` with `token` after
    /// `delay`: a signal on a wire between two devices that is not PCIe (an InfiniBand cable
    /// between two HCAs). False when no model is function `func`.
    pub fn signal(&mut self, func: FuncId, delay: Ps, token: u64) -> bool {
        let Some(&d) = self.peers.get(&func) else { return false };
        let at = self.core.now() + delay;
        self.core.set_timer(at, Owner::Device(d), token);
        true
    }

    /// Call [`Device::timer`](super::Device::timer) with `token` after `delay`.
    pub fn set_timer(&mut self, delay: Ps, token: u64) {
        let at = self.core.now() + delay;
        self.core.set_timer(at, Owner::Device(self.dev), token);
    }
}

impl<W: World> Machine<W> {
    /// Call the [`Device::timer`](super::Device::timer) of the device model that is function `func` with `token` at
    /// `at`: something the device sees that is no TLP (a cable pulled from its port). False when
    /// no model is function `func`.
    pub fn signal(&mut self, func: FuncId, at: Ps, token: u64) -> bool {
        let Some(&d) = self.by_func.get(&func) else { return false };
        self.core.borrow_mut().set_timer(at, Owner::Device(d), token);
        true
    }
}
