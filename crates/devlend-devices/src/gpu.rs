//! A GPU as a device on the fabric: the copy engine, device memory and device-initiated stores and
//! loads of the NVIDIA Kepler cards that 000 §7.1-7.2 lends (Quadro K420, Tesla K40c; their BAR
//! layouts are the `device.quadro-k420` / `device.tesla-k40c` profiles of params/hardware.toml),
//! reduced to what the paper's programs exercise:
//! - bandwidthTest (000 §7.1) uses "the remote K420's onboard DMA engine to copy data between GPU
//!   memory and borrower's RAM": the copy engine below, host memory at any DMA address;
//! - the GPU-to-GPU program (000 §7.2) lets "one GPU write directly into another GPUs memory":
//!   the same copy engine with a peer's BAR 1 as the destination;
//! - the ping-pong program (000 §7.2) has CUDA kernels "writing [a counter] to the other GPU's
//!   memory pointer" or to RAM and waiting for it: [`Gpu::store`], [`Gpu::load`], and the
//!   device's own view of its memory ([`Gpu::mem_read`]).
//!
//! Device memory is not BAR 1. A card has its frame buffer (the profile's `memory`: 12 GB on the
//! K40c, 1 GB on the K420) and a BAR 1 aperture (256 MiB by default) that windows onto part of
//! it; the copy engines reach all of device memory, CPUs and peers only what BAR 1 shows. The
//! bytes live in the fabric's sparse BAR store `bar_mem[(func, 1)]`, device-memory offset =
//! store offset, so a peer's P2P write to BAR 1 offset `o` is device memory at `o` and only pages
//! that were written take memory. BAR 1 windows onto device memory `[0, BAR 1 size)` (assumed:
//! NVIDIA's driver maps BAR 1 pages onto frame-buffer pages on demand, e.g. for
//! `nvidia_p2p_get_pages`; a fixed mapping of the first pages is what the paper's programs need).
//! A store to BAR 1 beyond device memory (the 16 GiB large-BAR1 K40c has 12 GB behind it) lands
//! where no copy engine reads. A GPU described by `functions` rather than a profile has no
//! `memory`: its device memory is its BAR 1, as before.
//!
//! NVIDIA's channel interface (push buffers, GPFIFO, class methods) is not publicly specified in
//! full, so BAR 0 holds a small register map of devlend's own with the same ingredients, little-
//! endian. Kepler cards have two asynchronous copy engines (CUDA's `asyncEngineCount` is 2 on the
//! K40c and K420): each has its own register block, CE0's at 0x100 and CE *n*'s at
//! `0x100 + n * CE_STRIDE` ([`ce_reg`]); the offsets below are CE0's.
//!
//! | offset  | register        | size | access | meaning                                             |
//! |---------|-----------------|------|--------|-----------------------------------------------------|
//! | 0x000   | `ID`            | 4    | RO     | PCI vendor ID, device ID << 16                      |
//! | 0x008   | `MEM_SIZE`      | 8    | RO     | device memory in bytes (the profile's `memory`)     |
//! | 0x010   | `CE_COUNT`      | 4    | RO     | copy engines ([`NUM_CE`])                           |
//! | 0x100   | `CE_SRC`        | 8    | RW     | source: device-memory offset or DMA address         |
//! | 0x108   | `CE_DST`        | 8    | RW     | destination: DMA address or device-memory offset    |
//! | 0x110   | `CE_LEN`        | 8    | RW     | bytes to copy                                       |
//! | 0x118   | `CE_DIR`        | 4    | RW     | `DIR_DEV_TO_BUS` (DMA writes) / `DIR_BUS_TO_DEV` (DMA reads) |
//! | 0x120   | `CE_SEM_ADDR`   | 8    | RW     | DMA address of the completion semaphore             |
//! | 0x128   | `CE_SEM_VALUE`  | 4    | RW     | value released into the semaphore                   |
//! | 0x12c   | `CE_DOORBELL`   | 4    | WO     | a value other than the last one launches the copy   |
//! | 0x130   | `CE_STATUS`     | 4    | RO     | `STATUS_*` of the last copy                         |
//! | 0x138   | `CE_FAULT_ADDR` | 8    | RO     | the DMA address that faulted (`STATUS_DMA_FAULT`)   |
//! | 0x140   | `CE_NOTIFY_ADDR`| 8    | RW     | DMA address the status goes to when a copy fails (0: none) |
//! | 0x148   | `CE_GPFIFO_ADDR`| 8    | RW     | DMA address of the engine's GPFIFO ring (0: methods in the registers above) |
//! | 0x150   | `CE_GPFIFO_ENTRIES`| 4 | RW     | entries in the GPFIFO ring                          |
//! | 0x200.. | CE1's block     |      |        | the same registers, `CE_STRIDE` (0x100) above CE0's |
//! | 0x1000  | `K_*`           |      |        | the ping-pong kernel's launch block ([`crate::gpu_kernel`]) |
//!
//! How a copy reaches the engine. As on a real Kepler channel (nouveau's and envytools' account of
//! the GPFIFO), a driver does not write a copy's parameters into the GPU: it writes them as methods
//! into a push buffer in host memory, a GPFIFO entry pointing at them into a ring in host memory,
//! and only the ring's put pointer into the GPU (`CE_DOORBELL`). The GPU then fetches the entry and
//! the methods with two dependent DMA reads, so a driver far from its GPU (a borrowed one, 000
//! §7.1-7.2) pays two round trips to its host's RAM per copy, on the links, before the copy starts:
//! the "reading and writing over the NTB" 000 §7.2 suspects behind the small-transfer gap. A
//! GPFIFO entry ([`GP_ENTRY_BYTES`]) is the methods' DMA address and their length; the methods
//! ([`METHODS_BYTES`]) are `CE_SRC`, `CE_DST`, `CE_LEN`, `CE_DIR`, `CE_SEM_VALUE` in that order,
//! written into the registers when fetched. With `CE_GPFIFO_ADDR` 0 the doorbell starts the copy
//! the registers hold (devlend's shortcut for tests that program the engine directly).
//!
//! The engine's own time (`dma_issue_ps` before each request it starts, `dma_completion_ps`
//! after read data it waits for) is the device's effective parameter (`devlend_fabric::tuning`).
//!
//! The MSI-X table sits at `config::MSIX_TABLE_OFFSET` (0x2000) above these.
//!
//! ## On the machine's clock
//!
//! The GPU is a [`Device`] on the engine's one clock, and one engine's copy is followed in this
//! file: a doorbell store landing in BAR 0 (`mmio_write` → `Gpu::ring`) makes that engine fetch
//! its copy's GPFIFO entry and methods from host memory (two dependent DMA reads, at the end of
//! this file; or take the registers, without a GPFIFO), decode them (`Gpu::command`), then start
//! the copy as one DMA flow on the machine, which splits it into max-payload writes or
//! max-read-request reads that contend with every other flow on the links: device to bus, a DMA
//! write of the device-memory bytes as they are when the doorbell lands; bus to device, a DMA read
//! whose data is written into device memory ([`Gpu::mem_write`]) request by request as the
//! completer serves it (`dma_data`: no copy of the whole transfer is held; a fault stops the read,
//! and what was served before it stays written). Then the engine releases its semaphore with a
//! 4-byte DMA write of `CE_SEM_VALUE` to `CE_SEM_ADDR`, the completion a CUDA driver spins on. A
//! copy that fails (bad registers, range outside device memory, DMA fault) sets `CE_STATUS` (and
//! `CE_FAULT_ADDR`; `STATUS_POISONED` when a read's completion came back poisoned), releases
//! nothing, and DMA-writes its status to `CE_NOTIFY_ADDR` (CUDA's error notifier) so a waiting
//! driver wakes; a DMA fault stops only that engine's flow. The two engines work at once, sharing
//! the links, each taking the engine's own time above. Stores landing in BAR 1 go to the
//! ping-pong kernel ([`crate::gpu_kernel`]). With [`Gpu::timing_only`] a copy that routes whole
//! moves no bytes: the same flow on the same links, timed alike, with nothing read or written.

use crate::error::{MResult, ModelError};
use crate::gpu_kernel::K_LAUNCH;
use devlend_engine::machine::{Cx, Device, FlowDone, World};
use devlend_engine::queue::Ps;
use devlend_fabric::model::FuncId;
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_wire::{Access, Tlp};

pub const ID: u64 = 0x000;
pub const MEM_SIZE: u64 = 0x008;
pub const CE_SRC: u64 = 0x100;
pub const CE_DST: u64 = 0x108;
pub const CE_LEN: u64 = 0x110;
pub const CE_DIR: u64 = 0x118;
pub const CE_SEM_ADDR: u64 = 0x120;
pub const CE_SEM_VALUE: u64 = 0x128;
pub const CE_DOORBELL: u64 = 0x12c;
pub const CE_STATUS: u64 = 0x130;
pub const CE_FAULT_ADDR: u64 = 0x138;
pub const CE_NOTIFY_ADDR: u64 = 0x140;
pub const CE_GPFIFO_ADDR: u64 = 0x148;
pub const CE_GPFIFO_ENTRIES: u64 = 0x150;
/// A GPFIFO entry: the methods' DMA address (8 bytes), their length (4), reserved (4).
pub const GP_ENTRY_BYTES: u64 = 16;
/// A copy's methods: source, destination, length (8 bytes each), direction, semaphore value (4 each).
pub const METHODS_BYTES: u64 = 32;
pub const CE_COUNT: u64 = 0x010;
/// Copy engines per GPU: Kepler's two async copy engines.
pub const NUM_CE: usize = 2;
/// Bytes between one copy engine's register block and the next.
pub const CE_STRIDE: u64 = 0x100;

/// Register `reg` (CE0's offset) of copy engine `ce`.
pub const fn ce_reg(ce: usize, reg: u64) -> u64 {
    reg + ce as u64 * CE_STRIDE
}

/// The copy engine whose doorbell is at BAR 0 offset `off`, if any.
pub fn doorbell_of(off: u64) -> Option<usize> {
    (0..NUM_CE).find(|&ce| ce_reg(ce, CE_DOORBELL) == off)
}

/// Device memory at `CE_SRC` to the DMA address `CE_DST` (device to host, or to a peer's BAR 1).
pub const DIR_DEV_TO_BUS: u32 = 0;
/// The DMA address `CE_SRC` to device memory at `CE_DST` (host to device).
pub const DIR_BUS_TO_DEV: u32 = 1;

pub const STATUS_IDLE: u32 = 0;
pub const STATUS_DONE: u32 = 1;
/// Unknown direction or zero length.
pub const STATUS_INVALID: u32 = 2;
/// The device-memory range is not inside device memory.
pub const STATUS_OUT_OF_RANGE: u32 = 3;
/// A DMA failed on the fabric (IOMMU fault, unsupported request, ...); see `CE_FAULT_ADDR`.
pub const STATUS_DMA_FAULT: u32 = 4;
/// The doorbell rang while the engine was still copying.
pub const STATUS_BUSY: u32 = 5;
/// A read of the copy came back as a poisoned completion (EP set, PCIe Base 4.0 §2.7.2): the
/// engine discarded its data and stopped (the fabric reported the Poisoned TLP Received through
/// AER); see `CE_FAULT_ADDR`.
pub const STATUS_POISONED: u32 = 6;

/// A decoded copy command: device-memory offset, bus (DMA) address, length, direction, and the
/// semaphore it releases (address, value), all taken when the doorbell rings, so registers
/// programmed for a later copy do not change a running one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cmd {
    pub dir: u32,
    pub dev: u64,
    pub bus: u64,
    pub len: u64,
    pub sem: u64,
    pub value: u32,
}

pub struct Gpu {
    pub func: FuncId,
    /// Device memory size (the profile's `memory`; BAR 1 size without a profile).
    pub mem_size: u64,
    /// BAR 1 size: how much of device memory CPUs and peers reach.
    pub bar1_size: u64,
    /// The doorbell value last served, per copy engine.
    pub(crate) served: [u32; NUM_CE],
    pub copies: u64,
    /// The command each copy engine is running (on the clock).
    pub(crate) busy: [Option<Cmd>; NUM_CE],
    /// Engines fetching their next copy's GPFIFO entry and methods.
    pub(crate) fetching: [bool; NUM_CE],
    /// The ping-pong kernel, when launched (on the clock).
    pub kernel: crate::gpu_kernel::Kernel,
    /// The copy engines move no bytes, only time (a workload that asks nothing of the data, as
    /// D6's epoch): a copy whose whole transfer routes when it starts is a data-free DMA
    /// (`Cx::dma_timed_after`), device memory and the other end left as they were; any other
    /// copy takes the data path, which stops at its first fault as before. Off by default.
    pub timing_only: bool,
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |a, x| a << 8 | *x as u64)
}

impl Gpu {
    /// The model of function `func`: device memory of its profile's `memory` size (or its BAR 1
    /// size), BAR 1 windowing onto it. Sets the read-only registers.
    pub fn new(f: &mut Fabric, func: FuncId) -> MResult<Gpu> {
        let fun = f.funcs().get(func as usize).ok_or(ModelError::NoFunction { func })?;
        let bar1 = fun.bars.iter().find(|b| b.index == 1).ok_or(ModelError::NoBar { device: fun.name.clone(), bar: 1 })?;
        let mem_size = Self::memory_of(f, func).unwrap_or(bar1.size);
        let g = Gpu {
            func,
            mem_size,
            bar1_size: bar1.size,
            served: [0; NUM_CE],
            copies: 0,
            busy: [None; NUM_CE],
            fetching: [false; NUM_CE],
            kernel: Default::default(),
            timing_only: false,
        };
        let id = fun.vendor as u32 | (fun.device_id as u32) << 16;
        f.set_power_on_value(func, 0, ID, &id.to_le_bytes());
        f.set_power_on_value(func, 0, MEM_SIZE, &g.mem_size.to_le_bytes());
        f.set_power_on_value(func, 0, CE_COUNT, &(NUM_CE as u32).to_le_bytes());
        Ok(g)
    }

    /// Device memory of `func`'s profile (params `device.<profile>.memory`), if it names one.
    fn memory_of(f: &Fabric, func: FuncId) -> Option<u64> {
        let node = f.func(func).node;
        let profile = f.devices().iter().find(|d| d.node == node)?.profile.as_ref()?;
        devlend_fabric::params::params().device.get(profile)?.memory
    }

    fn me(&self) -> Requester {
        Requester::Func(self.func)
    }

    pub(crate) fn reg(&self, f: &Fabric, off: u64, n: usize) -> u64 {
        let mut b = vec![0u8; n];
        if let Some(m) = f.bar_mem(self.func, 0) {
            m.read(off, &mut b);
        }
        le(&b)
    }

    pub(crate) fn reg_write(&self, f: &mut Fabric, off: u64, data: &[u8]) {
        f.bar_store(self.func, 0, off, data);
    }

    fn check(&self, off: u64, len: u64) -> MResult<()> {
        match off.checked_add(len) {
            Some(end) if end <= self.mem_size => Ok(()),
            _ => Err(ModelError::OutsideMemory { func: self.func, off, len, size: self.mem_size }),
        }
    }

    /// The GPU's own load from its memory (no fabric access): what a kernel polling its memory sees.
    pub fn mem_read(&self, f: &Fabric, off: u64, len: usize) -> MResult<Vec<u8>> {
        self.check(off, len as u64)?;
        let mut b = vec![0u8; len];
        if let Some(m) = f.bar_mem(self.func, 1) {
            m.read(off, &mut b);
        }
        Ok(b)
    }

    /// The GPU's own store into its memory (a kernel's store, or test set-up).
    pub fn mem_write(&self, f: &mut Fabric, off: u64, data: &[u8]) -> MResult<()> {
        self.check(off, data.len() as u64)?;
        f.bar_store(self.func, 1, off, data);
        Ok(())
    }

    /// A failed access by this GPU at `addr`, with the names of what refused it.
    fn dma_error(&self, f: &Fabric, failure: devlend_fabric::route::Failure, addr: u64) -> ModelError {
        ModelError::Dma { func: self.func, addr, failure: Box::new(f.failure_report(&failure)) }
    }

    /// A store by the GPU's SMs to a DMA address (a peer's BAR 1, host RAM), at once and without
    /// time: for the functional checks of what the fabric lets through (`devlend-vm`'s attacks).
    pub fn store(&mut self, f: &mut Fabric, addr: u64, data: &[u8]) -> MResult<()> {
        match f.write(self.me(), addr, data).1 {
            None => Ok(()),
            Some(e) => Err(self.dma_error(f, e, addr)),
        }
    }

    /// A load by the GPU's SMs from a DMA address, at once and without time (as [`Gpu::store`]).
    pub fn load(&mut self, f: &mut Fabric, addr: u64, len: usize) -> MResult<Vec<u8>> {
        match f.read(self.me(), addr, len) {
            (data, None) => Ok(data),
            (_, Some(e)) => Err(self.dma_error(f, e, addr)),
        }
    }

    /// The doorbell of engine `ce` rang with a new value: take it (None if it is not new).
    pub(crate) fn ring(&mut self, f: &Fabric, ce: usize) -> Option<u32> {
        let bell = self.reg(f, ce_reg(ce, CE_DOORBELL), 4) as u32;
        if bell == self.served[ce] {
            return None;
        }
        self.served[ce] = bell;
        self.copies += 1;
        Some(bell)
    }

    /// Engine `ce`'s programmed command, or the status that refuses it.
    pub(crate) fn command(&self, f: &Fabric, ce: usize) -> Result<Cmd, u32> {
        let r = |reg, n| self.reg(f, ce_reg(ce, reg), n);
        let (src, dst, len, dir) = (r(CE_SRC, 8), r(CE_DST, 8), r(CE_LEN, 8), r(CE_DIR, 4) as u32);
        let (dev, bus) = match dir {
            DIR_DEV_TO_BUS => (src, dst),
            DIR_BUS_TO_DEV => (dst, src),
            _ => return Err(STATUS_INVALID),
        };
        if len == 0 {
            return Err(STATUS_INVALID);
        }
        if self.check(dev, len).is_err() || bus.checked_add(len).is_none() {
            return Err(STATUS_OUT_OF_RANGE);
        }
        Ok(Cmd { dir, dev, bus, len, sem: r(CE_SEM_ADDR, 8), value: r(CE_SEM_VALUE, 4) as u32 })
    }

    pub(crate) fn set_status(&self, f: &mut Fabric, ce: usize, status: u32) {
        self.reg_write(f, ce_reg(ce, CE_STATUS), &status.to_le_bytes());
    }

    pub(crate) fn set_fault(&self, f: &mut Fabric, ce: usize, addr: u64) -> u32 {
        self.reg_write(f, ce_reg(ce, CE_FAULT_ADDR), &addr.to_le_bytes());
        STATUS_DMA_FAULT
    }

    /// As [`Gpu::set_fault`] for a flow that stopped on `why`: a poisoned completion is
    /// `STATUS_POISONED`, any other failure `STATUS_DMA_FAULT`.
    pub(crate) fn set_flow_fault(&self, f: &mut Fabric, ce: usize, (addr, why): (u64, devlend_fabric::route::Failure)) -> u32 {
        let s = self.set_fault(f, ce, addr);
        if matches!(why, devlend_fabric::route::Failure::Poisoned { .. }) {
            STATUS_POISONED
        } else {
            s
        }
    }
}

/// What a flow or timer of the GPU is for: the low byte is the engine (or kernel step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Token {
    Data(usize),
    Sem(usize),
    Notify(usize),
    Kernel(u8),
    /// The GPFIFO entry of engine `.0`'s next copy.
    Entry(usize),
    /// The methods of engine `.0`'s next copy.
    Methods(usize),
}

impl Token {
    pub(crate) fn encode(self) -> u64 {
        match self {
            Token::Data(ce) => ce as u64,
            Token::Sem(ce) => 1 << 8 | ce as u64,
            Token::Notify(ce) => 2 << 8 | ce as u64,
            Token::Kernel(step) => 3 << 8 | step as u64,
            Token::Entry(ce) => 4 << 8 | ce as u64,
            Token::Methods(ce) => 5 << 8 | ce as u64,
        }
    }

    pub(crate) fn decode(t: u64) -> Token {
        let low = (t & 0xff) as usize;
        match t >> 8 {
            0 => Token::Data(low),
            1 => Token::Sem(low),
            2 => Token::Notify(low),
            4 => Token::Entry(low),
            5 => Token::Methods(low),
            _ => Token::Kernel(low as u8),
        }
    }
}

impl<W: World> Device<W> for Gpu {
    fn mmio_write(&mut self, cx: &mut Cx<W>, bar: u8, offset: u64, _tlp: &Tlp) {
        match bar {
            0 => {
                if let Some(ce) = doorbell_of(offset) {
                    if let Some(put) = self.ring(cx.fabric(), ce) {
                        self.rung(cx, ce, put);
                    }
                } else if offset == K_LAUNCH {
                    self.kernel_launch(cx);
                }
            }
            1 => self.kernel_sees(cx, offset),
            _ => {}
        }
    }

    fn dma_done(&mut self, cx: &mut Cx<W>, done: FlowDone) {
        match Token::decode(done.token) {
            Token::Data(ce) => self.data_done(cx, ce, done),
            Token::Sem(ce) => match done.fault {
                None => self.end(cx, ce, STATUS_DONE),
                Some(fault) => {
                    let s = self.set_flow_fault(cx.fabric(), ce, fault);
                    self.end(cx, ce, s)
                }
            },
            Token::Notify(ce) => self.busy[ce] = None,
            Token::Kernel(step) => self.kernel_dma_done(cx, step, done),
            Token::Entry(ce) => self.entry_fetched(cx, ce, done),
            Token::Methods(ce) => self.methods_fetched(cx, ce, done),
        }
    }

    /// A bus-to-device copy's bytes as they are read: into device memory at once, as the copy
    /// engine writes each completion's data (no copy of the whole transfer is held).
    fn dma_data(&mut self, cx: &mut Cx<W>, token: u64, offset: u64, data: &[u8]) {
        let Token::Data(ce) = Token::decode(token) else { return };
        if let Some(cmd) = self.busy[ce] {
            let _ = self.mem_write(cx.fabric(), cmd.dev + offset, data);
        }
    }

    fn timer(&mut self, cx: &mut Cx<W>, token: u64) {
        if let Token::Kernel(step) = Token::decode(token) {
            self.kernel_timer(cx, step);
        }
    }
}

impl Gpu {
    /// The engine's own times: (issue, completion), the device's effective parameters.
    pub(crate) fn engine_ps<W: World>(&self, cx: &mut Cx<W>) -> (Ps, Ps) {
        let t = devlend_fabric::tuning::of_func(cx.fabric(), self.func);
        (t.dma_issue_ps, t.dma_completion_ps)
    }

    /// Engine `ce`'s doorbell rang with put pointer `put`: fetch the copy, or take the registers.
    fn rung<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, put: u32) {
        if self.busy[ce].is_some() || self.fetching[ce] {
            return self.end(cx, ce, STATUS_BUSY);
        }
        if self.reg(cx.fabric(), ce_reg(ce, CE_GPFIFO_ADDR), 8) != 0 {
            return self.fetch_entry(cx, ce, put);
        }
        self.start(cx, ce, 0);
    }

    /// Start engine `ce`'s copy as its registers hold it, `wait` after now plus the engine's issue time.
    pub(crate) fn start<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, wait: Ps) {
        if self.busy[ce].is_some() {
            return self.end(cx, ce, STATUS_BUSY);
        }
        let cmd = match self.command(cx.fabric(), ce) {
            Ok(c) => c,
            Err(s) => return self.end(cx, ce, s),
        };
        self.busy[ce] = Some(cmd);
        let token = Token::Data(ce).encode();
        let delay = wait + self.engine_ps(cx).0;
        let access = if cmd.dir == DIR_DEV_TO_BUS { Access::Write } else { Access::Read };
        let started = if self.timing_only && cx.transfer_routes(cmd.bus, cmd.len, access) {
            cx.dma_timed_after(delay, cmd.bus, access, cmd.len, token)
        } else if cmd.dir == DIR_DEV_TO_BUS {
            let data = self.mem_read(cx.fabric(), cmd.dev, cmd.len as usize).unwrap_or_default();
            cx.dma_write_after(delay, cmd.bus, data, token)
        } else {
            cx.dma_read_streamed_after(delay, cmd.bus, cmd.len, token)
        };
        if let Err(why) = started {
            let s = self.set_flow_fault(cx.fabric(), ce, (cmd.bus, why));
            self.end(cx, ce, s);
        }
    }

    /// Engine `ce`'s data flow ended (a read's bytes are in device memory already): release or report.
    fn data_done<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, done: FlowDone) {
        let Some(cmd) = self.busy[ce] else { return };
        if let Some(fault) = done.fault {
            let s = self.set_flow_fault(cx.fabric(), ce, fault);
            return self.end(cx, ce, s);
        }
        // Read data is taken in before the release; written data needs nothing more.
        let (issue, completion) = self.engine_ps(cx);
        let delay = issue + if cmd.dir == DIR_BUS_TO_DEV { completion } else { 0 };
        if let Err(why) = cx.dma_write_after(delay, cmd.sem, cmd.value.to_le_bytes().to_vec(), Token::Sem(ce).encode()) {
            let s = self.set_flow_fault(cx.fabric(), ce, (cmd.sem, why));
            self.end(cx, ce, s);
        }
    }

    /// Engine `ce` is done with `status`: set it, and on failure tell the error notifier.
    pub(crate) fn end<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, status: u32) {
        self.set_status(cx.fabric(), ce, status);
        let notify = self.reg(cx.fabric(), ce_reg(ce, CE_NOTIFY_ADDR), 8);
        if status == STATUS_DONE || notify == 0 || status == STATUS_BUSY {
            if status != STATUS_BUSY {
                self.busy[ce] = None;
            }
            return;
        }
        let issue = self.engine_ps(cx).0;
        if cx.dma_write_after(issue, notify, status.to_le_bytes().to_vec(), Token::Notify(ce).encode()).is_err() {
            self.busy[ce] = None;
        }
    }
}

// How a copy engine takes its next copy from host memory: the GPFIFO entry the doorbell's put
// pointer names, then the methods it points at, two dependent DMA reads (see the module docs).
// Each read leaves the engine `dma_issue_ps` after it decided on it, and its data is used
// `dma_completion_ps` after it arrived; a fault ends the copy as a fault of the engine's DMA.

impl Gpu {
    /// Fetch the GPFIFO entry before put pointer `put` of engine `ce`'s ring.
    pub(crate) fn fetch_entry<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, put: u32) {
        let ring = self.reg(cx.fabric(), ce_reg(ce, CE_GPFIFO_ADDR), 8);
        let entries = self.reg(cx.fabric(), ce_reg(ce, CE_GPFIFO_ENTRIES), 4).max(1);
        let at = ring + (put.wrapping_sub(1) as u64 % entries) * GP_ENTRY_BYTES;
        self.fetching[ce] = true;
        let issue = self.engine_ps(cx).0;
        if let Err(why) = cx.dma_read_after(issue, at, GP_ENTRY_BYTES, Token::Entry(ce).encode()) {
            self.fetch_failed(cx, ce, (at, why));
        }
    }

    /// The entry arrived: fetch the methods it points at.
    pub(crate) fn entry_fetched<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, done: FlowDone) {
        if let Some(fault) = done.fault {
            return self.fetch_failed(cx, ce, fault);
        }
        let (at, len) = (le(&done.data[0..8]), le(&done.data[8..12]));
        if len != METHODS_BYTES {
            self.fetching[ce] = false;
            return self.end(cx, ce, STATUS_INVALID);
        }
        let (issue, completion) = self.engine_ps(cx);
        if let Err(why) = cx.dma_read_after(completion + issue, at, len, Token::Methods(ce).encode()) {
            self.fetch_failed(cx, ce, (at, why));
        }
    }

    /// The methods arrived: execute them into the engine's registers and start the copy.
    pub(crate) fn methods_fetched<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, done: FlowDone) {
        self.fetching[ce] = false;
        if let Some(fault) = done.fault {
            let s = self.set_flow_fault(cx.fabric(), ce, fault);
            return self.end(cx, ce, s);
        }
        let m = &done.data;
        let f = cx.fabric();
        for (reg, from, n) in [(CE_SRC, 0, 8), (CE_DST, 8, 8), (CE_LEN, 16, 8), (CE_DIR, 24, 4), (CE_SEM_VALUE, 28, 4)] {
            self.reg_write(f, ce_reg(ce, reg), &m[from..from + n]);
        }
        let completion = self.engine_ps(cx).1;
        self.start(cx, ce, completion);
    }

    fn fetch_failed<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, fault: (u64, devlend_fabric::route::Failure)) {
        self.fetching[ce] = false;
        let s = self.set_flow_fault(cx.fabric(), ce, fault);
        self.end(cx, ce, s);
    }
}
