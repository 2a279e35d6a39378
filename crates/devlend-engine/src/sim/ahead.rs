//! Prefetching what the next events will touch (issue 33). At 1024 hosts / 8192 streams the
//! lines a TLP-hop touches (the TLP's record, its port's three lines, `Dllps`, `Tally`, the FIFO
//! and slot-return entries, the `hops` table) are reused only after many thousand other hops, so
//! each is a likely last-level miss, and one event's misses are found one after the other. The
//! event queue's current bucket holds the next events in order (`EventQueue::ahead`), so while
//! one is handled the engine asks for the lines of those a few places behind it, in stages:
//! an event `3 * AHEAD` places away has the records it names asked for (its port's lines, or
//! its TLP's record); at `2 * AHEAD` places, what those records point to (the first FIFO entry
//! and slot return of the port's earliest class, or the TLP's stage in `hops`), read from the
//! lines asked for before; at `AHEAD` places, one step further (the TLP behind that FIFO entry,
//! or the port the arriving TLP goes to next). A guess that turns out wrong (an event scheduled
//! in between, a record changed since) costs a wasted line, never a different result: nothing
//! here writes, and every index is checked.

use super::*;
use crate::prefetch;

impl Sim {
    /// Ask for the lines of the events coming next (see the module's documentation).
    #[inline(always)]
    pub(super) fn prefetch_ahead(&self) {
        let d = self.pf_dist;
        if d == 0 {
            return;
        }
        if self.pf_stages == 1 {
            if let Some(ev) = self.q.ahead(d - 1) {
                self.prefetch_records(ev);
            }
            return;
        }
        if let Some(ev) = self.q.ahead(3 * d - 1) {
            self.prefetch_records(ev);
        }
        if let Some(ev) = self.q.ahead(2 * d - 1) {
            self.prefetch_entries(ev);
        }
        if let Some(ev) = self.q.ahead(d - 1) {
            self.prefetch_onward(ev);
        }
    }

    /// The records an event names: a port's three lines, its `Dllps` and `Tally`; a TLP's record.
    #[inline(always)]
    fn prefetch_records(&self, ev: Ev) {
        match ev {
            Ev::TryTx(p) => {
                let p = p as usize;
                if let (Some(port), Some(d), Some(t)) = (self.ports.get(p), self.dllps.get(p), self.tally.get(p)) {
                    prefetch::lines(port, 3);
                    prefetch::record(d);
                    prefetch::record(t);
                }
            }
            Ev::Arrive(id) => {
                if let Some(t) = self.tlps.get(id as usize) {
                    prefetch::record(t);
                }
            }
            _ => {}
        }
    }

    /// What those records point to: the first FIFO entry and slot return of a port's earliest
    /// class; an arriving TLP's stage.
    #[inline(always)]
    fn prefetch_entries(&self, ev: Ev) {
        match ev {
            Ev::TryTx(p) => {
                let Some((port, c)) = self.earliest_class(p) else { return };
                if let Some(q) = self.fifo.first(&port.queues[c]) {
                    prefetch::record(q);
                }
                if let Some(s) = port.returns[c].front_ref(&self.slots) {
                    prefetch::record(s);
                }
            }
            Ev::Arrive(id) => {
                if let Some(h) = self.stage_of(id) {
                    prefetch::record(&self.hops[h]);
                }
            }
            _ => {}
        }
    }

    /// One step further: the TLP a port will send; the FIFO line of the port an arriving TLP
    /// goes to next.
    #[inline(always)]
    fn prefetch_onward(&self, ev: Ev) {
        match ev {
            Ev::TryTx(p) => {
                let Some((port, c)) = self.earliest_class(p) else { return };
                if let Some(t) = self.fifo.first(&port.queues[c]).and_then(|q| self.tlps.get(q.id() as usize)) {
                    prefetch::record(t);
                }
            }
            Ev::Arrive(id) => {
                let Some(h) = self.stage_of(id) else { return };
                if self.hops[h].last {
                    return;
                }
                if let Some(next) = self.hops.get(h + 1).and_then(|n| self.ports.get(n.port as usize)) {
                    prefetch::record(&next.queues);
                }
            }
            _ => {}
        }
    }

    /// Port `p` and its class whose head is ready first, if a TLP waits.
    #[inline(always)]
    fn earliest_class(&self, p: PortId) -> Option<(&Port, usize)> {
        let port = self.ports.get(p as usize)?;
        let h = port.heads;
        let c = if h[0] <= h[1] && h[0] <= h[2] {
            0
        } else if h[1] <= h[2] {
            1
        } else {
            2
        };
        (h[c] != NONE).then_some((port, c))
    }

    /// The index in `hops` of TLP `id`'s current stage.
    #[inline(always)]
    fn stage_of(&self, id: u32) -> Option<usize> {
        let t = self.tlps.get(id as usize)?;
        let h = (*self.first_hop.get(t.path as usize)? + t.stage()) as usize;
        (h < self.hops.len()).then_some(h)
    }
}
