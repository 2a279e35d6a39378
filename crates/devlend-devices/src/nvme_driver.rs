//! An NVMe driver in the style of Linux's `drivers/nvme/host/pci.c`, written only against the
//! kernel interface (`devlend_host::HostOs`): it maps BAR 0 with `pci_iomap`, allocates its queues
//! with `dma_alloc_coherent`, maps data buffers with `dma_map_single`, writes submission entries
//! and doorbells with CPU stores, and polls completion entries by their phase tag. It never knows
//! whether the drive is local or borrowed: Device Lending hands it far-side DMA addresses (000 §4).
//! Queues are polled (like Linux's poll queues); no interrupt is needed to complete a command.

use crate::nvme::{Controller, AQA, ACQ, ASQ, CC, CSTS, DOORBELL};
use crate::Op;
use devlend_fabric::route::Requester;
use devlend_host::{DevId, DmaDir, HostOs};
use devlend_wire::Access;

pub const QUEUE_ENTRIES: u32 = 64;

#[derive(Clone, Copy, Debug)]
struct QueuePair {
    qid: u16,
    sq: (u64, u64),
    cq: (u64, u64),
    sq_tail: u32,
    cq_head: u32,
    phase: bool,
    cid: u16,
}

pub struct Driver {
    pub dev: DevId,
    bar0: u64,
    admin: QueuePair,
    io: QueuePair,
    pub blocks: u64,
    cpu: Requester,
    /// The driver's own accesses (CPU stores and loads), in order, for timing.
    pub ops: Vec<Op>,
}

#[derive(Debug)]
pub struct NvmeError(pub String);

impl std::fmt::Display for NvmeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "nvme: {}", self.0)
    }
}

type NResult<T> = Result<T, NvmeError>;

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> NvmeError + '_ {
    move |e| NvmeError(format!("{what}: {e}"))
}

impl Driver {
    /// Probe: enable the controller with an admin queue pair, identify the namespace, create one
    /// I/O queue pair (completion queue without interrupts: polled).
    pub fn probe(os: &mut HostOs, dev: DevId, ctrl: &mut Controller) -> NResult<Driver> {
        let bar0 = os.pci_iomap(dev, 0).map_err(err("pci_iomap"))?;
        os.pci_set_master(dev).map_err(err("pci_set_master"))?;
        let cpu = Requester::Cpu(os.host());
        let mut q = |qid| -> NResult<QueuePair> {
            let sq = os.dma_alloc_coherent(dev, QUEUE_ENTRIES as u64 * 64).map_err(err("dma_alloc_coherent"))?;
            let cq = os.dma_alloc_coherent(dev, QUEUE_ENTRIES as u64 * 16).map_err(err("dma_alloc_coherent"))?;
            Ok(QueuePair { qid, sq, cq, sq_tail: 0, cq_head: 0, phase: true, cid: 0 })
        };
        let admin = q(0)?;
        let io = q(1)?;
        let mut d = Driver { dev, bar0, admin, io, blocks: 0, cpu, ops: Vec::new() };
        d.mmio_write(os, CC, &0u32.to_le_bytes())?;
        let aqa = (QUEUE_ENTRIES - 1) | (QUEUE_ENTRIES - 1) << 16;
        d.mmio_write(os, AQA, &aqa.to_le_bytes())?;
        d.mmio_write(os, ASQ, &admin.sq.1.to_le_bytes())?;
        d.mmio_write(os, ACQ, &admin.cq.1.to_le_bytes())?;
        d.mmio_write(os, CC, &1u32.to_le_bytes())?;
        os.run_hardware(|f| ctrl.process(f));
        let csts = os.read(bar0 + CSTS, 4).map_err(err("read CSTS"))?;
        if csts[0] & 1 == 0 {
            return Err(NvmeError("controller did not become ready (CSTS.RDY = 0)".into()));
        }
        // Identify namespace 1 into a coherent buffer.
        let id = os.dma_alloc_coherent(dev, 4096).map_err(err("dma_alloc_coherent"))?;
        d.admin_cmd(os, ctrl, 0x06, id.1, 0, 0)?;
        let data = os.read(id.0, 8).map_err(err("read identify data"))?;
        d.blocks = u64::from_le_bytes(data.try_into().unwrap());
        // Create I/O CQ 1 (physically contiguous, interrupts off) and I/O SQ 1 on it.
        let qsize = (QUEUE_ENTRIES - 1) << 16;
        d.admin_cmd(os, ctrl, 0x05, d.io.cq.1, qsize | 1, 1)?;
        d.admin_cmd(os, ctrl, 0x01, d.io.sq.1, qsize | 1, 1 << 16 | 1)?;
        Ok(d)
    }

    fn mmio_write(&mut self, os: &mut HostOs, reg: u64, data: &[u8]) -> NResult<()> {
        self.ops.push(Op { who: self.cpu, addr: self.bar0 + reg, len: data.len() as u64, access: Access::Write, what: "MMIO register write", plan: None });
        os.write(self.bar0 + reg, data).map_err(err("MMIO write"))
    }

    fn admin_cmd(&mut self, os: &mut HostOs, ctrl: &mut Controller, opcode: u8, prp1: u64, cdw10: u32, cdw11: u32) -> NResult<()> {
        let mut sqe = [0u8; 64];
        sqe[0] = opcode;
        sqe[24..32].copy_from_slice(&prp1.to_le_bytes());
        sqe[40..44].copy_from_slice(&cdw10.to_le_bytes());
        sqe[44..48].copy_from_slice(&cdw11.to_le_bytes());
        let mut q = self.admin;
        let status = self.submit(os, ctrl, &mut q, sqe)?;
        self.admin = q;
        if status != 0 {
            return Err(NvmeError(format!("admin command {opcode:#x} failed with status {status:#x}")));
        }
        Ok(())
    }

    /// Put one entry on a queue, ring its doorbell, let the controller run, poll the completion.
    fn submit(&mut self, os: &mut HostOs, ctrl: &mut Controller, q: &mut QueuePair, mut sqe: [u8; 64]) -> NResult<u16> {
        q.cid = q.cid.wrapping_add(1);
        sqe[2..4].copy_from_slice(&q.cid.to_le_bytes());
        let slot = q.sq.0 + q.sq_tail as u64 * 64;
        self.ops.push(Op { who: self.cpu, addr: slot, len: 64, access: Access::Write, what: "write submission entry", plan: None });
        os.write(slot, &sqe).map_err(err("write SQE"))?;
        q.sq_tail = (q.sq_tail + 1) % QUEUE_ENTRIES;
        self.mmio_write(os, DOORBELL + 8 * q.qid as u64, &q.sq_tail.to_le_bytes())?;
        os.run_hardware(|f| ctrl.process(f));
        let cqe_addr = q.cq.0 + q.cq_head as u64 * 16;
        let cqe = os.read(cqe_addr, 16).map_err(err("read CQE"))?;
        let sf = u16::from_le_bytes([cqe[14], cqe[15]]);
        if (sf & 1 == 1) != q.phase {
            return Err(NvmeError(format!("no completion for command {} on queue {} (controller did not answer)", q.cid, q.qid)));
        }
        let cid = u16::from_le_bytes([cqe[12], cqe[13]]);
        if cid != q.cid {
            return Err(NvmeError(format!("completion for command {cid}, expected {}", q.cid)));
        }
        q.cq_head = (q.cq_head + 1) % QUEUE_ENTRIES;
        if q.cq_head == 0 {
            q.phase = !q.phase;
        }
        self.mmio_write(os, DOORBELL + 8 * q.qid as u64 + 4, &q.cq_head.to_le_bytes())?;
        Ok(sf >> 1)
    }

    /// Read `blocks` 512-byte blocks from `lba` into the kernel buffer at CPU address `buf`, the
    /// way the block layer would: dma_map_single, one command with PRP1/PRP2 or a PRP list, unmap.
    pub fn read(&mut self, os: &mut HostOs, ctrl: &mut Controller, lba: u64, blocks: u16, buf: u64) -> NResult<()> {
        self.rw(os, ctrl, 0x02, lba, blocks, buf, DmaDir::FromDevice)
    }

    pub fn write(&mut self, os: &mut HostOs, ctrl: &mut Controller, lba: u64, blocks: u16, buf: u64) -> NResult<()> {
        self.rw(os, ctrl, 0x01, lba, blocks, buf, DmaDir::ToDevice)
    }

    #[allow(clippy::too_many_arguments)]
    fn rw(&mut self, os: &mut HostOs, ctrl: &mut Controller, opcode: u8, lba: u64, blocks: u16, buf: u64, dir: DmaDir) -> NResult<()> {
        if blocks == 0 {
            return Err(NvmeError("a transfer of zero blocks".into()));
        }
        let len = blocks as u64 * 512;
        let dma = os.dma_map_single(self.dev, buf, len, dir).map_err(err("dma_map_single"))?;
        let mut prp_list = None;
        let first = (4096 - dma % 4096).min(len);
        let prp2 = if len - first == 0 {
            0
        } else if len - first <= 4096 {
            dma + first
        } else {
            let pages: Vec<u64> = (0..(len - first).div_ceil(4096)).map(|i| (dma + first) + i * 4096).collect();
            let list = os.dma_alloc_coherent(self.dev, pages.len() as u64 * 8).map_err(err("dma_alloc_coherent"))?;
            let bytes: Vec<u8> = pages.iter().flat_map(|p| p.to_le_bytes()).collect();
            self.ops.push(Op { who: self.cpu, addr: list.0, len: bytes.len() as u64, access: Access::Write, what: "write PRP list", plan: None });
            os.write(list.0, &bytes).map_err(err("write PRP list"))?;
            prp_list = Some(list);
            list.1
        };
        let mut sqe = [0u8; 64];
        sqe[0] = opcode;
        sqe[4..8].copy_from_slice(&1u32.to_le_bytes());
        sqe[24..32].copy_from_slice(&dma.to_le_bytes());
        sqe[32..40].copy_from_slice(&prp2.to_le_bytes());
        sqe[40..48].copy_from_slice(&lba.to_le_bytes());
        sqe[48..50].copy_from_slice(&(blocks - 1).to_le_bytes());
        let mut q = self.io;
        let res = self.submit(os, ctrl, &mut q, sqe);
        self.io = q;
        if let Some(list) = prp_list {
            os.dma_free_coherent(self.dev, (len - first).div_ceil(4096) * 8, list.0, list.1).map_err(err("dma_free_coherent"))?;
        }
        os.dma_unmap_single(self.dev, dma, len, dir).map_err(err("dma_unmap_single"))?;
        match res? {
            0 => Ok(()),
            s => Err(NvmeError(format!("I/O command {opcode:#x} at LBA {lba} failed with status {s:#x}"))),
        }
    }
}
