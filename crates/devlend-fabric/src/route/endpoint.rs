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
        let Some((f, bar, offset)) = self.endpoint_decode(c, w.tlp.addr) else { return Break(w.unsupported(c, "no BAR of the device decodes the address")) };
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
