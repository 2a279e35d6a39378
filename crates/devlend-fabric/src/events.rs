//! The fabric's event log: every failed access and every interrupt message is counted by kind,
//! and the most recent ones are kept in a ring of `params().log.events` entries, so a run that
//! records millions of faults holds a bounded amount of memory. Events carry a sequence number,
//! so a reader can ask for what happened after a point it noted (`total()`, then `since`).

use crate::aer::{AerDetect, HotplugStep};
use crate::model::{FuncId, HostId};
use crate::params::params;
use crate::route::Failure;
use std::collections::{BTreeMap, VecDeque};

/// Something that happened on the data path and that tests and experiments can inspect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Failed(Failure),
    Msi {
        host: HostId,
        addr: u64,
        data: u32,
    },
    /// An AER error message handled by host `host`'s AER driver at `at` ps (`crate::aer`);
    /// `more` errors of the same kind came while it was pending (the root port's "multiple"
    /// bits, §7.8.4.10).
    Aer {
        at: u64,
        detect: AerDetect,
        more: u32,
    },
    /// A step of a removal reaching a driver at `at` ps (`crate::aer::HotplugStep`).
    Hotplug {
        at: u64,
        host: HostId,
        func: FuncId,
        step: HotplugStep,
    },
}

impl Event {
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Failed(f) => f.kind(),
            Event::Msi { .. } => "msi",
            Event::Aer { .. } => "aer",
            Event::Hotplug { .. } => "hotplug",
        }
    }
}

#[derive(Clone, Debug)]
pub struct EventLog {
    ring: VecDeque<(u64, Event)>,
    cap: usize,
    total: u64,
    counts: BTreeMap<&'static str, u64>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog::with_cap(params().log.events)
    }
}

impl EventLog {
    pub fn with_cap(cap: usize) -> EventLog {
        EventLog { ring: VecDeque::new(), cap: cap.max(1), total: 0, counts: BTreeMap::new() }
    }

    pub fn push(&mut self, e: Event) {
        if self.ring.len() == self.cap {
            self.ring.pop_front();
        }
        self.ring.push_back((self.total, e));
        self.total += 1;
        *self.counts.entry(e.kind()).or_default() += 1;
    }

    /// Events ever recorded (also the sequence number the next one gets).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Events ever recorded, by kind (`Event::kind`).
    pub fn counts(&self) -> &BTreeMap<&'static str, u64> {
        &self.counts
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Events still in the ring.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// The events in the ring, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Event> {
        self.ring.iter().map(|(_, e)| e)
    }

    pub fn last(&self) -> Option<&Event> {
        self.ring.back().map(|(_, e)| e)
    }

    /// The events in the ring recorded at or after sequence number `seq` (see `total`).
    pub fn since(&self, seq: u64) -> impl Iterator<Item = &Event> {
        self.ring.iter().filter(move |(s, _)| *s >= seq).map(|(_, e)| e)
    }

    /// As `since`, newest first, looking at the ring's tail only.
    pub fn since_rev(&self, seq: u64) -> impl Iterator<Item = &Event> {
        self.ring.iter().rev().take_while(move |(s, _)| *s >= seq).map(|(_, e)| e)
    }

    /// Drop the events in the ring for which `keep` is false (a consumer taking its messages);
    /// counts and the total are unchanged.
    pub fn retain(&mut self, mut keep: impl FnMut(&Event) -> bool) {
        self.ring.retain(|(_, e)| keep(e));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msi(data: u32) -> Event {
        Event::Msi { host: 0, addr: 0xfee0_0000, data }
    }

    #[test]
    fn the_ring_stays_at_its_cap_while_the_counts_keep_growing() {
        let mut log = EventLog::with_cap(64);
        for i in 0..10_000u32 {
            log.push(if i % 2 == 0 { msi(i) } else { Event::Failed(Failure::NtbLinkDown { ntb: 0 }) });
            assert!(log.len() <= 64);
        }
        assert_eq!((log.len(), log.total()), (64, 10_000));
        assert_eq!(log.counts()["msi"], 5_000);
        assert_eq!(log.counts()["ntb-link-down"], 5_000);
        assert_eq!(log.iter().next(), Some(&msi(9_936)), "the oldest kept is event 9936");
        assert_eq!(log.last(), Some(&Event::Failed(Failure::NtbLinkDown { ntb: 0 })));
        assert_eq!(log.since(9_998).count(), 2);
        assert_eq!(log.since(0).count(), 64);
    }

    #[test]
    fn the_default_cap_is_the_parameter() {
        assert_eq!(EventLog::default().cap(), params().log.events);
        assert!(params().log.events >= 1024, "enough for a test to see what it caused");
    }
}
