//! The measurements of 003 §3 (Figs 8-9) and issue 6's extension, on a topology given as JSON
//! (the Python front end's `pex8749-rdma.yaml` with its `setup` dropped: the handshake programs
//! the windows). Host B (NT link side, where the DMA function sits) puts into host A's buffer, as
//! in 003 ("we transfer the data to Host A from Host B by using one DMA channel"); a transfer ends
//! when host A's doorbell handler runs ("an interrupt occurs at the end of each transfer").
//! [`perf`] and [`pingpong`]: the ntb_perf and ntb_pingpong figures of issue 6 on this testbed.

pub mod perf;
pub mod pingpong;

use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_rdma::pio::Mapping;
use devlend_rdma::{handshake, Method, Pair, RResult, RdmaError, Timing};

pub const BUF_RAM_OFFSET: u64 = 0x1000_0000;
/// 003 §3: "Since the BAR memory size is 1 MB, we limit the buffer size to a maximum of 1 MB."
pub const BUF_SIZE: u64 = 1 << 20;
pub const NTB_A: &str = "nt-virtual";
pub const NTB_B: &str = "nt-link";
pub const DMA: &str = "plx-dma";

pub fn testbed(json: &str) -> RResult<(Fabric, Pair)> {
    let mut f = devlend_fabric::build_json(json).map_err(|e| RdmaError::Invalid(e.to_string()))?;
    let pair = handshake(&mut f, NTB_A, NTB_B, BUF_RAM_OFFSET, BUF_SIZE, Some(DMA))?;
    Ok((f, pair))
}

/// The testbed with host B's DMA engine given `channels` channels of `outstanding_reads` reads
/// in flight each (None: `[ntb_dma]`'s).
pub fn testbed_with(json: &str, channels: Option<u32>, outstanding_reads: Option<u64>) -> RResult<(Fabric, Pair)> {
    let p = &devlend_rdma::params::params().ntb_dma;
    let mut f = devlend_fabric::build_json(json).map_err(|e| RdmaError::Invalid(e.to_string()))?;
    let mut pair = handshake(&mut f, NTB_A, NTB_B, BUF_RAM_OFFSET, BUF_SIZE, None)?;
    pair.b.attach_dma_with(&mut f, DMA, channels.unwrap_or(p.channels), outstanding_reads.unwrap_or(p.outstanding_reads))?;
    Ok((f, pair))
}

pub fn parse_method(s: &str) -> RResult<Method> {
    match s {
        "memcpy" | "pio" => Ok(Method::Pio),
        "block" => Ok(Method::BlockDma),
        _ => s.strip_prefix("sg").and_then(|n| n.parse().ok()).filter(|n| *n > 0).map(Method::SgDma).ok_or_else(|| RdmaError::Invalid(format!("unknown method '{s}': memcpy, block or sgN"))),
    }
}

/// Time each (method, size) put from host B to the start of host A's buffer, checking that host
/// A's memory holds the data afterwards. Returns (method, size, ps, steps) rows.
pub fn sweep(json: &str, methods: &[&str], sizes: &[u64], mapping: Option<Mapping>) -> RResult<Vec<(String, u64, Timing)>> {
    let (mut f, mut pair) = testbed(json)?;
    if let Some(m) = mapping {
        pair.b.mapping = m;
    }
    let published = pair.b.node.peer.expect("handshake done");
    let peer = published.phys;
    if let Some(bad) = sizes.iter().find(|s| **s == 0 || **s > published.size) {
        return Err(RdmaError::Invalid(format!("transfer size {bad}: expected 1 to {} bytes (the peer's published buffer behind the NTB window)", published.size)));
    }
    let mut rows = Vec::new();
    for m in methods {
        let how = parse_method(m)?;
        for &size in sizes {
            let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
            let t = pair.b.put(&mut f, peer, &data, how)?;
            let landed = f.read(Requester::Cpu(pair.a.node.host), peer, size as usize).0;
            if landed != data {
                return Err(RdmaError::Fabric(format!("{m} {size} B: host A's buffer does not hold the data")));
            }
            rows.push((m.to_string(), size, t));
        }
    }
    Ok(rows)
}

/// The analytic limit (devlend_engine::analytic) of posted writes along the DMA's path into host
/// A: what the link allows, in bytes/s.
pub fn link_limit(json: &str) -> RResult<f64> {
    let (mut f, pair) = testbed(json)?;
    pair.b.dma_write_limit(&mut f)
}

/// ntb_perf from host B (where the DMA engine sits) into host A's window on the 003 testbed, with
/// `channels` DMA channels (None: `[ntb_dma]`'s) of `outstanding_reads` reads each.
pub fn ntb_perf(json: &str, chunk: u64, total: u64, use_dma: bool, threads: u32, channels: Option<u32>, outstanding_reads: Option<u64>) -> RResult<perf::Perf> {
    let (mut f, mut pair) = testbed_with(json, channels, outstanding_reads)?;
    perf::run(&mut f, &mut pair.b, chunk, total, use_dma, threads)
}

/// ntb_pingpong between host A and host B on the 003 testbed (host A rings first).
pub fn ntb_pingpong(json: &str, pings: u32, init_db: u64, delay_ps: u64) -> RResult<pingpong::PingPong> {
    let (mut f, pair) = testbed(json)?;
    pingpong::run(&mut f, &pair.a.node, &pair.b.node, pings, init_db, delay_ps)
}
