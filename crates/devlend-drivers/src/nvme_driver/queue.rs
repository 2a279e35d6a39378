//! One queue pair (Linux `struct nvme_queue`): submission entries and the tail doorbell
//! (`nvme_submit_cmd`), completions reaped by phase tag after the queue's interrupt
//! (`nvme_irq`, `nvme_process_cq`), and the block layer's per-request DMA mapping and PRPs
//! (`nvme_queue_rq`, `nvme_setup_prps`).

use super::{os_err, NResult, NvmeError};
use devlend_devices::nvme::{BLOCK, CSTS, DOORBELL, OP_READ, OP_WRITE};
use devlend_host::{DevId, DmaDir, Os};
use std::collections::HashMap;

/// A completed command: its id, NVMe status, and the submission queue head the controller reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub cid: u16,
    pub status: u16,
}

/// What a command in flight holds until it completes: its DMA mapping and PRP list.
struct Request {
    opcode: u8,
    lba: u64,
    dma: u64,
    len: u64,
    dir: DmaDir,
    list: Option<(u64, u64, u64)>,
}

pub struct NvmeQueue {
    dev: DevId,
    bar0: u64,
    pub qid: u16,
    sq: (u64, u64),
    cq: (u64, u64),
    depth: u32,
    sq_tail: u32,
    sq_head: u32,
    cq_head: u32,
    phase: bool,
    next_cid: u16,
    inflight: HashMap<u16, Option<Request>>,
    /// Completions reaped but not yet asked for.
    done: Vec<Completion>,
    /// The host's vector for this queue's interrupts, and how many the driver has taken.
    pub vector: u8,
    pub interrupts: u64,
}

fn phase_set(b: &[u8]) -> bool {
    b[14] & 1 == 1
}

fn phase_clear(b: &[u8]) -> bool {
    b[14] & 1 == 0
}

impl NvmeQueue {
    pub(super) fn empty(dev: DevId, bar0: u64) -> NvmeQueue {
        NvmeQueue::new(dev, bar0, 0, (0, 0), (0, 0), 2, 0)
    }

    pub(super) fn new(dev: DevId, bar0: u64, qid: u16, sq: (u64, u64), cq: (u64, u64), depth: u32, vector: u8) -> NvmeQueue {
        NvmeQueue {
            dev,
            bar0,
            qid,
            sq,
            cq,
            depth,
            sq_tail: 0,
            sq_head: 0,
            cq_head: 0,
            phase: true,
            next_cid: 0,
            inflight: HashMap::new(),
            done: Vec::new(),
            vector,
            interrupts: 0,
        }
    }

    pub(super) fn sq_dma(&self) -> u64 {
        self.sq.1
    }

    pub(super) fn cq_dma(&self) -> u64 {
        self.cq.1
    }

    /// Commands submitted and not yet reaped.
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// The most commands the queue holds at once (one entry stays empty, §4.1.2).
    pub fn depth(&self) -> usize {
        self.depth as usize - 1
    }

    /// Write an entry at the tail and ring the tail doorbell (`nvme_submit_cmd`); returns its command id.
    pub(super) fn submit(&mut self, os: &mut impl Os, sqe: [u8; 64]) -> NResult<u16> {
        self.submit_req(os, sqe, None)
    }

    fn submit_req(&mut self, os: &mut impl Os, mut sqe: [u8; 64], req: Option<Request>) -> NResult<u16> {
        if self.inflight.len() >= self.depth() || (self.sq_tail + 1) % self.depth == self.sq_head {
            return Err(NvmeError::QueueFull { qid: self.qid });
        }
        let mut cid = self.next_cid;
        while self.inflight.contains_key(&cid) {
            cid = cid.wrapping_add(1);
        }
        self.next_cid = cid.wrapping_add(1);
        sqe[2..4].copy_from_slice(&cid.to_le_bytes());
        let slot = self.sq.0 + self.sq_tail as u64 * 64;
        os.write(slot, &sqe).map_err(os_err("write SQE"))?;
        self.sq_tail = (self.sq_tail + 1) % self.depth;
        self.inflight.insert(cid, req);
        os.write(self.bar0 + DOORBELL + 8 * self.qid as u64, &self.sq_tail.to_le_bytes()).map_err(os_err("MMIO write"))?;
        Ok(cid)
    }

    /// `nvme_queue_rq`: map `blocks` blocks of the kernel buffer at `buf`, build PRP1/PRP2 or a
    /// PRP list, and submit a Read or Write of `lba` without waiting. Returns the command id.
    pub fn queue_rq(&mut self, os: &mut impl Os, opcode: u8, lba: u64, blocks: u16, buf: u64) -> NResult<u16> {
        if blocks == 0 {
            return Err(NvmeError::Invalid { reason: "a transfer of zero blocks" });
        }
        let dir = if opcode == OP_READ { DmaDir::FromDevice } else { DmaDir::ToDevice };
        let len = blocks as u64 * BLOCK;
        let dma = os.dma_map_single(self.dev, buf, len, dir).map_err(os_err("dma_map_single"))?;
        let first = (4096 - dma % 4096).min(len);
        let mut list = None;
        let prp2 = if len - first == 0 {
            0
        } else if len - first <= 4096 {
            dma + first
        } else {
            let pages: Vec<u64> = (0..(len - first).div_ceil(4096)).map(|i| (dma + first) + i * 4096).collect();
            let bytes = pages.len() as u64 * 8;
            let l = os.dma_alloc_coherent(self.dev, bytes).map_err(os_err("dma_alloc_coherent"))?;
            let raw: Vec<u8> = pages.iter().flat_map(|p| p.to_le_bytes()).collect();
            os.write(l.0, &raw).map_err(os_err("write PRP list"))?;
            list = Some((l.0, l.1, bytes));
            l.1
        };
        let mut sqe = [0u8; 64];
        sqe[0] = opcode;
        sqe[4..8].copy_from_slice(&1u32.to_le_bytes());
        sqe[24..32].copy_from_slice(&dma.to_le_bytes());
        sqe[32..40].copy_from_slice(&prp2.to_le_bytes());
        sqe[40..48].copy_from_slice(&lba.to_le_bytes());
        sqe[48..50].copy_from_slice(&(blocks - 1).to_le_bytes());
        let req = Request { opcode, lba, dma, len, dir, list };
        self.submit_req(os, sqe, Some(req))
    }

    /// `nvme_process_cq`: read completion entries at the head while their phase tag is the
    /// expected one, release their requests, and ring the CQ head doorbell once.
    fn process_cq(&mut self, os: &mut impl Os) -> NResult<usize> {
        let mut n = 0;
        loop {
            let cqe = os.read(self.cq.0 + self.cq_head as u64 * 16, 16).map_err(os_err("read CQE"))?;
            let sf = u16::from_le_bytes([cqe[14], cqe[15]]);
            if (sf & 1 == 1) != self.phase {
                break;
            }
            let cid = u16::from_le_bytes([cqe[12], cqe[13]]);
            self.sq_head = u16::from_le_bytes([cqe[8], cqe[9]]) as u32;
            let req = self.inflight.remove(&cid).ok_or(NvmeError::UnknownCommand { qid: self.qid, cid })?;
            if let Some(r) = req {
                self.unmap(os, r)?;
            }
            self.done.push(Completion { cid, status: sf >> 1 });
            self.cq_head = (self.cq_head + 1) % self.depth;
            if self.cq_head == 0 {
                self.phase = !self.phase;
            }
            n += 1;
        }
        if n > 0 {
            os.write(self.bar0 + DOORBELL + 8 * self.qid as u64 + 4, &self.cq_head.to_le_bytes()).map_err(os_err("MMIO write"))?;
        }
        Ok(n)
    }

    fn unmap(&mut self, os: &mut impl Os, r: Request) -> NResult<()> {
        if let Some((cpu, dma, len)) = r.list {
            os.dma_free_coherent(self.dev, len, cpu, dma).map_err(os_err("dma_free_coherent"))?;
        }
        os.dma_unmap_single(self.dev, r.dma, r.len, r.dir).map_err(os_err("dma_unmap_single"))?;
        let _ = (r.opcode, r.lba);
        Ok(())
    }

    /// Sleep until the queue's interrupt (`nvme_irq`) and reap what has completed; returns the
    /// completions not yet handed out (at least one while commands are in flight).
    pub fn reap(&mut self, os: &mut impl Os) -> NResult<Vec<Completion>> {
        while self.done.is_empty() && !self.inflight.is_empty() {
            if self.process_cq(os)? > 0 {
                break;
            }
            let seen = self.interrupts;
            let timeout = os.run_hardware(|f| f.tuning().timing.nvme_io_timeout_ps);
            match os.wait_irq_for(self.vector, seen, timeout).map_err(os_err("wait_irq"))? {
                Some(n) => self.interrupts = n,
                None => return Err(self.timed_out(os, timeout)),
            }
            // The completion entry is posted before the MSI-X message; make sure it is here
            // (within the same timeout: an interrupt whose entry never lands fails the request).
            let poll = if self.phase { phase_set } else { phase_clear };
            if os.poll_for(self.cq.0 + self.cq_head as u64 * 16, 16, "the completion entry's phase tag", poll, timeout).map_err(os_err("poll CQE"))?.is_none() {
                return Err(self.timed_out(os, timeout));
            }
        }
        Ok(std::mem::take(&mut self.done))
    }

    /// Linux `nvme_timeout` (drivers/nvme/host/pci.c): a request outlived the I/O timeout. Read
    /// CSTS: all ones (the read failed, or the device is gone) or CFS set means the controller
    /// is dead, and the request fails; Linux then resets or removes the controller. A live
    /// controller's timed-out request fails too (Linux aborts it, then resets the controller).
    fn timed_out(&mut self, os: &mut impl Os, after_ps: u64) -> NvmeError {
        let cid = self.inflight.keys().min().copied().unwrap_or(0);
        let csts = os.read(self.bar0 + CSTS, 4).ok().map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        NvmeError::Timeout { qid: self.qid, cid, after_ps, csts: csts.unwrap_or(u32::MAX) }
    }

    /// Wait for command `cid` to complete (other completions stay for a later `reap`).
    pub(super) fn wait_for(&mut self, os: &mut impl Os, cid: u16) -> NResult<Completion> {
        loop {
            if let Some(i) = self.done.iter().position(|c| c.cid == cid) {
                return Ok(self.done.remove(i));
            }
            if !self.inflight.contains_key(&cid) {
                return Err(NvmeError::UnknownCommand { qid: self.qid, cid });
            }
            let got = self.reap(os)?;
            self.done.extend(got);
        }
    }

    fn rw(&mut self, os: &mut impl Os, opcode: u8, lba: u64, blocks: u16, buf: u64) -> NResult<()> {
        let cid = self.queue_rq(os, opcode, lba, blocks, buf)?;
        match self.wait_for(os, cid)?.status {
            0 => Ok(()),
            status => Err(NvmeError::Status { opcode, lba, status }),
        }
    }

    /// Read `blocks` blocks at `lba` into the kernel buffer `buf` and wait for it.
    pub fn read(&mut self, os: &mut impl Os, lba: u64, blocks: u16, buf: u64) -> NResult<()> {
        self.rw(os, OP_READ, lba, blocks, buf)
    }

    pub fn write(&mut self, os: &mut impl Os, lba: u64, blocks: u16, buf: u64) -> NResult<()> {
        self.rw(os, OP_WRITE, lba, blocks, buf)
    }
}
