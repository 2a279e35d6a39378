//! A GPU driver in the style of the CUDA driver's copy path, written only against the kernel
//! interface (`devlend_host::Os`: a host's `HostOs`, or a VM's guest kernel in `devlend-vm`), so
//! the same code drives a local GPU, a borrowed one and one passed through to a VM (000 §4:
//! Device Lending works "without requiring changes to application or driver software", §7.1).
//! Probe maps BAR 0 with `pci_iomap`, enables bus mastering and allocates a coherent
//! semaphore, and a coherent page for each engine's GPFIFO ring and push buffer; each copy
//! (cudaMemcpy) costs the runtime's CPU time (the host's `cuda_call_ps`), maps the host buffer with
//! `dma_map_single` — or the peer's BAR 1 with `dma_map_resource`, which Device Lending resolves
//! into the three peer cases of 000 §6 — writes the copy's methods into the push buffer and a
//! GPFIFO entry pointing at them (host RAM), rings the engine's doorbell with the new put pointer
//! (one store into BAR 0), lets the hardware fetch and run it and polls the semaphore; on no
//! release it reads `CE_STATUS` and reports why. A borrowed GPU's fetches cross the NTB twice
//! there and back, which is what makes a far driver slower per copy (000 §7.1-7.2).
//!
//! On the machine's clock (a thread's `ThreadOs`) the stores are TLPs, the doorbell's landing
//! starts the GPU's copy engine ([`devlend_devices::gpu`]) and the driver spins on the semaphore with
//! `os.poll`, as CUDA's driver does; the semaphore slot is cleared before each copy, and a failed
//! copy wakes the poll through the engine's error notifier (the slot's second word). Each copy
//! engine has its own slot: [`Driver::memcpy_dtoh_async`]/[`Driver::memcpy_htod_async`] start a
//! copy on one engine (a CUDA stream) and [`Driver::sync`] waits for it.

use devlend_devices::gpu::*;
use devlend_host::{DevId, DmaDir, Os};

/// Bytes of the coherent page holding the semaphores.
const SEM_BYTES: u64 = 4096;
/// Bytes per copy engine's slot in it: the semaphore word, then the error notifier word.
const SLOT: u64 = 16;
/// Entries in each engine's GPFIFO ring; each has its own methods slot in the push buffer.
const GPFIFO_ENTRIES: u64 = 64;
/// Bytes of the coherent pages holding the rings and push buffers: per engine, the ring, then
/// one methods slot per entry.
const FIFO_BYTES: u64 = NUM_CE as u64 * GPFIFO_ENTRIES * (GP_ENTRY_BYTES + METHODS_BYTES);

/// A copy started on a copy engine; wait for it with [`Driver::sync`].
#[derive(Debug)]
#[must_use]
pub struct Pending {
    ce: usize,
    seq: u32,
}

fn released(v: &[u8]) -> bool {
    v.iter().any(|b| *b != 0)
}

pub struct Driver {
    pub dev: DevId,
    bar0: u64,
    /// Device memory in bytes, as the GPU reports it.
    pub mem_size: u64,
    /// The semaphore: (CPU address, DMA address).
    sem: (u64, u64),
    /// The GPFIFO rings and push buffers: (CPU address, DMA address).
    fifo: (u64, u64),
    seq: u32,
    /// The sequence number of the copy each engine runs and nobody has waited for yet: an engine
    /// takes one copy at a time.
    running: [Option<u32>; NUM_CE],
}

pub mod copy;
mod error;
pub use error::GpuError;

type GResult<T> = Result<T, GpuError>;

/// A kernel call `what` of the driver that failed.
fn err(what: &'static str) -> impl FnOnce(devlend_host::HostError) -> GpuError {
    move |error| GpuError::Os { what, error }
}

/// A DMA address handed to a kernel ([`devlend_devices::gpu_kernel`], [`Gpu::store`](devlend_devices::gpu::Gpu::store)); give it back with [`Driver::unmap`].
#[derive(Clone, Copy, Debug)]
pub struct Mapping {
    pub dma: u64,
    pub len: u64,
    peer: bool,
}

impl Driver {
    pub fn probe(os: &mut impl Os, dev: DevId) -> GResult<Driver> {
        let bar0 = os.pci_iomap(dev, 0).map_err(err("pci_iomap"))?;
        os.pci_set_master(dev).map_err(err("pci_set_master"))?;
        let ids = os.pci_read_config(dev, 0, 4).map_err(err("pci_read_config"))?;
        let id = os.read(bar0 + ID, 4).map_err(err("read ID"))?;
        if u32::from_le_bytes(id[..4].try_into().unwrap()) != ids {
            return Err(GpuError::NoModel { id, config: ids });
        }
        let m = os.read(bar0 + MEM_SIZE, 8).map_err(err("read MEM_SIZE"))?;
        let sem = os.dma_alloc_coherent(dev, SEM_BYTES).map_err(err("dma_alloc_coherent"))?;
        os.write(sem.0, &[0; 4]).map_err(err("clear semaphore"))?;
        let fifo = os.dma_alloc_coherent(dev, FIFO_BYTES).map_err(err("dma_alloc_coherent"))?;
        let mut d = Driver { dev, bar0, mem_size: u64::from_le_bytes(m[..8].try_into().unwrap()), sem, fifo, seq: 0, running: [None; NUM_CE] };
        for ce in 0..NUM_CE {
            let slot = sem.1 + ce as u64 * SLOT;
            d.mmio_write(os, ce_reg(ce, CE_SEM_ADDR), &slot.to_le_bytes())?;
            d.mmio_write(os, ce_reg(ce, CE_NOTIFY_ADDR), &(slot + 4).to_le_bytes())?;
            d.mmio_write(os, ce_reg(ce, CE_GPFIFO_ADDR), &(fifo.1 + Self::ring(ce)).to_le_bytes())?;
            d.mmio_write(os, ce_reg(ce, CE_GPFIFO_ENTRIES), &(GPFIFO_ENTRIES as u32).to_le_bytes())?;
        }
        Ok(d)
    }

    /// Offset of engine `ce`'s GPFIFO ring in the fifo pages; its methods slots follow it.
    fn ring(ce: usize) -> u64 {
        ce as u64 * GPFIFO_ENTRIES * (GP_ENTRY_BYTES + METHODS_BYTES)
    }

    fn mmio_write(&mut self, os: &mut impl Os, reg: u64, data: &[u8]) -> GResult<()> {
        os.write(self.bar0 + reg, data).map_err(err("MMIO write"))
    }

    fn mmio_read(&mut self, os: &mut impl Os, reg: u64, n: usize) -> GResult<u64> {
        let b = os.read(self.bar0 + reg, n).map_err(err("MMIO read"))?;
        Ok(b.iter().rev().fold(0, |a, x| a << 8 | *x as u64))
    }

    fn check_dev(&self, off: u64, len: u64) -> GResult<()> {
        if len == 0 {
            return Err(GpuError::Empty);
        }
        match off.checked_add(len) {
            Some(end) if end <= self.mem_size => Ok(()),
            _ => Err(GpuError::PastEnd { off, len, mem_size: self.mem_size }),
        }
    }

    /// cudaMemcpy device to host: `len` bytes of device memory at `dev_off` into the kernel buffer
    /// at CPU address `host_buf`.
    pub fn memcpy_dtoh(&mut self, os: &mut impl Os, dev_off: u64, host_buf: u64, len: u64) -> GResult<()> {
        self.check_dev(dev_off, len)?;
        let dma = os.dma_map_single(self.dev, host_buf, len, DmaDir::FromDevice).map_err(err("mapping the host buffer"))?;
        let r = self.copy(os, DIR_DEV_TO_BUS, dev_off, dma, len);
        // The copy's own error first: after a device is lost, it is what names the loss.
        let u = os.dma_unmap_single(self.dev, dma, len, DmaDir::FromDevice).map_err(err("dma_unmap_single"));
        r.and(u)
    }

    /// cudaMemcpy host to device: `len` bytes of the kernel buffer at `host_buf` into device memory at `dev_off`.
    pub fn memcpy_htod(&mut self, os: &mut impl Os, dev_off: u64, host_buf: u64, len: u64) -> GResult<()> {
        self.check_dev(dev_off, len)?;
        let dma = os.dma_map_single(self.dev, host_buf, len, DmaDir::ToDevice).map_err(err("mapping the host buffer"))?;
        let r = self.copy(os, DIR_BUS_TO_DEV, dma, dev_off, len);
        // The copy's own error first: after a device is lost, it is what names the loss.
        let u = os.dma_unmap_single(self.dev, dma, len, DmaDir::ToDevice).map_err(err("dma_unmap_single"));
        r.and(u)
    }

    /// cudaMemcpyPeer: this GPU's copy engine writes `len` bytes from its memory at `src_off` into
    /// the memory (BAR 1) of GPU `dst` at `dst_off`, peer-to-peer.
    pub fn memcpy_peer(&mut self, os: &mut impl Os, src_off: u64, dst: DevId, dst_off: u64, len: u64) -> GResult<()> {
        self.check_dev(src_off, len)?;
        let m = self.map_peer(os, dst, dst_off, len)?;
        let r = self.copy(os, DIR_DEV_TO_BUS, src_off, m.dma, len);
        self.unmap(os, m)?;
        r
    }

    /// cudaMemcpyAsync device to host on copy engine `ce`: device memory at `dev_off` to the DMA
    /// address `dma` (a [`Driver::map_host`] mapping).
    pub fn memcpy_dtoh_async(&mut self, os: &mut impl Os, ce: usize, dev_off: u64, dma: u64, len: u64) -> GResult<Pending> {
        self.check_dev(dev_off, len)?;
        self.submit(os, ce, DIR_DEV_TO_BUS, dev_off, dma, len)
    }

    /// cudaMemcpyAsync host to device on copy engine `ce`: the DMA address `dma` into device memory at `dev_off`.
    pub fn memcpy_htod_async(&mut self, os: &mut impl Os, ce: usize, dma: u64, dev_off: u64, len: u64) -> GResult<Pending> {
        self.check_dev(dev_off, len)?;
        self.submit(os, ce, DIR_BUS_TO_DEV, dma, dev_off, len)
    }

    /// The DMA address at which this GPU reaches `len` bytes of `dst`'s memory at `off`
    /// (cudaDeviceEnablePeerAccess): `dma_map_resource` of the peer's BAR 1.
    pub fn map_peer(&mut self, os: &mut impl Os, dst: DevId, off: u64, len: u64) -> GResult<Mapping> {
        let size = os.pci_resource_len(dst, 1).map_err(err("pci_resource_len"))?;
        if off.checked_add(len).is_none_or(|e| e > size) || len == 0 {
            return Err(GpuError::OutsidePeerBar { off, len, size });
        }
        let bar1 = os.pci_iomap(dst, 1).map_err(err("pci_iomap"))?;
        let dma = os.dma_map_resource(self.dev, bar1 + off, len, DmaDir::Bidirectional).map_err(err("mapping the peer's BAR 1"))?;
        Ok(Mapping { dma, len, peer: true })
    }

    /// The DMA address at which this GPU reaches a kernel buffer (cudaHostRegister).
    pub fn map_host(&mut self, os: &mut impl Os, buf: u64, len: u64) -> GResult<Mapping> {
        let dma = os.dma_map_single(self.dev, buf, len, DmaDir::Bidirectional).map_err(err("mapping the host buffer"))?;
        Ok(Mapping { dma, len, peer: false })
    }

    pub fn unmap(&mut self, os: &mut impl Os, m: Mapping) -> GResult<()> {
        if m.peer {
            os.dma_unmap_resource(self.dev, m.dma, m.len, DmaDir::Bidirectional).map_err(err("dma_unmap_resource"))
        } else {
            os.dma_unmap_single(self.dev, m.dma, m.len, DmaDir::Bidirectional).map_err(err("dma_unmap_single"))
        }
    }

    /// Program copy engine 0, ring its doorbell, wait for the semaphore.
    fn copy(&mut self, os: &mut impl Os, dir: u32, src: u64, dst: u64, len: u64) -> GResult<()> {
        let p = self.submit(os, 0, dir, src, dst, len)?;
        self.sync(os, p)
    }

    /// Clear engine `ce`'s semaphore slot, program the engine and ring its doorbell.
    fn submit(&mut self, os: &mut impl Os, ce: usize, dir: u32, src: u64, dst: u64, len: u64) -> GResult<Pending> {
        if ce >= NUM_CE {
            return Err(GpuError::NoEngine { ce, engines: NUM_CE });
        }
        if let Some(seq) = self.running[ce] {
            return Err(GpuError::EngineBusy { ce, seq });
        }
        let host = os.host();
        let call = os.run_hardware(|f| f.tuning().host(host).cuda_call_ps);
        os.spend(call);
        self.seq = self.seq.wrapping_add(1).max(1);
        os.write(self.sem.0 + ce as u64 * SLOT, &[0; 8]).map_err(err("clear semaphore"))?;
        // The methods into the push buffer, the entry pointing at them into the ring, then the
        // put pointer into the GPU (the doorbell counts copies, as the put pointer advances).
        let index = (self.seq.wrapping_sub(1) as u64) % GPFIFO_ENTRIES;
        let ring = Self::ring(ce);
        let methods = ring + GPFIFO_ENTRIES * GP_ENTRY_BYTES + index * METHODS_BYTES;
        let mut m = Vec::with_capacity(METHODS_BYTES as usize);
        for v in [src, dst, len] {
            m.extend_from_slice(&v.to_le_bytes());
        }
        m.extend_from_slice(&dir.to_le_bytes());
        m.extend_from_slice(&self.seq.to_le_bytes());
        os.write(self.fifo.0 + methods, &m).map_err(err("write push buffer"))?;
        let mut entry = (self.fifo.1 + methods).to_le_bytes().to_vec();
        entry.extend_from_slice(&(METHODS_BYTES as u32).to_le_bytes());
        entry.extend_from_slice(&[0; 4]);
        os.write(self.fifo.0 + ring + index * GP_ENTRY_BYTES, &entry).map_err(err("write GPFIFO entry"))?;
        self.mmio_write(os, ce_reg(ce, CE_DOORBELL), &self.seq.to_le_bytes())?;
        self.running[ce] = Some(self.seq);
        Ok(Pending { ce, seq: self.seq })
    }

    /// Poll the semaphore for the watchdog period at a time; after each, read BAR 0's ID
    /// register: all ones (or a failed read) means the GPU is gone, as NVIDIA's driver reports
    /// with Xid 79 "GPU has fallen off the bus"; an engine no longer busy that released nothing
    /// will not; one still busy is waited for again.
    fn wait_released(&mut self, os: &mut impl Os, ce: usize, slot: u64, what: &str) -> GResult<Vec<u8>> {
        let watchdog = os.run_hardware(|f| f.tuning().timing.gpu_watchdog_ps);
        loop {
            if let Some(v) = os.poll_for(slot, 8, what, released, watchdog).map_err(err("read semaphore"))? {
                return Ok(v);
            }
            let id = os.read(self.bar0 + ID, 4);
            if id.as_ref().map_or(true, |b| b.iter().all(|x| *x == 0xff)) {
                return Err(GpuError::FellOffBus { ce, watchdog_ps: watchdog, read: id.err() });
            }
            if self.mmio_read(os, ce_reg(ce, CE_STATUS), 4)? as u32 != STATUS_BUSY {
                return os.read(slot, 8).map_err(err("read semaphore"));
            }
        }
    }

    /// Spin on the copy's semaphore slot until it is released (or its error notifier is written).
    pub fn sync(&mut self, os: &mut impl Os, p: Pending) -> GResult<()> {
        if self.running[p.ce] == Some(p.seq) {
            self.running[p.ce] = None;
        }
        let slot = self.sem.0 + p.ce as u64 * SLOT;
        let what = format!("copy engine {} semaphore", p.ce);
        let v = self.wait_released(os, p.ce, slot, &what)?;
        if u32::from_le_bytes(v[..4].try_into().unwrap()) == p.seq {
            return Ok(());
        }
        // The error notifier says why without another register read (the engine's registers of
        // a poisoned GPU answer with poisoned completions too).
        if u32::from_le_bytes(v[4..8].try_into().unwrap()) == STATUS_POISONED {
            return Err(GpuError::Poisoned { ce: p.ce });
        }
        let status = self.mmio_read(os, ce_reg(p.ce, CE_STATUS), 4)? as u32;
        Err(match status {
            STATUS_DMA_FAULT => GpuError::DmaFault { addr: self.mmio_read(os, ce_reg(p.ce, CE_FAULT_ADDR), 8)? },
            STATUS_OUT_OF_RANGE => GpuError::OutOfRange,
            STATUS_INVALID => GpuError::Refused,
            STATUS_BUSY => GpuError::StillBusy { ce: p.ce },
            status => GpuError::NeverCompleted { seq: p.seq, status },
        })
    }
}
