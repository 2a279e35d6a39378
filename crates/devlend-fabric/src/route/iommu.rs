//! The IOMMU at the root complex (Intel VT-d 3.0 §3 DMA remapping, §5 interrupt remapping; the
//! tables themselves are `crate::iommu` and `crate::intremap`): a device's request arriving from
//! a root port is translated from its I/O virtual address to a physical one, and an MSI write is
//! checked against the interrupt remapping table. Either failing ends the walk.

use super::walk::{fail, Next, Walk};
use super::{Failure, Fault, HopKind};
use crate::fabric::Fabric;
use crate::model::HostId;
use std::ops::ControlFlow::Continue;

impl Fabric {
    /// Translate the walk's address through `host`'s IOMMU (a hop with the page size), for a
    /// write or a read as the TLP's kind says.
    #[inline(always)]
    pub(super) fn translate(&self, w: &mut Walk, host: HostId) -> Next<()> {
        let write = w.tlp.access().is_write();
        match self.iommus[host as usize].translate(w.tlp.requester, w.tlp.addr, write) {
            Ok(t) => {
                w.tlp.addr = t.addr;
                w.push(HopKind::Iommu, self.hosts[host as usize].rc, t.page_size);
                Continue(())
            }
            Err(reason) => fail(Failure::Iommu { host, fault: Fault { requester: w.tlp.requester, addr: w.tlp.addr, write, reason } }),
        }
    }

    /// An MSI write passes `host`'s interrupt remapping table, when it has one.
    #[inline(always)]
    pub(super) fn remap_interrupt(&self, w: &Walk, host: HostId) -> Next<()> {
        if let Some(Err(fault)) = self.iommus[host as usize].irt.as_ref().map(|t| t.lookup(w.tlp.addr, w.tlp.requester)) {
            return fail(Failure::Interrupt { host, rid: w.tlp.requester, addr: w.tlp.addr, fault });
        }
        Continue(())
    }
}
