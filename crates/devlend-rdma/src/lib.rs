//! # devlend-rdma: RDMA through a PCIe NTB (seed 003)
//!
//! Two hosts joined by the NT port of a PLX PEX8749 exchange data as 003's testbed does. The
//! hardware is modelled in `devlend-devices` with the other device models: the switch's DMA
//! engine (`devlend_devices::plx_dma`: block and scatter-gather descriptors {src, dst, byte
//! count}, descriptor fetch over PCIe, one channel by default and more configurable, MSI-X
//! completion per channel, 003 §3-4) and the NT port's doorbell and scratchpad registers
//! (`devlend_devices::plx_ntregs`, PLX register map). This crate is the software on them:
//! - [`driver`]: the driver's DMA call as a thread on any machine;
//! - [`node`]: physically contiguous page-locked buffers, the scratchpad handshake, the memory
//!   window (`mw_set_trans`) and doorbells (003 §2.2, §3, Figs 2-6);
//! - [`pio`]: CPU stores through the NTB BAR, uncached or write-combined, as a mechanism (Fig 8);
//! - [`shmem`]: an OpenSHMEM-style put/get library (bytes, int, double; blocking and `*_nbi` with
//!   `quiet`) choosing PIO, block DMA or SG DMA (003 §3, Fig 5-6), each call's operations, or all
//!   queued ones together at `quiet`, run on the session's machine (`ops`);
//! - [`session`]: [`Shmem`], the fabric inside the one machine every call of a session runs on,
//!   one call after another on the same clock, with the DMA engine and NT registers added once;
//!
//! Tools and figures are not here: `ntb_perf` as a workload on a shared machine is
//! devlend-workloads'; the measurements of Figs 8-9, the Gen3/Gen4 extension and the ntb_perf and
//! ntb_pingpong figures of issue 6 on the 003 testbed are devlend-experiments' `rdma`.
//!
//! Constants: `params/hardware.toml` tables `[cpu_store]`, `[ntb_dma]`, `[rdma_sw]` and the
//! `pex8749-dma` device profile, each with its source or marked assumed.

pub mod driver;
pub mod error;
pub mod node;
mod ops;
pub mod params;
pub mod pio;
pub mod session;
pub mod shmem;

pub use error::{RResult, RdmaError};
pub use session::Shmem;
pub use shmem::{handshake, Method, Pair, Pe, Timing};

#[cfg(test)]
mod engine_tests;
