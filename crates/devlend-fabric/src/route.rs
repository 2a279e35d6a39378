//! The functional router: for a TLP (the wire crate's `TlpHeader`) and where it starts, the
//! list of hops it takes, each with the component, port, host domain, address and requester ID
//! there, and where it ends; the route cache, the routes flows carry, and the bytes stored or
//! loaded where a route delivers them.
//!
//! Rules (PCIe Base 3.0 §2.2.4, §6.12 for ACS; 000 §2.1, §6):
//! - Requests are address-routed. A switch forwards down the port whose window claims the
//!   address, else up; an address inside the switch's range that no port claims is an
//!   Unsupported Request. When the host's IOMMU is on, Linux enables ACS P2P Request and
//!   Completion Redirect (drivers/pci/pci.c `pci_std_enable_acs`), so peer requests and their
//!   completions climb to the root to be translated (000 §6, Fig 8).
//! - The root complex sends CPU requests to RAM or down the root port that claims the address.
//!   Device requests to the MSI range are interrupts; others are translated by the IOMMU when it
//!   is on, then go to RAM, or down another root port when the CPU profile allows peer-to-peer
//!   through the root, else they are Unsupported Requests.
//! - An NTB memory window forwards into the peer's domain through the peer's inbound translation;
//!   the requester ID is rewritten through the adapter's requester-ID LUT (no entry: rejected).
//!   With several peers (`cluster`), the segment the address falls in names the peer; through a
//!   cluster switch the TLP crosses the adapter's cable, the switch and the peer's cable.
//! - Completions are ID-routed back by bus number, through the NTB's reverse LUT.
//!
//! Hop counting (the one rule devlend applies to every route): a hop is a link traversal, entry
//! into a root complex (counted when a TLP arrives from a root port, not where it originates), or
//! an NTB crossing. Switch forwarding, IOMMU translation and delivery are steps inside a hop.
//! The data path of a transfer bounced through RAM is the write route plus the completion route
//! of the read. On the expansion-chassis testbed this gives 000 §7.3's 7 and 21 hops.
//!
//! ## This file, in order
//!
//! 1. What a route is made of: `HopKind`, `Hop`, `Requester`, `Target`, `Failure`, `Outcome`,
//!    `Arrival`, `Route`.
//! 2. The walk's entry on `Fabric`: a request's header (`request_header`), a TLP walked without
//!    the cache (`walk_tlp`, `route_uncached`) and a read's completion walked back.
//! 3. `mod cache`: the route cache, one route per 4 KiB page (`route_tlp`, `route`, `lookup`,
//!    `arrival`), the route generation (`route_generation`, `invalidate_routes`), the route a
//!    flow carries (`CarriedRoute`, `route_to_carry`) and a TLP arriving along it
//!    (`arrival_along`).
//! 4. The router in pieces, each a `mod` of its own, one per kind of component, each citing the
//!    spec section it models:
//!    - `mod walk`: a TLP's walk, request (address-routed, §2.2.4.1) or completion (ID-routed,
//!      §2.2.4.2), from the wire crate's `TlpHeader` and where the TLP starts: which piece acts
//!      next, until the TLP is delivered or fails; routing loops;
//!    - `mod link`: crossing a link up or down, refused when the link is down (§3, §2.9.1);
//!    - `mod switch`: a switch's forwarding, by address or by bus number, with ACS redirect
//!      (§1.3.3, §7.5.3, §6.12);
//!    - `mod root`: the root complex: MSI, RAM, root ports, peer-to-peer through the root, the
//!      CPU's completions (§1.3.1, §6.1.4);
//!    - the IOMMU: DMA remapping of a request and interrupt remapping of an MSI write (VT-d 3.0
//!      §3, §5), the `remap` section of `crate::iommu`, beside the tables it reads;
//!    - `mod ntb`: an NTB crossing into the peer's domain (memory window, requester-ID LUT,
//!      cable, cluster switch) and a completion's way back through the reverse LUT, with the
//!      adapter's translations it reads (`NtbState::inbound_translate_from`, `out_pidx`,
//!      `rid_lut_index`, `alias_entry`; 000 §2.3, 003 §2.2);
//!    - `mod endpoint`: which BAR of an endpoint decodes an address (§7.5.2.1).
//! 5. `mod landing`: the bytes a TLP carries stored or loaded where its route delivers them
//!    (`write`, `write_tlp`, `read`, `read_tlp`), a failure recorded (`record`).
//!
//! Off the walk, elsewhere: injected faults a walk consults (`crate::link`: `fault_outcome`,
//! `ntb_link_is_up`), the sorted decoding BARs behind `decoding_bar` (`crate::decoding`).

use crate::fabric::Fabric;
use crate::iommu::Fault;
use crate::model::*;
use devlend_wire::{Access, Bdf, TlpHeader, TlpKind};
use walk::Walk;

pub use cache::CarriedRoute;
pub(crate) use cache::RouteKey;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HopKind {
    /// Where the TLP starts (a function, or the root complex for the CPU and for RAM completions).
    Start,
    /// Crossed a link; `node` is the component port at the receiving end, `aux` the link.
    Link,
    /// A switch or the root complex chose an egress port; `node` is that port.
    Forward,
    /// Arrived at a root complex from one of its root ports.
    Root,
    /// The IOMMU translated the address; `aux` is the page size.
    Iommu,
    /// Translated by an NTB for the peer's domain; `node` is the near adapter (address and
    /// requester ID still the near side's), `aux` the window. The next hop crosses the cable.
    Ntb,
    /// Reached the target.
    Deliver,
}

impl HopKind {
    pub fn counts(self) -> bool {
        matches!(self, HopKind::Link | HopKind::Root | HopKind::Ntb)
    }
    pub fn name(self) -> &'static str {
        match self {
            HopKind::Start => "start",
            HopKind::Link => "link",
            HopKind::Forward => "forward",
            HopKind::Root => "root",
            HopKind::Iommu => "iommu",
            HopKind::Ntb => "ntb",
            HopKind::Deliver => "deliver",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    pub kind: HopKind,
    pub node: NodeId,
    pub host: HostId,
    pub addr: u64,
    pub rid: Bdf,
    pub aux: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Requester {
    Cpu(HostId),
    Func(FuncId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Ram {
        host: HostId,
        addr: u64,
    },
    Bar {
        func: FuncId,
        bar: u8,
        offset: u64,
    },
    Msi {
        host: HostId,
        addr: u64,
    },
    /// A completion reached its requester.
    Cpu {
        host: HostId,
    },
    Func {
        func: FuncId,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Iommu {
        host: HostId,
        fault: Fault,
    },
    Unsupported {
        node: NodeId,
        host: HostId,
        addr: u64,
        why: &'static str,
    },
    BusMasterOff {
        func: FuncId,
    },
    RidLutMiss {
        ntb: u32,
        rid: Bdf,
    },
    NtbUnmapped {
        ntb: u32,
        window: u8,
        offset: u64,
    },
    NtbLinkDown {
        ntb: u32,
    },
    /// The TLP reached an NTB it had already crossed (the same adapter and window, or for a
    /// completion the same adapter): the translations lead back into each other. Nothing is
    /// delivered; `host` and `addr` are where the TLP was when it came back.
    RoutingLoop {
        ntb: u32,
        window: u8,
        host: HostId,
        addr: u64,
    },
    /// RAM and a decoding BAR both claim the address (a BAR relocated over RAM): the TLP is
    /// delivered to neither.
    BarOverRam {
        host: HostId,
        addr: u64,
        func: FuncId,
        bar: u8,
    },
    /// An MSI write blocked by the host's interrupt remapping (`intremap`).
    Interrupt {
        host: HostId,
        rid: Bdf,
        addr: u64,
        fault: crate::intremap::IntrFault,
    },
    /// The PCIe link above `node` is down (a switch port down, a device surprise-removed): the
    /// port above it terminates requests as Unsupported Requests and drops posted writes
    /// (PCIe Base 4.0 §2.9.1, DL_Down).
    PortDown {
        node: NodeId,
    },
    /// The function never answers (a hung completer): a read's completion timeout expires
    /// (PCIe Base 4.0 §2.8), a posted write is swallowed, and it issues nothing.
    Unresponsive {
        func: FuncId,
    },
    /// The completion carried poisoned data (EP set, PCIe Base 4.0 §2.7.2): the receiver must
    /// not use it; Linux reports it through AER (§6.2) and the driver gets an error.
    Poisoned {
        func: FuncId,
    },
}

impl Failure {
    /// The short name of the failure, as events and JSON report it.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Iommu { .. } => "iommu-fault",
            Failure::Unsupported { .. } => "unsupported-request",
            Failure::BusMasterOff { .. } => "bus-master-disabled",
            Failure::RidLutMiss { .. } => "rid-lut-miss",
            Failure::NtbUnmapped { .. } => "ntb-unmapped",
            Failure::NtbLinkDown { .. } => "ntb-link-down",
            Failure::RoutingLoop { .. } => "routing-loop",
            Failure::BarOverRam { .. } => "bar-over-ram",
            Failure::Interrupt { .. } => "interrupt-remapping-fault",
            Failure::PortDown { .. } => "port-down",
            Failure::Unresponsive { .. } => "completion-timeout",
            Failure::Poisoned { .. } => "poisoned-completion",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Delivered(Target),
    Failed(Failure),
}

/// What the target of a delivered route sees of a TLP: where it arrived, and its header as the
/// path rewrote it there (the address in the target's domain after NTB and IOMMU translation,
/// the requester ID after the NTB's requester-ID LUT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub target: Target,
    pub header: TlpHeader,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub access: Access,
    pub hops: Vec<Hop>,
    pub outcome: Outcome,
    /// For reads that reached their target: the completion's way back.
    pub completion: Option<Box<Route>>,
}

impl Route {
    /// Hops under devlend's counting rule (see module docs).
    pub fn hop_count(&self) -> usize {
        self.hops.iter().filter(|h| h.kind.counts()).count()
    }
    pub fn roots(&self) -> usize {
        self.hops.iter().filter(|h| h.kind == HopKind::Root).count()
    }
    pub fn ntb_crossings(&self) -> usize {
        self.hops.iter().filter(|h| h.kind == HopKind::Ntb).count()
    }
    pub fn delivered(&self) -> Option<Target> {
        match self.outcome {
            Outcome::Delivered(t) => Some(t),
            Outcome::Failed(_) => None,
        }
    }
}

impl Fabric {
    pub fn requester_rid(&self, r: Requester) -> Bdf {
        match r {
            Requester::Cpu(_) => Bdf(0),
            Requester::Func(f) => self.funcs[f as usize].bdf,
        }
    }

    pub fn requester_host(&self, r: Requester) -> HostId {
        match r {
            Requester::Cpu(h) => h,
            Requester::Func(f) => self.nodes[self.funcs[f as usize].node as usize].host,
        }
    }

    /// The header of a memory request by `req` at `addr` (a write or a read request, tag 0): what
    /// the address queries ([`Fabric::route`], [`Fabric::route_uncached`], [`Fabric::lookup`])
    /// route.
    pub fn request_header(&self, req: Requester, addr: u64, access: Access) -> TlpHeader {
        TlpHeader::request(self.requester_rid(req), addr, access, 0)
    }

    /// Route `req`'s `access` at `addr` without side effects: [`Fabric::walk_tlp`] of its
    /// request header.
    pub fn route_uncached(&self, req: Requester, addr: u64, access: Access) -> Route {
        self.walk_tlp(req, &self.request_header(req, addr, access))
    }

    /// Walk the request TLP `header` (a write, a read request or a message) from `origin`, where
    /// it starts, without side effects (faults are reported in the outcome, not recorded); for a
    /// read that arrives, also its completion's way back to the requester ID it arrived with.
    pub fn walk_tlp(&self, origin: Requester, header: &TlpHeader) -> Route {
        debug_assert!(header.kind != TlpKind::Completion, "a completion is walked from its request's target");
        let access = header.access();
        let mut w = Walk::new(*header, self.requester_host(origin));
        let outcome = self.fault_outcome(origin, access, self.walk_request(&mut w, origin));
        let mut route = Route { access, hops: w.hops, outcome, completion: None };
        if access == Access::Read {
            if let Outcome::Delivered(t) = outcome {
                let last = *route.hops.last().unwrap();
                let cpl = TlpHeader { kind: TlpKind::Completion, requester: last.rid, addr: 0, ..*header };
                route.completion = Some(Box::new(self.route_completion(t, cpl, last.host)));
            }
        }
        route
    }

    /// ID-route the completion `cpl` from the target of a request back to its requester ID in
    /// `host`.
    fn route_completion(&self, from: Target, cpl: TlpHeader, host: HostId) -> Route {
        let mut w = Walk::new(cpl, host);
        let outcome = self.walk_completion(&mut w, from);
        Route { access: Access::Read, hops: w.hops, outcome, completion: None }
    }
}

mod cache {
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
}

pub(crate) mod walk {
    //! A TLP's walk through the tree: the TLP's header as it travels (kind, requester ID, address;
    //! an NTB rewrites the address and requester ID, the IOMMU the address), the host domain it is
    //! in, the hops so far, and the two loops that hand it from piece to piece, one for requests
    //! (address-routed, PCIe Base 3.0 §2.2.4.1) and one for completions (ID-routed, §2.2.4.2).
    //! The walk's entry is the wire crate's `TlpHeader` and where the TLP starts ([`Walk::new`],
    //! `Fabric::walk_tlp`): the router routes the TLP itself, whose kind says whether it is
    //! address- or ID-routed and whether the IOMMU checks a write or a read.
    //!
    //! Loops: a tree walk always ends (up towards the root, or down towards the leaves), so a route
    //! can only come back to where it was through NTB translations. A walk keeps the NTB windows it
    //! crossed; reaching one a second time is a loop, reported before anything is delivered. This
    //! bounds every walk by the number of NTB windows.

    use super::{Failure, Hop, HopKind, Outcome, Requester, Target};
    use crate::fabric::Fabric;
    use crate::model::{HostId, NodeId, NodeKind};
    use devlend_wire::{TlpHeader, TlpKind};
    use std::ops::ControlFlow::{self, Break, Continue};

    /// What a piece of the router returns: the next step, or the walk's end.
    pub(crate) type Next<S> = ControlFlow<Outcome, S>;

    /// Where a request goes next.
    pub(super) enum Step {
        /// Up the link above this node.
        Up(NodeId),
        /// Down the link below this (downstream or root) port.
        Down(NodeId),
        /// Into the root complex of `host`, from one of its root ports or from its CPU.
        Rc { host: HostId, from_port: bool },
        /// Out through an NTB memory window.
        NtbOut { ntb: u32, window: u8, offset: u64 },
    }

    /// Where a completion goes next.
    pub(super) enum IdStep {
        Up(NodeId),
        Down(NodeId),
        Rc { host: HostId, from_port: bool },
    }

    pub(crate) struct Walk {
        pub hops: Vec<Hop>,
        /// The TLP as it is here: its address and requester ID in the current host's domain.
        pub tlp: TlpHeader,
        pub host: HostId,
        crossed: Vec<(u32, u8)>,
    }

    impl Walk {
        /// The walk of the TLP `tlp`, starting in `host`: a request's by address (`walk_request`),
        /// a completion's by its requester ID (`walk_completion`).
        pub fn new(tlp: TlpHeader, host: HostId) -> Walk {
            Walk { hops: Vec::with_capacity(16), tlp, host, crossed: Vec::new() }
        }

        /// A completion (ID-routed): an Unsupported Request names the requester ID, not an address.
        #[inline]
        fn by_id(&self) -> bool {
            self.tlp.kind == TlpKind::Completion
        }

        /// Note a crossing of `ntb` through `window`; a loop when it was crossed before.
        pub fn cross(&mut self, ntb: u32, window: u8) -> Result<(), Failure> {
            if self.crossed.contains(&(ntb, window)) {
                return Err(Failure::RoutingLoop { ntb, window, host: self.host, addr: self.tlp.addr });
            }
            self.crossed.push((ntb, window));
            Ok(())
        }

        #[inline]
        pub fn push(&mut self, kind: HopKind, node: NodeId, aux: u64) {
            self.hops.push(Hop { kind, node, host: self.host, addr: self.tlp.addr, rid: self.tlp.requester, aux });
        }

        /// The walk ends here with an Unsupported Request at `node`: the address (a request) or the
        /// requester ID (a completion) it was routing.
        #[inline]
        pub fn unsupported(&self, node: NodeId, why: &'static str) -> Outcome {
            let addr = if self.by_id() { self.tlp.requester.0 as u64 } else { self.tlp.addr };
            Outcome::Failed(Failure::Unsupported { node, host: self.host, addr, why })
        }
    }

    /// The walk ends here with `f`.
    #[inline]
    pub(crate) fn fail<S>(f: Failure) -> Next<S> {
        Break(Outcome::Failed(f))
    }

    impl Fabric {
        /// A request from `origin` (where it starts: a host's CPU or a function), address-routed.
        pub(super) fn walk_request(&self, w: &mut Walk, origin: Requester) -> Outcome {
            let mut step = match origin {
                Requester::Cpu(h) => {
                    w.push(HopKind::Start, self.hosts[h as usize].rc, 0);
                    Step::Rc { host: h, from_port: false }
                }
                Requester::Func(f) => {
                    let node = self.funcs[f as usize].node;
                    w.push(HopKind::Start, node, 0);
                    if !self.config[f as usize].bus_master() {
                        return Outcome::Failed(Failure::BusMasterOff { func: f });
                    }
                    Step::Up(node)
                }
            };
            loop {
                let next = match step {
                    Step::Up(n) => self.request_up(w, n),
                    Step::Down(b) => self.request_down(w, b),
                    Step::Rc { host, from_port } => self.root_request(w, host, from_port),
                    Step::NtbOut { ntb, window, offset } => self.ntb_request(w, ntb, window, offset),
                };
                match next {
                    Continue(s) => step = s,
                    Break(o) => return o,
                }
            }
        }

        /// Up the link above `n`: into a root port (the root complex next) or a switch's downstream
        /// port.
        #[inline(always)]
        fn request_up(&self, w: &mut Walk, n: NodeId) -> Next<Step> {
            let p = self.link_up(w, n)?;
            match self.nodes[p as usize].kind {
                NodeKind::RootPort { .. } => Continue(Step::Rc { host: w.host, from_port: true }),
                NodeKind::SwitchDown { .. } => self.switch_request_up(w, p),
                _ => Break(w.unsupported(p, "malformed tree")),
            }
        }

        /// Down the link below port `b`: into a switch's upstream port or an endpoint.
        #[inline(always)]
        fn request_down(&self, w: &mut Walk, b: NodeId) -> Next<Step> {
            let c = self.link_down(w, b)?;
            match self.nodes[c as usize].kind {
                NodeKind::SwitchUp { .. } => self.switch_request_down(w, c),
                _ => self.endpoint_request(w, c),
            }
        }

        pub(super) fn walk_completion(&self, w: &mut Walk, from: Target) -> Outcome {
            let mut step = match from {
                Target::Ram { host, .. } => {
                    w.push(HopKind::Start, self.hosts[host as usize].rc, 0);
                    IdStep::Rc { host, from_port: false }
                }
                Target::Bar { func, .. } => {
                    let n = self.funcs[func as usize].node;
                    w.push(HopKind::Start, n, 0);
                    IdStep::Up(n)
                }
                _ => return w.unsupported(0, "no completion for this target"),
            };
            loop {
                let next = match step {
                    IdStep::Up(n) => self.completion_up(w, n),
                    IdStep::Down(b) => self.completion_down(w, b),
                    IdStep::Rc { host, from_port } => self.root_completion(w, host, from_port),
                };
                match next {
                    Continue(s) => step = s,
                    Break(o) => return o,
                }
            }
        }

        /// A completion up the link above `n`: into a root port or a switch's downstream port.
        #[inline(always)]
        fn completion_up(&self, w: &mut Walk, n: NodeId) -> Next<IdStep> {
            let p = self.link_up(w, n)?;
            match self.nodes[p as usize].kind {
                NodeKind::RootPort { .. } => Continue(IdStep::Rc { host: w.host, from_port: true }),
                _ => self.switch_completion_up(w, p),
            }
        }

        /// A completion down the link below port `b`: into a switch, its requester, or an NTB that
        /// takes it back to the requester's domain.
        #[inline(always)]
        fn completion_down(&self, w: &mut Walk, b: NodeId) -> Next<IdStep> {
            let c = self.link_down(w, b)?;
            match self.nodes[c as usize].kind {
                NodeKind::SwitchUp { .. } => self.switch_completion_down(w, c),
                kind => {
                    if let Some(f) = self.nodes[c as usize].functions.iter().copied().find(|f| self.funcs[*f as usize].bdf == w.tlp.requester) {
                        w.push(HopKind::Deliver, c, 0);
                        return Break(Outcome::Delivered(Target::Func { func: f }));
                    }
                    let NodeKind::Ntb { ntb } = kind else { return Break(w.unsupported(c, "completion for an unknown function")) };
                    self.ntb_completion(w, ntb)
                }
            }
        }
    }
}

mod link {
    //! A link: a TLP crossing the link above or below a node (PCIe Base 3.0 §3, the data link
    //! layer). A link whose port is down (DL_Down, §2.9.1: a switch port down, a device
    //! surprise-removed) takes nothing: the port above terminates the TLP.

    use super::walk::{fail, Next, Walk};
    use super::{Failure, HopKind};
    use crate::fabric::Fabric;
    use crate::model::NodeId;
    use std::ops::ControlFlow::{Break, Continue};

    impl Fabric {
        /// Up the link above `n`; the port at its upper end.
        #[inline(always)]
        pub(super) fn link_up(&self, w: &mut Walk, n: NodeId) -> Next<NodeId> {
            let node = &self.nodes[n as usize];
            let Some(p) = node.parent else { return Break(w.unsupported(n, "no upstream link")) };
            if self.faults.ports_down.contains(&n) {
                return fail(Failure::PortDown { node: n });
            }
            w.push(HopKind::Link, p, node.uplink.unwrap_or(0) as u64);
            Continue(p)
        }

        /// Down the link below port `b`; the node at its lower end.
        #[inline(always)]
        pub(super) fn link_down(&self, w: &mut Walk, b: NodeId) -> Next<NodeId> {
            let Some(&c) = self.nodes[b as usize].children.first() else { return Break(w.unsupported(b, "no device below this port")) };
            if self.faults.ports_down.contains(&c) {
                return fail(Failure::PortDown { node: c });
            }
            w.push(HopKind::Link, c, self.nodes[c as usize].uplink.unwrap_or(0) as u64);
            Continue(c)
        }
    }
}

mod switch {
    //! A switch: forwarding between its upstream port and its downstream ports (PCIe Base 3.0 §1.3.3;
    //! each port's windows and bus range are its type 1 header's, §7.5.3). Requests are
    //! address-routed (§2.2.4.1), completions ID-routed by bus number (§2.2.4.2). A request arriving
    //! at a downstream port goes to the peer port whose window claims it, else up; an address inside
    //! the switch's range that no port claims is an Unsupported Request. When the host's IOMMU is on,
    //! Linux enables ACS P2P Request and Completion Redirect (§6.12; drivers/pci/pci.c
    //! `pci_std_enable_acs`), so peer requests and their completions climb to the root to be
    //! translated (000 §6, Fig 8).

    use super::walk::{IdStep, Next, Step, Walk};
    use super::HopKind;
    use crate::fabric::Fabric;
    use crate::model::NodeId;
    use std::ops::ControlFlow::{Break, Continue};

    impl Fabric {
        /// A request at downstream port `p`, from below: across to a peer port, or up.
        #[inline(always)]
        pub(super) fn switch_request_up(&self, w: &mut Walk, p: NodeId) -> Next<Step> {
            let up = self.nodes[p as usize].parent.unwrap();
            let acs = self.hosts[w.host as usize].iommu;
            let peer = self.nodes[up as usize].children.iter().copied().find(|s| *s != p && self.nodes[*s as usize].bridge.claims(w.tlp.addr));
            match peer {
                Some(s) if !acs => {
                    w.push(HopKind::Forward, s, 0);
                    Continue(Step::Down(s))
                }
                _ if !acs && self.nodes[p as usize].bridge.claims(w.tlp.addr) => Break(w.unsupported(p, "address belongs to the port it came from")),
                _ if !acs && peer.is_none() && self.nodes[up as usize].bridge.claims(w.tlp.addr) => {
                    Break(w.unsupported(up, "no switch port claims the address"))
                }
                _ => {
                    w.push(HopKind::Forward, up, 0);
                    Continue(Step::Up(up))
                }
            }
        }

        /// A request at upstream port `c`, from above: down the port whose window claims it.
        #[inline(always)]
        pub(super) fn switch_request_down(&self, w: &mut Walk, c: NodeId) -> Next<Step> {
            match self.nodes[c as usize].children.iter().copied().find(|s| self.nodes[*s as usize].bridge.claims(w.tlp.addr)) {
                Some(s) => {
                    w.push(HopKind::Forward, s, 0);
                    Continue(Step::Down(s))
                }
                None => Break(w.unsupported(c, "no switch port claims the address")),
            }
        }

        /// A completion at downstream port `p`, from below: across to the peer port whose bus range
        /// holds the requester (no ACS redirect), or up.
        #[inline(always)]
        pub(super) fn switch_completion_up(&self, w: &mut Walk, p: NodeId) -> Next<IdStep> {
            let up = self.nodes[p as usize].parent.unwrap();
            let acs = self.hosts[w.host as usize].iommu;
            match self.nodes[up as usize].children.iter().copied().find(|s| *s != p && self.nodes[*s as usize].bridge.claims_bus(w.tlp.requester.bus())) {
                Some(s) if !acs => {
                    w.push(HopKind::Forward, s, 0);
                    Continue(IdStep::Down(s))
                }
                _ => {
                    w.push(HopKind::Forward, up, 0);
                    Continue(IdStep::Up(up))
                }
            }
        }

        /// A completion at upstream port `c`, from above: down the port whose bus range holds the
        /// requester.
        #[inline(always)]
        pub(super) fn switch_completion_down(&self, w: &mut Walk, c: NodeId) -> Next<IdStep> {
            match self.nodes[c as usize].children.iter().copied().find(|s| self.nodes[*s as usize].bridge.claims_bus(w.tlp.requester.bus())) {
                Some(s) => {
                    w.push(HopKind::Forward, s, 0);
                    Continue(IdStep::Down(s))
                }
                None => Break(w.unsupported(c, "no switch port claims the completion's bus")),
            }
        }
    }
}

mod root {
    //! The root complex (PCIe Base 3.0 §1.3.1): where the CPU's requests start and completions to
    //! it end, and where a device's request arriving from a root port is an interrupt (the MSI
    //! range, §6.1.4), or is translated by the IOMMU when it is on (`crate::iommu`'s `remap`),
    //! then goes to RAM, or down another root port when the CPU profile allows peer-to-peer
    //! through the root (§1.3.1 leaves it optional), else is an Unsupported Request. Completions
    //! are ID-routed down the root port whose bus range holds the requester.

    use super::walk::{fail, IdStep, Next, Step, Walk};
    use super::{Failure, HopKind, Outcome, Target};
    use crate::fabric::Fabric;
    use crate::model::HostId;
    use devlend_wire::Bdf;
    use std::ops::ControlFlow::{Break, Continue};

    impl Fabric {
        /// A request in `host`'s root complex, from one of its root ports or from its CPU.
        #[inline(always)]
        pub(super) fn root_request(&self, w: &mut Walk, host: HostId, from_port: bool) -> Next<Step> {
            let h = &self.hosts[host as usize];
            if from_port {
                w.push(HopKind::Root, h.rc, 0);
                if h.msi.contains(w.tlp.addr) {
                    if w.tlp.access().is_write() {
                        self.remap_interrupt(w, host)?;
                        w.push(HopKind::Deliver, h.rc, 0);
                        return Break(Outcome::Delivered(Target::Msi { host, addr: w.tlp.addr }));
                    }
                    return Break(w.unsupported(h.rc, "read from the MSI range"));
                }
                if h.iommu {
                    self.translate(w, host)?;
                }
            }
            if h.in_ram(w.tlp.addr) {
                if let Some((func, bar, _)) = self.decoding_bar(host, w.tlp.addr) {
                    return fail(Failure::BarOverRam { host, addr: w.tlp.addr, func, bar });
                }
                w.push(HopKind::Deliver, h.rc, 0);
                return Break(Outcome::Delivered(Target::Ram { host, addr: w.tlp.addr }));
            }
            match h.root_ports.iter().copied().find(|rp| self.nodes[*rp as usize].bridge.claims(w.tlp.addr)) {
                Some(rp) if !from_port || h.cpu.p2p_through_root => {
                    w.push(HopKind::Forward, rp, 0);
                    Continue(Step::Down(rp))
                }
                Some(_) => Break(w.unsupported(h.rc, "peer-to-peer through the root is not supported by this CPU profile")),
                None => Break(w.unsupported(h.rc, "no RAM or device at this address")),
            }
        }

        /// A completion in `host`'s root complex: to the CPU (requester ID 0), or down a root port.
        #[inline(always)]
        pub(super) fn root_completion(&self, w: &mut Walk, host: HostId, from_port: bool) -> Next<IdStep> {
            let h = &self.hosts[host as usize];
            if from_port {
                w.push(HopKind::Root, h.rc, 0);
            }
            if w.tlp.requester == Bdf(0) {
                w.push(HopKind::Deliver, h.rc, 0);
                return Break(Outcome::Delivered(Target::Cpu { host }));
            }
            match h.root_ports.iter().copied().find(|rp| self.nodes[*rp as usize].bridge.claims_bus(w.tlp.requester.bus())) {
                Some(rp) => {
                    w.push(HopKind::Forward, rp, 0);
                    Continue(IdStep::Down(rp))
                }
                None => Break(w.unsupported(h.rc, "no root port leads to the completion's bus")),
            }
        }
    }
}

mod ntb {
    //! An NTB (non-transparent bridge; 000 §2.1, §6): a request to one of the adapter's memory
    //! windows is forwarded into the peer's domain through the peer's inbound translation, its
    //! requester ID rewritten through the adapter's requester-ID LUT (no entry: rejected). With
    //! several peers (`cluster`), the segment the address falls in names the peer; through a
    //! cluster switch the TLP crosses the adapter's cable, the switch and the peer's cable. A
    //! completion comes back through the reverse LUT to the original requester ID. The Linux face of
    //! the adapter (the `ntb_*` calls) is `crate::ntb_api`, its state `crate::ntb`; the translations
    //! a crossing reads (`NtbState::inbound_translate_from`, `out_pidx`, `rid_lut_index`,
    //! `alias_entry`, and `Fabric::ntb_alias_from`, the far-side requester ID) are here.

    use super::walk::{fail, IdStep, Next, Step, Walk};
    use super::{Failure, HopKind};
    use crate::fabric::Fabric;
    use crate::model::HostId;
    use crate::ntb::{Inbound, NtbState};
    use crate::params::WindowParam;
    use devlend_wire::Bdf;
    use std::ops::ControlFlow::Continue;

    impl Fabric {
        /// A request out through `window` of adapter `ntb`, at `offset` into the window: across the
        /// cable into the peer's domain, then up from the peer adapter.
        #[inline(always)]
        pub(super) fn ntb_request(&self, w: &mut Walk, ntb: u32, window: u8, offset: u64) -> Next<Step> {
            let s = &self.ntbs[ntb as usize];
            if !self.ntb_link_is_up(ntb) {
                return fail(Failure::NtbLinkDown { ntb });
            }
            let pidx = s.out_pidx(window as usize, offset);
            let link = pidx.map(|i| s.peers[i]);
            if link.is_some_and(|l| !self.ntb_link_is_up(l.ntb)) {
                return fail(Failure::NtbLinkDown { ntb });
            }
            if let Err(f) = w.cross(ntb, window) {
                return fail(f);
            }
            let Some(idx) = s.rid_lut_index(w.tlp.requester) else { return fail(Failure::RidLutMiss { ntb, rid: w.tlp.requester }) };
            let found = link.and_then(|l| {
                let p = &self.ntbs[l.ntb as usize];
                let from = p.peer_idx(ntb)?;
                Some((l, from, p.inbound_translate_from(from, window as usize, offset, &s.windows[window as usize])?))
            });
            let Some((l, from, addr)) = found else { return fail(Failure::NtbUnmapped { ntb, window, offset }) };
            let p = &self.ntbs[l.ntb as usize];
            w.push(HopKind::Ntb, s.node, window as u64);
            self.cross_cable(w, l, p.host);
            w.tlp.addr = addr;
            w.tlp.requester = self.ntb_alias_from(l.ntb, from, idx);
            w.push(HopKind::Link, p.node, l.via.map_or(l.cable, |v| v.far_cable) as u64);
            if !self.config[p.func as usize].bus_master() {
                return fail(Failure::BusMasterOff { func: p.func });
            }
            Continue(Step::Up(p.node))
        }

        /// A completion at adapter `ntb` for one of the aliases its LUT gave a peer's requester:
        /// back across the cable with the original requester ID, then up from the peer adapter.
        #[inline(always)]
        pub(super) fn ntb_completion(&self, w: &mut Walk, ntb: u32) -> Next<IdStep> {
            let s = &self.ntbs[ntb as usize];
            let own = self.funcs[s.func as usize].bdf;
            if !self.ntb_link_is_up(ntb) {
                return fail(Failure::NtbLinkDown { ntb });
            }
            if let Err(f) = w.cross(ntb, u8::MAX) {
                return fail(f);
            }
            let entry = (w.tlp.requester.bus() == own.bus())
                .then(|| s.alias_entry(w.tlp.requester.devfn(), |p| self.ntbs[s.peers[p].ntb as usize].rid_lut.len()))
                .flatten();
            let Some((pidx, idx)) = entry else { return fail(Failure::RidLutMiss { ntb, rid: w.tlp.requester }) };
            let l = s.peers[pidx];
            if !self.ntb_link_is_up(l.ntb) {
                return fail(Failure::NtbLinkDown { ntb });
            }
            let p = &self.ntbs[l.ntb as usize];
            let Some(orig) = p.rid_lut[idx] else { return fail(Failure::RidLutMiss { ntb, rid: w.tlp.requester }) };
            w.push(HopKind::Ntb, s.node, 0);
            self.cross_cable(w, l, p.host);
            w.tlp.requester = orig;
            w.push(HopKind::Link, p.node, l.via.map_or(l.cable, |v| v.far_cable) as u64);
            Continue(IdStep::Up(p.node))
        }

        /// The requester ID on `far`'s side of LUT entry `idx` of its peer `pidx`.
        pub fn ntb_alias_from(&self, far: u32, pidx: usize, idx: usize) -> Bdf {
            let s = &self.ntbs[far as usize];
            let bdf = self.funcs[s.func as usize].bdf;
            let base = s.alias_base.get(pidx).copied().unwrap_or(0) as usize;
            Bdf::from_bus_devfn(bdf.bus(), (base + idx + 1) as u8)
        }

        /// From an adapter to its peer `l` in `host`: through a cluster switch, the cable to the
        /// switch and the switch's forwarding; then the walk is in the peer's host.
        #[inline(always)]
        fn cross_cable(&self, w: &mut Walk, l: crate::ntb::NtbPeer, host: HostId) {
            if let Some(v) = l.via {
                w.push(HopKind::Link, v.ingress, l.cable as u64);
                w.push(HopKind::Forward, v.egress, 0);
            }
            w.host = host;
        }
    }

    /// The adapter's translations a crossing reads: the window's inbound translation (direct or per
    /// LUT segment) and the peer it leads to, and the requester-ID LUT both ways.
    impl NtbState {
        /// Translate an offset into window `widx` of peer 0 (as its BAR sees it) into this host's address.
        pub fn inbound_translate(&self, widx: usize, offset: u64, window: &WindowParam) -> Option<u64> {
            self.inbound_translate_from(0, widx, offset, window)
        }

        /// Translate an offset into window `widx` of peer `pidx` into this host's address.
        pub fn inbound_translate_from(&self, pidx: usize, widx: usize, offset: u64, window: &WindowParam) -> Option<u64> {
            match self.inbound.get(pidx)?.get(widx)? {
                Inbound::Unset => None,
                Inbound::Direct { addr, size } => (offset < *size).then(|| addr + offset),
                Inbound::Lut(segs) => {
                    let seg_size = window.size / window.lut_segments as u64;
                    let seg = (offset / seg_size) as usize;
                    segs.get(seg).copied().flatten().map(|base| base + offset % seg_size)
                }
            }
        }

        /// The peer index of adapter `ntb`, if this adapter reaches it.
        pub fn peer_idx(&self, ntb: u32) -> Option<usize> {
            self.peers.iter().position(|p| p.ntb == ntb)
        }

        /// The segment of own window `widx` that `offset` falls in (0 for a direct window).
        pub fn segment_of(&self, widx: usize, offset: u64) -> usize {
            let w = &self.windows[widx];
            if w.lut_segments == 0 {
                0
            } else {
                (offset / (w.size / w.lut_segments as u64)) as usize
            }
        }

        /// The peer index an access at `offset` of own window `widx` goes to: the one its segment
        /// leads to, or with a single peer that peer.
        pub fn out_pidx(&self, widx: usize, offset: u64) -> Option<usize> {
            let seg = self.segment_of(widx, offset);
            match self.out_peer.get(widx).and_then(|v| v.get(seg)).copied().flatten() {
                Some(p) => Some(p as usize),
                None => (self.peers.len() == 1).then_some(0),
            }
        }

        /// (peer index, LUT entry) of far-side alias devfn `devfn` on this adapter's bus.
        pub fn alias_entry(&self, devfn: u8, peer_lut_len: impl Fn(usize) -> usize) -> Option<(usize, usize)> {
            let k = (devfn as usize).checked_sub(1)?;
            (0..self.peers.len()).find_map(|p| {
                let base = self.alias_base[p] as usize;
                (k >= base && k < base + peer_lut_len(p)).then(|| (p, k - base))
            })
        }

        pub fn rid_lut_index(&self, rid: Bdf) -> Option<usize> {
            self.rid_lut.iter().position(|e| *e == Some(rid))
        }
    }
}

mod endpoint {
    //! An endpoint: which function and BAR decode an address (PCIe Base 3.0 §7.5.2.1, Base Address
    //! Registers; decoding needs Memory Space Enable in the Command register, §7.5.1.1, and devlend
    //! lets a VF follow its PF's). A request an endpoint decodes is delivered to that BAR, unless the BAR is one
    //! of an NTB adapter's memory windows, whose requests go on through the NTB (`ntb`).

    use super::walk::{Next, Step, Walk};
    use super::{HopKind, Outcome, Target};
    use crate::fabric::Fabric;
    use crate::model::{FuncId, HostId, NodeId, NodeKind};
    use std::ops::ControlFlow::{Break, Continue};

    impl Fabric {
        /// A request reached endpoint node `c`: delivered to the BAR that decodes it, or out
        /// through an NTB memory window.
        #[inline(always)]
        pub(super) fn endpoint_request(&self, w: &mut Walk, c: NodeId) -> Next<Step> {
            let Some((f, bar, offset)) = self.endpoint_decode(c, w.tlp.addr) else {
                return Break(w.unsupported(c, "no BAR of the device decodes the address"));
            };
            if let NodeKind::Ntb { ntb } = self.nodes[c as usize].kind {
                if let Some(wi) = self.ntbs[ntb as usize].window_bars.iter().position(|x| *x == bar) {
                    return Continue(Step::NtbOut { ntb, window: wi as u8, offset });
                }
            }
            w.push(HopKind::Deliver, c, 0);
            Break(Outcome::Delivered(Target::Bar { func: f, bar, offset }))
        }

        /// Which function and BAR of endpoint node `n` decode `addr` (memory decoding enabled).
        pub fn endpoint_decode(&self, n: NodeId, addr: u64) -> Option<(FuncId, u8, u64)> {
            for f in &self.nodes[n as usize].functions {
                if let Some(b) = self.funcs[*f as usize].bar_at(addr) {
                    return self.decodes(*f).then_some((*f, b.index, addr - b.addr));
                }
            }
            None
        }

        /// Whether function `f` decodes memory (a VF follows its PF's Memory Space Enable).
        pub fn decodes(&self, f: FuncId) -> bool {
            match self.funcs[f as usize].vf {
                Some((_, pf)) => self.config[pf as usize].memory_enabled(),
                None => self.config[f as usize].memory_enabled(),
            }
        }

        /// A decoding BAR of any function in `host` that claims `addr`, wherever it sits in the tree.
        /// Every delivery to RAM asks, so it searches the host's decoding BARs sorted by address
        /// (`decoding.rs`), not every function.
        pub fn decoding_bar(&self, host: HostId, addr: u64) -> Option<(FuncId, u8, u64)> {
            self.decoding_bar_claim(host, addr)
        }
    }
}

mod landing {
    //! The bytes a TLP carries, stored or loaded where its route delivers them (`crate::memory`'s
    //! sparse memory of a host's RAM or a BAR), page by page, along the route its flow carries
    //! while that stands (`cache`); a failed page recorded (an IOMMU fault in that IOMMU's log too).

    use super::cache::{CarriedRoute, PAGE};
    use super::{Arrival, Failure, Requester, Target};
    use crate::events::Event;
    use crate::fabric::Fabric;
    use devlend_wire::TlpHeader;

    impl Fabric {
        /// Write bytes as `req` would, one TLP per 4 KiB-bounded chunk (TLPs never cross 4 KiB).
        /// Chunks that fail are recorded as events and change nothing; returns the bytes delivered
        /// and the first failure.
        pub fn write(&mut self, req: Requester, addr: u64, data: &[u8]) -> (usize, Option<Failure>) {
            let header = TlpHeader::write(self.requester_rid(req), addr, data.len() as u32);
            let (delivered, first, _) = self.write_pages(req, &header, data, &mut None);
            (delivered, first)
        }

        /// A write TLP from `origin` lands now: its bytes are stored where its route delivers them
        /// (one route per 4 KiB page it spans, as [`Fabric::write`]), along the route its flow
        /// carries while that stands ([`Fabric::arrival_along`]; `carried` is left with the route of
        /// the TLP's last page). The first failure (recorded), or where the TLP's first byte arrived
        /// with its header as the path rewrote it.
        pub fn write_tlp(&mut self, origin: Requester, header: &TlpHeader, data: &[u8], carried: &mut Option<CarriedRoute>) -> Result<Arrival, Failure> {
            match self.write_pages(origin, header, data, carried) {
                (_, Some(f), _) => Err(f),
                (_, None, Some(a)) => Ok(a),
                // Nothing to write: where its first byte would have gone.
                (_, None, None) => self.arrival_along(carried, origin, header),
            }
        }

        /// Store `data` page by page; bytes delivered, the first failure, the first page's arrival.
        fn write_pages(
            &mut self,
            req: Requester,
            header: &TlpHeader,
            data: &[u8],
            carried: &mut Option<CarriedRoute>,
        ) -> (usize, Option<Failure>, Option<Arrival>) {
            let mut done = 0usize;
            let mut first = None;
            let mut delivered = 0usize;
            let mut head = None;
            while done < data.len() {
                let a = header.addr.wrapping_add(done as u64);
                let n = ((PAGE - a % PAGE) as usize).min(data.len() - done);
                match self.arrival_along(carried, req, &TlpHeader { addr: a, len: n as u32, ..*header }) {
                    Ok(arrival) => {
                        self.store(arrival.target, &data[done..done + n]);
                        delivered += n;
                        if done == 0 {
                            head = Some(arrival);
                        }
                    }
                    Err(f) => {
                        self.record(f);
                        first.get_or_insert(f);
                    }
                }
                done += n;
            }
            (delivered, first, head)
        }

        /// Read bytes as `req` would. Failed chunks read as all ones (a master abort) and are recorded.
        pub fn read(&mut self, req: Requester, addr: u64, len: usize) -> (Vec<u8>, Option<Failure>) {
            let header = TlpHeader::read(self.requester_rid(req), addr, len as u32, 0);
            self.read_pages(req, &header, len, &mut None)
        }

        /// A read request TLP from `origin` reaches its completer now: its `header.len` bytes as
        /// [`Fabric::read`] reads them, along the route its flow carries while that stands
        /// ([`Fabric::arrival_along`]).
        pub fn read_tlp(&mut self, origin: Requester, header: &TlpHeader, carried: &mut Option<CarriedRoute>) -> (Vec<u8>, Option<Failure>) {
            self.read_pages(origin, header, header.len as usize, carried)
        }

        /// Read `len` bytes at `header.addr` page by page (failed pages all ones, recorded).
        fn read_pages(&mut self, origin: Requester, header: &TlpHeader, len: usize, carried: &mut Option<CarriedRoute>) -> (Vec<u8>, Option<Failure>) {
            let mut out = vec![0u8; len];
            let mut done = 0usize;
            let mut first = None;
            while done < len {
                let a = header.addr.wrapping_add(done as u64);
                let n = ((PAGE - a % PAGE) as usize).min(len - done);
                match self.arrival_along(carried, origin, &TlpHeader { addr: a, len: n as u32, ..*header }) {
                    Ok(arrival) => self.load(arrival.target, &mut out[done..done + n]),
                    Err(f) => {
                        self.record(f);
                        first.get_or_insert(f);
                        out[done..done + n].fill(0xff);
                    }
                }
                done += n;
            }
            (out, first)
        }

        /// Record a failed access (an IOMMU fault goes to that IOMMU's fault log too).
        pub fn record(&mut self, f: Failure) {
            if let Failure::Iommu { host, fault } = f {
                self.iommus[host as usize].record(fault);
            }
            self.events.push(Event::Failed(f));
        }

        fn store(&mut self, t: Target, data: &[u8]) {
            match t {
                Target::Ram { host, addr } => self.ram[host as usize].write(addr, data),
                Target::Bar { func, bar, offset } => self.bar_mem.entry((func, bar)).or_default().write(offset, data),
                Target::Msi { host, addr } => {
                    let mut d = [0u8; 4];
                    let n = data.len().min(4);
                    d[..n].copy_from_slice(&data[..n]);
                    // With remapping the route checked the entry; the vector raised is the entry's.
                    let irte = self.iommus[host as usize].irt.as_ref().and_then(|t| t.entry_at(addr));
                    let data = irte.map_or(u32::from_le_bytes(d), |e| e.vector as u32);
                    self.events.push(Event::Msi { host, addr, data });
                }
                Target::Cpu { .. } | Target::Func { .. } => {}
            }
        }

        fn load(&self, t: Target, out: &mut [u8]) {
            match t {
                Target::Ram { host, addr } => self.ram[host as usize].read(addr, out),
                Target::Bar { func, bar, offset } => match self.bar_mem.get(&(func, bar)) {
                    Some(m) => m.read(offset, out),
                    None => out.fill(0),
                },
                _ => out.fill(0xff),
            }
        }
    }
}
