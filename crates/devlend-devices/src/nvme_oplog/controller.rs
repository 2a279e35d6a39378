//! The NVMe controller as a functional model driven synchronously (`process`), its accesses logged
//! for `time_ops`: kept only for D5's VM rows, whose guest kernel does not run on the machine yet.
//! The controller on the one clock is [`crate::nvme::Controller`].
//!
//! An NVMe controller (NVM Express 1.3) as a device on the fabric.
//!
//! Registers in BAR 0 (§3.1): CAP, VS, CC (EN), CSTS (RDY), AQA, ASQ, ACQ, and the doorbells from
//! 0x1000 (stride 4: SQ y tail at 0x1000 + 8y, CQ y head at 0x1000 + 8y + 4). The controller works
//! like firmware polling its doorbells: `process` looks at what the CPU wrote into BAR 0, fetches
//! new submission queue entries with DMA reads, executes them (Identify, Create I/O CQ/SQ, Read,
//! Write with PRP1/PRP2 and PRP lists, §4.3), posts completion queue entries with the phase tag
//! (§4.6), and raises MSI-X interrupts by writing the table entry's message (MSI-X table in BAR 0
//! at `config::MSIX_TABLE_OFFSET`). Every DMA goes through the fabric as this function's own
//! requester, so the IOMMU, NTB and requester-ID rules apply, and is logged for timing.

use crate::Op;
use devlend_fabric::config::MSIX_TABLE_OFFSET;
use devlend_fabric::memory::SparseMem;
use devlend_fabric::model::FuncId;
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_wire::Access;

use crate::nvme::{ACQ, AQA, ASQ, BLOCK, CAP, CC, CSTS, DOORBELL, MAX_QUEUE_ENTRIES, SC_DATA_TRANSFER_ERROR, SC_INVALID_FIELD, SC_INVALID_OPCODE, SC_LBA_OUT_OF_RANGE, SC_SUCCESS};

#[derive(Clone, Copy, Debug, Default)]
struct Queue {
    base: u64,
    entries: u32,
    head: u32,
    tail: u32,
    cq: u16,
    phase: bool,
    vector: Option<u16>,
}

pub struct Controller {
    pub func: FuncId,
    pub blocks: u64,
    media: SparseMem,
    sqs: Vec<Option<Queue>>,
    cqs: Vec<Option<Queue>>,
    ready: bool,
    /// Every access this controller made, in order (cleared by the caller).
    pub ops: Vec<Op>,
    pub commands: u64,
}

fn le(b: &[u8], off: usize, n: usize) -> u64 {
    b[off..off + n].iter().rev().fold(0, |a, x| a << 8 | *x as u64)
}

impl Controller {
    pub fn new(f: &mut Fabric, func: FuncId, blocks: u64) -> Controller {
        let c = Controller { func, blocks, media: SparseMem::default(), sqs: vec![None; 17], cqs: vec![None; 17], ready: false, ops: Vec::new(), commands: 0 };
        // CAP: MQES = entries - 1, CQR = 1, DSTRD = 0, TO = 10 x 500 ms, CSS = NVM.
        let cap: u64 = (MAX_QUEUE_ENTRIES as u64 - 1) | 1 << 16 | 10 << 24 | 1 << 37;
        c.reg_write(f, CAP, &cap.to_le_bytes());
        c.reg_write(f, 0x08, &0x0001_0300u32.to_le_bytes());
        c
    }

    fn reg_read(&self, f: &Fabric, off: u64, n: usize) -> u64 {
        let mut b = vec![0u8; n];
        if let Some(m) = f.bar_mem.get(&(self.func, 0)) {
            m.read(off, &mut b);
        }
        le(&b, 0, n)
    }

    fn reg_write(&self, f: &mut Fabric, off: u64, data: &[u8]) {
        f.bar_mem.entry((self.func, 0)).or_default().write(off, data);
    }

    fn me(&self) -> Requester {
        Requester::Func(self.func)
    }

    fn log(&mut self, f: &mut Fabric, addr: u64, len: usize, access: Access, what: &'static str) {
        let plan = devlend_engine::plan(f, self.me(), addr, access).ok().map(std::sync::Arc::new);
        self.ops.push(Op { who: self.me(), addr, len: len as u64, access, what, plan });
    }

    fn dma_read(&mut self, f: &mut Fabric, addr: u64, len: usize, what: &'static str) -> Option<Vec<u8>> {
        self.log(f, addr, len, Access::Read, what);
        let (data, fail) = f.read(self.me(), addr, len);
        fail.is_none().then_some(data)
    }

    fn dma_write(&mut self, f: &mut Fabric, addr: u64, data: &[u8], what: &'static str) -> bool {
        self.log(f, addr, data.len(), Access::Write, what);
        f.write(self.me(), addr, data).1.is_none()
    }

    /// Look at the doorbells and do all the work the CPU has asked for.
    pub fn process(&mut self, f: &mut Fabric) {
        let cc = self.reg_read(f, CC, 4);
        if cc & 1 == 0 {
            if self.ready {
                self.reset(f);
            }
            return;
        }
        if !self.ready {
            let aqa = self.reg_read(f, AQA, 4);
            let (asq, acq) = (self.reg_read(f, ASQ, 8), self.reg_read(f, ACQ, 8));
            self.sqs[0] = Some(Queue { base: asq, entries: (aqa & 0xfff) as u32 + 1, cq: 0, ..Default::default() });
            self.cqs[0] = Some(Queue { base: acq, entries: ((aqa >> 16) & 0xfff) as u32 + 1, phase: true, vector: Some(0), ..Default::default() });
            self.ready = true;
            self.reg_write(f, CSTS, &1u32.to_le_bytes());
        }
        for qid in 0..self.sqs.len() {
            let Some(mut sq) = self.sqs[qid] else { continue };
            sq.tail = self.reg_read(f, DOORBELL + 8 * qid as u64, 4) as u32 % sq.entries;
            while sq.head != sq.tail {
                let addr = sq.base + sq.head as u64 * 64;
                sq.head = (sq.head + 1) % sq.entries;
                let (cid, status) = match self.dma_read(f, addr, 64, "fetch submission queue entry") {
                    Some(sqe) => {
                        self.commands += 1;
                        let cid = le(&sqe, 2, 2) as u16;
                        (cid, if qid == 0 { self.admin(f, &sqe) } else { self.io(f, &sqe) })
                    }
                    None => (0, SC_DATA_TRANSFER_ERROR),
                };
                self.sqs[qid] = Some(sq);
                self.complete(f, sq.cq as usize, qid as u16, sq.head as u16, cid, status);
            }
            self.sqs[qid] = Some(sq);
        }
    }

    fn admin(&mut self, f: &mut Fabric, sqe: &[u8]) -> u16 {
        let (opcode, prp1) = (sqe[0], le(sqe, 24, 8));
        let (cdw10, cdw11) = (le(sqe, 40, 4), le(sqe, 44, 4));
        let qid = (cdw10 & 0xffff) as usize;
        let entries = (cdw10 >> 16) as u32 + 1;
        match opcode {
            0x06 => {
                // Identify: controller (CNS 1) or namespace (CNS 0) data structure, 4 KiB.
                let mut data = vec![0u8; 4096];
                if cdw10 & 0xff == 0 {
                    data[0..8].copy_from_slice(&self.blocks.to_le_bytes()); // NSZE
                    data[8..16].copy_from_slice(&self.blocks.to_le_bytes()); // NCAP
                    data[130] = 9; // LBA format 0: 2^9 = 512-byte blocks
                } else {
                    data[0..2].copy_from_slice(&0x8086u16.to_le_bytes());
                    data[24..30].copy_from_slice(b"devlnd");
                }
                if self.dma_write(f, prp1, &data, "identify data") { SC_SUCCESS } else { SC_DATA_TRANSFER_ERROR }
            }
            0x05 if (1..self.cqs.len()).contains(&qid) && entries <= MAX_QUEUE_ENTRIES => {
                let vector = (cdw11 & 2 != 0).then_some((cdw11 >> 16) as u16);
                self.cqs[qid] = Some(Queue { base: prp1, entries, phase: true, vector, ..Default::default() });
                SC_SUCCESS
            }
            0x01 if (1..self.sqs.len()).contains(&qid) && entries <= MAX_QUEUE_ENTRIES => {
                let cq = (cdw11 >> 16) as u16;
                if self.cqs.get(cq as usize).copied().flatten().is_none() {
                    return SC_INVALID_FIELD;
                }
                self.sqs[qid] = Some(Queue { base: prp1, entries, cq, ..Default::default() });
                SC_SUCCESS
            }
            0x05 | 0x01 => SC_INVALID_FIELD,
            _ => SC_INVALID_OPCODE,
        }
    }

    /// The data pages of a transfer (§4.3): PRP1 (any offset), then PRP2 as the second page or as
    /// a pointer to a PRP list.
    fn prps(&mut self, f: &mut Fabric, prp1: u64, prp2: u64, len: u64) -> Option<Vec<(u64, u64)>> {
        let first = (4096 - prp1 % 4096).min(len);
        let mut out = vec![(prp1, first)];
        let rest = len - first;
        if rest == 0 {
            return Some(out);
        }
        if rest <= 4096 {
            out.push((prp2, rest));
            return Some(out);
        }
        let n = rest.div_ceil(4096) as usize;
        let list = self.dma_read(f, prp2, n * 8, "fetch PRP list")?;
        for i in 0..n {
            out.push((le(&list, i * 8, 8), (rest - i as u64 * 4096).min(4096)));
        }
        Some(out)
    }

    fn io(&mut self, f: &mut Fabric, sqe: &[u8]) -> u16 {
        let opcode = sqe[0];
        let (prp1, prp2) = (le(sqe, 24, 8), le(sqe, 32, 8));
        let slba = le(sqe, 40, 8);
        let nlb = le(sqe, 48, 2) + 1;
        if !matches!(opcode, 0x01 | 0x02) {
            return SC_INVALID_OPCODE;
        }
        if slba.checked_add(nlb).is_none_or(|e| e > self.blocks) {
            return SC_LBA_OUT_OF_RANGE;
        }
        let Some(pages) = self.prps(f, prp1, prp2, nlb * BLOCK) else { return SC_DATA_TRANSFER_ERROR };
        let mut pos = slba * BLOCK;
        for (addr, len) in pages {
            let ok = if opcode == 0x02 {
                let mut buf = vec![0u8; len as usize];
                self.media.read(pos, &mut buf);
                self.dma_write(f, addr, &buf, "read data")
            } else {
                match self.dma_read(f, addr, len as usize, "write data") {
                    Some(buf) => {
                        self.media.write(pos, &buf);
                        true
                    }
                    None => false,
                }
            };
            if !ok {
                return SC_DATA_TRANSFER_ERROR;
            }
            pos += len;
        }
        SC_SUCCESS
    }

    fn complete(&mut self, f: &mut Fabric, cqid: usize, sqid: u16, sq_head: u16, cid: u16, status: u16) {
        let Some(mut cq) = self.cqs.get(cqid).copied().flatten() else { return };
        let mut cqe = [0u8; 16];
        cqe[8..10].copy_from_slice(&sq_head.to_le_bytes());
        cqe[10..12].copy_from_slice(&sqid.to_le_bytes());
        cqe[12..14].copy_from_slice(&cid.to_le_bytes());
        let sf: u16 = (status << 1) | cq.phase as u16;
        cqe[14..16].copy_from_slice(&sf.to_le_bytes());
        let addr = cq.base + cq.tail as u64 * 16;
        self.dma_write(f, addr, &cqe, "post completion queue entry");
        cq.tail = (cq.tail + 1) % cq.entries;
        if cq.tail == 0 {
            cq.phase = !cq.phase;
        }
        self.cqs[cqid] = Some(cq);
        if let Some(v) = cq.vector {
            self.interrupt(f, v);
        }
    }

    /// MSI-X (PCIe 3.0 §6.1.4): write the vector's message data to its message address, unless masked.
    fn interrupt(&mut self, f: &mut Fabric, vector: u16) {
        let entry = MSIX_TABLE_OFFSET + vector as u64 * 16;
        let addr = self.reg_read(f, entry, 8);
        let data = self.reg_read(f, entry + 8, 4) as u32;
        let masked = self.reg_read(f, entry + 12, 4) & 1 != 0;
        // MSI-X Enable (bit 15) and Function Mask (bit 14) of the Message Control register.
        let control = f.config_read(self.func, devlend_fabric::config::MSIX_CAP + 2, 2).unwrap_or(0);
        let enabled = control & (1 << 15) != 0 && control & (1 << 14) == 0;
        if addr != 0 && !masked && enabled {
            self.dma_write(f, addr, &data.to_le_bytes(), "MSI-X interrupt");
        }
    }

    /// Controller reset on CC.EN 1 -> 0 (NVMe 1.3 §7.6.2): all queues are deleted and the
    /// doorbells read as zero again, so a driver can enable the controller afresh.
    fn reset(&mut self, f: &mut Fabric) {
        self.ready = false;
        self.sqs.iter_mut().for_each(|q| *q = None);
        self.cqs.iter_mut().for_each(|q| *q = None);
        self.reg_write(f, DOORBELL, &[0u8; 8 * 17]);
        self.reg_write(f, CSTS, &0u32.to_le_bytes());
    }

    /// Store blocks directly in the media (test set-up, like a pre-written disk).
    pub fn preload(&mut self, lba: u64, data: &[u8]) {
        self.media.write(lba * BLOCK, data);
    }
}
