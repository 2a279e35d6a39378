//! The route cache and the routes flows carry: one route per 4 KiB page, by where the TLP
//! starts, its requester ID and whether it writes (`RouteKey`); the route generation, moved by
//! every change that can alter a route (`Fabric::invalidate_routes`); a route a flow carries
//! (`CarriedRoute`, `Fabric::route_to_carry`) and a TLP arriving along it while the generation
//! stands (`Fabric::arrival_along`).

use super::{Arrival, Failure, Hop, Outcome, Requester, Route, Target};
use crate::fabric::Fabric;
use devlend_wire::{Access, Bdf, TlpHeader};
use std::sync::Arc;

pub(super) const PAGE: u64 = 0x1000;

impl Fabric {
    /// Route with the cache: the route of the TLP `header` from `origin`. Every decision on a
    /// route is uniform across a 4 KiB page (BARs, windows, IOMMU pages and NTB translations are
    /// page-aligned), so a route computed for a page serves every address in it, shifted by the
    /// offset. Only delivered routes are cached.
    pub fn route_tlp(&mut self, origin: Requester, header: &TlpHeader) -> Arc<Route> {
        let key = RouteKey::of(origin, header);
        let off = header.addr & (PAGE - 1);
        if let Some(r) = self.cache.get(&key) {
            if off == 0 {
                self.cache_hits += 1;
                return r.clone();
            }
            if let Some(shifted) = self.shift(r, off) {
                self.cache_hits += 1;
                return Arc::new(shifted);
            }
        }
        self.cache_misses += 1;
        let base = self.walk_tlp(origin, &TlpHeader { addr: key.page, ..*header });
        // MSI routes are not cached: with interrupt remapping the handle lies in address bits
        // inside the page (bits 11:5), so the page does not decide the outcome.
        if base.delivered().is_some()
            && !matches!(base.outcome, Outcome::Delivered(Target::Msi { .. }))
            && base.completion.as_ref().is_none_or(|c| c.delivered().is_some())
        {
            let base = Arc::new(base);
            self.cache.insert(key, base.clone());
            if off == 0 {
                return base;
            }
            if let Some(s) = self.shift(&base, off) {
                return Arc::new(s);
            }
        }
        Arc::new(self.walk_tlp(origin, header))
    }

    /// [`Fabric::route_tlp`] of `req`'s `access` at `addr` (its [`Fabric::request_header`]).
    pub fn route(&mut self, req: Requester, addr: u64, access: Access) -> Arc<Route> {
        let header = self.request_header(req, addr, access);
        self.route_tlp(req, &header)
    }

    /// [`Fabric::route_tlp`], and the route of the TLP's page for its flow to carry to where its
    /// TLPs land ([`Fabric::arrival_along`]): none where the route is not one the cache keeps (a
    /// failure, an MSI).
    pub fn route_to_carry(&mut self, origin: Requester, header: &TlpHeader) -> (Arc<Route>, Option<CarriedRoute>) {
        let route = self.route_tlp(origin, header);
        (route, self.carry(RouteKey::of(origin, header)))
    }

    /// The cached route of `key`'s page, stamped with the route generation now.
    fn carry(&self, key: RouteKey) -> Option<CarriedRoute> {
        self.cache.get(&key).map(|r| CarriedRoute { key, route: r.clone(), generation: self.route_generation })
    }

    /// How many times routes have changed: every change that can alter a route (an IOMMU map or
    /// unmap, an NTB window or LUT change, a link or port down, config space, ...) drops the
    /// cached routes and moves this on ([`Fabric::invalidate_routes`]). A carried route stands
    /// for its page while this has not moved.
    pub fn route_generation(&self) -> u64 {
        self.route_generation
    }

    /// The outcome alone, from the cache: the fast path for data movement and benchmarks.
    pub fn lookup(&mut self, req: Requester, addr: u64, access: Access) -> Outcome {
        let header = self.request_header(req, addr, access);
        match self.delivered(req, &header) {
            Ok((target, _)) => Outcome::Delivered(target),
            Err(f) => Outcome::Failed(f),
        }
    }

    /// Where a TLP with `header` from `origin` arrives now, and its header as the path rewrote
    /// it there (an NTB's address and requester-ID translation, the IOMMU's translation), from
    /// the cache (one route per page; see [`Fabric::route_tlp`]).
    pub fn arrival(&mut self, origin: Requester, header: &TlpHeader) -> Result<Arrival, Failure> {
        self.arrival_along(&mut None, origin, header)
    }

    /// [`Fabric::arrival`] along the route `carried` while it stands for this TLP: the same
    /// origin, requester ID, kind and page, and the route generation unchanged since it was
    /// found, so the cache would hand back that very route; nothing is looked up or walked.
    /// Otherwise (another page, or routes changed since: an unmap between the TLP's issue and its
    /// landing acts on it here) the arrival is found as [`Fabric::arrival`] finds it, and
    /// `carried` becomes the route of this TLP's page now.
    pub fn arrival_along(&mut self, carried: &mut Option<CarriedRoute>, origin: Requester, header: &TlpHeader) -> Result<Arrival, Failure> {
        let key = RouteKey::of(origin, header);
        let off = header.addr & (PAGE - 1);
        if let Some(c) = carried.as_ref().filter(|c| c.key == key && c.generation == self.route_generation) {
            if let Some(target) = shift_target(c.route.outcome, off, self) {
                let last = c.route.hops.last().map(|h| Hop { addr: h.addr + off, ..*h });
                return Ok(rewritten(header, target, last));
            }
        }
        let found = self.delivered(origin, header);
        *carried = self.carry(key);
        found.map(|(target, last)| rewritten(header, target, last))
    }

    /// Where a TLP with `header` from `origin` is delivered, with the last hop of its route (at
    /// the header's address).
    fn delivered(&mut self, origin: Requester, header: &TlpHeader) -> Result<(Target, Option<Hop>), Failure> {
        let key = RouteKey::of(origin, header);
        let off = header.addr & (PAGE - 1);
        if let Some(r) = self.cache.get(&key) {
            if let Some(target) = shift_target(r.outcome, off, self) {
                self.cache_hits += 1;
                return Ok((target, r.hops.last().map(|h| Hop { addr: h.addr + off, ..*h })));
            }
        }
        let r = self.route_tlp(origin, header);
        match r.outcome {
            Outcome::Delivered(target) => Ok((target, r.hops.last().copied())),
            Outcome::Failed(f) => Err(f),
        }
    }

    fn shift(&self, r: &Route, off: u64) -> Option<Route> {
        let outcome = Outcome::Delivered(shift_target(r.outcome, off, self)?);
        let mut out = r.clone();
        for h in &mut out.hops {
            h.addr += off;
        }
        out.outcome = outcome;
        Some(out)
    }

    /// Drop every cached route and move the route generation on: what every change that can
    /// alter a route calls.
    pub fn invalidate_routes(&mut self) {
        self.cache.clear();
        self.route_generation += 1;
        self.decoding_bars.clear();
    }

    pub fn cached_routes(&self) -> usize {
        self.cache.len()
    }
}

/// A cached route's target moved `off` bytes into its page, or None where that leaves the BAR.
#[inline]
fn shift_target(o: Outcome, off: u64, f: &Fabric) -> Option<Target> {
    match o {
        Outcome::Delivered(Target::Ram { host, addr }) => Some(Target::Ram { host, addr: addr + off }),
        Outcome::Delivered(Target::Bar { func, bar, offset }) => {
            let size = f.funcs[func as usize].bars.iter().find(|b| b.index == bar)?.size;
            (offset + off < size).then_some(Target::Bar { func, bar, offset: offset + off })
        }
        Outcome::Delivered(Target::Msi { host, addr }) => Some(Target::Msi { host, addr: addr + off }),
        _ => None,
    }
}

/// The header `header` as the path rewrote it where it arrived at `target` (`last`: the route's
/// last hop, at the header's address).
fn rewritten(header: &TlpHeader, target: Target, last: Option<Hop>) -> Arrival {
    let header = last.map_or(*header, |h| TlpHeader { requester: h.rid, addr: h.addr, ..*header });
    Arrival { target, header }
}

/// What a cached route is cached by: where the TLP starts, its requester ID, whether it writes,
/// and its 4 KiB page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RouteKey {
    origin: u32,
    requester: Bdf,
    write: bool,
    page: u64,
}

impl RouteKey {
    #[inline]
    pub(super) fn of(origin: Requester, header: &TlpHeader) -> RouteKey {
        let origin = match origin {
            Requester::Cpu(h) => 0x8000_0000 | h as u32,
            Requester::Func(f) => f,
        };
        RouteKey { origin, requester: header.requester, write: header.access().is_write(), page: header.addr & !(PAGE - 1) }
    }
}

/// A route a flow carries from its issue to where its TLPs land ([`Fabric::route_to_carry`],
/// [`Fabric::arrival_along`]): the route of one 4 KiB page as the route cache holds it, for one
/// origin, requester ID and kind, and the route generation it was found at. While that
/// generation is the fabric's, the cache holds this very route for the page, so a TLP on the
/// page arrives along it without a lookup; once routes have changed it stands for nothing.
#[derive(Clone, Debug)]
pub struct CarriedRoute {
    key: RouteKey,
    route: Arc<Route>,
    generation: u64,
}
