//! Device Lending (000 §4, §6): the lender and borrower agents and the fabric resources they hold.
//! The borrower's side of the DMA API (a driver's buffer mapped into the lender's DMA window) is
//! with the rest of the DMA API in `crate::timed`; the lender's opening of that window is here
//! (`lender`), as are peer-to-peer (`p2p`) and MSI (`msi`) mappings.
//!
//! Every piece of programming is a *held resource* (`Held`) with exactly one way to undo it.
//! Shared pieces are reference counted: the IOMMU domain of an NTB adapter, the DMA window a
//! lender opens into a borrower (shared by all devices lent over that NTB pair), a BAR mapped
//! through a window, a requester-ID LUT entry. A borrow builds its list step by step; if a step
//! fails the list is released in reverse, and returning a device releases the same list. So a
//! failed borrow and a returned device leave the fabric exactly as it was (apart from IOMMU
//! domains, which the IOMMU API cannot free: they stay allocated, empty and detached).
//!
//! Policies (the papers leave them open; each is what the code does):
//! - *Domains.* In a host whose IOMMU is on, all inbound traffic of an NTB adapter (its DMA
//!   aliases) translates through one domain `dl:ADAPTER`: on a borrower it holds the IOVAs the
//!   DMA window lands on (000 §5: "all devices borrowed by the same physical host would be placed
//!   in the same IOMMU domain"); on a lender it holds one-to-one mappings of the lent BARs, so the
//!   borrower's CPU accesses, which the lender's switches redirect to the root, reach them.
//!   A limitation that follows: devices lent to one borrower over one NTB pair share the DMA
//!   window and that borrower domain, so with the lender's IOMMU off one can write into buffers
//!   mapped for another, unrecorded. `BorrowOptions::device_domain` closes it: the device's
//!   far-side requester ID gets a borrower domain of its own (`Held::DeviceDomain`).
//! - *Borrower IOMMU.* Required: without it the window would have to map all of the borrower's
//!   RAM, "not practical" (000 §8.1); borrowing onto a host with its IOMMU off is refused.
//! - *Rem-IOMMU* (000 §7.1): when the lender's IOMMU is on, the addresses handed to the driver
//!   are still lender-physical (NTB window addresses, peer BARs); the lender maps each of them
//!   one-to-one, page by page and only while the driver's mapping lives, in the device's own
//!   domain (`dma:DEVICE`). The device's DMA then climbs to the lender's root, is checked by the
//!   IOMMU and turns back down to the NTB: the data path the paper measures.
//! - *MSI* ("The lender is responsible for setting up reverse mappings for DMA and MSI", 000 §4):
//!   the borrower's MSI page is mapped through the lender's NTB when the borrower's driver first
//!   requests an interrupt for a device lent over that NTB pair, straight onto the MSI page (the
//!   borrower's root takes MSI before DMA remapping); see `msi`.
//! - *IOVAs* are allocated from 4 GiB up to the 64-bit MMIO base, so they never collide with the
//!   one-to-one mappings of BARs and windows (see `kernel::iova_space`).

pub(crate) mod lender;
pub(crate) mod msi;
pub(crate) mod owned;
pub(crate) mod p2p;
mod resources;
pub(crate) mod windows;

use crate::alloc::RangeAlloc;
use crate::kernel::{BarView, DevId};
use devlend_fabric::iommu::DomainId;
use devlend_fabric::model::{FuncId, HostId};
use devlend_wire::Bdf;
use std::collections::BTreeMap;
use windows::{WinMap, Windows};

/// The device's own IOMMU domain in its lender, when the lender's IOMMU is on (Rem-IOMMU).
pub(crate) type DevDomain = Option<(HostId, DomainId)>;

/// One piece of fabric programming, undone by `LendState::release`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    /// A reference to the IOMMU domain of an NTB adapter (attached while referenced).
    AdapterDomain(u32),
    /// An IOVA range from an adapter domain's allocator.
    DomainIova { ntb: u32, iova: u64 },
    /// A reference to the DMA window lender adapter `la` opens into borrower adapter `bb`.
    DmaWindow(u32, u32),
    /// A range inside that DMA window.
    WindowIova { la: u32, bb: u32, iova: u64 },
    /// A reference to a requester-ID LUT entry of an adapter.
    Rid(u32, Bdf),
    /// A reference to a BAR (function, index) mapped through the windows of adapter `out`.
    BarWin(u32, FuncId, u8),
    /// A reference to the borrower's MSI page mapped through the windows of lender adapter `la`
    /// into borrower adapter `bb` (see `msi`).
    MsiWin(u32, u32),
    /// A window mapping.
    Win(WinMap),
    /// A far-side requester ID attached to a device's own borrower domain; released by pointing
    /// it back at the adapter domain `shared`.
    DeviceDomain { host: HostId, rid: Bdf, shared: DomainId },
    /// An IOMMU mapping.
    IommuMap { host: HostId, domain: DomainId, iova: u64, size: u64 },
}

pub(crate) struct AdapterDomain {
    host: HostId,
    pub domain: DomainId,
    refs: u32,
    pub iova: RangeAlloc,
}

pub(crate) struct DmaWindow {
    /// Where the lender's devices reach the window (lender-physical).
    pub lender_addr: u64,
    /// Where it lands in the borrower (IOVAs of the borrower adapter's domain).
    pub iova_base: u64,
    pub size: u64,
    pub domain: DomainId,
    pub iova: RangeAlloc,
    refs: u32,
    inner: Vec<Held>,
}

struct Shared {
    addr: u64,
    refs: u32,
    inner: Vec<Held>,
}

struct RidRef {
    refs: u32,
    /// Whether we added the entry (entry 0, the root complex, was there from probe on).
    owned: bool,
}

/// A driver's mapping of a buffer for a borrowed device.
pub(crate) struct BorrowedMap {
    pub dma: u64,
    pub size: u64,
    pub held: Vec<Held>,
}

/// What the borrower stores for a borrowed source and a target BAR (000 §6).
pub(crate) struct P2pEntry {
    pub borrower_addr: u64,
    pub lender_addr: u64,
    pub size: u64,
    held: Vec<Held>,
}

/// A borrowed device's way to its borrower's MSI page, while its driver holds interrupt vectors.
pub(crate) struct LendMsi {
    /// The lender-side address of the borrower's MSI page (what the MSI-X table entries hold).
    pub addr: u64,
    /// Vectors using it.
    pub users: u32,
    held: Vec<Held>,
}

/// A local device's mapping of a borrowed device's BAR: its requester ID crosses the NTB.
pub(crate) struct LocalP2p {
    pub target: FuncId,
    held: Vec<Held>,
}

pub(crate) struct Lend {
    pub lender: HostId,
    pub borrower: HostId,
    /// The lender's adapter towards the borrower, and the borrower's adapter.
    pub la: u32,
    pub bb: u32,
    /// The borrower's handle of the hot-added device.
    pub dev: DevId,
    /// The device's own domain in the lender, when the lender's IOMMU is on.
    pub dev_domain: DevDomain,
    /// The device's own domain on the borrower (`BorrowOptions::device_domain`), else its
    /// driver's mappings go to the borrower adapter's domain.
    pub own_domain: Option<DomainId>,
    pub bars: Vec<BarView>,
    held: Vec<Held>,
    pub maps: Vec<BorrowedMap>,
    pub p2p: BTreeMap<(FuncId, u8), P2pEntry>,
    /// The driver's resource mappings: (bus address, size).
    pub resource_maps: Vec<(u64, u64)>,
    /// The reverse mapping for MSI, while the borrower's driver holds interrupt vectors.
    pub msi: Option<LendMsi>,
}

#[derive(Default)]
pub(crate) struct LendState {
    pub lends: BTreeMap<FuncId, Lend>,
    pub domains: BTreeMap<u32, AdapterDomain>,
    pub dma_windows: BTreeMap<(u32, u32), DmaWindow>,
    bar_wins: BTreeMap<(u32, FuncId, u8), Shared>,
    msi_wins: BTreeMap<(u32, u32), Shared>,
    rids: BTreeMap<(u32, Bdf), RidRef>,
    pub windows: Windows,
    pub local_p2p: BTreeMap<(FuncId, u64), LocalP2p>,
    /// Undo steps that the fabric refused: always empty unless this crate has a bug.
    pub anomalies: Vec<String>,
}

/// Run `step`, which pushes what it holds onto `held`; if it fails, release that in reverse.
macro_rules! atomically {
    ($st:expr, $f:expr, $held:ident, $step:expr) => {{
        let mut $held = Vec::new();
        match $step {
            Ok(v) => Ok((v, $held)),
            Err(e) => {
                $st.release_all($f, $held);
                Err(e)
            }
        }
    }};
}
pub(crate) use atomically;

pub(crate) use crate::timed::map_held;
