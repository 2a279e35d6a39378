//! The root complex (PCIe Base 3.0 §1.3.1): where the CPU's requests start and completions to it
//! end, and where a device's request arriving from a root port is an interrupt (the MSI range,
//! §6.1.4), or is translated by the IOMMU when it is on (`crate::iommu`'s `remap`), then goes to RAM, or down
//! another root port when the CPU profile allows peer-to-peer through the root (§1.3.1 leaves it
//! optional), else is an Unsupported Request. Completions are ID-routed down the root port whose
//! bus range holds the requester.

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
