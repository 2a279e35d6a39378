//! The PEX8749 DMA engine (003 §3-4) as a device on the fabric.
//!
//! From 003: one channel (§3 "by using one DMA channel"; more are configurable, each with its own
//! register block at `channel * CH_STRIDE` and its own MSI-X vector), block mode (one transfer described in the
//! channel's registers) and scatter-gather mode, whose descriptors carry "source address,
//! destination address, and byte count" (§3) and let one start move several discontiguous buffers;
//! an interrupt at the end of each transfer (§3). The register map and descriptor layout are
//! devlend's own (the PEX8749 data book's are not reproduced; see `params/hardware.toml [ntb_dma]`).
//!
//! Like the NVMe controller in devlend-devices, the engine works like firmware: `process` looks at
//! what the CPU wrote into BAR 0, fetches descriptors from host memory with DMA reads over PCIe,
//! moves the data with reads of `read_request_bytes` (at most `outstanding_reads` in flight) and
//! posted writes, writes SG status back, and raises its MSI-X vector. Every access goes through the
//! fabric as this function's own requester (so the NTB's requester-ID LUT and windows apply) and
//! is logged as an [`Op`] with its plan for timing. A failing access stops the channel with an
//! error status naming the descriptor; the fault is recorded by the fabric. Completion is never
//! reported for a transfer that did not fully land.

use crate::params::params;
use devlend_devices::Op;
use devlend_fabric::config::MSIX_TABLE_OFFSET;
use devlend_fabric::model::FuncId;
use devlend_fabric::route::{Failure, Requester};
use devlend_fabric::Fabric;
use devlend_wire::Access;

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
    fn decode(b: &[u8]) -> (Desc, u32) {
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

/// What one channel did during its last transfers (cleared by the caller).
#[derive(Default)]
pub struct ChannelLog {
    /// Every access the channel made, in order.
    pub ops: Vec<Op>,
    /// Engine-internal time not spent on the fabric (descriptor turnaround), in ps.
    pub internal_ps: u64,
    pub faults: Vec<DmaFault>,
    pub transfers: u64,
}

pub struct DmaEngine {
    pub func: FuncId,
    /// One log per channel; the channel count is fixed when the engine is made.
    pub channels: Vec<ChannelLog>,
    /// Read requests of `read_request_bytes` each channel keeps in flight.
    pub outstanding_reads: u64,
}

impl DmaEngine {
    /// An engine with `[ntb_dma]`'s channel count and read pipeline.
    pub fn new(func: FuncId) -> DmaEngine {
        let p = &params().ntb_dma;
        DmaEngine::with(func, p.channels, p.outstanding_reads).expect("[ntb_dma] channels and outstanding_reads are valid")
    }

    /// An engine with `channels` channels (1 to `[ntb_dma] max_channels`) that each keep
    /// `outstanding_reads` reads in flight (at least 1).
    pub fn with(func: FuncId, channels: u32, outstanding_reads: u64) -> Result<DmaEngine, String> {
        let max = params().ntb_dma.max_channels;
        if channels == 0 || channels > max {
            return Err(format!("{channels} DMA channels: the engine has 1 to {max}"));
        }
        if outstanding_reads == 0 {
            return Err("outstanding_reads must be at least 1".into());
        }
        Ok(DmaEngine { func, channels: (0..channels).map(|_| ChannelLog::default()).collect(), outstanding_reads })
    }

    fn me(&self) -> Requester {
        Requester::Func(self.func)
    }

    pub fn reg_read(&self, f: &Fabric, off: u64, n: usize) -> u64 {
        let mut b = vec![0u8; n];
        if let Some(m) = f.bar_mem.get(&(self.func, 0)) {
            m.read(off, &mut b);
        }
        b.iter().rev().fold(0, |a, x| a << 8 | *x as u64)
    }

    fn reg_write(&self, f: &mut Fabric, off: u64, data: &[u8]) {
        f.bar_mem.entry((self.func, 0)).or_default().write(off, data);
    }

    fn log(&mut self, f: &mut Fabric, ch: usize, addr: u64, len: u64, access: Access, what: &'static str) {
        let plan = devlend_engine::plan(f, self.me(), addr, access).ok().map(std::sync::Arc::new);
        let who = self.me();
        self.channels[ch].ops.push(Op { who, addr, len, access, what, plan });
    }

    fn dma_read(&mut self, f: &mut Fabric, ch: usize, addr: u64, len: u64, what: &'static str) -> Result<Vec<u8>, Failure> {
        self.log(f, ch, addr, len, Access::Read, what);
        let (data, fail) = f.read(self.me(), addr, len as usize);
        fail.map_or(Ok(data), Err)
    }

    fn dma_write(&mut self, f: &mut Fabric, ch: usize, addr: u64, data: &[u8], what: &'static str) -> Result<(), Failure> {
        self.log(f, ch, addr, data.len() as u64, Access::Write, what);
        f.write(self.me(), addr, data).1.map_or(Ok(()), Err)
    }

    /// Look at every channel's control register and run the transfers the CPU started.
    pub fn process(&mut self, f: &mut Fabric) {
        for ch in 0..self.channels.len() {
            self.process_channel(f, ch);
        }
    }

    fn process_channel(&mut self, f: &mut Fabric, ch: usize) {
        let base = ch as u64 * CH_STRIDE;
        let ctrl = self.reg_read(f, base + CTRL, 4) as u32;
        if ctrl & CTRL_START == 0 {
            return;
        }
        self.reg_write(f, base + CTRL, &(ctrl & !CTRL_START).to_le_bytes());
        self.channels[ch].transfers += 1;
        let result = if ctrl & CTRL_SG != 0 { self.run_sg(f, ch) } else { self.run_block(f, ch) };
        let (status, done) = match result {
            Ok(done) => (STATUS_DONE, done),
            Err(fault) => {
                self.channels[ch].faults.push(fault);
                (STATUS_DONE | STATUS_ERROR | (fault.descriptor as u32) << 8, fault.bytes_done)
            }
        };
        self.reg_write(f, base + STATUS, &status.to_le_bytes());
        self.reg_write(f, base + BYTES_DONE, &done.to_le_bytes());
        if ctrl & CTRL_IRQ != 0 {
            self.interrupt(f, ch);
        }
    }

    fn run_block(&mut self, f: &mut Fabric, ch: usize) -> Result<u64, DmaFault> {
        let base = ch as u64 * CH_STRIDE;
        let d = Desc { src: self.reg_read(f, base + SRC, 8), dst: self.reg_read(f, base + DST, 8), count: self.reg_read(f, base + COUNT, 4) as u32 };
        self.copy(f, ch, d).map_err(|(failure, bytes_done)| DmaFault { descriptor: 0, failure, bytes_done })
    }

    fn run_sg(&mut self, f: &mut Fabric, ch: usize) -> Result<u64, DmaFault> {
        let p = &params().ntb_dma;
        let base = ch as u64 * CH_STRIDE;
        let (ring, n) = (self.reg_read(f, base + RING, 8), self.reg_read(f, base + NDESC, 4) as usize);
        let dbytes = p.descriptor_bytes;
        let mut total = 0u64;
        let mut batch: Vec<u8> = Vec::new();
        for i in 0..n {
            if (i as u64).is_multiple_of(p.descriptor_prefetch) {
                let k = (n - i).min(p.descriptor_prefetch as usize) as u64;
                batch = self
                    .dma_read(f, ch, ring + i as u64 * dbytes, k * dbytes, "fetch descriptors")
                    .map_err(|e| DmaFault { descriptor: i, failure: Some(e), bytes_done: total })?;
            }
            let off = (i as u64 % p.descriptor_prefetch * dbytes) as usize;
            let (d, ctl) = Desc::decode(&batch[off..off + dbytes as usize]);
            let addr = ring + i as u64 * dbytes + 20;
            if ctl & DESC_VALID == 0 {
                return Err(DmaFault { descriptor: i, failure: None, bytes_done: total });
            }
            self.channels[ch].internal_ps += p.descriptor_turnaround_ps;
            match self.copy(f, ch, d) {
                Ok(b) => total += b,
                Err((failure, b)) => {
                    let _ = self.dma_write(f, ch, addr, &(DESC_ERROR | DESC_DONE).to_le_bytes(), "descriptor status");
                    return Err(DmaFault { descriptor: i, failure, bytes_done: total + b });
                }
            }
            let _ = self.dma_write(f, ch, addr, &DESC_DONE.to_le_bytes(), "descriptor status");
        }
        Ok(total)
    }

    /// Move one descriptor's bytes: reads of the read-request size, `outstanding_reads` at a time,
    /// each followed by its posted writes. Stops at the first failure, before writing what failed.
    fn copy(&mut self, f: &mut Fabric, ch: usize, d: Desc) -> Result<u64, (Option<Failure>, u64)> {
        let burst = params().ntb_dma.read_request_bytes * self.outstanding_reads;
        let mut done = 0u64;
        while done < d.count as u64 {
            let n = burst.min(d.count as u64 - done);
            let data = self.dma_read(f, ch, d.src + done, n, "read data").map_err(|e| (Some(e), done))?;
            self.dma_write(f, ch, d.dst + done, &data, "write data").map_err(|e| (Some(e), done))?;
            done += n;
        }
        Ok(done)
    }

    /// The channel's MSI-X vector (PCIe 3.0 §6.1.4), as the NVMe model raises it.
    fn interrupt(&mut self, f: &mut Fabric, ch: usize) {
        let entry = MSIX_TABLE_OFFSET + 16 * ch as u64;
        let addr = self.reg_read(f, entry, 8);
        let data = self.reg_read(f, entry + 8, 4) as u32;
        let masked = self.reg_read(f, entry + 12, 4) & 1 != 0;
        if addr != 0 && !masked {
            let _ = self.dma_write(f, ch, addr, &data.to_le_bytes(), "MSI-X completion interrupt");
        }
    }
}
