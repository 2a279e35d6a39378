//! `Os`: the kernel interface as a trait, so the same driver source runs in more than one kernel
//! (000 §5: a guest "uses the same drivers"; the guest kernel believes guest-physical is
//! physical). [`HostOs`] implements it for a host's own kernel (every method is the inherent one
//! of the same name); the guest kernel of `devlend-vm` implements it for a VM. Drivers take
//! `&mut impl Os` and their bodies do not change: they are the same source "compiled" against
//! another kernel, as a Linux driver is built for the host or for the guest.
//!
//! Only what drivers call is here: PCI, memory, the DMA API, and MSI-X interrupts (a host's own
//! vectors, or a guest's, delivered through the hypervisor's eventfd path in `devlend-vm`).

use crate::error::HResult;
use crate::kernel::DevId;
use crate::os::{DmaDir, HostOs};
use devlend_fabric::model::HostId;
use devlend_fabric::Fabric;

pub trait Os {
    /// The host whose CPUs run this kernel (a guest runs on its host's CPUs).
    fn host(&self) -> HostId;
    /// Let the hardware run (device models act on the fabric).
    fn run_hardware<R>(&mut self, hw: impl FnOnce(&mut Fabric) -> R) -> R;
    fn find(&self, name: &str) -> HResult<DevId>;
    fn pci_iomap(&self, dev: DevId, bar: u8) -> HResult<u64>;
    fn pci_resource_len(&self, dev: DevId, bar: u8) -> HResult<u64>;
    fn pci_set_master(&mut self, dev: DevId) -> HResult<()>;
    fn pci_clear_master(&mut self, dev: DevId) -> HResult<()>;
    fn pci_read_config(&self, dev: DevId, off: usize, len: usize) -> HResult<u32>;
    fn kmalloc(&mut self, size: u64) -> HResult<u64>;
    fn kfree(&mut self, phys: u64) -> HResult<()>;
    fn write(&mut self, addr: u64, data: &[u8]) -> HResult<()>;
    fn read(&mut self, addr: u64, len: usize) -> HResult<Vec<u8>>;
    fn dma_map_single(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64>;
    fn dma_unmap_single(&mut self, dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()>;
    fn dma_alloc_coherent(&mut self, dev: DevId, len: u64) -> HResult<(u64, u64)>;
    fn dma_free_coherent(&mut self, dev: DevId, len: u64, cpu: u64, dma: u64) -> HResult<()>;
    fn dma_map_resource(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64>;
    fn dma_unmap_resource(&mut self, dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()>;
    /// `request_irq` on MSI-X entry `entry` of `dev`: returns the vector.
    fn request_irq(&mut self, dev: DevId, entry: u16, handler: u32) -> HResult<u8>;
    fn free_irq(&mut self, dev: DevId, entry: u16) -> HResult<()>;
    /// How many interrupts `vector`'s handler has run (after delivering what is pending).
    fn irq_count(&mut self, vector: u8) -> u64;
    /// Sleep until `vector`'s handler has run more than `seen` times; returns the count. In a
    /// kernel without a clock (the hardware already ran) this only looks.
    fn wait_irq(&mut self, vector: u8, seen: u64) -> HResult<u64> {
        let _ = seen;
        Ok(self.irq_count(vector))
    }
    /// Spend `ps` of this CPU's time in software whose cost is a constant rather than its accesses
    /// (a user-space runtime's work per call). Without a clock, nothing.
    fn spend(&mut self, ps: u64) {
        let _ = ps;
    }
    /// Poll `len` bytes at `addr` (this host's RAM) until `done` holds for them (a driver
    /// spinning on a semaphore or a completion entry); returns them. Without a clock, one read.
    fn poll(&mut self, addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool) -> HResult<Vec<u8>> {
        let _ = (what, done);
        self.read(addr, len)
    }
    /// As `wait_irq`, for at most `timeout_ps` (a driver's timeout): `None` if it timed out.
    /// Without a clock, `wait_irq`.
    fn wait_irq_for(&mut self, vector: u8, seen: u64, timeout_ps: u64) -> HResult<Option<u64>> {
        let _ = timeout_ps;
        self.wait_irq(vector, seen).map(Some)
    }
    /// As `poll`, for at most `timeout_ps`: `None` if `done` did not hold by then. Without a
    /// clock, `poll`.
    fn poll_for(&mut self, addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool, timeout_ps: u64) -> HResult<Option<Vec<u8>>> {
        let _ = timeout_ps;
        self.poll(addr, len, what, done).map(Some)
    }
}

impl Os for HostOs<'_> {
    fn host(&self) -> HostId {
        HostOs::host(self)
    }
    fn run_hardware<R>(&mut self, hw: impl FnOnce(&mut Fabric) -> R) -> R {
        HostOs::run_hardware(self, hw)
    }
    fn find(&self, name: &str) -> HResult<DevId> {
        HostOs::find(self, name)
    }
    fn pci_iomap(&self, dev: DevId, bar: u8) -> HResult<u64> {
        HostOs::pci_iomap(self, dev, bar)
    }
    fn pci_resource_len(&self, dev: DevId, bar: u8) -> HResult<u64> {
        HostOs::pci_resource_len(self, dev, bar)
    }
    fn pci_set_master(&mut self, dev: DevId) -> HResult<()> {
        HostOs::pci_set_master(self, dev)
    }
    fn pci_clear_master(&mut self, dev: DevId) -> HResult<()> {
        HostOs::pci_clear_master(self, dev)
    }
    fn pci_read_config(&self, dev: DevId, off: usize, len: usize) -> HResult<u32> {
        HostOs::pci_read_config(self, dev, off, len)
    }
    fn kmalloc(&mut self, size: u64) -> HResult<u64> {
        HostOs::kmalloc(self, size)
    }
    fn kfree(&mut self, phys: u64) -> HResult<()> {
        HostOs::kfree(self, phys)
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> HResult<()> {
        HostOs::write(self, addr, data)
    }
    fn read(&mut self, addr: u64, len: usize) -> HResult<Vec<u8>> {
        HostOs::read(self, addr, len)
    }
    fn dma_map_single(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64> {
        HostOs::dma_map_single(self, dev, phys, len, dir)
    }
    fn dma_unmap_single(&mut self, dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()> {
        HostOs::dma_unmap_single(self, dev, dma, len, dir)
    }
    fn dma_alloc_coherent(&mut self, dev: DevId, len: u64) -> HResult<(u64, u64)> {
        HostOs::dma_alloc_coherent(self, dev, len)
    }
    fn dma_free_coherent(&mut self, dev: DevId, len: u64, cpu: u64, dma: u64) -> HResult<()> {
        HostOs::dma_free_coherent(self, dev, len, cpu, dma)
    }
    fn dma_map_resource(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64> {
        HostOs::dma_map_resource(self, dev, phys, len, dir)
    }
    fn dma_unmap_resource(&mut self, dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()> {
        HostOs::dma_unmap_resource(self, dev, dma, len, dir)
    }
    fn request_irq(&mut self, dev: DevId, entry: u16, handler: u32) -> HResult<u8> {
        HostOs::request_irq(self, dev, entry, handler)
    }
    fn free_irq(&mut self, dev: DevId, entry: u16) -> HResult<()> {
        HostOs::free_irq(self, dev, entry)
    }
    fn irq_count(&mut self, vector: u8) -> u64 {
        HostOs::irq_count(self, vector)
    }
}
