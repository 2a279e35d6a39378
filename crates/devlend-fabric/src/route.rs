//! The functional router: for a requester and an address, the list of hops a TLP takes, each
//! with the component, port, host domain, address and requester ID there, and where it ends.
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

use crate::fabric::Fabric;
use crate::iommu::{Fault, FaultReason};
use crate::model::*;
use devlend_wire::{Access, Bdf};

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

enum Step {
    Up(NodeId),
    Down(NodeId),
    Rc { host: HostId, from_port: bool },
    NtbOut { ntb: u32, window: u8, offset: u64 },
}

enum IdStep {
    Up(NodeId),
    Down(NodeId),
    Rc { host: HostId, from_port: bool },
}

/// Loops: a tree walk always ends (up towards the root, or down towards the leaves), so a route
/// can only come back to where it was through NTB translations. A walk keeps the NTB windows it
/// crossed; reaching one a second time is a loop, reported before anything is delivered. This
/// bounds every walk by the number of NTB windows.
struct Walk {
    hops: Vec<Hop>,
    addr: u64,
    rid: Bdf,
    host: HostId,
    crossed: Vec<(u32, u8)>,
}

impl Walk {
    fn new(addr: u64, rid: Bdf, host: HostId) -> Walk {
        Walk { hops: Vec::with_capacity(16), addr, rid, host, crossed: Vec::new() }
    }

    /// Note a crossing of `ntb` through `window`; a loop when it was crossed before.
    fn cross(&mut self, ntb: u32, window: u8) -> Result<(), Failure> {
        if self.crossed.contains(&(ntb, window)) {
            return Err(Failure::RoutingLoop { ntb, window, host: self.host, addr: self.addr });
        }
        self.crossed.push((ntb, window));
        Ok(())
    }

    fn push(&mut self, kind: HopKind, node: NodeId, aux: u64) {
        self.hops.push(Hop { kind, node, host: self.host, addr: self.addr, rid: self.rid, aux });
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

    /// Route a request without side effects (faults are reported in the outcome, not recorded).
    pub fn route_uncached(&self, req: Requester, addr: u64, access: Access) -> Route {
        let host = self.requester_host(req);
        let mut w = Walk::new(addr, self.requester_rid(req), host);
        let outcome = self.fault_outcome(req, access, self.walk_request(&mut w, req, access));
        let mut route = Route { access, hops: w.hops, outcome, completion: None };
        if access == Access::Read {
            if let Outcome::Delivered(t) = outcome {
                let last = *route.hops.last().unwrap();
                route.completion = Some(Box::new(self.route_completion(t, last.rid, last.host)));
            }
        }
        route
    }

    fn walk_request(&self, w: &mut Walk, req: Requester, access: Access) -> Outcome {
        let mut step = match req {
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
        let ur = |w: &Walk, node: NodeId, why: &'static str| Outcome::Failed(Failure::Unsupported { node, host: w.host, addr: w.addr, why });
        loop {
            step = match step {
                Step::Up(n) => {
                    let node = &self.nodes[n as usize];
                    let Some(p) = node.parent else { return ur(w, n, "no upstream link") };
                    if self.faults.ports_down.contains(&n) {
                        return Outcome::Failed(Failure::PortDown { node: n });
                    }
                    w.push(HopKind::Link, p, node.uplink.unwrap_or(0) as u64);
                    match self.nodes[p as usize].kind {
                        NodeKind::RootPort { .. } => Step::Rc { host: w.host, from_port: true },
                        NodeKind::SwitchDown { .. } => {
                            let up = self.nodes[p as usize].parent.unwrap();
                            let acs = self.hosts[w.host as usize].iommu;
                            let peer = self.nodes[up as usize].children.iter().copied().find(|s| *s != p && self.nodes[*s as usize].bridge.claims(w.addr));
                            match peer {
                                Some(s) if !acs => {
                                    w.push(HopKind::Forward, s, 0);
                                    Step::Down(s)
                                }
                                _ if !acs && self.nodes[p as usize].bridge.claims(w.addr) => return ur(w, p, "address belongs to the port it came from"),
                                _ if !acs && peer.is_none() && self.nodes[up as usize].bridge.claims(w.addr) => {
                                    return ur(w, up, "no switch port claims the address")
                                }
                                _ => {
                                    w.push(HopKind::Forward, up, 0);
                                    Step::Up(up)
                                }
                            }
                        }
                        _ => return ur(w, p, "malformed tree"),
                    }
                }
                Step::Down(b) => {
                    let Some(&c) = self.nodes[b as usize].children.first() else { return ur(w, b, "no device below this port") };
                    if self.faults.ports_down.contains(&c) {
                        return Outcome::Failed(Failure::PortDown { node: c });
                    }
                    w.push(HopKind::Link, c, self.nodes[c as usize].uplink.unwrap_or(0) as u64);
                    match self.nodes[c as usize].kind {
                        NodeKind::SwitchUp { .. } => {
                            match self.nodes[c as usize].children.iter().copied().find(|s| self.nodes[*s as usize].bridge.claims(w.addr)) {
                                Some(s) => {
                                    w.push(HopKind::Forward, s, 0);
                                    Step::Down(s)
                                }
                                None => return ur(w, c, "no switch port claims the address"),
                            }
                        }
                        _ => match self.endpoint_decode(c, w.addr) {
                            Some((f, bar, offset)) => {
                                if let NodeKind::Ntb { ntb } = self.nodes[c as usize].kind {
                                    let s = &self.ntbs[ntb as usize];
                                    if let Some(wi) = s.window_bars.iter().position(|x| *x == bar) {
                                        Step::NtbOut { ntb, window: wi as u8, offset }
                                    } else {
                                        w.push(HopKind::Deliver, c, 0);
                                        return Outcome::Delivered(Target::Bar { func: f, bar, offset });
                                    }
                                } else {
                                    w.push(HopKind::Deliver, c, 0);
                                    return Outcome::Delivered(Target::Bar { func: f, bar, offset });
                                }
                            }
                            None => return ur(w, c, "no BAR of the device decodes the address"),
                        },
                    }
                }
                Step::Rc { host, from_port } => {
                    let h = &self.hosts[host as usize];
                    if from_port {
                        w.push(HopKind::Root, h.rc, 0);
                        if h.msi.contains(w.addr) {
                            if access.is_write() {
                                if let Some(Err(fault)) = self.iommus[host as usize].irt.as_ref().map(|t| t.lookup(w.addr, w.rid)) {
                                    return Outcome::Failed(Failure::Interrupt { host, rid: w.rid, addr: w.addr, fault });
                                }
                                w.push(HopKind::Deliver, h.rc, 0);
                                return Outcome::Delivered(Target::Msi { host, addr: w.addr });
                            }
                            return ur(w, h.rc, "read from the MSI range");
                        }
                        if h.iommu {
                            match self.iommus[host as usize].translate(w.rid, w.addr, access.is_write()) {
                                Ok(t) => {
                                    w.addr = t.addr;
                                    w.push(HopKind::Iommu, h.rc, t.page_size);
                                }
                                Err(reason) => {
                                    return Outcome::Failed(Failure::Iommu {
                                        host,
                                        fault: Fault { requester: w.rid, addr: w.addr, write: access.is_write(), reason },
                                    });
                                }
                            }
                        }
                    }
                    if h.in_ram(w.addr) {
                        if let Some((func, bar, _)) = self.decoding_bar(host, w.addr) {
                            return Outcome::Failed(Failure::BarOverRam { host, addr: w.addr, func, bar });
                        }
                        w.push(HopKind::Deliver, h.rc, 0);
                        return Outcome::Delivered(Target::Ram { host, addr: w.addr });
                    }
                    match h.root_ports.iter().copied().find(|rp| self.nodes[*rp as usize].bridge.claims(w.addr)) {
                        Some(rp) if !from_port || h.cpu.p2p_through_root => {
                            w.push(HopKind::Forward, rp, 0);
                            Step::Down(rp)
                        }
                        Some(_) => return ur(w, h.rc, "peer-to-peer through the root is not supported by this CPU profile"),
                        None => return ur(w, h.rc, "no RAM or device at this address"),
                    }
                }
                Step::NtbOut { ntb, window, offset } => {
                    let s = &self.ntbs[ntb as usize];
                    if !self.ntb_link_is_up(ntb) {
                        return Outcome::Failed(Failure::NtbLinkDown { ntb });
                    }
                    let pidx = s.out_pidx(window as usize, offset);
                    let link = pidx.map(|i| s.peers[i]);
                    if link.is_some_and(|l| !self.ntb_link_is_up(l.ntb)) {
                        return Outcome::Failed(Failure::NtbLinkDown { ntb });
                    }
                    if let Err(f) = w.cross(ntb, window) {
                        return Outcome::Failed(f);
                    }
                    let Some(idx) = s.rid_lut_index(w.rid) else { return Outcome::Failed(Failure::RidLutMiss { ntb, rid: w.rid }) };
                    let found = link.and_then(|l| {
                        let p = &self.ntbs[l.ntb as usize];
                        let from = p.peer_idx(ntb)?;
                        Some((l, from, p.inbound_translate_from(from, window as usize, offset, &s.windows[window as usize])?))
                    });
                    let Some((l, from, addr)) = found else { return Outcome::Failed(Failure::NtbUnmapped { ntb, window, offset }) };
                    let p = &self.ntbs[l.ntb as usize];
                    w.push(HopKind::Ntb, s.node, window as u64);
                    self.cross_cable(w, l, p.host);
                    w.addr = addr;
                    w.rid = self.ntb_alias_from(l.ntb, from, idx);
                    w.push(HopKind::Link, p.node, l.via.map_or(l.cable, |v| v.far_cable) as u64);
                    if !self.config[p.func as usize].bus_master() {
                        return Outcome::Failed(Failure::BusMasterOff { func: p.func });
                    }
                    Step::Up(p.node)
                }
            };
        }
    }

    /// From an adapter to its peer `l` in `host`: through a cluster switch, the cable to the
    /// switch and the switch's forwarding; then the walk is in the peer's host.
    fn cross_cable(&self, w: &mut Walk, l: crate::ntb::NtbPeer, host: HostId) {
        if let Some(v) = l.via {
            w.push(HopKind::Link, v.ingress, l.cable as u64);
            w.push(HopKind::Forward, v.egress, 0);
        }
        w.host = host;
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

    /// ID-route a completion from the target of a request back to requester `rid` in `host`.
    fn route_completion(&self, from: Target, rid: Bdf, host: HostId) -> Route {
        let mut w = Walk::new(0, rid, host);
        let outcome = self.walk_completion(&mut w, from);
        Route { access: Access::Read, hops: w.hops, outcome, completion: None }
    }

    fn walk_completion(&self, w: &mut Walk, from: Target) -> Outcome {
        let bus = |w: &Walk| w.rid.bus();
        let ur = |w: &Walk, node: NodeId, why: &'static str| Outcome::Failed(Failure::Unsupported { node, host: w.host, addr: w.rid.0 as u64, why });
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
            _ => return ur(w, 0, "no completion for this target"),
        };
        loop {
            step = match step {
                IdStep::Up(n) => {
                    let node = &self.nodes[n as usize];
                    let Some(p) = node.parent else { return ur(w, n, "no upstream link") };
                    if self.faults.ports_down.contains(&n) {
                        return Outcome::Failed(Failure::PortDown { node: n });
                    }
                    w.push(HopKind::Link, p, node.uplink.unwrap_or(0) as u64);
                    match self.nodes[p as usize].kind {
                        NodeKind::RootPort { .. } => IdStep::Rc { host: w.host, from_port: true },
                        _ => {
                            let up = self.nodes[p as usize].parent.unwrap();
                            let acs = self.hosts[w.host as usize].iommu;
                            match self.nodes[up as usize].children.iter().copied().find(|s| *s != p && self.nodes[*s as usize].bridge.claims_bus(bus(w))) {
                                Some(s) if !acs => {
                                    w.push(HopKind::Forward, s, 0);
                                    IdStep::Down(s)
                                }
                                _ => {
                                    w.push(HopKind::Forward, up, 0);
                                    IdStep::Up(up)
                                }
                            }
                        }
                    }
                }
                IdStep::Down(b) => {
                    let Some(&c) = self.nodes[b as usize].children.first() else { return ur(w, b, "no device below this port") };
                    if self.faults.ports_down.contains(&c) {
                        return Outcome::Failed(Failure::PortDown { node: c });
                    }
                    w.push(HopKind::Link, c, self.nodes[c as usize].uplink.unwrap_or(0) as u64);
                    match self.nodes[c as usize].kind {
                        NodeKind::SwitchUp { .. } => {
                            match self.nodes[c as usize].children.iter().copied().find(|s| self.nodes[*s as usize].bridge.claims_bus(bus(w))) {
                                Some(s) => {
                                    w.push(HopKind::Forward, s, 0);
                                    IdStep::Down(s)
                                }
                                None => return ur(w, c, "no switch port claims the completion's bus"),
                            }
                        }
                        kind => {
                            if let Some(f) = self.nodes[c as usize].functions.iter().copied().find(|f| self.funcs[*f as usize].bdf == w.rid) {
                                w.push(HopKind::Deliver, c, 0);
                                return Outcome::Delivered(Target::Func { func: f });
                            }
                            let NodeKind::Ntb { ntb } = kind else { return ur(w, c, "completion for an unknown function") };
                            let s = &self.ntbs[ntb as usize];
                            let own = self.funcs[s.func as usize].bdf;
                            if !self.ntb_link_is_up(ntb) {
                                return Outcome::Failed(Failure::NtbLinkDown { ntb });
                            }
                            if let Err(f) = w.cross(ntb, u8::MAX) {
                                return Outcome::Failed(f);
                            }
                            let entry = (w.rid.bus() == own.bus())
                                .then(|| s.alias_entry(w.rid.devfn(), |p| self.ntbs[s.peers[p].ntb as usize].rid_lut.len()))
                                .flatten();
                            let Some((pidx, idx)) = entry else { return Outcome::Failed(Failure::RidLutMiss { ntb, rid: w.rid }) };
                            let l = s.peers[pidx];
                            if !self.ntb_link_is_up(l.ntb) {
                                return Outcome::Failed(Failure::NtbLinkDown { ntb });
                            }
                            let p = &self.ntbs[l.ntb as usize];
                            let Some(orig) = p.rid_lut[idx] else { return Outcome::Failed(Failure::RidLutMiss { ntb, rid: w.rid }) };
                            w.push(HopKind::Ntb, s.node, 0);
                            self.cross_cable(w, l, p.host);
                            w.rid = orig;
                            w.push(HopKind::Link, p.node, l.via.map_or(l.cable, |v| v.far_cable) as u64);
                            IdStep::Up(p.node)
                        }
                    }
                }
                IdStep::Rc { host, from_port } => {
                    let h = &self.hosts[host as usize];
                    if from_port {
                        w.push(HopKind::Root, h.rc, 0);
                    }
                    if w.rid == Bdf(0) {
                        w.push(HopKind::Deliver, h.rc, 0);
                        return Outcome::Delivered(Target::Cpu { host });
                    }
                    match h.root_ports.iter().copied().find(|rp| self.nodes[*rp as usize].bridge.claims_bus(bus(w))) {
                        Some(rp) => {
                            w.push(HopKind::Forward, rp, 0);
                            IdStep::Down(rp)
                        }
                        None => return ur(w, h.rc, "no root port leads to the completion's bus"),
                    }
                }
            };
        }
    }
}

impl FaultReason {
    pub fn code(self) -> &'static str {
        match self {
            FaultReason::NoContext => "no-context",
            FaultReason::NotPresent => "not-present",
            FaultReason::WriteDenied => "write-denied",
            FaultReason::AddressWidth => "address-width",
        }
    }
}
