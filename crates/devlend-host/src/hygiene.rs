//! Device hygiene between borrowers: what one borrower leaves in a lent device (a GPU's device
//! memory, its registers, a controller's queues) is what the next one reads, unless the lender
//! clears it. SmartIO's documentation found does not say that it does; a provider lending
//! devices between tenants has to (as cloud providers clear a GPU between VMs), so the policy is
//! the cluster's:
//!
//! - [`Hygiene::Scrub`] (the default): when a lend ends (a return, a forced return, a fault that
//!   ends it) the lender clears every byte and register of the device that a driver can read back
//!   (`Fabric::scrub`: every byte behind its BARs, registers included), before anyone
//!   borrows it again. A device the scrub cannot reach then (its lender crashed, its slot is
//!   down, it hangs) stays marked, and is scrubbed at its next borrow or refused with the reason.
//!   How long it takes is how the device would do it ([`ScrubHow`]): a device with memory of its
//!   own behind its BARs (a GPU's frame buffer) is filled by its own copy engine at its memory
//!   bandwidth (`device.<profile>.memory_bandwidth`, assumed to be what a fill reaches), all of
//!   it (the lender cannot know which pages were used), and its registers are written back to
//!   their defaults by the lender's driver (a few stores, not counted); any other
//!   device is cleared by the reset itself (its registers return to their defaults, PCIe Base 4.0
//!   §6.6.2), which software waits `timing.flr_wait_ps` (100 ms) for. The time is reported
//!   ([`Scrub`]); a scenario refuses a borrow before it has passed.
//! - [`Hygiene::None`]: today's lending, for studies of what real lending leaks: nothing is
//!   cleared (a fault's reset still clears the poisoned state, not the bytes).
//!
//! Not covered: an NVMe drive's media (the namespace's blocks are what a drive is for; clearing
//! them is a Format NVM or Sanitize the tenant asks for; devlend's controller model keeps its
//! media per fio job, so no block outlives a job).

use crate::cluster::Cluster;
use crate::error::{HResult, HostError, InvalidRequest};
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::params::params;

/// What the lender does with a device between two borrowers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hygiene {
    #[default]
    Scrub,
    None,
}

pub const HYGIENE_POLICIES: [(&str, Hygiene, &str); 2] = [
    ("scrub", Hygiene::Scrub, "every byte and register of a returned device cleared before its next borrower"),
    ("none", Hygiene::None, "nothing cleared: the next borrower reads what the last one left (what real lending may leak)"),
];

impl Hygiene {
    pub fn parse(name: &str) -> HResult<Hygiene> {
        HYGIENE_POLICIES
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, h, _)| *h)
            .ok_or_else(|| HostError::from(InvalidRequest::UnknownHygiene { name: name.into() }))
    }

    pub fn name(self) -> &'static str {
        HYGIENE_POLICIES.iter().find(|(_, h, _)| *h == self).map_or("", |(n, _, _)| n)
    }
}

/// How a device is cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScrubHow {
    /// Its own engine fills `bytes` of device memory at `bytes_per_s`.
    Fill { bytes: u64, bytes_per_s: u64 },
    /// A Function Level Reset, which clears its registers.
    Reset,
}

/// One scrub: the device, how, and how long it keeps the device from its next borrower.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scrub {
    pub device: String,
    pub how: ScrubHow,
    pub ps: u64,
}

/// The devices whose last lend ended and that have not been scrubbed yet, and the last scrub of each.
#[derive(Clone, Debug, Default)]
pub struct HygieneState {
    pub(crate) policy: Hygiene,
    pub(crate) pending: std::collections::BTreeSet<FuncId>,
    pub(crate) last: std::collections::BTreeMap<FuncId, Scrub>,
    /// Hosts that crashed and have not rebooted: their agents scrub nothing.
    pub(crate) crashed: std::collections::BTreeSet<HostId>,
    /// Lends ending now go back to the same tenant (`Cluster::same_tenant`).
    pub(crate) same_tenant: bool,
}

impl Cluster {
    pub fn set_hygiene(&mut self, policy: Hygiene) {
        self.hygiene.policy = policy;
        if policy == Hygiene::None {
            self.hygiene.pending.clear();
        }
    }

    pub fn hygiene(&self) -> Hygiene {
        self.hygiene.policy
    }

    /// Run `f`, whose returns and borrows hand devices back to the tenant that had them (a VM's
    /// cold migration re-borrows its devices from the new host): those returns scrub nothing.
    pub fn same_tenant<R>(&mut self, f: impl FnOnce(&mut Cluster) -> R) -> R {
        let was = std::mem::replace(&mut self.hygiene.same_tenant, true);
        let out = f(self);
        self.hygiene.same_tenant = was;
        out
    }

    /// A lend of `func` ended: scrub it now if the policy says so and it can be reached; else it
    /// stays pending until its next borrow.
    pub(crate) fn lend_ended(&mut self, func: FuncId) {
        if self.hygiene.policy == Hygiene::Scrub && !self.hygiene.same_tenant {
            self.hygiene.pending.insert(func);
            // A lender does not touch a device it knows is unreachable (crashed itself, the device
            // hung or removed, its slot down): the scrub waits for the next borrow, and no access
            // of it shows in the AER log.
            if !self.hygiene.crashed.contains(&self.fabric.func_host(func)) && self.fabric.can_scrub(func) {
                let _ = self.scrub_pending(func);
            }
        }
    }

    /// Before `func` is lent: scrub it if a lend of it ended unscrubbed; an error if that fails.
    pub(crate) fn scrub_pending(&mut self, func: FuncId) -> HResult<()> {
        if !self.hygiene.pending.contains(&func) {
            return Ok(());
        }
        let scrub = self.scrub_time(func);
        let f = &mut self.fabric;
        f.scrub(func, scrub.how == ScrubHow::Reset).map_err(|failure| HostError::Fault {
            addr: 0,
            failure: Box::new(f.failure_report(&failure)),
            during: Some("scrubbing the device before its next borrower (hygiene policy scrub)"),
        })?;
        self.hygiene.pending.remove(&func);
        self.hygiene.last.insert(func, scrub);
        Ok(())
    }

    /// How `func` is scrubbed and how long it takes (see the module docs).
    fn scrub_time(&self, func: FuncId) -> Scrub {
        let f = &self.fabric;
        let device = f.func(func).name.clone();
        let profile = f.devices().iter().find(|d| d.node == f.func(func).node).and_then(|d| d.profile.as_deref());
        let fill = profile.and_then(|p| params().device.get(p)).and_then(|p| Some((p.memory?, p.memory_bandwidth?)));
        match fill {
            Some((bytes, bytes_per_s)) => {
                let ps = (bytes as u128 * 1_000_000_000_000 / bytes_per_s.max(1) as u128) as u64;
                Scrub { device, how: ScrubHow::Fill { bytes, bytes_per_s }, ps }
            }
            None => Scrub { device, how: ScrubHow::Reset, ps: f.tuning().timing.flr_wait_ps },
        }
    }

    /// The last scrub of `func`, if it had one.
    pub fn last_scrub(&self, func: FuncId) -> Option<&Scrub> {
        self.hygiene.last.get(&func)
    }

    /// Whether `func` still waits for its scrub.
    pub fn scrub_is_pending(&self, func: FuncId) -> bool {
        self.hygiene.pending.contains(&func)
    }
}
