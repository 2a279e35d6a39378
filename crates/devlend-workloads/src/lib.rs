//! # devlend-workloads: several workloads at once on one clock
//!
//! The workloads layer of devlend, above the devices and their drivers (`devlend-devices`,
//! `devlend-drivers`), RDMA (`devlend-rdma`) and host software (`devlend-host`): a [`Scenario`] is one `Machine<Cluster>` on which workloads start
//! at given times — timing-only DMA streams, bandwidthTest-style GPU copies driven by the real GPU
//! driver on the GPU actor, GPU ping-pongs of the ping-pong kernel (`gpu_kernel`), fio-style NVMe
//! jobs driven by the real NVMe driver on the controller (the copies and the fio jobs written
//! against the service, `devlend_drivers::service`, so any registered type that serves copies or
//! block I/O runs them), Linux's `ntb_perf` between two
//! hosts joined by an NTB (CPU stores or the DMA engine's channels), and the hyper-tenant NIC
//! of 002 whose packets and translation requests leave it at the rates of the HyperTRIO
//! pipeline fed with the round trip they see on this run (`nic`) — and run together, sharing
//! links, credits and tags. A run gives each workload's result (start, end, bytes, bandwidth;
//! IOPS and latency percentiles for fio; round-trip percentiles for a ping-pong; per-thread
//! throughput for ntb_perf) and each loaded link direction's bytes, busy time, queueing and
//! credit stalls. Devices in another host are borrowed through Device Lending. A runner may
//! also be a VM of the topology's `vms` section ([`Scenario::with_vms`]): its guest kernel drives
//! the devices its description gives it (VFIO or the mediated path, `devlend_vm::describe`), its
//! interrupts on the VM path of `devlend_vm::irq_clock`.
//!
//! What lives here: workloads and tools a user runs on any topology, on a machine shared with
//! other workloads. A paper figure's procedure (its named testbed, its sizes, a shortcut valid
//! only on an idle fabric) lives in devlend-experiments, which may use this crate, never the
//! reverse.
//!
//! ```no_run
//! # use devlend_workloads::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let json = "";
//! let mut s = Scenario::new(devlend_host::Cluster::from_json(json)?);
//! s.add_gpu_copy("copy", "borrower", "gpu0", Dir::HtoD, 16 << 20, 0)?;
//! s.add_stream("load", "gpu2", 0x3800_0000_0000, 16 << 20, Access::Write, 0)?;
//! let report = s.run()?;
//! for w in &report.workloads { println!("{} {:?}", w.name, w.bandwidth()); }
//! # Ok(()) }
//! ```

mod attach;
mod error;
mod fault;
mod fio;
pub mod fio_job;
mod gpu;
mod lend_at;
mod nic;
mod ntb_perf;
mod outcome;
mod pingpong;
mod scenario;
mod stats;

pub use devlend_drivers::service::copy::Dir;
pub use devlend_engine::machine::LinkStat;
pub use devlend_wire::Access;
pub use error::{BadSpec, FailCause, Missing, SetupCause, Unreached, WResult, WorkloadError};
pub use fault::FaultEntry;
pub use fio::{FioSpec, FIO_BS};
pub use fio_job::{FioError, FioResult, Rw};
pub use nic::{NicEpoch, NicFault, NicResult, NicSpec};
pub use ntb_perf::{NtbPerfResult, NtbPerfSpec, DMA_PROFILE, MAX_THREADS};
pub use outcome::Outcome;
pub use pingpong::{RoundTrips, Via};
pub use scenario::{Kind, Report, Scenario, WorkloadResult};
pub use stats::engine_params;
