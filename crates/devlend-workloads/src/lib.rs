//! # devlend-workloads: several workloads at once on one clock
//!
//! Layer 5 of devlend, above the devices (`devlend-devices`), RDMA (`devlend-rdma`) and host
//! software (`devlend-host`): a [`Scenario`] is one `Machine<Cluster>` on which workloads start
//! at given times — timing-only DMA streams, bandwidthTest-style GPU copies driven by the real GPU
//! driver on the GPU actor, fio-style NVMe jobs driven by the real NVMe driver on the controller —
//! and run together, sharing links, credits and tags. A run gives each workload's result (start,
//! end, bytes, bandwidth; IOPS and latency percentiles for fio) and each loaded link direction's
//! bytes, busy time, queueing and credit stalls. Devices in another host are borrowed through
//! Device Lending, as the paper workloads do.
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
//!
//! `ntb_perf` is not offered yet: the RDMA driver (`devlend-rdma`) runs on a `Machine<Fabric>`
//! of its own per operation, not on a shared `Machine<Cluster>`.

mod attach;
mod error;
mod fio;
mod gpu;
mod scenario;
mod stats;

pub use devlend_devices::fio::{FioResult, Rw};
pub use devlend_devices::gpu_bench::Dir;
pub use devlend_wire::Access;
pub use error::{WResult, WorkloadError};
pub use fio::{FioSpec, FIO_BS};
pub use scenario::{Kind, Report, Scenario, WorkloadResult};
pub use devlend_engine::machine::LinkStat;
pub use stats::engine_params;
