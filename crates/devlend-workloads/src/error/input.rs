//! What a workload was given that the runner cannot use, as values: a name that is not there
//! ([`Missing`]), a device or address it cannot reach ([`Unreached`]), a description it cannot
//! run ([`BadSpec`]). Each displays as the runner's message always read.

use crate::fio_job::FioError;
use devlend_engine::machine::Unrunnable;
use devlend_fabric::report::FailureReport;
use devlend_fabric::FabricError;
use devlend_host::HostError;
use devlend_hypertrio::error::HtError;
use devlend_rdma::RdmaError;
use std::error::Error;
use std::fmt;

/// Why a workload's host, device, requester, fault target or lend is not there.
#[derive(Debug)]
pub enum Missing {
    /// The fabric knows no such name.
    Fabric(FabricError),
    /// The host layer refused the name (a device, a fault target).
    Host(HostError),
    /// No host of that name (`error`), nor a VM among the scenario's `vms`.
    NorVm { error: FabricError, vms: Vec<String> },
    /// Function `device` is not in host `host`.
    NotInHost { device: String, host: String },
    /// Host `host` has no function with device profile `profile`.
    NoProfile { host: String, profile: &'static str },
    /// `device` is not lent (`by` None), or host `by` does not hold it borrowed.
    NotLent { device: String, by: Option<String> },
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::Fabric(e) => write!(f, "{e}"),
            Missing::Host(e) => write!(f, "{e}"),
            Missing::NorVm { error, vms } => write!(f, "{error} (nor a VM: {})", vms.join(", ")),
            Missing::NotInHost { device, host } => write!(f, "{device} is not in host {host}"),
            Missing::NoProfile { host, profile } => write!(f, "host {host} has no function with the {profile} profile"),
            Missing::NotLent { device, by: None } => write!(f, "cannot return {device}: it is not lent"),
            Missing::NotLent { device, by: Some(b) } => write!(f, "cannot return {device}: {b} does not hold it borrowed"),
        }
    }
}

impl Missing {
    pub(super) fn error(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Missing::Fabric(e) | Missing::NorVm { error: e, .. } => Some(e),
            Missing::Host(e) => Some(e),
            _ => None,
        }
    }
}

/// What a workload cannot reach from its runner.
#[derive(Debug)]
pub enum Unreached {
    /// Device `device`: the lending agents found no way to it (no NTB between the hosts, a DMA
    /// window larger than the NTB maps).
    Device { device: String, error: HostError },
    /// A stream's address `addr`: `failure` is where the fabric refused it.
    Addr { addr: u64, failure: Box<FailureReport> },
}

impl fmt::Display for Unreached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreached::Device { device, error } => write!(f, "{device} cannot be reached: {error}"),
            Unreached::Addr { addr, failure } => write!(f, "{addr:#x} cannot be reached: {failure}"),
        }
    }
}

impl Unreached {
    pub(super) fn error(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Unreached::Device { error, .. } => Some(error),
            Unreached::Addr { failure, .. } => Some(failure.as_ref()),
        }
    }
}

/// A workload description the runner cannot run: what was given, and what is accepted.
#[derive(Debug)]
pub enum BadSpec {
    /// A stream the machine cannot run.
    Stream(Unrunnable),
    /// A GPU copy of `len` bytes, where the GPU holds 1 to `mem_size` bytes.
    CopySize { len: u64, mem_size: u64 },
    /// A workload needing `need` bytes of simulated memory where the run's workloads hold `held`
    /// already, over the budget of `budget` bytes (`limits.memory_bytes`).
    MemoryBudget { need: u64, held: u64, budget: u64 },
    /// A GPU copy of `len` bytes through the `window`-byte DMA window of borrowed `device`.
    DmaWindow { len: u64, window: u64, device: String },
    /// A ping-pong of zero round trips.
    NoRounds,
    /// A ping-pong with GPU `gpu` at both ends.
    SameGpu { gpu: String },
    /// A fio block size other than the 4 KiB the job issues.
    BlockSize { bs: u64 },
    /// A fio job (or its `rw`) the fio model refuses.
    Fio(FioError),
    /// `numjobs` fio jobs, where the controller has `queues` I/O queues.
    Jobs { numjobs: u16, queues: usize },
    /// An fio `iodepth` deeper than a queue's `max` commands.
    IoDepth { iodepth: u32, max: u32 },
    /// `threads` ntb_perf threads, outside 1 to `max`.
    Threads { threads: u32, max: u32 },
    /// ntb_perf's chunk and total orders out of their ranges.
    Orders { chunk_order: u32, total_order: u32 },
    /// An ntb_perf chunk larger than one DMA descriptor moves.
    DescriptorChunk { chunk_order: u32 },
    /// ntb_perf's `max_mw_size` of 0.
    NoWindow,
    /// An ntb_perf peer `peer` with its IOMMU on.
    PeerIommu { peer: String },
    /// ntb_perf's threads, refused by the DMA engine (one channel each).
    DmaThreads(RdmaError),
    /// An ntb_perf chunk larger than each of `threads` threads' part of a `window`-byte window.
    ChunkOverPart { chunk_order: u32, window: u64, threads: u32 },
    /// A NIC run of zero duration or epoch.
    NicTimes,
    /// The NIC's pipeline configuration or workload profile, refused by the HyperTRIO model.
    Nic(HtError),
    /// An unknown fault kind.
    FaultKind(HostError),
    /// A GPU copy direction other than htod or dtoh (`given`).
    Direction { given: String },
    /// A ping-pong path other than peer or ram (`given`).
    Via { given: String },
}

impl fmt::Display for BadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use BadSpec::*;
        match self {
            Stream(e) => write!(f, "{e}"),
            CopySize { len, mem_size } => write!(f, "a copy of {len} bytes (the GPU holds 1 to {mem_size} bytes)"),
            MemoryBudget { need, held, budget } => write!(
                f,
                "needs {need} bytes of simulated memory{}: over the budget of {budget} bytes (limits.memory_bytes; raise it with --set limits.memory_bytes=...)",
                if *held > 0 { format!(" beside the {held} the run's earlier workloads hold") } else { String::new() }
            ),
            DmaWindow { len, window, device } => write!(
                f,
                "a copy of {len} bytes: borrowed {device}'s DMA window holds {window} bytes (the runner's buffer is mapped whole into it; borrow with a larger dma_window or copy less)"
            ),
            NoRounds => write!(f, "rounds: expected at least one round trip"),
            SameGpu { gpu } => write!(f, "gpus: {gpu} plays both ends; a ping-pong takes two GPUs"),
            BlockSize { bs } => write!(f, "bs {bs} is not modelled: the fio job issues 4 KiB commands (bs 4096)"),
            Fio(e) => write!(f, "{e}"),
            Jobs { numjobs, queues } => write!(f, "{numjobs} jobs: the controller has {queues} I/O queues, one per job"),
            IoDepth { iodepth, max } => write!(f, "iodepth {iodepth}: a queue holds at most {max} commands"),
            Threads { threads, max } => write!(f, "threads: {threads} (expected 1 to {max})"),
            Orders { chunk_order, total_order } => {
                write!(f, "chunk_order {chunk_order} and total_order {total_order}: expected chunk_order <= 32 and chunk_order <= total_order <= 40")
            }
            DescriptorChunk { chunk_order } => write!(f, "chunk_order: {chunk_order} (a DMA descriptor moves at most {} bytes)", u32::MAX),
            NoWindow => write!(f, "max_mw_size: expected at least one chunk"),
            PeerIommu { peer } => {
                write!(f, "peer: {peer} has its IOMMU on; ntb_perf here maps its inbound buffer by physical address, so it needs a peer with the IOMMU off")
            }
            DmaThreads(e) => write!(f, "threads: {e}"),
            ChunkOverPart { chunk_order, window, threads } => {
                let chunk = 1u64 << chunk_order;
                write!(
                    f,
                    "chunk_order: {chunk_order} ({chunk} bytes; the window of {window} bytes gives each of {threads} threads {})",
                    window / *threads as u64
                )
            }
            NicTimes => write!(f, "the NIC's duration and epoch must be longer than 0"),
            Nic(e) => write!(f, "{e}"),
            FaultKind(e) => write!(f, "{e}"),
            Direction { given } => write!(f, "direction {given:?}: expected htod or dtoh"),
            Via { given } => write!(f, "via {given:?}: expected peer or ram"),
        }
    }
}

impl BadSpec {
    pub(super) fn error(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            BadSpec::Fio(e) => Some(e),
            BadSpec::DmaThreads(e) => Some(e),
            BadSpec::Nic(e) => Some(e),
            BadSpec::FaultKind(e) => Some(e),
            _ => None,
        }
    }
}
