//! `ntb_perf` as a workload: Linux's drivers/ntb/test/ntb_perf between two hosts joined by an
//! NTB, on the shared machine, with the tool's knobs (`use_dma`, `chunk_order`, `total_order`,
//! `max_mw_size`, and the thread count, each thread holding a DMA channel of its own with
//! `use_dma`).
//!
//! Set-up, as the tool does it (timeless, before the run): the NT adapters joining the runner to
//! the peer are found on the fabric; the peer allocates an inbound buffer (its RAM, the size of
//! the memory window or `max_mw_size`) and points the runner's last free direct memory window at
//! it; it publishes the buffer in the runner's scratchpads (devlend-rdma's handshake); the runner allocates its source buffer and,
//! with `use_dma`, programs the DMA engine of its host (a function with the `pex8749-dma` profile,
//! or the one named) with one channel per thread and lets it through its NTB's requester-ID LUT.
//! The run: from the workload's time, each thread copies `2^total_order` bytes in chunks of
//! `2^chunk_order` into its equal part of the window, wrapping to the part's start, with CPU
//! stores into the write-combining mapped window (devlend-rdma's `pio`) or with DMA descriptors on
//! its channel (SG chains of the channel's ring slice, devlend-rdma's driver). Every chunk is
//! run on the machine, so the copy contends with the other workloads; the bytes are checked after.
//!
//! The host layer keeps no reservation of NTB windows for other users: a device lent after this
//! workload was added could be given the same window if every other one is taken.

use crate::error::{BadSpec, FailCause, Missing, SetupCause, WResult, WorkloadError};
use devlend_devices::plx_dma::Desc;
use devlend_engine::machine::Machine;
use devlend_engine::queue::Ps;
use devlend_fabric::model::HostId;
use devlend_fabric::ntb::Inbound;
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_host::Cluster;
use devlend_rdma::node::{Node, Pinned};
use devlend_rdma::pio::{spawn_copy, Mapping};
use devlend_rdma::shmem::{ring_slice, DmaRun, Pe};
use devlend_rdma::RdmaError;

/// The Linux tool's thread limit.
pub const MAX_THREADS: u32 = 32;
/// The device profile of the DMA engine devlend-rdma models.
pub const DMA_PROFILE: &str = "pex8749-dma";
/// Descriptor ring per host (page-locked, beside the source buffer), split among the channels.
const RING_BYTES: u64 = 0x2000;

/// ntb_perf's knobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NtbPerfSpec {
    pub use_dma: bool,
    /// Copy threads (each with its own DMA channel with `use_dma`).
    pub threads: u32,
    /// log2 of the bytes one copy moves.
    pub chunk_order: u32,
    /// log2 of the bytes each thread copies.
    pub total_order: u32,
    /// The most of the memory window used (None: all of it).
    pub max_mw_size: Option<u64>,
    /// The DMA engine's function (None: the runner host's function with the `pex8749-dma` profile).
    pub dma: Option<String>,
}

/// Each thread's bytes and time (ps).
#[derive(Clone, Debug, PartialEq)]
pub struct NtbPerfResult {
    pub threads: Vec<(u64, Ps)>,
}

impl NtbPerfResult {
    /// Bytes per microsecond over all threads, as the tool prints "MBytes/s".
    pub fn mbytes_per_s(&self) -> f64 {
        let bytes: u64 = self.threads.iter().map(|t| t.0).sum();
        let ps = self.threads.iter().map(|t| t.1).max().unwrap_or(0);
        if ps == 0 {
            0.0
        } else {
            bytes as f64 / (ps as f64 * 1e-6)
        }
    }
}

/// A run started on the machine.
pub(crate) struct NtbPerf {
    /// Per thread: its machine threads (store slots, or the one DMA driver thread).
    workers: Vec<Vec<usize>>,
    dma: Vec<DmaRun>,
    host: HostId,
    window: u64,
    part: u64,
    src: Vec<u8>,
    chunks: u64,
}

struct Geometry {
    chunk: u64,
    part: u64,
    /// Chunks each thread copies.
    chunks: u64,
}

fn invalid(w: &str, why: BadSpec) -> WorkloadError {
    WorkloadError::invalid(w, why)
}

fn setup(w: &str, cause: SetupCause) -> WorkloadError {
    WorkloadError::Setup { workload: w.into(), cause }
}

fn check(w: &str, s: &NtbPerfSpec) -> WResult<()> {
    if s.threads == 0 || s.threads > MAX_THREADS {
        return Err(invalid(w, BadSpec::Threads { threads: s.threads, max: MAX_THREADS }));
    }
    if s.chunk_order > 32 || s.total_order > 40 || s.total_order < s.chunk_order {
        return Err(invalid(w, BadSpec::Orders { chunk_order: s.chunk_order, total_order: s.total_order }));
    }
    if s.use_dma && 1u64 << s.chunk_order > u32::MAX as u64 {
        return Err(invalid(w, BadSpec::DescriptorChunk { chunk_order: s.chunk_order }));
    }
    if s.max_mw_size == Some(0) {
        return Err(invalid(w, BadSpec::NoWindow));
    }
    Ok(())
}

/// The NT adapter of `runner` whose peer sits in `peer`, and that peer.
fn ntb_between(f: &Fabric, runner: HostId, peer: HostId) -> Option<(u32, u32)> {
    f.ntbs().iter().enumerate().find_map(|(i, n)| {
        let p = n.peer?;
        (n.host == runner && f.ntb(p).host == peer).then_some((i as u32, p))
    })
}

/// A direct (not LUT-segmented) memory window of `out` whose translation on its peer `inbound`
/// is unset: the last one, as Device Lending takes the first free window for itself.
fn free_window(f: &Fabric, out: u32, inbound: u32) -> Option<usize> {
    let windows = &f.ntb(out).windows;
    (0..windows.len()).rev().find(|&i| {
        windows[i].lut_segments == 0 && {
            let t = f.ntb(inbound);
            matches!(t.peer_idx(out).and_then(|q| t.inbound[q].get(i)), Some(Inbound::Unset))
        }
    })
}

fn rdma(w: &str) -> impl Fn(RdmaError) -> WorkloadError + '_ {
    WorkloadError::setup(w)
}

/// Page-locked buffer of `size` bytes (and a descriptor ring after it) in `host`'s RAM.
fn pinned(c: &mut Cluster, w: &str, host: HostId, size: u64) -> WResult<(Pinned, Pinned)> {
    let mut os = c.os(host).map_err(WorkloadError::host_setup(w, "the host's kernel"))?;
    let phys = os.kmalloc(size + RING_BYTES).map_err(WorkloadError::host_setup(w, "kmalloc of the buffer and its descriptor ring"))?;
    Ok((Pinned { phys, size }, Pinned { phys: phys + size, size: RING_BYTES }))
}

/// The two ends, joined by the handshake; the runner's with its DMA engine when asked.
fn ends(c: &mut Cluster, w: &str, runner: &str, peer: &str, s: &NtbPerfSpec, dma: Option<&str>) -> WResult<Pe> {
    let no = |what: &str, e| WorkloadError::no_such(w, what, Missing::Fabric(e));
    let (hr, hp) = (c.fabric.host_id(runner).map_err(|e| no("host", e))?, c.fabric.host_id(peer).map_err(|e| no("host", e))?);
    let (nr, np) = ntb_between(&c.fabric, hr, hp).ok_or_else(|| WorkloadError::NoNtb { workload: w.into(), runner: runner.into(), peer: peer.into() })?;
    if c.fabric.host(hp).iommu {
        // Linux's ntb_perf maps its inbound buffer for the adapter with the DMA API; here the host
        // kernel keeps an adapter's DMA for Device Lending, so the window lands on a physical address
        // that the peer's IOMMU would fault.
        return Err(invalid(w, BadSpec::PeerIommu { peer: peer.into() }));
    }
    let widx = free_window(&c.fabric, nr, np).ok_or_else(|| setup(w, SetupCause::NoFreeWindow { ntb: c.fabric.ntb(nr).name.clone() }))?;
    let (window, size) = c.fabric.peer_mw_get_addr(nr, widx).map_err(WorkloadError::setup(w))?;
    let mw = size.min(s.max_mw_size.unwrap_or(u64::MAX));
    let (buf_p, ring_p) = pinned(c, w, hp, mw)?;
    let (buf_r, ring_r) = pinned(c, w, hr, mw)?;
    let f = &mut c.fabric;
    let a = Node::open_at(f, np, widx, buf_p, ring_p).map_err(rdma(w))?;
    f.set_bus_master(f.ntb(nr).func, true);
    let mut b = Node { host: hr, ntb: nr, buf: buf_r, ring: ring_r, peer: None, window: (window, size) };
    a.publish(f).map_err(rdma(w))?;
    if b.learn_peer(f).map_err(rdma(w))?.is_none() {
        return Err(setup(w, SetupCause::NotPublished));
    }
    let mut pe = Pe::new(b);
    if let Some(name) = dma {
        let reads = devlend_devices::plx_dma::params::ntb_dma().outstanding_reads;
        pe.attach_dma_on(f, name, s.threads, reads).map_err(|e| invalid(w, BadSpec::DmaThreads(e)))?;
        let first = request_irqs(c, w, hr, name, s.threads)?;
        if let Some(ch) = pe.dma.as_mut() {
            ch.msi.1 = first;
        }
    }
    Ok(pe)
}

/// One interrupt vector of the runner's kernel per channel (`request_irq`, which programs the
/// engine's MSI-X entries), so the completions are the kernel's, not another device's vectors.
/// The driver numbers its channels' vectors from the first: they must follow one another.
fn request_irqs(c: &mut Cluster, w: &str, host: HostId, dma: &str, channels: u32) -> WResult<u32> {
    let mut os = c.os(host).map_err(WorkloadError::host_setup(w, "the host's kernel"))?;
    let dev = os.find(dma).map_err(WorkloadError::host_setup(w, "finding the DMA engine"))?;
    let vectors =
        (0..channels as u16).map(|e| os.request_irq(dev, e, 0)).collect::<Result<Vec<u8>, _>>().map_err(WorkloadError::host_setup(w, "request_irq"))?;
    if vectors.windows(2).any(|v| v[1] != v[0] + 1) {
        return Err(setup(w, SetupCause::Vectors { device: dma.to_string(), vectors }));
    }
    Ok(vectors[0] as u32)
}

/// The DMA engine ntb_perf drives with `use_dma`: the one named, or the function of the
/// runner's host with the engine's profile.
pub(crate) fn dma_name(f: &Fabric, w: &str, runner: &str, s: &NtbPerfSpec) -> WResult<Option<String>> {
    if !s.use_dma {
        return Ok(None);
    }
    let no = |missing| WorkloadError::no_such(w, "DMA engine", missing);
    let host = f.host_id(runner).map_err(|e| WorkloadError::no_such(w, "host", Missing::Fabric(e)))?;
    let in_host = |name: &str| f.func_id(name).ok().is_some_and(|x| f.func_host(x) == host);
    match &s.dma {
        Some(n) => {
            f.func_id(n).map_err(|e| no(Missing::Fabric(e)))?;
            in_host(n).then(|| Some(n.clone())).ok_or_else(|| no(Missing::NotInHost { device: n.clone(), host: runner.into() }))
        }
        None => f
            .devices()
            .iter()
            .find(|d| d.profile.as_deref() == Some(DMA_PROFILE) && in_host(&d.name))
            .map(|d| Some(d.name.clone()))
            .ok_or_else(|| no(Missing::NoProfile { host: runner.into(), profile: DMA_PROFILE })),
    }
}

fn geometry(w: &str, pe: &Pe, s: &NtbPerfSpec) -> WResult<Geometry> {
    let chunk = 1u64 << s.chunk_order;
    let part = pe.node.window_size() / s.threads as u64;
    if chunk > part {
        return Err(invalid(w, BadSpec::ChunkOverPart { chunk_order: s.chunk_order, window: pe.node.window_size(), threads: s.threads }));
    }
    Ok(Geometry { chunk, part: part / chunk * chunk, chunks: (1u64 << s.total_order) / chunk })
}

/// Set up both ends and start every thread at `at`.
pub(crate) fn start(m: &mut Machine<Cluster>, w: &str, runner: &str, peer: &str, s: &NtbPerfSpec, dma: Option<&str>, at: Ps) -> WResult<NtbPerf> {
    check(w, s)?;
    let mut c = m.world();
    let pe = ends(&mut c, w, runner, peer, s, dma)?;
    let g = geometry(w, &pe, s)?;
    let (host, window, local) = (pe.node.host, pe.node.window.0, pe.node.buf.phys);
    let src: Vec<u8> = (0..g.chunk).map(|i| (i * 31 + 7) as u8).collect();
    for t in 0..s.threads as u64 {
        c.fabric.write(Requester::Cpu(host), local + t * g.part, &src);
    }
    drop(c);
    let wrap = g.part / g.chunk;
    let mut run = NtbPerf { workers: Vec::new(), dma: Vec::new(), host, window, part: g.part, src, chunks: g.chunks };
    if s.use_dma {
        let channels = s.threads as usize;
        let cap = ring_slice(pe.node.ring, channels) / devlend_devices::plx_dma::params::ntb_dma().descriptor_bytes;
        let queues: Vec<Vec<Vec<Desc>>> = (0..s.threads as u64)
            .map(|t| {
                let descs: Vec<Desc> =
                    (0..g.chunks).map(|j| Desc { src: local + t * g.part, dst: window + t * g.part + (j % wrap) * g.chunk, count: g.chunk as u32 }).collect();
                descs.chunks(cap.max(1) as usize).map(<[Desc]>::to_vec).collect()
            })
            .collect();
        let (func, engine) = pe.dma_device().map_err(rdma(w))?;
        m.add_device(func, engine);
        run.dma = pe.spawn_queues(m, &format!("{w}/dma"), &queues, true, at).map_err(rdma(w))?;
        run.workers = run.dma.iter().map(|d| vec![d.thread]).collect();
    } else {
        run.workers = (0..s.threads as u64)
            .map(|t| spawn_copy(m, &format!("{w}/thread {t}"), host, window + t * g.part, &run.src, g.chunks, wrap, Mapping::WriteCombining, at))
            .collect();
    }
    Ok(run)
}

impl NtbPerf {
    /// After the run: the channels' errors, the bytes in the peer, each thread's time.
    pub(crate) fn result(&self, m: &Machine<Cluster>, w: &str) -> WResult<(NtbPerfResult, Ps, Option<Ps>)> {
        let failed = |cause| WorkloadError::Failed { workload: w.into(), cause };
        for (t, d) in self.dma.iter().enumerate() {
            d.check().map_err(|error| failed(FailCause::Channel { thread: t, error }))?;
        }
        let mut c = m.world();
        let wrap = (self.part / self.src.len() as u64).min(self.chunks);
        for t in 0..self.workers.len() as u64 {
            for j in 0..wrap {
                let at = self.window + t * self.part + j * self.src.len() as u64;
                if c.fabric.read(Requester::Cpu(self.host), at, self.src.len()).0 != self.src {
                    return Err(failed(FailCause::NotLanded { thread: t, chunk: j }));
                }
            }
        }
        let span = |ids: &[usize]| {
            let start = ids.iter().map(|&i| m.thread_start(i)).min().unwrap_or(0);
            let end = ids.iter().map(|&i| m.thread_end(i)).collect::<Option<Vec<_>>>().map(|e| e.into_iter().max().unwrap_or(start));
            (start, end)
        };
        let spans: Vec<(Ps, Option<Ps>)> = self.workers.iter().map(|ids| span(ids)).collect();
        let bytes = self.chunks * self.src.len() as u64;
        let threads = spans.iter().map(|(s, e)| (bytes, e.map_or(0, |e| e - s))).collect();
        let start = spans.iter().map(|s| s.0).min().unwrap_or(0);
        let end = spans.iter().map(|s| s.1).collect::<Option<Vec<_>>>().map(|e| e.into_iter().max().unwrap_or(start));
        Ok((NtbPerfResult { threads }, start, end))
    }
}
