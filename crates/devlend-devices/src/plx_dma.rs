//! The PEX8749 DMA engine (003 §3-4) as a device on the machine's one clock.
//!
//! From 003: one channel (§3 "by using one DMA channel"; more are configurable, each with its own
//! register block at `channel * CH_STRIDE` and its own MSI-X vector), block mode (one transfer described in the
//! channel's registers) and scatter-gather mode, whose descriptors carry "source address,
//! destination address, and byte count" (§3) and let one start move several discontiguous buffers;
//! an interrupt at the end of each transfer (§3). The register map and descriptor layout are
//! devlend's own (the PEX8749 data book's are not reproduced; see `params/hardware.toml [ntb_dma]`).
//!
//! The engine is an actor ([`Device`]): the CPU's store of START into a channel's CTRL register
//! starts the channel when it lands. The channel ([`channel`]) fetches SG descriptors with
//! DMA reads, moves data as a pipeline (reads of `read_request_bytes`, at most `outstanding_reads`
//! in flight, each chunk's posted write issued when its read data has returned, so reads and
//! writes overlap), writes SG status back, and raises its MSI-X vector. Every access is a flow on
//! the machine's links as this function's own requester (so the NTB's requester-ID LUT and windows
//! apply), contending with every other channel and device. A failing access stops the channel with
//! an error status naming the descriptor; the fault is recorded by the fabric. Completion is never
//! reported for a transfer that did not fully land.

mod channel;
pub mod params;

use crate::error::{MResult, ModelError};
use channel::Channel;
use devlend_engine::machine::{Cx, Device, FlowDone, World};
use devlend_fabric::model::FuncId;
use devlend_fabric::route::Failure;
use devlend_fabric::Fabric;
use devlend_wire::Tlp;
use params::ntb_dma;

/// Channel registers (BAR 0), at `channel * CH_STRIDE`.
pub const CH_STRIDE: u64 = 0x100;
pub const SRC: u64 = 0x00;
pub const DST: u64 = 0x08;
pub const COUNT: u64 = 0x10;
pub const CTRL: u64 = 0x14;
pub const RING: u64 = 0x18;
pub const NDESC: u64 = 0x20;
pub const STATUS: u64 = 0x24;
pub const BYTES_DONE: u64 = 0x28;

pub const CTRL_START: u32 = 1;
pub const CTRL_SG: u32 = 2;
pub const CTRL_IRQ: u32 = 4;

pub const STATUS_DONE: u32 = 1;
pub const STATUS_ERROR: u32 = 2;

/// Descriptor control word: valid (set by software), done and error (written back by the engine).
pub const DESC_VALID: u32 = 1;
pub const DESC_DONE: u32 = 2;
pub const DESC_ERROR: u32 = 4;

/// One scatter-gather descriptor {src, dst, byte count} (003 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desc {
    pub src: u64,
    pub dst: u64,
    pub count: u32,
}

impl Desc {
    pub fn encode(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0..8].copy_from_slice(&self.src.to_le_bytes());
        b[8..16].copy_from_slice(&self.dst.to_le_bytes());
        b[16..20].copy_from_slice(&self.count.to_le_bytes());
        b[20..24].copy_from_slice(&DESC_VALID.to_le_bytes());
        b
    }
    pub(crate) fn decode(b: &[u8]) -> (Desc, u32) {
        let u = |o: usize, n: usize| b[o..o + n].iter().rev().fold(0u64, |a, x| a << 8 | *x as u64);
        (Desc { src: u(0, 8), dst: u(8, 8), count: u(16, 4) as u32 }, u(20, 4) as u32)
    }
}

/// Why a channel stopped with an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaFault {
    pub descriptor: usize,
    pub failure: Option<Failure>,
    pub bytes_done: u64,
}

/// What one channel has done since the engine was made.
#[derive(Default, Clone, Debug)]
pub struct ChannelLog {
    pub faults: Vec<DmaFault>,
    pub transfers: u64,
    /// Bytes whose writes have landed.
    pub bytes: u64,
}

pub struct DmaEngine {
    pub func: FuncId,
    /// Read requests of `read_request_bytes` each channel keeps in flight.
    pub outstanding_reads: u64,
    channels: Vec<Channel>,
}

/// A DMA token: which channel, which run of it, what kind of access, and its sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub run: u16,
    pub ch: u8,
    pub kind: Kind,
    pub seq: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Fetch = 1,
    Read = 2,
    Write = 3,
    Status = 4,
    Msi = 5,
    Turnaround = 6,
}

impl Token {
    pub fn encode(self) -> u64 {
        (self.run as u64) << 48 | (self.ch as u64) << 40 | (self.kind as u64) << 32 | self.seq as u64
    }
    fn decode(t: u64) -> Option<Token> {
        let kind = match (t >> 32) & 0xff {
            1 => Kind::Fetch,
            2 => Kind::Read,
            3 => Kind::Write,
            4 => Kind::Status,
            5 => Kind::Msi,
            6 => Kind::Turnaround,
            _ => return None,
        };
        Some(Token { run: (t >> 48) as u16, ch: (t >> 40) as u8, kind, seq: t as u32 })
    }
}

impl DmaEngine {
    /// An engine with `[ntb_dma]`'s channel count and read pipeline.
    pub fn new(func: FuncId) -> DmaEngine {
        let p = ntb_dma();
        DmaEngine::with(func, p.channels, p.outstanding_reads).expect("[ntb_dma] channels and outstanding_reads are valid")
    }

    /// An engine with `channels` channels (1 to `[ntb_dma] max_channels`) that each keep
    /// `outstanding_reads` reads in flight (at least 1).
    pub fn with(func: FuncId, channels: u32, outstanding_reads: u64) -> MResult<DmaEngine> {
        let max = ntb_dma().max_channels;
        if channels == 0 || channels > max {
            return Err(ModelError::DmaChannels { channels, max });
        }
        if outstanding_reads == 0 {
            return Err(ModelError::NoOutstandingReads);
        }
        let channels = (0..channels as u8).map(|c| Channel::new(c, outstanding_reads)).collect();
        Ok(DmaEngine { func, outstanding_reads, channels })
    }

    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }

    /// What channel `c` has done.
    pub fn log(&self, c: usize) -> &ChannelLog {
        &self.channels[c].log
    }

    /// Whether channel `c` is moving data now.
    pub fn busy(&self, c: usize) -> bool {
        self.channels[c].busy()
    }

    pub fn reg_read(&self, f: &Fabric, off: u64, n: usize) -> u64 {
        reg_read(f, self.func, off, n)
    }
}

/// `n` bytes (little-endian) of the engine's BAR 0 at `off`.
pub fn reg_read(f: &Fabric, func: FuncId, off: u64, n: usize) -> u64 {
    let mut b = vec![0u8; n];
    if let Some(m) = f.bar_mem(func, 0) {
        m.read(off, &mut b);
    }
    b.iter().rev().fold(0, |a, x| a << 8 | *x as u64)
}

pub(crate) fn reg_write(f: &mut Fabric, func: FuncId, off: u64, data: &[u8]) {
    f.bar_store(func, 0, off, data);
}

impl<W: World> Device<W> for DmaEngine {
    /// A store into BAR 0: START in a channel's CTRL register starts that channel.
    fn mmio_write(&mut self, cx: &mut Cx<W>, bar: u8, offset: u64, tlp: &Tlp) {
        if bar != 0 {
            return;
        }
        let ctrl_of = |c: u64| c * CH_STRIDE + CTRL;
        for c in 0..self.channels.len() {
            let at = ctrl_of(c as u64);
            if offset <= at && at < offset + tlp.header.len as u64 {
                self.channels[c].start(cx);
            }
        }
    }

    fn dma_done(&mut self, cx: &mut Cx<W>, done: FlowDone) {
        if let Some(t) = Token::decode(done.token) {
            if let Some(ch) = self.channels.get_mut(t.ch as usize) {
                ch.done(cx, t, done);
            }
        }
    }

    fn timer(&mut self, cx: &mut Cx<W>, token: u64) {
        if let Some(t) = Token::decode(token) {
            if let Some(ch) = self.channels.get_mut(t.ch as usize) {
                ch.timer(cx, t);
            }
        }
    }
}
