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
