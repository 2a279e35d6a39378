//! The functional router: for a TLP (the wire crate's `TlpHeader`) and where it starts, the
//! list of hops it takes, each with the component, port, host domain, address and requester ID
//! there, and where it ends.
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
//! The router in pieces, one per kind of component, each a file of this module (the IOMMU's
//! piece, DMA remapping of a request and interrupt remapping of an MSI write, is `remap` in
//! `crate::iommu`, beside the tables it reads):
//! - `walk`: a TLP's walk, request (address-routed) or completion (ID-routed), from the wire
//!   crate's `TlpHeader` and where the TLP starts ([`Fabric::walk_tlp`]): which piece acts
//!   next, until the TLP is delivered or fails;
//! - `link`: crossing a link up or down, refused when the link is down;
//! - `switch`: a switch's forwarding, by address or by bus number, with ACS redirect;
//! - `root`: the root complex: MSI, RAM, root ports, peer-to-peer through the root, the CPU's
//!   completions;
//! - `ntb`: an NTB crossing into the peer's domain (memory window, requester-ID LUT, cable,
//!   cluster switch) and a completion's way back through the reverse LUT;
//! - `endpoint`: which BAR of an endpoint decodes an address.

mod cache;
mod endpoint;
mod landing;
mod link;
mod ntb;
mod root;
mod switch;
pub(crate) mod walk;

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
