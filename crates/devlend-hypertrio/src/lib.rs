//! Hyper-tenant I/O address translation (seed 002: HyperTRIO, ISCA 2020) on the devlend VT-d
//! model: a shared SR-IOV NIC with up to 1024 VFs, three gIOVA translations per packet at line
//! rate, and the structures that decide whether translation or the link limits bandwidth.
//!
//! What comes from where in 002:
//! - `tables`: the two-dimensional walk of §II-A / Fig 2 (24 accesses for 4-level nested,
//!   Table II) on devlend-fabric's page tables (guest first-level and host second-level).
//! - `cache`: set-associative DevTLB, IOTLB, context cache, L2/L3 page-structure caches with
//!   partitioning (§III P-DevTLB, Table IV) and LRU / LFU (4-bit, halving, §V-C) / oracle (§V-C);
//!   Table IV's structures run as caches whose type fixes their policy and ways (`cache::Shape`,
//!   chosen once per run by `sim::run_fitting`), any other configuration with run-time values.
//! - `sim`: the performance model of §IV-C with the PTB, hit under miss, drop-and-retry and the
//!   prefetch unit of §III; latencies of Table II.
//! - `workload`: the tenant generator of §IV-D with Table III / §V-C profiles and the RR/RAND
//!   interleavings of §IV-B / §V-A, streamed.
//! - `point`: one simulation point from names (a Table IV column with overrides, a workload). The
//!   paper's grids (H1-H4) are procedures of the experiments, in devlend-experiments.
//! - `qemu`: QEMU intel-iommu trace-log parser (workload (b), §IV-A); `construct`: the Trace
//!   Constructor of §IV-B (logs of up to 24 tenants each into one hyper-trace, RR/RAND with a
//!   burst); `trace`: the streamed binary `.dlt` format; `replay`: `sim` on a `.dlt` trace or on
//!   logs constructed on the fly.
//! - `divisor`: division by a run constant (packet slot, tenant count) without a hardware divide.
//! - `examples/tps.rs`: translations simulated per second on one core.
//! - Parameters: `params/hardware.toml [hypertrio]` (`params`).

pub mod cache;
pub mod construct;
mod divisor;
pub mod error;
pub mod params;
pub mod point;
pub mod qemu;
pub mod replay;
pub mod sim;
pub mod tables;
pub mod trace;
pub mod workload;

pub use cache::Policy;
pub use error::{HtError, HtResult};
pub use params::{params, Config, Profile};
pub use point::run_point;
pub use sim::{simulate, Stats};
pub use workload::{Order, WorkloadSpec};
