//! The checks of the tools built on the library (devlend-experiments' `rdma`: the Figs 8-9 sweep,
//! ntb_perf, ntb_pingpong): the value given and what is accepted.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolError {
    /// A put method that is not memcpy (pio), block or sgN.
    UnknownMethod { method: String },
    /// A transfer size outside 1 to `max` bytes (the peer's published buffer).
    TransferSize { size: u64, max: u64 },
    /// After a `method` put of `size` bytes, host A's buffer does not hold the data.
    NotHeld { method: String, size: u64 },
    /// No NTB joins host `from` to host `to`.
    NoNtbBetween { from: String, to: String },
    /// The peer host has its IOMMU on; the tools map buffers by physical address.
    PeerIommu { peer: String },
    /// NT adapter `ntb` has no direct (non-LUT) memory window.
    NoDirectWindow { ntb: String },
    /// Host `host` has no function with the DMA profile `profile`.
    NoDmaFunction { host: String, profile: &'static str },
    /// ntb_perf's `chunk_order` and `total_order`: chunk_order <= `max_chunk` and
    /// chunk_order <= total_order <= `max_total` are accepted.
    Orders { chunk_order: u32, total_order: u32, max_chunk: u32, max_total: u32 },
    /// ntb_perf's thread count: 1 to `max`.
    Threads { threads: u32, max: u32 },
    /// ntb_perf's chunk: 1 to `part` bytes, the peer's `window` split among `threads` threads.
    Chunk { chunk: u64, part: u64, window: u64, threads: u32 },
    /// ntb_perf's total: at least one chunk.
    Total { total: u64, chunk: u64 },
    /// ntb_perf with DMA: a chunk larger than one descriptor moves (`max` bytes).
    ChunkOverDescriptor { chunk: u64, max: u64 },
    /// ntb_perf with DMA: `threads` threads, one channel each, where host `host` has `channels`.
    TooFewChannels { threads: u32, channels: usize, host: u16 },
    /// ntb_perf: thread `thread`'s chunk `chunk` did not land in the peer at `addr`.
    ChunkNotLanded { thread: u64, chunk: u64, addr: u64 },
    /// ntb_pingpong's first doorbell mask: non-zero and within the `valid_bits` bits (`valid`).
    InitDb { init_db: u64, valid_bits: u8, valid: u64 },
    /// ntb_pingpong asked for no ping.
    NoPings,
    /// ntb_pingpong's ping `ping` rang `rang` but `arrived` arrived.
    Doorbell { ping: usize, rang: u64, arrived: u64 },
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ToolError::*;
        match self {
            UnknownMethod { method } => write!(f, "unknown method '{method}': memcpy, block or sgN"),
            TransferSize { size, max } => write!(f, "transfer size {size}: expected 1 to {max} bytes (the peer's published buffer behind the NTB window)"),
            NotHeld { method, size } => write!(f, "{method} {size} B: host A's buffer does not hold the data"),
            NoNtbBetween { from, to } => write!(f, "no NTB joins host {from} to host {to}"),
            PeerIommu { peer } => {
                write!(
                    f,
                    "peer: {peer} has its IOMMU on; ntb_perf and ntb_pingpong here map the buffers by physical address, so they need hosts with the IOMMU off"
                )
            }
            NoDirectWindow { ntb } => write!(f, "{ntb} has no direct memory window"),
            NoDmaFunction { host, profile } => write!(f, "host {host} has no function with the {profile} profile: no DMA channel"),
            Orders { chunk_order, total_order, max_chunk, max_total } => write!(
                f,
                "chunk_order {chunk_order} and total_order {total_order}: expected chunk_order <= {max_chunk} and chunk_order <= total_order <= {max_total}"
            ),
            Threads { threads, max } => write!(f, "{threads} threads: expected 1 to {max}"),
            Chunk { chunk, part, window, threads } => {
                write!(f, "chunk of {chunk} bytes: expected 1 to {part} (the peer's window of {window} bytes split among {threads} threads)")
            }
            Total { total, chunk } => write!(f, "total of {total} bytes: expected at least one chunk ({chunk} bytes)"),
            ChunkOverDescriptor { chunk, max } => write!(f, "chunk of {chunk} bytes: a DMA descriptor moves at most {max} bytes"),
            TooFewChannels { threads, channels, host } => {
                write!(f, "{threads} threads need a DMA channel each: host {host} has {channels}")
            }
            ChunkNotLanded { thread, chunk, addr } => write!(f, "thread {thread}: chunk {chunk} did not land in the peer at {addr:#x}"),
            InitDb { init_db, valid_bits, valid } => {
                write!(f, "init_db {init_db:#x}: expected a non-zero mask within the {valid_bits} doorbell bits ({valid:#x})")
            }
            NoPings => write!(f, "pings: expected at least 1"),
            Doorbell { ping, rang, arrived } => write!(f, "ping {ping}: doorbell bits {rang:#x} rang but {arrived:#x} arrived"),
        }
    }
}

impl std::error::Error for ToolError {}
