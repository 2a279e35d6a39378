//! Pieces of programming the hypervisor holds, each with one way to undo it (the same pattern
//! as devlend-host's `lending`): a failed step releases what it held in reverse, and detaching a
//! device or shutting a VM down releases the same lists, so nothing stays half-mapped.

use crate::error::Anomaly;
use devlend_fabric::iommu::DomainId;
use devlend_fabric::model::{FuncId, HostId};
use devlend_host::{Cluster, DevId, DmaDir, HResult, HostError};

/// One piece of programming the hypervisor holds (what an [`Anomaly::Release`] failed to undo).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    /// A device borrowed by the VM's host through Device Lending.
    Borrowed { host: HostId, dev: DevId },
    /// A DMA mapping the hypervisor host made for a borrowed device (guest RAM into the window).
    HostDma { host: HostId, dev: DevId, dma: u64, len: u64 },
    /// An IOMMU mapping in a VM domain.
    Iommu { host: HostId, domain: DomainId, iova: u64, len: u64 },
    /// A device moved from its default domain (`dma:NAME`) into a VM domain.
    Attached { host: HostId, func: FuncId },
    /// Bus mastering enabled.
    Master { func: FuncId },
    /// Host memory backing guest RAM.
    Pages { host: HostId, phys: u64 },
}

/// Undo one piece.
pub(crate) fn release(c: &mut Cluster, h: &Held) -> HResult<()> {
    match *h {
        Held::Borrowed { host, dev } => c.return_device(host, dev).map(|_| ()),
        Held::HostDma { host, dev, dma, len } => c.os(host).and_then(|mut os| os.dma_unmap_single(dev, dma, len, DmaDir::Bidirectional)),
        Held::Iommu { host, domain, iova, len } => c.fabric.iommu_unmap(host, domain, iova, len).map(|_| ()).map_err(HostError::from),
        Held::Attached { host, func } => reattach_default(c, host, func),
        Held::Master { func } => {
            c.fabric.set_bus_master(func, false);
            Ok(())
        }
        Held::Pages { host, phys } => c.os(host).and_then(|mut os| os.kfree(phys)),
    }
}

/// Give a device back its host's default DMA domain (`dma:NAME`, see devlend-host's kernel).
fn reattach_default(c: &mut Cluster, host: HostId, func: FuncId) -> HResult<()> {
    let name = format!("dma:{}", c.fabric.func(func).name);
    c.fabric.iommu_detach(host, func)?;
    let d = c.fabric.iommu_domain(host, &name)?;
    Ok(c.fabric.iommu_attach(host, d, func)?)
}

/// Undo every piece, the last first; what the host or fabric refused is recorded as an anomaly.
pub(crate) fn release_all(c: &mut Cluster, held: Vec<Held>, anomalies: &mut Vec<Anomaly>) {
    for h in held.into_iter().rev() {
        if let Err(error) = release(c, &h) {
            anomalies.push(Anomaly::Release { held: h, error });
        }
    }
}
