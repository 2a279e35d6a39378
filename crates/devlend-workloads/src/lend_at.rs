//! Borrow and return at a simulated time. The machine runs up to that time
//! (`Machine::run_until`: everything due before it has happened, nothing after), then the lend
//! is made or undone there, between two events of the one clock; workloads added afterwards start
//! no earlier and see the device's new owner. A return needs every workload on the device to
//! have ended by then (else an error naming the workload); their results are taken at the
//! return (the next borrower may overwrite what they left in the device), and every mapping of
//! the lend is undone (`Cluster::return_device_force`, once nothing is in flight), so another host may borrow the device next,
//! once its lender has scrubbed it (hygiene policy `scrub`, `devlend_host::hygiene`: a borrow
//! before the scrub's end is refused with the time it ends).

use crate::error::{Missing, SetupCause, WResult, WorkloadError};
use crate::scenario::Scenario;
use devlend_engine::queue::Ps;

impl Scenario {
    /// Run the machine up to `at` for action `what` (an error if the scenario is past it).
    fn advance(&mut self, what: &str, at: Ps) -> WResult<()> {
        if at < self.now() {
            return Err(WorkloadError::StartInPast { workload: what.into(), at, now: self.now() });
        }
        self.drive(Some(at))
    }

    /// Borrow `device` for host `borrower` at time `at` (see [`Scenario::borrow`]).
    pub fn borrow_at(&mut self, borrower: &str, device: &str, dma_window: Option<u64>, at: Ps) -> WResult<()> {
        self.advance(&format!("borrow of {device}"), at)?;
        if let Some(&(until, how)) = self.scrubbing.get(device).filter(|(until, _)| at < *until) {
            return Err(WorkloadError::Scrubbing { device: device.into(), at, until, how });
        }
        self.borrow(borrower, device, dma_window)
    }

    /// Return `device` to its lender at time `at` (held by `borrower`, when given): its
    /// workloads must have ended by then; every mapping of the lend is undone.
    pub fn return_at(&mut self, device: &str, borrower: Option<&str>, at: Ps) -> WResult<()> {
        let w = format!("return of {device}");
        self.advance(&w, at)?;
        let users: Vec<String> = self.users.iter().filter(|(d, _)| d.as_str() == device).map(|(_, u)| u.clone()).collect();
        let mut done = Vec::new();
        for u in users {
            if self.failures.contains_key(&u) {
                continue; // it ended at its failure (`keep_going`); its result is made after the run
            }
            let e = self.entries.iter().find(|e| e.name == u).expect("a device's user is an entry");
            match self.result(e) {
                Ok(r) if r.end.is_some_and(|end| end <= at) => done.push(r),
                _ => return Err(WorkloadError::ReturnInUse { device: device.into(), workload: u, at }),
            }
        }
        let mut c = self.m.world();
        let lend = c.lends().into_iter().find(|l| l.device == device && borrower.is_none_or(|b| b == l.borrower));
        let Some(lend) = lend else {
            return Err(WorkloadError::no_such(&w, "lend", Missing::NotLent { device: device.into(), by: borrower.map(String::from) }));
        };
        // Every workload on the device has ended, so nothing is in flight. The return hot-removes
        // the device from the borrower, which unbinds its driver; a workload's driver lives no
        // longer than its workload here, so what its probe allocated (coherent buffers) goes with
        // the lend's teardown rather than through a remove() nobody is left to call.
        c.return_device_force(lend.borrower.as_str(), lend.dev)
            .map_err(|error| WorkloadError::Setup { workload: w, cause: SetupCause::Host { step: "returning the device", error } })?;
        let func = c.fabric.func_id(device).ok();
        let scrub = func.filter(|&f| c.hygiene() == devlend_host::Hygiene::Scrub && !c.scrub_is_pending(f)).and_then(|f| c.last_scrub(f).cloned());
        drop(c);
        if let Some(s) = scrub {
            self.scrubbing.insert(device.into(), (at + s.ps, s.how));
        }
        self.users.retain(|d, _| d != device);
        self.done.extend(done.into_iter().map(|r| (r.name.clone(), r)));
        Ok(())
    }
}
