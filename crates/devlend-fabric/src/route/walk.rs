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
