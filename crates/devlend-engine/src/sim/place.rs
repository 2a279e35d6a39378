//! Where a port's record lies in `Sim::ports` (issue 33): not at its [`PortId`] but at a place
//! given when a path first crosses its link, so that the links appear in the table in the order
//! paths first cross them. A hop touches three ports of one path (the sending port, the previous
//! port and its other direction, the next port); placed in a path's order they share one or two
//! 4 KiB pages (a link's two records are 640 bytes) where by PortId they lay wherever the fabric
//! numbered their links, and the links no path crosses (at 1024 hosts, most of a host's devices
//! and ports) sit after the used ones instead of between them.
//!
//! A link keeps its two directions side by side (places `2k` and `2k + 1`, the direction's
//! parity kept), so the other direction of the port at place `q` is at `q ^ 1`, as by PortId.
//! Placing a link swaps its two records (and `last_posted`) with those of the first pair of
//! places not yet given, which belong to a link no path has crossed: neither has carried a TLP,
//! so no event, FIFO entry or DLLP timer names either place yet, and what the swap moves is
//! their set-up (rates, credits, DLLP periods, a bus's phases). Places are given in `add_path`
//! (each stage's port); the hot path reads places only (`Hop::port`, `Ev::TryTx`); what is named
//! by PortId outside (`Path::stages`, `set_half_duplex`, `set_dllp_periods`, `port_stats`) is
//! looked up in `place`. The simulated run is the same whatever the places: the event queue
//! orders by time and scheduling order, never by port.

use super::{PortId, Sim};

/// A port's place in `Sim::ports`: what the hot path, its events and its records name a port by.
pub(super) type Place = u32;

/// Where each port's record lies, both ways, and how many link pairs have been given places.
#[derive(Default)]
pub(super) struct Places {
    /// By PortId: the port's place in `Sim::ports`.
    pub(super) of: Vec<Place>,
    /// By place: the port's PortId.
    pub(super) port: Vec<PortId>,
    /// Pairs of places `0..given` belong to links some path crosses.
    given: u32,
}

impl Places {
    /// `n` ports, each at its PortId until a path crosses its link.
    pub(super) fn identity(n: usize) -> Places {
        let ids: Vec<u32> = (0..n as u32).collect();
        Places { of: ids.clone(), port: ids, given: 0 }
    }
}

impl Sim {
    /// The place of port `p`'s record, given now if no path has crossed its link before (see the
    /// module docs). A port without its other direction (an odd count of ports, only from
    /// [`Sim::tuned`]'s direct callers) stays where it is.
    pub(super) fn place(&mut self, p: PortId) -> Place {
        let at = self.places.of[p as usize];
        let pair = at / 2;
        if pair < self.places.given || 2 * pair + 1 >= self.ports.len() as u32 {
            return at;
        }
        let to = self.places.given;
        self.places.given += 1;
        for k in 0..2 {
            self.swap_places(2 * to + k, 2 * pair + k);
        }
        self.places.of[p as usize]
    }

    /// Swap the records at places `a` and `b`.
    fn swap_places(&mut self, a: Place, b: Place) {
        let (a, b) = (a as usize, b as usize);
        self.ports.swap(a, b);
        self.last_posted.swap(a, b);
        let pl = &mut self.places;
        pl.port.swap(a, b);
        pl.of[pl.port[a] as usize] = a as u32;
        pl.of[pl.port[b] as usize] = b as u32;
    }

    /// The place of port `p`, given or not.
    #[inline]
    pub(super) fn at(&self, p: PortId) -> Place {
        self.places.of[p as usize]
    }
}
