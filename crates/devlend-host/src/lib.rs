//! # devlend-host: the host software of Device Lending
//!
//! The host-software layer of devlend, above the engine, the fabric and the wire (see the README's
//! architecture section). Each kernel has a functional interface (no timing; [`HostOs`]) and a
//! timed one for a thread on the engine's one clock ([`timed`]: [`ThreadOs`]):
//!
//! - [`kernel`]: a small kernel per host: the device tree (local functions after enumeration,
//!   hot-added borrowed ones), BAR addresses, a deterministic page allocator.
//! - [`os`]: [`HostOs`], the interface drivers are written against: PCI, memory, and the Linux
//!   DMA API (`dma_map_single`, `dma_map_sg`, `dma_alloc_coherent`, `dma_map_resource`, ...,
//!   in [`timed`], after `ThreadOs`). For a local device it maps through the host's IOMMU (one domain per device) or
//!   returns physical addresses ([`localdma`]); for a borrowed device the borrower agent
//!   intercepts it and maps the buffer into the lender's DMA window (there too: a borrowed
//!   device's mapping is followed in one file, down to the IOMMU mapping it holds for undo).
//!   Interrupts: MSI-X `request_irq`/`free_irq` and per-vector counts ([`irq`]); legacy INTx
//!   and the hooks the VM layer forwards interrupts with (`forward`).
//! - `lending`: the lender and borrower agents of seed 000 §4 (DMA window through the NTB,
//!   requester-ID LUT, BARs through window segments, borrower-side IOMMU mappings (those of a
//!   driver's buffers are in [`timed`]), hot-add, the borrower's MSI page mapped through the
//!   lender's NTB: "reverse mappings for DMA and MSI")
//!   and the multi-device peer-to-peer resolution of §6 (three cases), with the policies for the
//!   lender's IOMMU ("Rem-IOMMU", §7.1) written down in its module docs.
//! - [`cluster`]: [`Cluster`], which owns the fabric, the kernels and the agents: `borrow`,
//!   `return_device` (refused while the driver holds DMA mappings or vectors),
//!   `return_device_force` (surprise removal), inspection.
//! - [`pool`]: [`Pool`], the device pool with `smartio_tool`'s verbs (connect, add, available,
//!   unavailable, remove, borrow with a DMA window size, return, list, show) and fabric device IDs.
//!
//! All programming goes through the fabric's Linux-named interfaces (NTB API, IOMMU API, PCI
//! config space); every error is a [`HostError`] value with a clear message.

pub mod alloc;
pub mod api;
pub mod cluster;
pub mod error;
pub mod fault;
mod forward;
pub mod hygiene;
pub mod irq;
pub mod kernel;
pub mod leftover;
mod lending;
pub mod localdma;
pub mod os;
pub mod pool;
pub mod timed;

pub use api::Os;
pub use cluster::{BorrowOptions, Cluster, HostRef, LendInfo, P2pInfo, Teardown, Unreached};
pub use error::{
    BadAccess, BadDma, BadIrq, BadLend, BadVm, EptFault, HResult, HandleUse, HostError, InUse, InVm, InvalidRequest, Lent, LinkStep, Migration, MwState, MwUse,
    NoRoom, NoSuch, NtbUse, OutOf, Refusal, Unreachability,
};
pub use fault::{EndReason, EndedLend, FaultKind, FaultReport, Notice};
pub use hygiene::{Hygiene, Scrub, ScrubHow, HYGIENE_POLICIES};
pub use irq::{IntxLine, IrqDesc, IrqTable};
pub use kernel::{BarView, DevId, Kernel, Origin, PciDevice};
pub use leftover::Leftover;
pub use os::{DmaDir, HostOs};
pub use pool::{Pool, PoolEntry, PoolError};
pub use timed::{ThreadKernel, ThreadOs};
