//! AER on the clock: every failure the fabric records that the hardware reports through AER
//! (`devlend_fabric::aer`: a poisoned completion, a completion timeout, an Unsupported Request, a
//! Surprise Down) is detected when it is recorded (a completion timeout when the requester's
//! timer expires, `timing.completion_timeout_ps` later), and its error message reaches the host's
//! AER driver `timing.aer_irq_ps` after detection (the root port's interrupt and the driver's handler), where
//! it is recorded as `Event::Aer`. While one message of a kind is under way from a root port,
//! more errors of that kind only count (the root port's "multiple" status bits, PCIe Base 4.0
//! §7.8.4.10; Linux reports them as one), so the log stays bounded by the time the run takes.

use super::core::Owner;
use super::fault::Pending;
use super::{Machine, World};
use devlend_fabric::aer::{AerDetect, AerError};
use devlend_fabric::events::Event;

impl<W: World> Machine<W> {
    /// Look at the failures recorded since the last look.
    pub(super) fn aer_scan(&mut self) {
        let found: Vec<AerDetect> = {
            let mut w = self.world.borrow_mut();
            let f = w.fabric();
            let total = f.events().total();
            if total == self.faults.aer_seen {
                return;
            }
            let seen = std::mem::replace(&mut self.faults.aer_seen, total);
            let mut v: Vec<_> = f.events().since_rev(seen).filter_map(|e| if let Event::Failed(x) = e { f.aer_of(x) } else { None }).collect();
            v.reverse();
            v
        };
        for d in found {
            self.aer_detect(d);
        }
    }

    /// An error detected now: its message is sent unless one of its kind is under way.
    pub(super) fn aer_detect(&mut self, d: AerDetect) {
        let key = (d.host, d.root_port, d.error);
        if let Some(more) = self.faults.aer_pending.get_mut(&key) {
            *more += 1;
            return;
        }
        self.faults.aer_pending.insert(key, 0);
        let t = self.world.borrow_mut().fabric().tuning().timing.clone();
        // A completion timeout is recorded when the request meets the completer that will never
        // answer; the requester detects it when its timer expires.
        let wait = if d.error == AerError::CompletionTimeout { t.completion_timeout_ps } else { 0 };
        let at = self.now() + wait + t.aer_irq_ps;
        let i = self.push_pending(Pending::Aer(d));
        self.core.borrow_mut().set_timer(at, Owner::Machine(i), 0);
    }

    pub(super) fn aer_deliver(&mut self, d: AerDetect) {
        let more = self.faults.aer_pending.remove(&(d.host, d.root_port, d.error)).unwrap_or(0);
        let at = self.now();
        self.world.borrow_mut().fabric().record_event(Event::Aer { at, detect: d, more });
    }
}
