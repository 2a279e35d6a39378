//! One channel of the PEX8749 DMA engine: a pipeline of DMA flows driven by their completions.
//!
//! A run starts when START lands in the channel's CTRL register. The issuer walks the descriptors
//! (the block registers, or the SG ring fetched `descriptor_prefetch` at a time with a DMA read)
//! and keeps at most `outstanding_reads` reads of `read_request_bytes` in flight; when a read's
//! data returns, its chunk is written to the destination at once (posted) and the next read goes
//! out, so reads and writes overlap. SG descriptors are worked one at a time: once the last read
//! of one has returned, the engine spends its `descriptor_turnaround_ps` loading the next. A
//! descriptor is retired (its status written back into the ring) once all its bytes have landed,
//! in order. When every descriptor is retired, or at the first fault once the flows already in
//! flight have ended, the channel writes STATUS and BYTES_DONE and raises its MSI-X vector.

use super::params::ntb_dma;
use super::{reg_read, reg_write, ChannelLog, Desc, DmaFault, Kind, Token};
use super::{
    BYTES_DONE, CH_STRIDE, COUNT, CTRL, CTRL_IRQ, CTRL_SG, CTRL_START, DESC_DONE, DESC_ERROR, DESC_VALID, DST, NDESC, RING, SRC, STATUS, STATUS_DONE,
    STATUS_ERROR,
};
use devlend_engine::machine::{Cx, FlowDone, World};
use devlend_fabric::config::MSIX_TABLE_OFFSET;
use devlend_fabric::route::Failure;

/// One run of a channel: from START to its interrupt.
#[derive(Default)]
struct Run {
    sg: bool,
    irq: bool,
    ring: u64,
    /// Descriptors fetched so far: (descriptor, control word).
    descs: Vec<(Desc, u32)>,
    ndesc: usize,
    fetching: bool,
    /// The issuer: descriptor and offset of the next read; descriptors whose turnaround is over.
    cur: usize,
    off: u64,
    loaded: usize,
    waiting: bool,
    reads: u64,
    /// (descriptor, offset, length) of each chunk, by sequence number.
    chunks: Vec<(usize, u64, u64)>,
    /// Bytes of each descriptor not yet landed.
    left: Vec<u64>,
    retired: usize,
    landed: u64,
    /// Flows of this run in flight.
    inflight: u32,
    fault: Option<DmaFault>,
}

pub(crate) struct Channel {
    ch: u8,
    outstanding: u64,
    run_id: u16,
    run: Option<Run>,
    pub log: ChannelLog,
}

impl Channel {
    pub fn new(ch: u8, outstanding: u64) -> Channel {
        Channel { ch, outstanding, run_id: 0, run: None, log: ChannelLog::default() }
    }

    pub fn busy(&self) -> bool {
        self.run.is_some()
    }

    fn base(&self) -> u64 {
        self.ch as u64 * CH_STRIDE
    }

    fn token(&self, kind: Kind, seq: u32) -> u64 {
        Token { run: self.run_id, ch: self.ch, kind, seq }.encode()
    }

    /// START has landed in CTRL: clear it and begin (a channel already running ignores it).
    pub fn start<W: World>(&mut self, cx: &mut Cx<W>) {
        let (func, base) = (cx.func(), self.base());
        let ctrl = reg_read(cx.fabric(), func, base + CTRL, 4) as u32;
        if ctrl & CTRL_START == 0 || self.busy() {
            return;
        }
        let f = cx.fabric();
        reg_write(f, func, base + CTRL, &(ctrl & !CTRL_START).to_le_bytes());
        reg_write(f, func, base + STATUS, &0u32.to_le_bytes());
        let mut run = Run { sg: ctrl & CTRL_SG != 0, irq: ctrl & CTRL_IRQ != 0, ..Run::default() };
        if run.sg {
            run.ring = reg_read(f, func, base + RING, 8);
            run.ndesc = reg_read(f, func, base + NDESC, 4) as usize;
        } else {
            let d = Desc { src: reg_read(f, func, base + SRC, 8), dst: reg_read(f, func, base + DST, 8), count: reg_read(f, func, base + COUNT, 4) as u32 };
            run.descs.push((d, DESC_VALID));
            run.ndesc = 1;
        }
        run.left = vec![0; run.ndesc];
        self.run_id = self.run_id.wrapping_add(1);
        self.log.transfers += 1;
        self.run = Some(run);
        self.pump(cx);
    }

    /// Issue what the pipeline allows now; end the run if nothing is left to do.
    fn pump<W: World>(&mut self, cx: &mut Cx<W>) {
        while self.step(cx) {}
        self.retire(cx);
        self.maybe_finish(cx);
    }

    /// Issue one thing (a fetch, a turnaround, a read); false when the issuer must wait.
    fn step<W: World>(&mut self, cx: &mut Cx<W>) -> bool {
        match self.next() {
            Next::Wait => false,
            Next::Advance => true,
            Next::Fetch => {
                self.fetch(cx);
                false
            }
            Next::Invalid(i) => {
                self.stop(cx, i, None);
                false
            }
            Next::Turnaround => {
                let t = self.token(Kind::Turnaround, 0);
                cx.set_timer(ntb_dma().descriptor_turnaround_ps, t);
                false
            }
            Next::Read { i, addr, n, seq } => {
                let t = self.token(Kind::Read, seq);
                match cx.dma_read(addr, n, t) {
                    Ok(()) => {
                        let r = self.run.as_mut().expect("running");
                        r.reads += 1;
                        r.inflight += 1;
                        true
                    }
                    Err(e) => {
                        self.stop(cx, i, Some(e));
                        false
                    }
                }
            }
        }
    }

    /// What the issuer does next (and the bookkeeping of deciding it).
    fn next(&mut self) -> Next {
        let rrb = ntb_dma().read_request_bytes;
        let outstanding = self.outstanding;
        let Some(r) = self.run.as_mut() else { return Next::Wait };
        if r.fault.is_some() || r.waiting || r.cur >= r.ndesc {
            return Next::Wait;
        }
        if r.cur >= r.descs.len() {
            return if r.fetching { Next::Wait } else { Next::Fetch };
        }
        let (d, ctl) = r.descs[r.cur];
        if ctl & DESC_VALID == 0 {
            return Next::Invalid(r.cur);
        }
        if r.sg && r.loaded <= r.cur {
            // Descriptors are worked one at a time: the next is loaded once the last read of the
            // one before has returned (its writes issued).
            if r.reads > 0 {
                return Next::Wait;
            }
            r.waiting = true;
            return Next::Turnaround;
        }
        if r.off == 0 {
            r.left[r.cur] = d.count as u64;
        }
        if r.off >= d.count as u64 {
            r.cur += 1;
            r.off = 0;
            return Next::Advance;
        }
        if r.reads >= outstanding {
            return Next::Wait;
        }
        let n = rrb.min(d.count as u64 - r.off);
        let seq = r.chunks.len() as u32;
        r.chunks.push((r.cur, r.off, n));
        let (i, addr) = (r.cur, d.src + r.off);
        r.off += n;
        Next::Read { i, addr, n, seq }
    }

    /// Fetch the next `descriptor_prefetch` SG descriptors from the ring.
    fn fetch<W: World>(&mut self, cx: &mut Cx<W>) {
        let p = ntb_dma();
        let r = self.run.as_mut().expect("running");
        let i = r.descs.len();
        let k = (r.ndesc - i).min(p.descriptor_prefetch as usize) as u64;
        let addr = r.ring + i as u64 * p.descriptor_bytes;
        let t = self.token(Kind::Fetch, i as u32);
        match cx.dma_read(addr, k * p.descriptor_bytes, t) {
            Ok(()) => {
                let r = self.run.as_mut().expect("running");
                r.fetching = true;
                r.inflight += 1;
            }
            Err(e) => self.stop(cx, i, Some(e)),
        }
    }

    /// A flow of this channel has ended.
    pub fn done<W: World>(&mut self, cx: &mut Cx<W>, t: Token, done: FlowDone) {
        if t.run != self.run_id || t.kind == Kind::Msi {
            return;
        }
        let Some(r) = self.run.as_mut() else { return };
        r.inflight -= 1;
        let fault = done.fault.map(|(_, e)| e);
        match t.kind {
            Kind::Fetch => self.fetched(cx, t.seq as usize, done.data, fault),
            Kind::Read => self.read_back(cx, t.seq, done.data, fault),
            Kind::Write => self.landed(cx, t.seq, fault),
            Kind::Status => {
                if let Some(e) = fault {
                    self.stop(cx, t.seq as usize, Some(e));
                }
            }
            _ => {}
        }
        self.pump(cx);
    }

    fn fetched<W: World>(&mut self, cx: &mut Cx<W>, first: usize, data: Vec<u8>, fault: Option<Failure>) {
        let r = self.run.as_mut().expect("running");
        r.fetching = false;
        if let Some(e) = fault {
            return self.stop(cx, first, Some(e));
        }
        let n = ntb_dma().descriptor_bytes as usize;
        r.descs.extend(data.chunks_exact(n).map(Desc::decode));
    }

    /// A read's data is back: write its chunk to the destination.
    fn read_back<W: World>(&mut self, cx: &mut Cx<W>, seq: u32, data: Vec<u8>, fault: Option<Failure>) {
        let r = self.run.as_mut().expect("running");
        r.reads -= 1;
        let (i, off, _) = r.chunks[seq as usize];
        if let Some(e) = fault {
            return self.stop(cx, i, Some(e));
        }
        if r.fault.is_some() {
            return;
        }
        let dst = r.descs[i].0.dst + off;
        let t = self.token(Kind::Write, seq);
        match cx.dma_write(dst, data, t) {
            Ok(()) => self.run.as_mut().expect("running").inflight += 1,
            Err(e) => self.stop(cx, i, Some(e)),
        }
    }

    fn landed<W: World>(&mut self, cx: &mut Cx<W>, seq: u32, fault: Option<Failure>) {
        let r = self.run.as_mut().expect("running");
        let (i, _, n) = r.chunks[seq as usize];
        if let Some(e) = fault {
            return self.stop(cx, i, Some(e));
        }
        r.left[i] -= n;
        r.landed += n;
        self.log.bytes += n;
    }

    /// The turnaround before descriptor `cur` is over.
    pub fn timer<W: World>(&mut self, cx: &mut Cx<W>, t: Token) {
        if t.run != self.run_id {
            return;
        }
        if let Some(r) = self.run.as_mut() {
            r.waiting = false;
            r.loaded = r.cur + 1;
        }
        self.pump(cx);
    }

    /// Retire, in order, the descriptors the issuer has passed whose bytes have all landed.
    fn retire<W: World>(&mut self, cx: &mut Cx<W>) {
        let dbytes = ntb_dma().descriptor_bytes;
        loop {
            let Some(r) = self.run.as_mut() else { return };
            // After a fault, the descriptors before the failing one are still retired as they land.
            let limit = r.fault.map_or(r.cur, |x| x.descriptor.min(r.cur));
            if r.retired >= limit || r.left[r.retired] != 0 {
                return;
            }
            let (i, sg, ring) = (r.retired, r.sg, r.ring);
            r.retired += 1;
            if sg {
                self.status_write(cx, i, ring + i as u64 * dbytes + 20, DESC_DONE);
            }
        }
    }

    /// Write descriptor `i`'s control word back into the ring (posted).
    fn status_write<W: World>(&mut self, cx: &mut Cx<W>, i: usize, addr: u64, v: u32) {
        let t = self.token(Kind::Status, i as u32);
        if cx.dma_write(addr, v.to_le_bytes().to_vec(), t).is_ok() {
            self.run.as_mut().expect("running").inflight += 1;
        }
    }

    /// Stop at the first fault: descriptor `i` failed (`None`: it was not valid).
    fn stop<W: World>(&mut self, cx: &mut Cx<W>, i: usize, failure: Option<Failure>) {
        let dbytes = ntb_dma().descriptor_bytes;
        let r = self.run.as_mut().expect("running");
        if r.fault.is_some() {
            return;
        }
        r.fault = Some(DmaFault { descriptor: i, failure, bytes_done: 0 });
        let (sg, ring) = (r.sg, r.ring);
        if sg && i < r.descs.len() {
            self.status_write(cx, i, ring + i as u64 * dbytes + 20, DESC_ERROR | DESC_DONE);
        }
    }

    /// End the run once it is complete (or faulted) and nothing of it is in flight.
    fn maybe_finish<W: World>(&mut self, cx: &mut Cx<W>) {
        let Some(r) = self.run.as_ref() else { return };
        let complete = r.fault.is_some() || (r.cur >= r.ndesc && r.retired >= r.ndesc);
        if !complete || r.inflight > 0 || r.waiting {
            return;
        }
        let r = self.run.take().expect("running");
        let (func, base) = (cx.func(), self.base());
        let status = match r.fault {
            None => STATUS_DONE,
            Some(mut fault) => {
                fault.bytes_done = r.landed;
                self.log.faults.push(fault);
                STATUS_DONE | STATUS_ERROR | (fault.descriptor as u32) << 8
            }
        };
        let f = cx.fabric();
        reg_write(f, func, base + BYTES_DONE, &r.landed.to_le_bytes());
        reg_write(f, func, base + STATUS, &status.to_le_bytes());
        if r.irq {
            self.interrupt(cx);
        }
    }

    /// The channel's MSI-X vector (PCIe 3.0 §6.1.4), as the NVMe model raises it.
    fn interrupt<W: World>(&mut self, cx: &mut Cx<W>) {
        let func = cx.func();
        let entry = MSIX_TABLE_OFFSET + 16 * self.ch as u64;
        let f = cx.fabric();
        let addr = reg_read(f, func, entry, 8);
        let data = reg_read(f, func, entry + 8, 4) as u32;
        let masked = reg_read(f, func, entry + 12, 4) & 1 != 0;
        if addr != 0 && !masked {
            let t = self.token(Kind::Msi, 0);
            let _ = cx.dma_write(addr, data.to_le_bytes().to_vec(), t);
        }
    }
}

enum Next {
    Wait,
    Advance,
    Fetch,
    Invalid(usize),
    Turnaround,
    Read { i: usize, addr: u64, n: u64, seq: u32 },
}
