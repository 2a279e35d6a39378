//! The ntb_perf figure of issue 6 on the 003 testbed: throughput of writes into the peer's memory
//! window with CPU copies or DMA, with the semantics of Linux's drivers/ntb/test/ntb_perf, between the two ends of any NTB. (The
//! tool as a workload on a machine shared with other workloads is devlend-workloads' `ntb_perf`;
//! this procedure runs it alone.)
//!
//! What the Linux tool does, and devlend with it: each of `threads` workers owns an equal part of
//! the peer's memory window and copies `chunk` bytes at a time from one local source buffer into
//! it, chunk after chunk, wrapping to the start of its part when it is full, until it has copied
//! `total` bytes (`total / chunk` chunks). With CPU copies the window is mapped write-combining
//! (`ioremap_wc`) and each chunk is a `memcpy_toio` ([`crate::pio`], WC); with DMA each worker
//! holds its own DMA channel (none left: the run fails) and each chunk is one memcpy descriptor,
//! all submitted before waiting for the last completion. The result is bytes copied over elapsed
//! microseconds, i.e. MB/s, per worker and for all of them.
//!
//! devlend's timing: every chunk of every worker runs on the session's machine (bytes land in the peer,
//! descriptors go through the channels), the workers at the same time, as threads (CPU copies)
//! or DMA channels sharing the links as their TLPs do. DMA descriptors go to the channel as
//! scatter-gather chains of at most its ring slice.

use devlend_devices::plx_dma::Desc;
use devlend_fabric::route::Requester;
use devlend_rdma::driver;
use devlend_rdma::error::ToolError;
use devlend_rdma::pio::{spawn_copy, Mapping};
use devlend_rdma::shmem::{ring_slice, Pe};
use devlend_rdma::{RResult, RdmaError, Shmem};

/// The Linux tool's thread limit.
pub const MAX_THREADS: u32 = 32;

#[derive(Clone, Debug)]
pub struct Perf {
    /// (bytes copied, ps) per worker.
    pub threads: Vec<(u64, u64)>,
    pub copied: u64,
    pub total_ps: u64,
    /// The busiest link direction's time serialising TLPs, over all passes, in ps.
    pub link_ps: u64,
}

impl Perf {
    /// Bytes per microsecond, as ntb_perf prints its "MBytes/s".
    pub fn mbytes_per_s(&self) -> f64 {
        self.copied as f64 / (self.total_ps as f64 * 1e-6)
    }
}

/// Run ntb_perf from `pe` into the peer's window.
pub fn run(s: &mut Shmem, pe: &mut Pe, chunk: u64, total: u64, use_dma: bool, threads: u32) -> RResult<Perf> {
    if threads == 0 || threads > MAX_THREADS {
        return Err(ToolError::Threads { threads, max: MAX_THREADS }.into());
    }
    let window = pe.node.window_size();
    if window == 0 {
        return Err(RdmaError::NotPublished { addr: 0, len: chunk, published: None });
    }
    let part = window / threads as u64;
    if chunk == 0 || chunk > part {
        return Err(ToolError::Chunk { chunk, part, window, threads }.into());
    }
    if total < chunk {
        return Err(ToolError::Total { total, chunk }.into());
    }
    pe.node.check_link(&s.fabric())?;
    let n = total / chunk;
    let wrap = part / chunk;
    let cpu = Requester::Cpu(pe.node.host);
    // One source buffer per worker, at the start of its part of the local buffer.
    let src: Vec<u8> = (0..chunk).map(|i| (i * 31 + 7) as u8).collect();
    for t in 0..threads as u64 {
        s.fabric().write(cpu, pe.node.buf.phys + t * part, &src);
    }
    let run = if use_dma {
        let channels = pe.dma.as_ref().map_or(0, |d| d.engine.borrow().channel_count());
        if threads as usize > channels {
            return Err(ToolError::TooFewChannels { threads, channels, host: pe.node.host }.into());
        }
        if chunk > u32::MAX as u64 {
            return Err(ToolError::ChunkOverDescriptor { chunk, max: u32::MAX as u64 }.into());
        }
        dma_run(s, pe, chunk, part, threads, n)?
    } else {
        cpu_run(s, pe, &src, part, threads, n)?
    };
    // The peer's memory holds the source in every chunk a worker wrote.
    for t in 0..threads as u64 {
        let peer = pe.node.peer.expect("window_size > 0").phys + t * part;
        for j in 0..wrap.min(n) {
            if s.fabric().read(Requester::Cpu(pe.node.host), pe.node.window.0 + t * part + j * chunk, chunk as usize).0 != src {
                return Err(ToolError::ChunkNotLanded { thread: t, chunk: j, addr: peer + j * chunk }.into());
            }
        }
    }
    Ok(Perf {
        threads: run.workers.iter().map(|&ps| (n * chunk, ps)).collect(),
        copied: n * chunk * threads as u64,
        total_ps: run.end_ps,
        link_ps: run.link_ps,
    })
}

/// Every worker's chunks on one machine.
struct Run {
    /// Each worker's time, in ps.
    workers: Vec<u64>,
    /// When the last byte had landed and every worker was done, in ps.
    end_ps: u64,
    /// The busiest link direction's time serialising TLPs, in ps.
    link_ps: u64,
}

/// `n` chunks per worker with CPU stores into the WC-mapped window, the workers as threads.
fn cpu_run(s: &mut Shmem, pe: &Pe, src: &[u8], part: u64, threads: u32, n: u64) -> RResult<Run> {
    let (host, window, wrap) = (pe.node.host, pe.node.window.0, part / src.len() as u64);
    let start = s.start();
    let m = s.machine();
    let ids: Vec<Vec<usize>> = (0..threads as u64)
        .map(|t| spawn_copy(m, &format!("ntb_perf worker {t}"), host, window + t * part, src, n, wrap, Mapping::WriteCombining, start.at))
        .collect();
    s.run()?;
    let workers = ids.iter().map(|lanes| driver::thread_ps(s.machine(), lanes).into_iter().max().unwrap_or(0)).collect();
    Ok(Run { workers, end_ps: s.now() - start.at, link_ps: s.busiest_since(&start) })
}

/// `n` chunks per worker, each a DMA descriptor on the worker's channel, wrapping over its part.
fn dma_run(s: &mut Shmem, pe: &mut Pe, chunk: u64, part: u64, threads: u32, n: u64) -> RResult<Run> {
    let channels = pe.dma.as_ref().expect("checked").engine.borrow().channel_count();
    let cap = (ring_slice(pe.node.ring, channels) / devlend_devices::plx_dma::params::ntb_dma().descriptor_bytes) as usize;
    let wrap = part / chunk;
    let queues: Vec<Vec<Vec<Desc>>> = (0..threads as u64)
        .map(|t| {
            let (src, dst) = (pe.node.buf.phys + t * part, pe.node.window.0 + t * part);
            let descs: Vec<Desc> = (0..n).map(|j| Desc { src, dst: dst + (j % wrap) * chunk, count: chunk as u32 }).collect();
            descs.chunks(cap).map(<[Desc]>::to_vec).collect()
        })
        .collect();
    let r = pe.dma_concurrent(s, &queues, true)?;
    Ok(Run { end_ps: r.total_ps, workers: r.channel_ps, link_ps: r.link_ps })
}
