//! # devlend-xenib: InfiniBand in Xen with device-domain bypass (seed 004, Xen-IB)
//!
//! What is taken from which part of 004 (Huang, Liu, Abali, Panda, OSU-CISRC-10/05-TR63):
//! - [`xen`]: domains, grant-style shared pages, event channels, the device channel (request ring on
//!   a shared page + event channel, 004 §2.1, §3.1) whose one-way latency is Fig 9's "at least
//!   10 us"; the back-end daemon in the device domain and its validation (004 §3.1-3.2).
//! - [`hca`]: the HCA of 004 §2.2 (QPs of WQEs, CQs, UAR doorbell pages, the key-indexed TPT,
//!   registration = pinning + TPT entries, lkey/rkey), RDMA write and send/receive across the
//!   back-to-back 4X link of §4.1, completion events; on the PCI-X bus of the MHXL-CF128-T.
//! - [`ops`]: the native driver's operations (Gen2 mthca), run by native Linux, the device domain,
//!   or the back-end for a guest.
//! - [`verbs`]: the Gen2-style verbs API and its three drivers: native, basic split (§3.1-3.2, with
//!   CQE buffering) and device-domain bypass (§3.3: UAR mapped into the guest, two-stage QP/CQ
//!   creation, registration validated by the back-end).
//! - [`bench`]: the micro-benchmarks of §4: kernel RDMA-write latency and throughput (X1, Figs 7-8),
//!   user-level latency and throughput for RDMA and send/receive (X2, Figs 10-11), blocking verbs
//!   (X3, Fig 12), registration time against pages (X4, Fig 13).
//! - [`cmp`]: beyond 004 (issue 7), the same RDMA-write benchmark with server A's HCA reached
//!   through the basic split driver, bypass, VFIO pass-through (devlend-vm) and Device Lending
//!   (devlend-host), the host interface timed by devlend-engine along each set-up's routes.
//!
//! Constants: `params/hardware.toml` `[xenib]` and the `mhxl-cf128-t` device profile. The
//! testbed: `python/devlend/topologies/xenib-back-to-back.yaml` ([`hca::TESTBED_JSON`]); for
//! [`cmp`] also `xenib-vfio.yaml` and `xenib-lending.yaml` (JSON copies in `tests/`).

pub mod bench;
pub mod cmp;
pub mod hca;
pub mod ops;
pub mod params;
pub mod types;
pub mod verbs;
pub mod xen;

pub use hca::World;
pub use types::*;
pub use verbs::{Basic, Bypass, Native, Verbs};
