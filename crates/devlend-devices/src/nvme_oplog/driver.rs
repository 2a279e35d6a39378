//! The NVMe driver that runs the functional controller by hand (`os.run_hardware`): kept only for
//! D5's VM rows (see [`super`]). The driver on the one clock is [`crate::nvme_driver`].
//!
//! An NVMe driver in the style of Linux's `drivers/nvme/host/pci.c`, written only against the
//! kernel interface (`devlend_host::Os`: a host's kernel or a guest's): it maps BAR 0 with
//! `pci_iomap`, allocates its queues with `dma_alloc_coherent`, maps data buffers with
//! `dma_map_single`, writes submission entries and doorbells with CPU stores, and reads completion
//! entries by their phase tag. It never knows whether the drive is local or borrowed: Device
//! Lending hands it far-side DMA addresses (000 §4) and, for interrupts, a far-side MSI address
//! the driver never sees.
//!
//! Completions are interrupt-driven, as in Linux (`queue_request_irq`, `nvme_irq`): the admin
//! completion queue always interrupts, on MSI-X entry 0 (NVM Express 1.3), and I/O completion
//! queue 1 is created with interrupts enabled on entry 1 (Create I/O Completion Queue, §5.3,
//! CDW11: PC bit 0, IEN bit 1, IV bits 31:16). Each entry gets a vector with
//! `request_irq`; after ringing a doorbell the driver waits for its vector's interrupt and then,
//! like `nvme_process_cq`, reads the completion entry by its phase tag. A command whose
//! completion raised no interrupt is an error (Linux would time it out).

use super::controller::Controller;
use crate::nvme::{AQA, ACQ, ASQ, CC, CSTS, DOORBELL};
use crate::Op;
use devlend_fabric::route::Requester;
use devlend_host::{DevId, DmaDir, Os};
use devlend_wire::Access;

pub const QUEUE_ENTRIES: u32 = 64;
/// MSI-X entries of the admin queue and of I/O queue 1 (Linux: one vector per queue, admin first).
pub const ADMIN_MSIX_ENTRY: u16 = 0;
pub const IO_MSIX_ENTRY: u16 = 1;
/// Handler ids this driver registers (`request_irq`).
pub const ADMIN_HANDLER: u32 = 0x4e56_0000;
pub const IO_HANDLER: u32 = 0x4e56_0001;

#[derive(Clone, Copy, Debug, Default)]
struct QueuePair {
    qid: u16,
    sq: (u64, u64),
    cq: (u64, u64),
    sq_tail: u32,
    cq_head: u32,
    phase: bool,
    cid: u16,
    /// The host's vector for this queue's interrupts, and how many of them the driver has seen.
    vector: u8,
    irqs: u64,
}

pub struct Driver {
    pub dev: DevId,
    bar0: u64,
    admin: QueuePair,
    io: QueuePair,
    pub blocks: u64,
    cpu: Requester,
    /// The identify buffer (cpu, dma), kept until `remove`.
    id: (u64, u64),
    /// The host's vectors for the admin queue and I/O queue 1.
    pub admin_irq: u8,
    pub io_irq: u8,
    /// Interrupts the driver has taken (one per completed command).
    pub interrupts: u64,
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
    /// Probe: request the admin queue's interrupt, enable the controller with an admin queue
    /// pair, identify the namespace, request I/O queue 1's interrupt and create that queue pair
    /// (completion queue with interrupts enabled). Whatever fails is undone.
    pub fn probe(os: &mut impl Os, dev: DevId, ctrl: &mut Controller) -> NResult<Driver> {
        let bar0 = os.pci_iomap(dev, 0).map_err(err("pci_iomap"))?;
        os.pci_set_master(dev).map_err(err("pci_set_master"))?;
        let cpu = Requester::Cpu(os.host());
        let mut d = Driver { dev, bar0, admin: QueuePair::default(), io: QueuePair::default(), blocks: 0, cpu, id: (0, 0), admin_irq: 0, io_irq: 0, interrupts: 0, ops: Vec::new() };
        match d.setup(os, ctrl) {
            Ok(()) => Ok(d),
            Err(e) => {
                if d.admin.sq != (0, 0) {
                    let _ = d.mmio_write(os, CC, &0u32.to_le_bytes());
                    os.run_hardware(|f| ctrl.process(f));
                }
                d.teardown(os);
                Err(e)
            }
        }
    }

    fn setup(&mut self, os: &mut impl Os, ctrl: &mut Controller) -> NResult<()> {
        let dev = self.dev;
        fn q(os: &mut impl Os, dev: DevId, qid: u16) -> NResult<QueuePair> {
            let sq = os.dma_alloc_coherent(dev, QUEUE_ENTRIES as u64 * 64).map_err(err("dma_alloc_coherent"))?;
            let cq = match os.dma_alloc_coherent(dev, QUEUE_ENTRIES as u64 * 16) {
                Ok(cq) => cq,
                Err(e) => {
                    let _ = os.dma_free_coherent(dev, QUEUE_ENTRIES as u64 * 64, sq.0, sq.1);
                    return Err(err("dma_alloc_coherent")(e));
                }
            };
            Ok(QueuePair { qid, sq, cq, phase: true, ..Default::default() })
        }
        self.admin = q(os, dev, 0)?;
        self.io = q(os, dev, 1)?;
        self.admin_irq = os.request_irq(dev, ADMIN_MSIX_ENTRY, ADMIN_HANDLER).map_err(err("request_irq (admin queue)"))?;
        self.admin.vector = self.admin_irq;
        self.mmio_write(os, CC, &0u32.to_le_bytes())?;
        let aqa = (QUEUE_ENTRIES - 1) | (QUEUE_ENTRIES - 1) << 16;
        self.mmio_write(os, AQA, &aqa.to_le_bytes())?;
        self.mmio_write(os, ASQ, &self.admin.sq.1.to_le_bytes())?;
        self.mmio_write(os, ACQ, &self.admin.cq.1.to_le_bytes())?;
        self.mmio_write(os, CC, &1u32.to_le_bytes())?;
        os.run_hardware(|f| ctrl.process(f));
        let csts = os.read(self.bar0 + CSTS, 4).map_err(err("read CSTS"))?;
        if csts[0] & 1 == 0 {
            return Err(NvmeError("controller did not become ready (CSTS.RDY = 0)".into()));
        }
        // Identify namespace 1 into a coherent buffer.
        self.id = os.dma_alloc_coherent(dev, 4096).map_err(err("dma_alloc_coherent"))?;
        self.admin_cmd(os, ctrl, 0x06, self.id.1, 0, 0)?;
        let data = os.read(self.id.0, 8).map_err(err("read identify data"))?;
        self.blocks = u64::from_le_bytes(data.try_into().unwrap_or_default());
        // Create I/O CQ 1 (physically contiguous, interrupts on its own vector) and I/O SQ 1 on it.
        self.io_irq = os.request_irq(dev, IO_MSIX_ENTRY, IO_HANDLER).map_err(err("request_irq (I/O queue)"))?;
        self.io.vector = self.io_irq;
        let qsize = (QUEUE_ENTRIES - 1) << 16;
        self.admin_cmd(os, ctrl, 0x05, self.io.cq.1, qsize | 1, (IO_MSIX_ENTRY as u32) << 16 | 2 | 1)?;
        self.admin_cmd(os, ctrl, 0x01, self.io.sq.1, qsize | 1, 1 << 16 | 1)?;
        Ok(())
    }

    /// Remove (Linux `nvme_remove`): disable the controller, free the interrupts and the queues
    /// and stop bus mastering, so the drive can be lent or returned.
    pub fn remove(mut self, os: &mut impl Os, ctrl: &mut Controller) -> NResult<()> {
        self.mmio_write(os, CC, &0u32.to_le_bytes())?;
        os.run_hardware(|f| ctrl.process(f));
        self.teardown(os).map_or(Ok(()), Err)
    }

    /// Free whatever the driver holds; returns the first failure.
    fn teardown(&mut self, os: &mut impl Os) -> Option<NvmeError> {
        let dev = self.dev;
        let mut first = None;
        let mut note = |r: Result<(), devlend_host::HostError>, what: &str| {
            if let Err(e) = r {
                first.get_or_insert(NvmeError(format!("{what}: {e}")));
            }
        };
        for (irq, entry) in [(self.io_irq, IO_MSIX_ENTRY), (self.admin_irq, ADMIN_MSIX_ENTRY)] {
            if irq != 0 {
                note(os.free_irq(dev, entry), "free_irq");
            }
        }
        (self.io_irq, self.admin_irq) = (0, 0);
        let (sq_len, cq_len) = (QUEUE_ENTRIES as u64 * 64, QUEUE_ENTRIES as u64 * 16);
        for (buf, len) in [(self.id, 4096), (self.io.sq, sq_len), (self.io.cq, cq_len), (self.admin.sq, sq_len), (self.admin.cq, cq_len)] {
            if buf != (0, 0) {
                note(os.dma_free_coherent(dev, len, buf.0, buf.1), "dma_free_coherent");
            }
        }
        (self.id, self.io.sq, self.io.cq, self.admin.sq, self.admin.cq) = Default::default();
        note(os.pci_clear_master(dev), "pci_clear_master");
        first
    }

    fn mmio_write(&mut self, os: &mut impl Os, reg: u64, data: &[u8]) -> NResult<()> {
        self.ops.push(Op { who: self.cpu, addr: self.bar0 + reg, len: data.len() as u64, access: Access::Write, what: "MMIO register write", plan: None });
        os.write(self.bar0 + reg, data).map_err(err("MMIO write"))
    }

    fn admin_cmd(&mut self, os: &mut impl Os, ctrl: &mut Controller, opcode: u8, prp1: u64, cdw10: u32, cdw11: u32) -> NResult<()> {
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
    fn submit(&mut self, os: &mut impl Os, ctrl: &mut Controller, q: &mut QueuePair, mut sqe: [u8; 64]) -> NResult<u16> {
        q.cid = q.cid.wrapping_add(1);
        sqe[2..4].copy_from_slice(&q.cid.to_le_bytes());
        let slot = q.sq.0 + q.sq_tail as u64 * 64;
        self.ops.push(Op { who: self.cpu, addr: slot, len: 64, access: Access::Write, what: "write submission entry", plan: None });
        os.write(slot, &sqe).map_err(err("write SQE"))?;
        q.sq_tail = (q.sq_tail + 1) % QUEUE_ENTRIES;
        self.mmio_write(os, DOORBELL + 8 * q.qid as u64, &q.sq_tail.to_le_bytes())?;
        os.run_hardware(|f| ctrl.process(f));
        // Wait for the queue's interrupt, then reap the completion entry by its phase tag.
        let irqs = os.irq_count(q.vector);
        if irqs == q.irqs {
            return Err(NvmeError(format!("no interrupt for command {} on queue {} (vector {:#x}): timed out", q.cid, q.qid, q.vector)));
        }
        self.interrupts += irqs - q.irqs;
        q.irqs = irqs;
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
    pub fn read(&mut self, os: &mut impl Os, ctrl: &mut Controller, lba: u64, blocks: u16, buf: u64) -> NResult<()> {
        self.rw(os, ctrl, 0x02, lba, blocks, buf, DmaDir::FromDevice)
    }

    pub fn write(&mut self, os: &mut impl Os, ctrl: &mut Controller, lba: u64, blocks: u16, buf: u64) -> NResult<()> {
        self.rw(os, ctrl, 0x01, lba, blocks, buf, DmaDir::ToDevice)
    }

    #[allow(clippy::too_many_arguments)]
    fn rw(&mut self, os: &mut impl Os, ctrl: &mut Controller, opcode: u8, lba: u64, blocks: u16, buf: u64, dir: DmaDir) -> NResult<()> {
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
