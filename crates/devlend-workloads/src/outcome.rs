//! A run that goes on past a workload's failure (`Scenario::keep_going`): a fault that makes one
//! workload's driver fail, or its host crash, or leaves it waiting for what never comes, ends
//! that workload, not the run. A failure before any fault has struck is the workload's own (a
//! limit its input exceeds, such as a DMA window too small for its buffer) and stays an error. Every workload then gets a result that says how it ended
//! ([`Outcome`]), with the bytes its device had moved.

use crate::error::{FailCause, WResult, WorkloadError};
use crate::scenario::{machine_error, Entry, Scenario, WorkloadResult};
use devlend_engine::machine::{MachineError, ThreadError};
use devlend_engine::queue::Ps;
use std::rc::Rc;

/// How a workload ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    Completed,
    /// Its application saw an error (a driver's, a failed access), noticed at `noticed` (when its
    /// thread ended; None when it was found only after the run).
    Failed {
        error: Rc<WorkloadError>,
        noticed: Option<Ps>,
    },
    /// It stopped without an error of its own: its host crashed (`noticed`: the crash), or it
    /// waited for what a fault kept from coming (no driver watchdog fired; `noticed` None).
    CutShort {
        error: Rc<WorkloadError>,
        noticed: Option<Ps>,
    },
}

impl Outcome {
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed { .. } => "failed",
            Outcome::CutShort { .. } => "cut short",
        }
    }

    pub fn error(&self) -> Option<&WorkloadError> {
        match self {
            Outcome::Completed => None,
            Outcome::Failed { error, .. } | Outcome::CutShort { error, .. } => Some(error),
        }
    }

    pub fn noticed(&self) -> Option<Ps> {
        match self {
            Outcome::Completed => None,
            Outcome::Failed { noticed, .. } | Outcome::CutShort { noticed, .. } => *noticed,
        }
    }
}

/// How far `Scenario::drive_to` runs the machine.
#[derive(Clone, Copy)]
pub(crate) enum Until {
    /// Until nothing is left to happen (the end's checks: stuck threads, crashes).
    End,
    /// Up to this time.
    At(Ps),
    /// At most this many events.
    Events(u64),
}

impl Scenario {
    /// Go on past a workload's failure: `run` and the machine's runs up to a borrow or return
    /// record it in that workload's result instead of ending with it.
    pub fn keep_going(&mut self, on: bool) {
        self.keep_going = on;
    }

    /// Run the machine (up to `until`, or until nothing is left to happen). Without
    /// `keep_going`, a workload's failure is the error; with it, each workload's first failure is
    /// kept and the run goes on (a crash or a stuck thread is found only once nothing is left).
    pub(crate) fn drive(&mut self, until: Option<Ps>) -> WResult<()> {
        self.drive_to(match until {
            Some(at) => Until::At(at),
            None => Until::End,
        })
        .map(|_| ())
    }

    /// As `drive`, to `until`; whether anything is left to happen (`Until::Events`).
    pub(crate) fn drive_to(&mut self, until: Until) -> WResult<bool> {
        loop {
            let r = match until {
                Until::At(at) => self.m.run_until(at).map(|()| true),
                Until::End => self.m.run().map(|()| false),
                Until::Events(n) => self.m.run_events(n),
            };
            let e = match r {
                Ok(more) => return Ok(more),
                Err(e) => e,
            };
            // With no fault struck yet, a failure is the workload's own (bad input, a limit): an error.
            if !self.keep_going || !self.struck_by(Some(self.now())) {
                return Err(machine_error(e));
            }
            // (cut short, when noticed, the last error a run gives: a crash or a stuck thread)
            let now = self.now();
            let (cut, noticed, last) = match &e {
                MachineError::Stuck { .. } => (true, None, true),
                MachineError::Thread { error, .. } => match **error {
                    ThreadError::HostCrashed { at, .. } => (true, Some(at), true),
                    _ => (false, Some(now), false),
                },
                _ => (false, Some(now), false),
            };
            let error = machine_error(e);
            let WorkloadError::Failed { workload, .. } = &error else { return Err(error) };
            if !self.entries.iter().any(|en| &en.name == workload) {
                return Err(error);
            }
            let workload = workload.clone();
            let error = Rc::new(error);
            let outcome = if cut { Outcome::CutShort { error, noticed } } else { Outcome::Failed { error, noticed } };
            self.failures.entry(workload).or_insert(outcome);
            if last {
                return Ok(false);
            }
        }
    }

    /// Whether a fault has struck (by `t`, when given).
    fn struck_by(&self, t: Option<Ps>) -> bool {
        self.faults.iter().any(|f| f.report.borrow().is_some() && t.is_none_or(|t| f.at <= t))
    }

    /// Every workload's result, each with how it ended (`keep_going`'s run).
    pub(crate) fn results_with_outcomes(&self) -> WResult<Vec<WorkloadResult>> {
        self.entries
            .iter()
            .map(|e| {
                let moved = e.device.as_deref().and_then(|d| self.moved(d).ok()).map(|(m, _)| m);
                if let Some(o) = self.failures.get(&e.name) {
                    return Ok(self.unfinished(e, o.clone(), moved));
                }
                if let Some(r) = self.done.get(&e.name) {
                    return Ok(r.clone());
                }
                Ok(match self.result(e) {
                    Ok(r) if r.end.is_some() => r,
                    Ok(r) => {
                        let error = WorkloadError::Failed { workload: e.name.clone(), cause: FailCause::NeverEnded };
                        WorkloadResult { outcome: Outcome::CutShort { error: Rc::new(error), noticed: None }, moved, ..r }
                    }
                    Err(error) if !self.struck_by(self.failed_at(e)) => return Err(error),
                    Err(error) => self.unfinished(e, Outcome::Failed { error: Rc::new(error), noticed: self.failed_at(e) }, moved),
                })
            })
            .collect()
    }
}

impl Scenario {
    /// The result of a workload before its measurements are filled in (or of one that did not
    /// complete): asked-for start, no end, its device's bytes moved, how it ended.
    pub(crate) fn unfinished(&self, e: &Entry, outcome: Outcome, moved: Option<u64>) -> WorkloadResult {
        WorkloadResult {
            name: e.name.clone(),
            kind: e.kind,
            at: e.at,
            start: e.at,
            end: None,
            bytes: e.bytes,
            fio: None,
            round_trips: None,
            ntb_perf: None,
            nic: None,
            outcome,
            moved,
        }
    }
}
