//! The measurements of 003 §3 (Figs 8-9) and issue 6's extension, on a topology given as JSON
//! (the Python front end's `pex8749-rdma.yaml` with its `setup` dropped: the handshake programs
//! the windows). Host B (NT link side, where the DMA function sits) puts into host A's buffer, as
//! in 003 ("we transfer the data to Host A from Host B by using one DMA channel"); a transfer ends
//! when host A's doorbell handler runs ("an interrupt occurs at the end of each transfer").
//! [`perf`] and [`pingpong`]: the ntb_perf and ntb_pingpong figures of issue 6, on this testbed or
//! between the two ends of any NTB ([`ends`]).

pub mod perf;
pub mod pingpong;

use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_rdma::error::ToolError;
use devlend_rdma::node::{Node, Pinned};
use devlend_rdma::pio::Mapping;
use devlend_rdma::shmem::Pe;
use devlend_rdma::{handshake, Method, Pair, RResult, RdmaError, Shmem, Timing};

pub const BUF_RAM_OFFSET: u64 = 0x1000_0000;
/// 003 §3: "Since the BAR memory size is 1 MB, we limit the buffer size to a maximum of 1 MB."
pub const BUF_SIZE: u64 = 1 << 20;
pub const NTB_A: &str = "nt-virtual";
pub const NTB_B: &str = "nt-link";
pub const DMA: &str = "plx-dma";

pub fn testbed(json: &str) -> RResult<(Shmem, Pair)> {
    let mut s = Shmem::new(devlend_fabric::build_json(json)?);
    let pair = handshake(&mut s, NTB_A, NTB_B, BUF_RAM_OFFSET, BUF_SIZE, Some(DMA))?;
    Ok((s, pair))
}

pub fn parse_method(s: &str) -> RResult<Method> {
    match s {
        "memcpy" | "pio" => Ok(Method::Pio),
        "block" => Ok(Method::BlockDma),
        _ => s
            .strip_prefix("sg")
            .and_then(|n| n.parse().ok())
            .filter(|n| *n > 0)
            .map(Method::SgDma)
            .ok_or_else(|| ToolError::UnknownMethod { method: s.to_string() }.into()),
    }
}

/// Time each (method, size) put from host B to the start of host A's buffer, checking that host
/// A's memory holds the data afterwards. Returns (method, size, ps, steps) rows.
pub fn sweep(json: &str, methods: &[&str], sizes: &[u64], mapping: Option<Mapping>) -> RResult<Vec<(String, u64, Timing)>> {
    let (mut s, mut pair) = testbed(json)?;
    if let Some(m) = mapping {
        pair.b.mapping = m;
    }
    let published = pair.b.node.peer.expect("handshake done");
    let peer = published.phys;
    if let Some(bad) = sizes.iter().find(|s| **s == 0 || **s > published.size) {
        return Err(ToolError::TransferSize { size: *bad, max: published.size }.into());
    }
    let mut rows = Vec::new();
    for m in methods {
        let how = parse_method(m)?;
        for &size in sizes {
            let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
            let t = pair.b.put(&mut s, peer, &data, how)?;
            let landed = s.fabric().read(Requester::Cpu(pair.a.node.host), peer, size as usize).0;
            if landed != data {
                return Err(ToolError::NotHeld { method: m.to_string(), size }.into());
            }
            rows.push((m.to_string(), size, t));
        }
    }
    Ok(rows)
}

/// The analytic limit (devlend_engine::analytic) of posted writes along the DMA's path into host
/// A: what the link allows, in bytes/s.
pub fn link_limit(json: &str) -> RResult<f64> {
    let (s, pair) = testbed(json)?;
    pair.b.dma_write_limit(&s)
}

/// The DMA engine's profile ntb_perf looks for in the runner's host with `use_dma`.
pub const DMA_PROFILE: &str = "pex8749-dma";

/// The Linux tool ntb_perf's knobs (module parameters `use_dma`, `chunk_order`, `total_order`,
/// `max_mw_size`; debugfs `threads_count`), and the DMA engine's channels and read pipeline
/// (None: `[ntb_dma]`'s, at least one channel per thread).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfSpec {
    pub use_dma: bool,
    pub threads_count: u32,
    pub chunk_order: u32,
    pub total_order: u32,
    pub max_mw_size: Option<u64>,
    pub channels: Option<u32>,
    pub outstanding_reads: Option<u64>,
}

/// Linux's limit on `chunk_order` (MAX_CHUNK_ORDER: no chunk larger than 1 MiB).
pub const MAX_CHUNK_ORDER: u32 = 20;

/// devlend's limit on `total_order` (1 TiB copied).
pub const MAX_TOTAL_ORDER: u32 = 40;

/// The NT adapter of host `from` whose peer sits in host `to`.
fn ntb_between(f: &Fabric, from: &str, to: &str) -> RResult<u32> {
    let (a, b) = (f.host_id(from)?, f.host_id(to)?);
    let found = f.ntbs().iter().enumerate().find(|(_, n)| n.host == a && n.peer.is_some_and(|p| f.ntb(p).host == b));
    found.map(|(i, _)| i as u32).ok_or_else(|| ToolError::NoNtbBetween { from: from.to_string(), to: to.to_string() }.into())
}

/// The handshake between the two ends of the NTB joining `runner` to `peer`, on the topology
/// `json`: each end's buffer (at [`BUF_RAM_OFFSET`] of its RAM, the size of the window or
/// `max_mw_size`) behind the last direct memory window. Pair `a` is the peer, `b` the runner.
pub fn ends(json: &str, runner: &str, peer: &str, max_mw_size: Option<u64>) -> RResult<(Shmem, Pair)> {
    let mut f = devlend_fabric::build_json(json)?;
    let (nb, na) = (ntb_between(&f, runner, peer)?, ntb_between(&f, peer, runner)?);
    if f.host(f.ntb(na).host).iommu {
        return Err(ToolError::PeerIommu { peer: peer.to_string() }.into());
    }
    let windows = &f.ntb(nb).windows;
    let widx = (0..windows.len()).rev().find(|&i| windows[i].lut_segments == 0).ok_or_else(|| ToolError::NoDirectWindow { ntb: f.ntb(nb).name.clone() })?;
    let size = windows[widx].size.min(max_mw_size.unwrap_or(u64::MAX));
    let mut open = |ntb: u32| -> RResult<Node> {
        let h = f.host(f.ntb(ntb).host);
        let at = |off: u64| f.ram_offset_to_phys(h, off).filter(|p| h.in_ram(p + size + 0x2000 - 1));
        let phys = at(BUF_RAM_OFFSET).ok_or_else(|| RdmaError::NotContiguous { host: h.name.clone(), offset: BUF_RAM_OFFSET, size })?;
        Node::open_at(&mut f, ntb, widx, Pinned { phys, size }, Pinned { phys: phys + size, size: 0x2000 })
    };
    let (mut a, mut b) = (open(na)?, open(nb)?);
    a.publish(&mut f)?;
    b.publish(&mut f)?;
    for n in [&mut a, &mut b] {
        if n.learn_peer(&mut f)?.is_none() {
            return Err(RdmaError::NotPublished { addr: 0, len: 0, published: None });
        }
    }
    Ok((Shmem::new(f), Pair { a: Pe::new(a), b: Pe::new(b) }))
}

/// ntb_perf from host `runner` into host `peer`'s window over the NTB joining them, on the
/// topology `json`.
pub fn ntb_perf(json: &str, runner: &str, peer: &str, s: &PerfSpec) -> RResult<perf::Perf> {
    if s.chunk_order > MAX_CHUNK_ORDER || s.total_order < s.chunk_order || s.total_order > MAX_TOTAL_ORDER {
        let (chunk_order, total_order) = (s.chunk_order, s.total_order);
        return Err(ToolError::Orders { chunk_order, total_order, max_chunk: MAX_CHUNK_ORDER, max_total: MAX_TOTAL_ORDER }.into());
    }
    let (mut shmem, mut pair) = ends(json, runner, peer, s.max_mw_size)?;
    if s.use_dma {
        let host = pair.b.node.host;
        let dma = {
            let f = shmem.fabric();
            let found = f.devices().iter().find(|d| d.profile.as_deref() == Some(DMA_PROFILE) && f.func_id(&d.name).is_ok_and(|x| f.func_host(x) == host));
            found.map(|d| d.name.clone())
        };
        let dma = dma.ok_or_else(|| ToolError::NoDmaFunction { host: runner.to_string(), profile: DMA_PROFILE })?;
        let p = devlend_devices::plx_dma::params::ntb_dma();
        pair.b.attach_dma_with(&mut shmem, &dma, s.channels.unwrap_or(p.channels), s.outstanding_reads.unwrap_or(p.outstanding_reads))?;
    }
    perf::run(&mut shmem, &mut pair.b, 1 << s.chunk_order, 1 << s.total_order, s.use_dma, s.threads_count)
}

/// ntb_pingpong between host `a` (it rings first) and host `b` over the NTB joining them.
pub fn ntb_pingpong(json: &str, a: &str, b: &str, pings: u32, init_db: u64, delay_ps: u64) -> RResult<pingpong::PingPong> {
    let (mut s, pair) = ends(json, b, a, None)?;
    pingpong::run(&mut s, &pair.a.node, &pair.b.node, pings, init_db, delay_ps)
}
