//! Faults on the pool: what a fault ended leaves the pool's books, and the reset a touched
//! device gets before its next borrower (a Function Level Reset, PCIe Base 4.0 §6.6.2; Linux's
//! `pcie_flr`). A device the reset cannot reach (hung, or behind a link that is down) is refused
//! with the reason, and so is a surprise-removed device until its slot comes back.

use super::{PResult, Pool, PoolError};
use crate::fault::{FaultKind, FaultReport};
use devlend_fabric::model::FuncId;

impl Pool {
    /// Inject fault `kind` at `target` (a name, see `crate::fault`) and bring the pool's books in
    /// line: lends it ended are no longer borrowed; devices it touched are reset before their
    /// next borrow; removed devices cannot be borrowed.
    pub fn inject(&mut self, kind: &str, target: &str) -> PResult<FaultReport> {
        let k = FaultKind::parse(kind).map_err(|error| PoolError::Fault { kind: kind.into(), target: target.into(), error })?;
        let report = self.cluster.inject(k, target).map_err(|error| PoolError::Fault { kind: kind.into(), target: target.into(), error })?;
        for e in &report.ended {
            if let Ok(func) = self.cluster.fabric.func_id(&e.device) {
                self.borrowed.remove(&func);
            }
        }
        self.dirty.extend(report.touched.iter().copied());
        self.removed.extend(report.removed.iter().copied());
        if k == FaultKind::HostReboot {
            // The boot's conventional reset cleared what a fault left in the host's devices.
            let f = &self.cluster.fabric;
            let h = f.host_id(target).map_err(|e| PoolError::Fault { kind: kind.into(), target: target.into(), error: e.into() })?;
            self.dirty.retain(|&func| f.func_host(func) != h);
        }
        if k == FaultKind::PortUp {
            let f = &self.cluster.fabric;
            let back: Vec<FuncId> = self.removed.iter().copied().filter(|&func| f.port_is_up(f.slot_of(func))).collect();
            for func in back {
                self.removed.remove(&func);
            }
        }
        Ok(report)
    }

    /// Before `func` is lent again: refuse it if removed; reset it if a fault touched it.
    pub(super) fn ready_for_borrow(&mut self, func: FuncId) -> PResult<()> {
        let device = self.name(func);
        if self.removed.contains(&func) {
            return Err(PoolError::Removed { device });
        }
        if self.dirty.contains(&func) {
            let f = &mut self.cluster.fabric;
            f.flr(func).map_err(|failure| PoolError::ResetFailed { device, failure: Box::new(f.failure_report(&failure)) })?;
            self.dirty.remove(&func);
        }
        Ok(())
    }

    /// Whether the lend of `func` can carry anything: both NTBs' link up, and every port above
    /// the device and above both adapters up (true when it is not lent).
    pub(super) fn lend_path_up(&self, func: FuncId) -> bool {
        let f = &self.cluster.fabric;
        let name = self.name(func);
        let Some(l) = self.cluster.lends().into_iter().find(|l| l.device == name) else { return true };
        let ntbs = [&l.lender_ntb, &l.borrower_ntb].map(|n| f.ntb_id(n).ok());
        let links_up = ntbs.iter().all(|n| n.is_some_and(|n| f.ntb_link_is_up(n)));
        let mut nodes = std::iter::once(f.slot_of(func)).chain(ntbs.iter().flatten().map(|&n| f.ntb(n).node));
        links_up && nodes.all(|n| ports_up_above(f, n))
    }

    /// Devices a fault touched that have not been reset yet.
    pub fn needs_reset(&self) -> Vec<String> {
        self.dirty.iter().map(|&f| self.name(f)).collect()
    }
}

/// Whether the link above `node` and every link above its ancestors is up.
fn ports_up_above(f: &devlend_fabric::Fabric, node: devlend_fabric::model::NodeId) -> bool {
    std::iter::successors(Some(node), |&n| f.node(n).parent).all(|n| f.port_is_up(n))
}
