//! `Cluster`: the fabric, one kernel per host, and the Device Lending agents. Borrowing a device
//! is the borrower agent asking the lender agent (000 §4): the lender programs its side and the
//! borrower's NTB and IOMMU, then the borrower hot-adds the device into its device tree ("by
//! emulating a hot-plug event"). Returning undoes everything and hot-removes the device.
//!
//! Returning is refused (`HostError::Busy`) while the borrower's driver still holds DMA mappings
//! or interrupt vectors of the device, as borrowing is refused while the lender's driver does:
//! the device could have DMA in flight, and Linux removes a device only after its driver has let
//! go. `return_device_force` takes it back anyway (a surprise removal): everything is undone, the
//! lender masks the device's MSI-X table and disables MSI-X, and whatever the device still sends
//! towards the former borrower is refused on the data path and recorded by the fabric.
//!
//! The fabric should come without a Device Lending `setup` section: that programming is what
//! this crate does.

use crate::error::{BadLend, HResult, HostError, InUse, InvalidRequest, Lent, NoSuch, NtbUse};
use crate::kernel::{BarView, DevId, Kernel, Origin, PciDevice};
use crate::lending::LendState;
use crate::os::HostOs;
use devlend_fabric::model::{FuncId, HostId, NodeKind};
use devlend_fabric::Fabric;

pub struct Cluster {
    pub fabric: Fabric,
    pub(crate) kernels: Vec<Kernel>,
    pub(crate) lending: LendState,
    pub(crate) hygiene: crate::hygiene::HygieneState,
}

/// A host given by id or by name.
pub trait HostRef {
    fn resolve(&self, c: &Cluster) -> HResult<HostId>;
}

impl HostRef for HostId {
    fn resolve(&self, c: &Cluster) -> HResult<HostId> {
        if (*self as usize) < c.kernels.len() {
            Ok(*self)
        } else {
            Err(HostError::NoDevice(NoSuch::HostNumber(*self)))
        }
    }
}

impl HostRef for &str {
    fn resolve(&self, c: &Cluster) -> HResult<HostId> {
        Ok(c.fabric.host_id(self)?)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BorrowOptions {
    /// Size of the DMA window the lender opens (default: a whole NTB memory window). Only the
    /// first device lent over an NTB pair opens the window; later ones share it.
    pub dma_window: Option<u64>,
    /// Give the device its own IOMMU domain on the borrower. By default every device lent over
    /// one NTB pair shares the DMA window and the borrower adapter's domain (000 §4-§5: "a
    /// single DMA window", "all devices borrowed by the same physical host would be placed in
    /// the same IOMMU domain"), so with the lender's IOMMU off one lent device can reach the
    /// buffers another one's driver mapped (a stated limitation). With this option the
    /// device's far-side requester ID (its LUT entry's alias) is attached to a domain of its
    /// own, `dl:ADAPTER:DEVICE`, which holds only its driver's mappings: the window stays
    /// shared, but another device's write into this device's part of it faults in the
    /// borrower's IOMMU, and is recorded.
    pub device_domain: bool,
}

/// One active lend, for inspection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LendInfo {
    pub device: String,
    pub lender: String,
    pub borrower: String,
    /// The borrower's handle of the device.
    pub dev: DevId,
    pub lender_ntb: String,
    pub borrower_ntb: String,
    /// The DMA window: lender-side address, size, and the borrower IOVA it lands on.
    pub window_addr: u64,
    pub window_size: u64,
    pub window_iova: u64,
    /// The BARs as the borrower sees them.
    pub bars: Vec<BarView>,
    /// The borrower's driver's DMA mappings (buffers and resources).
    pub live_dma_maps: usize,
    /// Interrupt vectors the borrower's driver holds for the device.
    pub irq_vectors: usize,
}

/// What ending a lend could not do across the NTB. Each side's half of a lend is programmed in
/// its own host (translations and LUT entries of its adapter, its IOMMU, its device tree), so a
/// return completes locally on both sides whatever the link does (see `devlend_fabric::link`);
/// what a down link stops is the agents' exchange (000 §4: the borrower returns the device to
/// the lender's agent). Empty when the link was up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Teardown {
    pub unreached: Vec<Unreached>,
}

/// A lend whose link was down when it ended: the borrower's return message did not reach the
/// lender; the lender undid its half on its own (as its agent does when it sees the link go
/// down), the borrower its half.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreached {
    pub device: String,
    pub lender: String,
    pub borrower: String,
    /// The lender's adapter, whose link was down.
    pub ntb: String,
}

/// One stored P2P address pair of a borrowed source (000 §6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct P2pInfo {
    pub target: String,
    pub bar: u8,
    pub borrower_addr: u64,
    pub lender_addr: u64,
    pub size: u64,
}

impl Cluster {
    /// The size of the DMA window a borrowed function `func` maps its buffers into (through the
    /// lender's NTB onto the borrower's IOMMU); `None` when `func` is not borrowed.
    pub fn dma_window_size(&self, func: FuncId) -> Option<u64> {
        let l = self.lending.lends.get(&func)?;
        self.lending.dma_windows.get(&(l.la, l.bb)).map(|w| w.size)
    }

    /// Boot a kernel on every host of an enumerated fabric.
    pub fn new(mut fabric: Fabric) -> HResult<Cluster> {
        let kernels = (0..fabric.hosts().len() as HostId).map(|h| Kernel::boot(&mut fabric, h)).collect::<HResult<Vec<_>>>()?;
        Ok(Cluster { fabric, kernels, lending: LendState::default(), hygiene: Default::default() })
    }

    pub fn from_json(json: &str) -> HResult<Cluster> {
        let f = devlend_fabric::build_json(json).map_err(InvalidRequest::Topology)?;
        Cluster::new(f)
    }

    pub fn host_id(&self, name: &str) -> HResult<HostId> {
        Ok(self.fabric.host_id(name)?)
    }

    pub fn kernel(&self, host: impl HostRef) -> HResult<&Kernel> {
        Ok(&self.kernels[host.resolve(self)? as usize])
    }

    /// The kernel interface of one host, for drivers.
    pub fn os(&mut self, host: impl HostRef) -> HResult<HostOs<'_>> {
        let host = host.resolve(self)?;
        Ok(HostOs { c: self, host })
    }

    pub fn borrow(&mut self, borrower: impl HostRef, device: &str) -> HResult<DevId> {
        self.borrow_with(borrower, device, BorrowOptions::default())
    }

    /// Borrow `device` (a function name) onto `borrower`; returns its handle in the borrower.
    pub fn borrow_with(&mut self, borrower: impl HostRef, device: &str, opts: BorrowOptions) -> HResult<DevId> {
        let b = borrower.resolve(self)?;
        let func = self.fabric.func_id(device)?;
        let (lender, lender_dev) = self.check_borrow(b, func)?;
        self.scrub_pending(func)?;
        let dev_domain = self.kernels[lender as usize].dma.get(&lender_dev).and_then(|d| d.domain).map(|d| (lender, d));
        let mut lend = self.lending.lend(&mut self.fabric, func, b, dev_domain, opts)?;
        let f = self.fabric.func(func);
        let view = PciDevice {
            id: DevId(0),
            name: f.name.clone(),
            func,
            bdf: f.bdf,
            is_ntb: false,
            origin: Origin::Borrowed { lender },
            lent_to: None,
            bars: lend.bars.clone(),
        };
        let dev = self.kernels[b as usize].hot_add(view);
        if let Ok(d) = self.kernels[lender as usize].device_mut(lender_dev) {
            d.lent_to = Some(b);
        }
        lend.dev = dev;
        self.lending.lends.insert(func, lend);
        Ok(dev)
    }

    /// Everything that must hold before a lend starts: (lender, lender's handle of the device).
    fn check_borrow(&self, b: HostId, func: FuncId) -> HResult<(HostId, DevId)> {
        let f = &self.fabric;
        let (name, lender) = (&f.func(func).name, f.func_host(func));
        let hn = |h: HostId| f.host(h).name.clone();
        if let Some(l) = self.lending.lends.get(&func) {
            return Err(HostError::AlreadyLent(Lent::Borrow { device: name.clone(), borrower: hn(l.borrower) }));
        }
        if lender == b {
            return Err(BadLend::OwnDevice { device: name.to_string(), host: hn(b).to_string() }.into());
        }
        if matches!(f.node(f.func(func).node).kind, NodeKind::Ntb { .. }) {
            return Err(InvalidRequest::NtbAdapter { device: name.to_string(), refused: NtbUse::Lend }.into());
        }
        if !f.host(b).iommu {
            return Err(BadLend::NoIommu { host: hn(b).to_string() }.into());
        }
        let k = &self.kernels[lender as usize];
        let dev = k.by_func(func).ok_or_else(|| HostError::NoDevice(NoSuch::NotListed { host: hn(lender), device: name.clone() }))?;
        let live = k.dma.get(&dev).map_or(0, |d| d.live());
        if live > 0 {
            return Err(InUse::Lender { device: name.clone(), host: hn(lender), count: live, vectors: false }.into());
        }
        let irqs = k.irqs.of(dev);
        if irqs > 0 {
            return Err(InUse::Lender { device: name.clone(), host: hn(lender), count: irqs, vectors: true }.into());
        }
        Ok((lender, dev))
    }

    /// Return a borrowed device to its lender: every mapping, LUT entry and window the lend made
    /// is undone, the device stops bus mastering, and the borrower's tree loses it. Refused with
    /// `Busy` while the borrower's driver holds DMA mappings or interrupt vectors of it.
    pub fn return_device(&mut self, borrower: impl HostRef, dev: DevId) -> HResult<Teardown> {
        let b = borrower.resolve(self)?;
        let (_, func) = self.borrowed(b, dev)?;
        let maps = self.lending.lends.get(&func).map_or(0, |l| l.maps.len() + l.resource_maps.len());
        let irqs = self.kernels[b as usize].irqs.of(dev);
        if maps + irqs > 0 {
            let name = &self.fabric.func(func).name;
            let (device, host) = (name.clone(), self.kernels[b as usize].name.clone());
            return Err(InUse::Return { device, host, maps, irqs }.into());
        }
        self.return_device_force(b, dev)
    }

    /// Take a borrowed device back whatever its driver still holds (a surprise removal): its
    /// DMA mappings, P2P entries, MSI mapping and interrupt vectors go with the lend; the lender
    /// disables bus mastering and MSI-X (every table entry masked). DMA the device still issues
    /// towards the former borrower is refused on the data path and recorded as a fault.
    /// A link that is down does not stop it: see [`Teardown`].
    pub fn return_device_force(&mut self, borrower: impl HostRef, dev: DevId) -> HResult<Teardown> {
        let b = borrower.resolve(self)?;
        let (lender, func) = self.borrowed(b, dev)?;
        let lend = self.lending.reclaim(&mut self.fabric, func)?;
        let f = &self.fabric;
        let mut report = Teardown::default();
        if !f.ntb_link_is_up(lend.la) || !f.ntb_link_is_up(lend.bb) {
            let host = |h: HostId| f.host(h).name.clone();
            report.unreached.push(Unreached { device: f.func(func).name.clone(), lender: host(lender), borrower: host(b), ntb: f.ntb(lend.la).name.clone() });
        }
        self.fabric.set_bus_master(func, false);
        for e in crate::irq::quiesce_msix(&mut self.fabric, func) {
            self.lending.anomalies.push(format!("masking the MSI-X table of {}: {e}", self.fabric.func(func).name));
        }
        let irtes: Vec<u32> = self.kernels[b as usize].irqs.iter().filter(|d| d.dev == dev).filter_map(|d| d.irte).collect();
        for h in irtes {
            self.fabric.irte_free(b, h);
        }
        self.kernels[b as usize].hot_remove(dev)?;
        let k = &mut self.kernels[lender as usize];
        if let Some(id) = k.by_func(func) {
            k.device_mut(id)?.lent_to = None;
        }
        self.lend_ended(func);
        Ok(report)
    }

    /// (lender, function) of a device borrowed by `b`.
    fn borrowed(&self, b: HostId, dev: DevId) -> HResult<(HostId, FuncId)> {
        let d = self.kernels[b as usize].device(dev)?;
        let Origin::Borrowed { lender } = d.origin else {
            return Err(BadLend::NotBorrowedBy { device: d.name.clone(), host: self.kernels[b as usize].name.clone() }.into());
        };
        Ok((lender, d.func))
    }

    pub fn lends(&self) -> Vec<LendInfo> {
        let f = &self.fabric;
        self.lending
            .lends
            .iter()
            .map(|(&func, l)| {
                let w = self.lending.dma_windows.get(&(l.la, l.bb));
                LendInfo {
                    device: f.func(func).name.clone(),
                    lender: f.host(l.lender).name.clone(),
                    borrower: f.host(l.borrower).name.clone(),
                    dev: l.dev,
                    lender_ntb: f.ntb(l.la).name.clone(),
                    borrower_ntb: f.ntb(l.bb).name.clone(),
                    window_addr: w.map_or(0, |w| w.lender_addr),
                    window_size: w.map_or(0, |w| w.size),
                    window_iova: w.map_or(0, |w| w.iova_base),
                    bars: l.bars.clone(),
                    live_dma_maps: l.maps.len() + l.resource_maps.len(),
                    irq_vectors: self.kernels[l.borrower as usize].irqs.of(l.dev),
                }
            })
            .collect()
    }

    /// The P2P address pairs stored for a borrowed source device.
    pub fn p2p_table(&self, device: &str) -> Vec<P2pInfo> {
        let Ok(func) = self.fabric.func_id(device) else { return Vec::new() };
        let Some(l) = self.lending.lends.get(&func) else { return Vec::new() };
        l.p2p
            .iter()
            .map(|(&(t, bar), e)| P2pInfo {
                target: self.fabric.func(t).name.clone(),
                bar,
                borrower_addr: e.borrower_addr,
                lender_addr: e.lender_addr,
                size: e.size,
            })
            .collect()
    }

    /// Turn on interrupt remapping in `host` (`devlend_fabric::intremap`): from then on every
    /// vector `request_irq` hands out gets a remapping entry that validates the device's
    /// requester ID (for a borrowed device, its far-side ID through the NTB), and its table
    /// entry a remappable-format address; a device's write to another vector's entry, or in
    /// compatibility format, is blocked and recorded. Refused while the host holds vectors
    /// (they were programmed in compatibility format).
    pub fn enable_interrupt_remapping(&mut self, host: impl HostRef) -> HResult<()> {
        let h = host.resolve(self)?;
        let k = &self.kernels[h as usize];
        if k.irqs.iter().next().is_some() {
            return Err(InUse::VectorsHeld { host: k.name.clone() }.into());
        }
        Ok(self.fabric.intr_remap_enable(h)?)
    }

    /// Whether Device Lending holds nothing (no lend, window, LUT entry or mapping).
    pub fn lending_idle(&self) -> bool {
        self.lending.idle()
    }

    /// Undo steps the fabric refused (always empty unless this crate has a bug, or a returned
    /// device's BAR no longer decodes when the lender masks its MSI-X table).
    pub fn anomalies(&self) -> &[String] {
        &self.lending.anomalies
    }
}
