//! An NVMe driver in the style of Linux's `drivers/nvme/host/pci.c`, written only against the
//! kernel interface (`devlend_host::Os`): it maps BAR 0 with `pci_iomap`, allocates its queues
//! with `dma_alloc_coherent`, maps data buffers with `dma_map_single`, writes submission entries
//! and doorbells with CPU stores, sleeps in `wait_irq` until its queue's MSI-X interrupt, and reads
//! completion entries by their phase tag (`nvme_process_cq`). It never sees the controller: on the
//! machine, the controller acts when the driver's stores land. It never knows whether the drive
//! is local or borrowed (000 §4).
//!
//! The admin queue interrupts on MSI-X entry 0; I/O queue pair q (1..) is created with
//! interrupts on entry q (Create I/O Completion Queue, §5.3, CDW11: PC bit 0, IEN bit 1, IV bits
//! 31:16), one pair per job or CPU as in Linux. An [`NvmeQueue`] can have many commands in flight
//! (`nvme_queue_rq` and [`NvmeQueue::reap`]), up to its depth less one.

pub mod block;
mod error;
mod queue;

pub use error::NvmeError;
pub use queue::{Completion, NvmeQueue};

use devlend_devices::nvme::{ACQ, AQA, ASQ, CC, CSTS};
use devlend_host::{DevId, Os};

/// Entries of the admin queue; I/O queues get their depth at probe.
pub const ADMIN_QUEUE_ENTRIES: u32 = 64;
pub const ADMIN_MSIX_ENTRY: u16 = 0;
/// Handler ids this driver registers (`request_irq`): admin, then I/O queue q as `IO_HANDLER + q - 1`.
pub const ADMIN_HANDLER: u32 = 0x4e56_0000;
pub const IO_HANDLER: u32 = 0x4e56_0001;
/// How many times probe reads CSTS waiting for RDY (Linux `nvme_wait_ready` sleeps between reads).
const READY_POLLS: u32 = 1000;

type NResult<T> = Result<T, NvmeError>;

fn os_err<E: Into<devlend_host::HostError>>(what: &'static str) -> impl FnOnce(E) -> NvmeError {
    move |e| NvmeError::Os { what, error: e.into() }
}

pub struct Driver {
    pub dev: DevId,
    bar0: u64,
    pub admin: NvmeQueue,
    /// I/O queue pairs not handed to a job ([`Driver::take_queue`]).
    io: Vec<Option<NvmeQueue>>,
    /// What every queue holds, for `remove`: (cpu, dma, len) buffers, (MSI-X entry) interrupts.
    buffers: Vec<(u64, u64, u64)>,
    entries: Vec<u16>,
    pub blocks: u64,
    pub admin_irq: u8,
    pub io_irqs: Vec<u8>,
}

impl Driver {
    /// Probe with one I/O queue pair of 64 entries.
    pub fn probe(os: &mut impl Os, dev: DevId) -> NResult<Driver> {
        Driver::probe_queues(os, dev, 1, 64)
    }

    /// Probe (Linux `nvme_probe`, `nvme_reset_work`): enable the controller with an admin queue,
    /// identify namespace 1, and create `queues` I/O queue pairs of `depth` entries, each with its
    /// own interrupt (`nvme_setup_io_queues`). Whatever fails is undone.
    pub fn probe_queues(os: &mut impl Os, dev: DevId, queues: u16, depth: u32) -> NResult<Driver> {
        let bar0 = os.pci_iomap(dev, 0).map_err(os_err("pci_iomap"))?;
        os.pci_set_master(dev).map_err(os_err("pci_set_master"))?;
        let mut d = Driver {
            dev,
            bar0,
            admin: NvmeQueue::empty(dev, bar0),
            io: Vec::new(),
            buffers: Vec::new(),
            entries: Vec::new(),
            blocks: 0,
            admin_irq: 0,
            io_irqs: Vec::new(),
        };
        match d.setup(os, queues, depth) {
            Ok(()) => Ok(d),
            Err(e) => {
                let _ = os.write(bar0 + CC, &0u32.to_le_bytes());
                d.teardown(os);
                Err(e)
            }
        }
    }

    fn alloc_queue(&mut self, os: &mut impl Os, qid: u16, depth: u32) -> NResult<NvmeQueue> {
        let sq = os.dma_alloc_coherent(self.dev, depth as u64 * 64).map_err(os_err("dma_alloc_coherent"))?;
        self.buffers.push((sq.0, sq.1, depth as u64 * 64));
        let cq = os.dma_alloc_coherent(self.dev, depth as u64 * 16).map_err(os_err("dma_alloc_coherent"))?;
        self.buffers.push((cq.0, cq.1, depth as u64 * 16));
        // A fresh completion queue has every phase tag clear (Linux `nvme_init_queue` zeroes it).
        os.write(cq.0, &vec![0u8; depth as usize * 16]).map_err(os_err("zero CQ"))?;
        let handler = if qid == 0 { ADMIN_HANDLER } else { IO_HANDLER + qid as u32 - 1 };
        let vector = os.request_irq(self.dev, qid, handler).map_err(os_err("request_irq"))?;
        self.entries.push(qid);
        Ok(NvmeQueue::new(self.dev, self.bar0, qid, sq, cq, depth, vector))
    }

    fn setup(&mut self, os: &mut impl Os, queues: u16, depth: u32) -> NResult<()> {
        if queues == 0 || queues as usize >= devlend_devices::nvme::MAX_QUEUES || !(2..=devlend_devices::nvme::MAX_QUEUE_ENTRIES).contains(&depth) {
            let (max_queues, max_entries) = (devlend_devices::nvme::MAX_QUEUES - 1, devlend_devices::nvme::MAX_QUEUE_ENTRIES);
            return Err(NvmeError::QueueShape { queues, depth, max_queues, max_entries });
        }
        self.admin = self.alloc_queue(os, 0, ADMIN_QUEUE_ENTRIES)?;
        self.admin_irq = self.admin.vector;
        let w = |os: &mut dyn FnMut(u64, &[u8]) -> NResult<()>, reg: u64, v: &[u8]| os(reg, v);
        let bar0 = self.bar0;
        let mut store = |reg: u64, v: &[u8]| os.write(bar0 + reg, v).map_err(os_err("MMIO write"));
        w(&mut store, CC, &0u32.to_le_bytes())?;
        let aqa = (ADMIN_QUEUE_ENTRIES - 1) | (ADMIN_QUEUE_ENTRIES - 1) << 16;
        w(&mut store, AQA, &aqa.to_le_bytes())?;
        w(&mut store, ASQ, &self.admin.sq_dma().to_le_bytes())?;
        w(&mut store, ACQ, &self.admin.cq_dma().to_le_bytes())?;
        w(&mut store, CC, &1u32.to_le_bytes())?;
        self.wait_ready(os)?;
        // Identify namespace 1 into a coherent buffer.
        let id = os.dma_alloc_coherent(self.dev, 4096).map_err(os_err("dma_alloc_coherent"))?;
        self.buffers.push((id.0, id.1, 4096));
        self.admin_cmd(os, 0x06, id.1, 0, 0)?;
        let data = os.read(id.0, 8).map_err(os_err("read identify data"))?;
        self.blocks = u64::from_le_bytes(data.try_into().unwrap_or_default());
        for qid in 1..=queues {
            // Create I/O CQ q (physically contiguous, interrupts on entry q), then I/O SQ q on it.
            let q = self.alloc_queue(os, qid, depth)?;
            let qsize = (depth - 1) << 16 | qid as u32;
            self.admin_cmd(os, 0x05, q.cq_dma(), qsize, (qid as u32) << 16 | 2 | 1)?;
            self.admin_cmd(os, 0x01, q.sq_dma(), qsize, (qid as u32) << 16 | 1)?;
            self.io_irqs.push(q.vector);
            self.io.push(Some(q));
        }
        Ok(())
    }

    fn wait_ready(&mut self, os: &mut impl Os) -> NResult<()> {
        for _ in 0..READY_POLLS {
            let csts = os.read(self.bar0 + CSTS, 4).map_err(os_err("read CSTS"))?;
            if csts[0] & 1 == 1 {
                return Ok(());
            }
        }
        Err(NvmeError::NotReady)
    }

    fn admin_cmd(&mut self, os: &mut impl Os, opcode: u8, prp1: u64, cdw10: u32, cdw11: u32) -> NResult<()> {
        let mut sqe = [0u8; 64];
        sqe[0] = opcode;
        // NSID (§4.2): namespace 1 for Identify Namespace; the other admin commands here ignore it.
        sqe[4..8].copy_from_slice(&1u32.to_le_bytes());
        sqe[24..32].copy_from_slice(&prp1.to_le_bytes());
        sqe[40..44].copy_from_slice(&cdw10.to_le_bytes());
        sqe[44..48].copy_from_slice(&cdw11.to_le_bytes());
        let cid = self.admin.submit(os, sqe)?;
        let c = self.admin.wait_for(os, cid)?;
        match c.status {
            0 => Ok(()),
            status => Err(NvmeError::Admin { opcode, status }),
        }
    }

    /// Hand I/O queue pair `qid` (1..) to a job; `None` if there is none or it is taken.
    pub fn take_queue(&mut self, qid: u16) -> Option<NvmeQueue> {
        self.io.get_mut(qid as usize - 1).and_then(Option::take)
    }

    /// Give a queue back (so that `read`/`write` on the driver can use it again).
    pub fn put_queue(&mut self, q: NvmeQueue) {
        let i = q.qid as usize - 1;
        self.io[i] = Some(q);
    }

    fn io_queue(&mut self) -> NResult<&mut NvmeQueue> {
        self.io.first_mut().and_then(Option::as_mut).ok_or(NvmeError::Invalid { reason: "I/O queue 1 is handed to a job" })
    }

    /// Read `blocks` 512-byte blocks at `lba` into the kernel buffer at `buf` on I/O queue 1, and wait.
    pub fn read(&mut self, os: &mut impl Os, lba: u64, blocks: u16, buf: u64) -> NResult<()> {
        self.io_queue()?.read(os, lba, blocks, buf)
    }

    pub fn write(&mut self, os: &mut impl Os, lba: u64, blocks: u16, buf: u64) -> NResult<()> {
        self.io_queue()?.write(os, lba, blocks, buf)
    }

    /// Interrupts the driver has taken on every queue it still holds.
    pub fn interrupts(&self) -> u64 {
        self.admin.interrupts + self.io.iter().flatten().map(|q| q.interrupts).sum::<u64>()
    }

    /// Remove (Linux `nvme_remove`): disable the controller, free the interrupts and the queues
    /// and stop bus mastering, so the drive can be lent or returned.
    pub fn remove(mut self, os: &mut impl Os) -> NResult<()> {
        os.write(self.bar0 + CC, &0u32.to_le_bytes()).map_err(os_err("MMIO write"))?;
        self.teardown(os).map_or(Ok(()), Err)
    }

    /// Free whatever the driver holds; returns the first failure.
    fn teardown(&mut self, os: &mut impl Os) -> Option<NvmeError> {
        let dev = self.dev;
        let mut first = None;
        for entry in std::mem::take(&mut self.entries).into_iter().rev() {
            if let Err(e) = os.free_irq(dev, entry) {
                first.get_or_insert(NvmeError::Os { what: "free_irq", error: e });
            }
        }
        (self.admin_irq, self.io_irqs) = (0, Vec::new());
        for (cpu, dma, len) in std::mem::take(&mut self.buffers).into_iter().rev() {
            if let Err(e) = os.dma_free_coherent(dev, len, cpu, dma) {
                first.get_or_insert(NvmeError::Os { what: "dma_free_coherent", error: e });
            }
        }
        if let Err(e) = os.pci_clear_master(dev) {
            first.get_or_insert(NvmeError::Os { what: "pci_clear_master", error: e });
        }
        first
    }
}
