//! `HostOs`: the kernel interface a driver is written against, for one host. The same driver
//! code runs on a local device and on a borrowed one; only the implementation behind these calls
//! differs (000 §4: Device Lending "does not require any modifications to device drivers").
//!
//! - PCI: `find`, `pci_iomap`, `pci_resource_len`, `pci_set_master`, `pci_read_config`;
//!   config accesses to a borrowed device are forwarded to the device in the lender.
//! - Memory: `kmalloc`/`kfree` (page granular), CPU `write`/`read` (memcpy, writel, readl).
//! - DMA API: `dma_map_single`, `dma_map_sg`, `dma_alloc_coherent`, `dma_map_resource` and their
//!   unmaps, in `crate::timed` after `ThreadOs` (a local device's mappings and a borrowed device's, through Device
//!   Lending's DMA window, in one place).
//! - Interrupts: `pci_msix_vec_count`, `request_irq`/`free_irq` (MSI-X; see `irq` for what is
//!   modelled and from where), `handle_irqs`, `irq_count`, `irq_spurious`. For a borrowed device
//!   the table entry gets the lender-side address of this host's MSI page (`lending::msi`).
//!
//! CPU accesses that fail on the data path (an address no BAR decodes, an NTB window segment
//! without a translation, a device whose memory decoding is off, an IOMMU fault on the far side)
//! are recorded by the fabric and returned as `HostError::Fault`; nothing panics.

use crate::cluster::Cluster;
use crate::error::{BadAccess, BadIrq, BadLend, HResult, HostError, InUse, InvalidRequest, NtbUse, OutOf};
use crate::irq::{self, IrqDesc, MsixCap, MSIX_ENTRY_CTRL, MSIX_ENTRY_DATA, MSIX_ENTRY_MASKED, MSIX_ENTRY_SIZE, MSIX_MASKALL};
use crate::kernel::{DevId, Kernel, Origin, PciDevice};
use devlend_fabric::config::MSIX_ENABLE;
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::Requester;

/// The largest single CPU access (`write`/`read`) this layer performs; larger ones are refused.
pub const MAX_CPU_ACCESS: usize = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaDir {
    /// The device reads the buffer.
    ToDevice,
    /// The device writes the buffer.
    FromDevice,
    Bidirectional,
}

impl DmaDir {
    pub fn device_writes(self) -> bool {
        !matches!(self, DmaDir::ToDevice)
    }
}

pub struct HostOs<'a> {
    pub(crate) c: &'a mut Cluster,
    pub(crate) host: HostId,
}

impl HostOs<'_> {
    pub fn host(&self) -> HostId {
        self.host
    }

    /// Let the hardware run: device models (firmware loops polling their doorbells) act on the
    /// fabric here. Drivers never touch the fabric directly; they only call this to wait.
    pub fn run_hardware<R>(&mut self, hw: impl FnOnce(&mut devlend_fabric::Fabric) -> R) -> R {
        hw(&mut self.c.fabric)
    }

    pub fn kernel(&self) -> &Kernel {
        &self.c.kernels[self.host as usize]
    }

    fn kernel_mut(&mut self) -> &mut Kernel {
        &mut self.c.kernels[self.host as usize]
    }

    pub fn find(&self, name: &str) -> HResult<DevId> {
        self.kernel().find(name)
    }

    pub fn device(&self, dev: DevId) -> HResult<&PciDevice> {
        self.kernel().device(dev)
    }

    /// The device, if this host may drive it (not lent away to another host).
    pub(crate) fn usable(&self, dev: DevId) -> HResult<&PciDevice> {
        let d = self.kernel().device(dev)?;
        if let Some(to) = d.lent_to {
            return Err(InUse::LentTo { device: d.name.clone(), borrower: self.c.fabric.host(to).name.clone() }.into());
        }
        Ok(d)
    }

    // ----- PCI ------------------------------------------------------------------------------

    /// The CPU address of a BAR in this host (the BAR, or the NTB window onto it).
    pub fn pci_iomap(&self, dev: DevId, bar: u8) -> HResult<u64> {
        Ok(self.usable(dev)?.bar(bar)?.cpu_addr)
    }

    pub fn pci_resource_len(&self, dev: DevId, bar: u8) -> HResult<u64> {
        Ok(self.usable(dev)?.bar(bar)?.size)
    }

    pub fn pci_set_master(&mut self, dev: DevId) -> HResult<()> {
        let f = self.usable(dev)?.func;
        self.c.fabric.set_bus_master(f, true);
        Ok(())
    }

    pub fn pci_clear_master(&mut self, dev: DevId) -> HResult<()> {
        let f = self.usable(dev)?.func;
        self.c.fabric.set_bus_master(f, false);
        Ok(())
    }

    /// A configuration read; all ones when no function answers it (`Fabric::config_answers`),
    /// and for a borrowed device also while an NTB of its lend is down (Device Lending relays
    /// the borrower's configuration accesses to the lender, which the cable then cannot reach).
    pub fn pci_read_config(&self, dev: DevId, off: usize, len: usize) -> HResult<u32> {
        let f = self.usable(dev)?.func;
        let v = self.c.fabric.config_read(f, off, len)?;
        let fab = &self.c.fabric;
        let relayed = self.c.lending.lends.get(&f).filter(|l| l.borrower == self.host);
        let answered = fab.config_answers(f) && relayed.is_none_or(|l| fab.ntb_link_is_up(l.la) && fab.ntb_link_is_up(l.bb));
        Ok(if answered { v } else { (u64::MAX >> (64 - 8 * len)) as u32 })
    }

    // ----- interrupts (MSI-X) -----------------------------------------------------------------

    /// A device whose interrupts drivers request: (function, origin, name).
    fn irq_dev(&self, dev: DevId) -> HResult<(FuncId, Origin, String)> {
        let d = self.usable(dev)?;
        if d.is_ntb {
            return Err(InvalidRequest::NtbAdapter { device: d.name.clone(), refused: NtbUse::Interrupts }.into());
        }
        Ok((d.func, d.origin, d.name.clone()))
    }

    /// pci_msix_vec_count: the number of entries in the device's MSI-X table.
    pub fn pci_msix_vec_count(&self, dev: DevId) -> HResult<u16> {
        let (func, _, _) = self.irq_dev(dev)?;
        Ok(irq::msix_cap(&self.c.fabric, func)?.entries)
    }

    /// The CPU address of MSI-X table entry `entry`, through this host's mapping of the BAR.
    fn msix_entry(&self, dev: DevId, cap: &MsixCap, entry: u16) -> HResult<u64> {
        let base = self.pci_iomap(dev, cap.bir)?;
        let len = self.pci_resource_len(dev, cap.bir)?;
        let at = cap.offset + entry as u64 * MSIX_ENTRY_SIZE;
        if at + MSIX_ENTRY_SIZE > len {
            return Err(BadIrq::EntryOutsideBar { device: self.usable(dev)?.name.clone(), entry, at, bar: cap.bir, len }.into());
        }
        Ok(base + at)
    }

    /// This host's MSI message address (destination APIC ID 0; see `irq`).
    pub fn msi_address(&self) -> u64 {
        self.c.fabric.host(self.host).msi.start
    }

    /// `request_irq(pci_irq_vector(dev, entry), handler, ...)`: allocate a vector of this host
    /// for MSI-X table entry `entry` of the device, program the entry through the CPU's mapping
    /// of the table's BAR (masked, address, data, then unmasked) and enable MSI-X (Message
    /// Control bit 15) if it is not yet. Returns the vector (the message data). For a borrowed
    /// device the address is the lender-side address of this host's MSI page, which the lender
    /// maps through its NTB (000 §4). Nothing stays allocated or mapped on error.
    pub fn request_irq(&mut self, dev: DevId, entry: u16, handler: u32) -> HResult<u8> {
        let (func, origin, name) = self.irq_dev(dev)?;
        if let Some(v) = self.kernel().irqs.find(dev, entry) {
            return Err(InUse::MsixEntry { device: name.to_string(), entry, vector: v }.into());
        }
        let cap = irq::msix_cap(&self.c.fabric, func)?;
        if entry >= cap.entries {
            return Err(BadIrq::NoEntry { device: name, entries: cap.entries, entry }.into());
        }
        let slot = self.msix_entry(dev, &cap, entry)?;
        let Some(vector) = self.kernel().irqs.alloc() else {
            return Err(OutOf::Vector { host: self.kernel().name.clone() }.into());
        };
        let borrowed = matches!(origin, Origin::Borrowed { .. });
        let msg_addr = if borrowed {
            let Cluster { fabric, lending, .. } = &mut *self.c;
            lending.msi_acquire(fabric, func)?
        } else {
            self.msi_address()
        };
        let (msg_addr, irte) = match self.remap_entry(func, vector) {
            Ok(Some(h)) => (devlend_fabric::intremap::remappable_addr(msg_addr, h), Some(h)),
            Ok(None) => (msg_addr, None),
            Err(e) => {
                if borrowed {
                    let Cluster { fabric, lending, .. } = &mut *self.c;
                    lending.msi_release(fabric, func);
                }
                return Err(e);
            }
        };
        if let Err(e) = self.program_msix_entry(func, &cap, slot, msg_addr, vector as u32) {
            if let Some(h) = irte {
                self.c.fabric.irte_free(self.host, h);
            }
            if borrowed {
                let Cluster { fabric, lending, .. } = &mut *self.c;
                lending.msi_release(fabric, func);
            }
            if self.kernel().irqs.of(dev) == 0 {
                let _ = self.msix_disable(func, &cap);
            }
            return Err(e);
        }
        self.kernel_mut().irqs.insert(IrqDesc { vector, dev, entry, handler, msg_addr, count: 0, irte });
        Ok(vector)
    }

    /// With interrupt remapping on in this host, an entry raising `vector` that validates the
    /// requester ID under which `func`'s messages arrive here: its own, or for a borrowed device
    /// the far-side ID of its LUT entry on the lender's adapter (what the borrower's root sees
    /// after the NTB rewrote it). Returns its handle; None with remapping off.
    fn remap_entry(&mut self, func: FuncId, vector: u8) -> HResult<Option<u32>> {
        let f = &self.c.fabric;
        if !f.intr_remap_on(self.host) {
            return Ok(None);
        }
        let bdf = f.func(func).bdf;
        let rid = match self.c.lending.lends.get(&func) {
            Some(l) => {
                let idx = f
                    .ntb(l.la)
                    .rid_lut_index(bdf)
                    .ok_or_else(|| HostError::from(BadLend::NoLutEntry { device: f.func(func).name.clone(), lender_side: true }))?;
                f.ntb_alias_of(l.bb, l.la, idx)
            }
            None => bdf,
        };
        let irte = devlend_fabric::intremap::Irte { vector, source: devlend_fabric::intremap::Source::Rid(rid) };
        Ok(Some(self.c.fabric.irte_alloc(self.host, irte)?))
    }

    fn program_msix_entry(&mut self, func: FuncId, cap: &MsixCap, slot: u64, addr: u64, data: u32) -> HResult<()> {
        self.write(slot + MSIX_ENTRY_CTRL, &MSIX_ENTRY_MASKED.to_le_bytes())?;
        self.write(slot, &(addr as u32).to_le_bytes())?;
        self.write(slot + 4, &((addr >> 32) as u32).to_le_bytes())?;
        self.write(slot + MSIX_ENTRY_DATA, &data.to_le_bytes())?;
        let control = irq::msix_control(&self.c.fabric, func, cap)?;
        if control & MSIX_ENABLE == 0 {
            // msix_capability_init: enable with the function masked, then unmask the function.
            irq::set_msix_control(&mut self.c.fabric, func, cap, control | MSIX_ENABLE | MSIX_MASKALL)?;
            irq::set_msix_control(&mut self.c.fabric, func, cap, (control | MSIX_ENABLE) & !MSIX_MASKALL)?;
        }
        self.write(slot + MSIX_ENTRY_CTRL, &0u32.to_le_bytes())
    }

    fn msix_disable(&mut self, func: FuncId, cap: &MsixCap) -> HResult<()> {
        let control = irq::msix_control(&self.c.fabric, func, cap)?;
        irq::set_msix_control(&mut self.c.fabric, func, cap, control & !(MSIX_ENABLE | MSIX_MASKALL))
    }

    /// `free_irq`: take what is pending for the vector, mask the table entry, release the vector
    /// (and for a borrowed device its reference to the MSI mapping); the device's last vector
    /// disables MSI-X.
    pub fn free_irq(&mut self, dev: DevId, entry: u16) -> HResult<()> {
        let (func, origin, name) = self.irq_dev(dev)?;
        let Some(vector) = self.kernel().irqs.find(dev, entry) else {
            return Err(BadIrq::NotRequested { device: name, entry }.into());
        };
        self.handle_irqs();
        let cap = irq::msix_cap(&self.c.fabric, func)?;
        let masked = self.msix_entry(dev, &cap, entry).and_then(|slot| self.write(slot + MSIX_ENTRY_CTRL, &MSIX_ENTRY_MASKED.to_le_bytes()));
        if let Some(h) = self.kernel_mut().irqs.remove(vector).and_then(|d| d.irte) {
            self.c.fabric.irte_free(self.host, h);
        }
        if let Origin::Borrowed { .. } = origin {
            let Cluster { fabric, lending, .. } = &mut *self.c;
            lending.msi_release(fabric, func);
        }
        if self.kernel().irqs.of(dev) == 0 {
            self.msix_disable(func, &cap)?;
        }
        masked
    }

    /// Take the interrupts delivered to this host since the last call (the MSI writes the fabric
    /// recorded for it) and count them per vector; returns how many arrived.
    pub fn handle_irqs(&mut self) -> usize {
        let Cluster { fabric, kernels, .. } = &mut *self.c;
        kernels[self.host as usize].irqs.accept(fabric, self.host)
    }

    /// Interrupts delivered to `vector` so far (0 for a vector nobody holds).
    pub fn irq_count(&mut self, vector: u8) -> u64 {
        self.handle_irqs();
        self.kernel().irqs.get(vector).map_or(0, |d| d.count)
    }

    /// Interrupts that arrived for a vector no driver requested.
    pub fn irq_spurious(&mut self) -> u64 {
        self.handle_irqs();
        self.kernel().irqs.spurious()
    }

    // ----- memory -----------------------------------------------------------------------------

    pub fn kmalloc(&mut self, size: u64) -> HResult<u64> {
        self.kernel_mut().alloc_pages(size)
    }

    pub fn kfree(&mut self, phys: u64) -> HResult<()> {
        self.kernel_mut().free_pages(phys)
    }

    /// A CPU store of `data` at `addr` (RAM, or MMIO through `pci_iomap`).
    pub fn write(&mut self, addr: u64, data: &[u8]) -> HResult<()> {
        check_cpu_range(addr, data.len())?;
        let (_, fail) = self.c.fabric.write(Requester::Cpu(self.host), addr, data);
        self.check(addr, fail)
    }

    /// A CPU load of `len` bytes at `addr`.
    pub fn read(&mut self, addr: u64, len: usize) -> HResult<Vec<u8>> {
        check_cpu_range(addr, len)?;
        let (out, fail) = self.c.fabric.read(Requester::Cpu(self.host), addr, len);
        self.check(addr, fail).map(|_| out)
    }

    /// Turn a data-path failure (already recorded by the fabric) into an error.
    fn check(&self, addr: u64, fail: Option<devlend_fabric::route::Failure>) -> HResult<()> {
        match fail {
            None => Ok(()),
            Some(f) => Err(HostError::fault(&self.c.fabric, addr, f)),
        }
    }
}

/// A CPU access must fit in the address space and be of a sane size.
pub(crate) fn check_cpu_range(addr: u64, len: usize) -> HResult<()> {
    if len > MAX_CPU_ACCESS {
        return Err(BadAccess::CpuTooLong { addr, len }.into());
    }
    if len > 0 && addr.checked_add(len as u64 - 1).is_none() {
        return Err(BadAccess::CpuWraps { addr, len }.into());
    }
    Ok(())
}
