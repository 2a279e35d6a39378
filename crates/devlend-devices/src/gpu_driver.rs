//! A GPU driver in the style of the CUDA driver's copy path, written only against the kernel
//! interface (`devlend_host::Os`: a host's `HostOs`, or a VM's guest kernel in `devlend-vm`), so
//! the same code drives a local GPU, a borrowed one and one passed through to a VM (000 §4:
//! Device Lending works "without requiring changes to application or driver software", §7.1).
//! Probe maps BAR 0 with `pci_iomap`, enables bus mastering and allocates a coherent
//! semaphore; each copy (cudaMemcpy) maps the host buffer with `dma_map_single` — or the peer's
//! BAR 1 with `dma_map_resource`, which Device Lending resolves into the three peer cases of 000
//! §6 — programs the copy-engine registers with CPU stores, rings the doorbell, lets the hardware
//! run and polls the semaphore; on no release it reads `CE_STATUS` and reports why.
//!
//! The driver's own accesses (MMIO stores, the semaphore poll, status reads) are logged as
//! [`Op`]s in program order, and after the hardware ran the GPU's accesses are taken into the same
//! list, so `time_ops(&driver.ops)` times a whole copy as the host sees it.

use crate::gpu::*;
use crate::Op;
use devlend_fabric::route::Requester;
use devlend_host::{DevId, DmaDir, Os};
use devlend_wire::Access;

/// Bytes of the coherent page holding the semaphore.
const SEM_BYTES: u64 = 4096;

pub struct Driver {
    pub dev: DevId,
    bar0: u64,
    /// Device memory in bytes, as the GPU reports it.
    pub mem_size: u64,
    /// The semaphore: (CPU address, DMA address).
    sem: (u64, u64),
    seq: u32,
    cpu: Requester,
    /// Every access of the copies so far, the GPU's included, in program order (clear it between copies).
    pub ops: Vec<Op>,
}

#[derive(Debug)]
pub struct GpuError(pub String);

impl std::fmt::Display for GpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gpu: {}", self.0)
    }
}

impl std::error::Error for GpuError {}

type GResult<T> = Result<T, GpuError>;

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> GpuError + '_ {
    move |e| GpuError(format!("{what}: {e}"))
}

/// A DMA address handed to a kernel ([`Gpu::store`], [`Gpu::load`]); give it back with [`Driver::unmap`].
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
        let cpu = Requester::Cpu(os.host());
        let ids = os.pci_read_config(dev, 0, 4).map_err(err("pci_read_config"))?;
        let id = os.read(bar0 + ID, 4).map_err(err("read ID"))?;
        if u32::from_le_bytes(id[..4].try_into().unwrap()) != ids {
            return Err(GpuError(format!("BAR 0 ID register reads {id:02x?}, config space says {ids:#010x}: no GPU model answers")));
        }
        let m = os.read(bar0 + MEM_SIZE, 8).map_err(err("read MEM_SIZE"))?;
        let sem = os.dma_alloc_coherent(dev, SEM_BYTES).map_err(err("dma_alloc_coherent"))?;
        os.write(sem.0, &[0; 4]).map_err(err("clear semaphore"))?;
        let mut d = Driver { dev, bar0, mem_size: u64::from_le_bytes(m[..8].try_into().unwrap()), sem, seq: 0, cpu, ops: Vec::new() };
        d.mmio_write(os, CE_SEM_ADDR, &sem.1.to_le_bytes())?;
        Ok(d)
    }

    fn mmio_write(&mut self, os: &mut impl Os, reg: u64, data: &[u8]) -> GResult<()> {
        self.ops.push(Op { who: self.cpu, addr: self.bar0 + reg, len: data.len() as u64, access: Access::Write, what: "MMIO register write", plan: None });
        os.write(self.bar0 + reg, data).map_err(err("MMIO write"))
    }

    fn mmio_read(&mut self, os: &mut impl Os, reg: u64, n: usize) -> GResult<u64> {
        self.ops.push(Op { who: self.cpu, addr: self.bar0 + reg, len: n as u64, access: Access::Read, what: "MMIO register read", plan: None });
        let b = os.read(self.bar0 + reg, n).map_err(err("MMIO read"))?;
        Ok(b.iter().rev().fold(0, |a, x| a << 8 | *x as u64))
    }

    fn check_dev(&self, off: u64, len: u64) -> GResult<()> {
        if len == 0 {
            return Err(GpuError("a copy of zero bytes".into()));
        }
        match off.checked_add(len) {
            Some(end) if end <= self.mem_size => Ok(()),
            _ => Err(GpuError(format!("device memory {off:#x}+{len:#x} is past the end of the GPU's {:#x} bytes", self.mem_size))),
        }
    }

    /// cudaMemcpy device to host: `len` bytes of device memory at `dev_off` into the kernel buffer
    /// at CPU address `host_buf`.
    pub fn memcpy_dtoh(&mut self, os: &mut impl Os, gpu: &mut Gpu, dev_off: u64, host_buf: u64, len: u64) -> GResult<()> {
        self.check_dev(dev_off, len)?;
        let dma = os.dma_map_single(self.dev, host_buf, len, DmaDir::FromDevice).map_err(err("mapping the host buffer"))?;
        let r = self.copy(os, gpu, DIR_DEV_TO_BUS, dev_off, dma, len);
        os.dma_unmap_single(self.dev, dma, len, DmaDir::FromDevice).map_err(err("dma_unmap_single"))?;
        r
    }

    /// cudaMemcpy host to device: `len` bytes of the kernel buffer at `host_buf` into device memory at `dev_off`.
    pub fn memcpy_htod(&mut self, os: &mut impl Os, gpu: &mut Gpu, dev_off: u64, host_buf: u64, len: u64) -> GResult<()> {
        self.check_dev(dev_off, len)?;
        let dma = os.dma_map_single(self.dev, host_buf, len, DmaDir::ToDevice).map_err(err("mapping the host buffer"))?;
        let r = self.copy(os, gpu, DIR_BUS_TO_DEV, dma, dev_off, len);
        os.dma_unmap_single(self.dev, dma, len, DmaDir::ToDevice).map_err(err("dma_unmap_single"))?;
        r
    }

    /// cudaMemcpyPeer: this GPU's copy engine writes `len` bytes from its memory at `src_off` into
    /// the memory (BAR 1) of GPU `dst` at `dst_off`, peer-to-peer.
    #[allow(clippy::too_many_arguments)]
    pub fn memcpy_peer(&mut self, os: &mut impl Os, gpu: &mut Gpu, src_off: u64, dst: DevId, dst_off: u64, len: u64) -> GResult<()> {
        self.check_dev(src_off, len)?;
        let m = self.map_peer(os, dst, dst_off, len)?;
        let r = self.copy(os, gpu, DIR_DEV_TO_BUS, src_off, m.dma, len);
        self.unmap(os, m)?;
        r
    }

    /// The DMA address at which this GPU reaches `len` bytes of `dst`'s memory at `off`
    /// (cudaDeviceEnablePeerAccess): `dma_map_resource` of the peer's BAR 1.
    pub fn map_peer(&mut self, os: &mut impl Os, dst: DevId, off: u64, len: u64) -> GResult<Mapping> {
        let size = os.pci_resource_len(dst, 1).map_err(err("pci_resource_len"))?;
        if off.checked_add(len).is_none_or(|e| e > size) || len == 0 {
            return Err(GpuError(format!("peer memory {off:#x}+{len:#x} is not inside the peer's {size:#x}-byte BAR 1")));
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

    /// Program the copy engine, ring its doorbell, let the GPU run, wait for the semaphore.
    #[allow(clippy::too_many_arguments)]
    fn copy(&mut self, os: &mut impl Os, gpu: &mut Gpu, dir: u32, src: u64, dst: u64, len: u64) -> GResult<()> {
        self.seq = self.seq.wrapping_add(1).max(1);
        self.mmio_write(os, CE_SRC, &src.to_le_bytes())?;
        self.mmio_write(os, CE_DST, &dst.to_le_bytes())?;
        self.mmio_write(os, CE_LEN, &len.to_le_bytes())?;
        self.mmio_write(os, CE_DIR, &dir.to_le_bytes())?;
        self.mmio_write(os, CE_SEM_VALUE, &self.seq.to_le_bytes())?;
        self.mmio_write(os, CE_DOORBELL, &self.seq.to_le_bytes())?;
        os.run_hardware(|f| gpu.process(f));
        self.ops.append(&mut gpu.ops);
        self.ops.push(Op { who: self.cpu, addr: self.sem.0, len: 4, access: Access::Read, what: "semaphore poll", plan: None });
        let v = os.read(self.sem.0, 4).map_err(err("read semaphore"))?;
        if u32::from_le_bytes(v[..4].try_into().unwrap()) == self.seq {
            return Ok(());
        }
        let status = self.mmio_read(os, CE_STATUS, 4)? as u32;
        Err(GpuError(match status {
            STATUS_DMA_FAULT => format!("copy engine DMA fault at bus address {:#x}: not mapped for the GPU, or the GPU may not master the bus", self.mmio_read(os, CE_FAULT_ADDR, 8)?),
            STATUS_OUT_OF_RANGE => "copy engine refused a range outside device memory".to_string(),
            STATUS_INVALID => "copy engine refused the command (direction or length)".to_string(),
            s => format!("copy {} never completed (status {s})", self.seq),
        }))
    }
}
