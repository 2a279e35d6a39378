//! The GPU on the machine's clock: a [`Device`] whose copy engines act when their doorbell lands.
//!
//! A doorbell store reaching BAR 0 makes that engine fetch its copy's GPFIFO entry and methods
//! from host memory (the GPFIFO entry, then the methods it points at: two dependent DMA reads, at
//! the end of this file; or take the registers, without a GPFIFO), then start the
//! copy as one DMA flow on the machine (the
//! machine splits it into max-payload writes or max-read-request reads, which contend with every
//! other flow on the links): device to bus, a DMA write of the device-memory bytes as they are
//! when the doorbell lands; bus to device, a DMA read whose data is written into device memory
//! request by request as the completer serves it (no copy of the whole transfer is held; a
//! fault stops the read, and what was served before it stays written). Then the engine releases
//! its semaphore with a 4-byte DMA write. The two engines work at once. A fault sets the engine's `CE_STATUS`/`CE_FAULT_ADDR` (`STATUS_POISONED` when
//! a read's completion came back poisoned) and DMA-writes the status to `CE_NOTIFY_ADDR`; the other engine goes on. Every request the engine starts leaves it
//! `dma_issue_ps` after the engine decided on it, and read data is acted on `dma_completion_ps`
//! after it has all arrived (the device's effective parameters). Stores landing in BAR 1 go to the
//! ping-pong kernel ([`crate::gpu_kernel`]). With [`Gpu::timing_only`] a copy that routes whole moves no
//! bytes: the same flow on the same links, timed alike, with nothing read or written.

use crate::gpu::*;
use crate::gpu_kernel::K_LAUNCH;
use devlend_engine::machine::{Cx, Device, FlowDone, World};
use devlend_engine::queue::Ps;
use devlend_wire::{Access, Tlp};

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
// pointer names, then the methods it points at, two dependent DMA reads (see [`crate::gpu`]).
// Each read leaves the engine `dma_issue_ps` after it decided on it, and its data is used
// `dma_completion_ps` after it arrived; a fault ends the copy as a fault of the engine's DMA.

fn le(b: &[u8], at: usize, n: usize) -> u64 {
    b[at..at + n].iter().rev().fold(0, |a, x| a << 8 | *x as u64)
}

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
        let (at, len) = (le(&done.data, 0, 8), le(&done.data, 8, 4));
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
