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
            _ if !acs && peer.is_none() && self.nodes[up as usize].bridge.claims(w.tlp.addr) => Break(w.unsupported(up, "no switch port claims the address")),
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
