//! The guest kernel: what a driver in the VM calls (`devlend_host::Os`), so the same GPU driver
//! runs in a guest unmodified (000 §5). The guest believes guest-physical is physical: it has no
//! IOMMU of its own, so its DMA API is Linux's `dma-direct` (the bus address of a buffer or of a
//! peer's BAR is its guest-physical address), and the pass-through domain makes that true for
//! the device. CPU loads and stores go through the EPT (`Vm::translate`) to the host's RAM or,
//! for a BAR, to where the host's CPUs reach it (the BAR itself, or the NTB window onto it).
//! Config accesses and the MSI-X table go through the hypervisor (`config`): setting Bus Master
//! Enable is the config write the mediated path borrows on (`Vmm::set_master`).
//!
//! Interrupts: the same calls as `devlend_host::HostOs` (`pci_msix_vec_count`, `request_irq`,
//! `free_irq`, `irq_count`, `irq_spurious`) plus legacy INTx (`request_intx`,
//! `free_intx`). The guest programs its (virtual) MSI-X table with its own MSI address and
//! vector, as Linux does; the hypervisor routes the interrupt to it (`irq`).

use crate::config::CMD_INTX_DISABLE;
use crate::irq::{GuestIrq, Src};
use crate::vm::{GuestDev, VmId};
use crate::vmm::Vmm;
use devlend_fabric::config::{CMD_BUS_MASTER, COMMAND, MSIX_CAP, MSIX_ENABLE};
use devlend_fabric::model::HostId;
use devlend_fabric::{Fabric, Requester};
use devlend_host::irq::{MSIX_ENTRY_CTRL, MSIX_ENTRY_DATA, MSIX_ENTRY_MASKED, MSIX_ENTRY_SIZE, MSIX_MASKALL};
use devlend_host::{BadAccess, BadDma, BadIrq, Cluster, DevId, DmaDir, HResult, HostError, InUse, InVm, InvalidRequest, NoSuch, Os, OutOf};

pub struct GuestOs<'a> {
    pub(crate) c: &'a mut Cluster,
    pub(crate) vmm: &'a mut Vmm,
    pub(crate) vm: VmId,
}

impl GuestOs<'_> {
    fn vm(&self) -> &crate::vm::Vm {
        &self.vmm.vms[&self.vm]
    }

    /// This guest's VM, to change; an error once it is gone.
    fn vm_mut(&mut self) -> HResult<&mut crate::vm::Vm> {
        let vm = self.vm;
        self.vmm.vms.get_mut(&vm).ok_or(HostError::NoDevice(NoSuch::Vm(InVm::Gone { vm: vm.0 })))
    }

    fn bar(&self, dev: DevId, bar: u8) -> HResult<&crate::vm::GuestBar> {
        let d = self.vmm.dev(self.vm, dev)?;
        d.bars.iter().find(|b| b.index == bar).ok_or_else(|| InvalidRequest::NoBar { device: d.name.clone(), bar }.into())
    }

    /// A CPU access of the guest: a trapped MSI-X table page goes to the hypervisor; anything
    /// else is EPT translation, then the host CPU's access in the fabric.
    fn access(&mut self, gpa: u64, len: usize, data: Option<&[u8]>) -> HResult<Vec<u8>> {
        if let Some((dev, at)) = self.vmm.msix_trap(self.vm, gpa, len) {
            return match data {
                Some(d) => self.vmm.msix_write(self.c, self.vm, dev, at, d).map(|_| Vec::new()),
                None => self.vmm.msix_read(self.vm, dev, at, len),
            };
        }
        let pieces = self.vm().translate(gpa, len).map_err(HostError::Ept)?;
        let cpu = Requester::Cpu(self.vm().host);
        let (mut out, mut at) = (Vec::with_capacity(len), 0usize);
        for (addr, n) in pieces {
            let fail = match data {
                Some(d) => self.c.fabric.write(cpu, addr, &d[at..at + n]).1,
                None => {
                    let (b, f) = self.c.fabric.read(cpu, addr, n);
                    out.extend(b);
                    f
                }
            };
            if let Some(f) = fail {
                return Err(HostError::fault(&self.c.fabric, addr, f));
            }
            at += n;
        }
        Ok(out)
    }

    /// This guest's device `dev`, for its DMA bookkeeping.
    fn dev_mut(&mut self, dev: DevId) -> HResult<&mut GuestDev> {
        let vm = self.vm;
        let missing = HostError::NoDevice(NoSuch::Vm(InVm::GuestDevice { vm: vm.0, dev: dev.0 }));
        self.vmm.vms.get_mut(&vm).and_then(|v| v.devices.get_mut(&dev)).ok_or(missing)
    }

    fn track(&mut self, dev: DevId, dma: u64, len: u64) -> HResult<u64> {
        let d = self.dev_mut(dev)?;
        d.dma_maps.push((dma, len));
        Ok(dma)
    }

    fn untrack(&mut self, dev: DevId, dma: u64, len: u64) -> HResult<()> {
        let d = self.dev_mut(dev)?;
        match d.dma_maps.iter().position(|&m| m == (dma, len)) {
            Some(i) => {
                d.dma_maps.remove(i);
                Ok(())
            }
            None => Err(BadDma::GuestNoMapping { device: d.name.clone(), dma, len }.into()),
        }
    }
}

impl Os for GuestOs<'_> {
    fn host(&self) -> HostId {
        self.vm().host
    }
    fn run_hardware<R>(&mut self, hw: impl FnOnce(&mut Fabric) -> R) -> R {
        hw(&mut self.c.fabric)
    }
    fn find(&self, name: &str) -> HResult<DevId> {
        let v = self.vm();
        v.devices
            .values()
            .find(|d| d.name == name)
            .map(|d| d.id)
            .ok_or_else(|| HostError::NoDevice(NoSuch::Vm(InVm::DeviceName { vm: v.name.clone(), name: name.into() })))
    }
    fn pci_iomap(&self, dev: DevId, bar: u8) -> HResult<u64> {
        Ok(self.bar(dev, bar)?.gpa)
    }
    fn pci_resource_len(&self, dev: DevId, bar: u8) -> HResult<u64> {
        Ok(self.bar(dev, bar)?.size)
    }
    fn pci_set_master(&mut self, dev: DevId) -> HResult<()> {
        let cmd = self.pci_read_config(dev, COMMAND, 2)?;
        self.pci_write_config(dev, COMMAND, 2, cmd | CMD_BUS_MASTER as u32)
    }
    fn pci_clear_master(&mut self, dev: DevId) -> HResult<()> {
        let cmd = self.pci_read_config(dev, COMMAND, 2)?;
        self.pci_write_config(dev, COMMAND, 2, cmd & !(CMD_BUS_MASTER as u32))
    }
    fn pci_read_config(&self, dev: DevId, off: usize, len: usize) -> HResult<u32> {
        self.vmm.config_read(self.c, self.vm, dev, off, len)
    }
    fn kmalloc(&mut self, size: u64) -> HResult<u64> {
        let v = self.vm_mut()?;
        v.kmalloc(size).ok_or_else(|| OutOf::GuestMemory { vm: v.name.clone(), bytes: size }.into())
    }
    fn kfree(&mut self, phys: u64) -> HResult<()> {
        let v = self.vm_mut()?;
        if v.kfree(phys) {
            Ok(())
        } else {
            Err(BadAccess::GuestKfree { phys }.into())
        }
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> HResult<()> {
        self.access(addr, data.len(), Some(data)).map(|_| ())
    }
    fn read(&mut self, addr: u64, len: usize) -> HResult<Vec<u8>> {
        self.access(addr, len, None)
    }
    fn dma_map_single(&mut self, dev: DevId, phys: u64, len: u64, _dir: DmaDir) -> HResult<u64> {
        if len == 0 || !self.vm().layout.is_ram(phys, len) {
            return Err(BadDma::GuestNotRam { phys, len, vm: self.vm().name.clone() }.into());
        }
        self.track(dev, phys, len)
    }
    fn dma_unmap_single(&mut self, dev: DevId, dma: u64, len: u64, _dir: DmaDir) -> HResult<()> {
        self.untrack(dev, dma, len)
    }
    fn dma_alloc_coherent(&mut self, dev: DevId, len: u64) -> HResult<(u64, u64)> {
        self.vmm.dev(self.vm, dev)?;
        let cpu = self.kmalloc(len)?;
        Ok((cpu, self.track(dev, cpu, len)?))
    }
    fn dma_free_coherent(&mut self, dev: DevId, len: u64, cpu: u64, dma: u64) -> HResult<()> {
        self.untrack(dev, dma, len)?;
        self.kfree(cpu)
    }
    fn dma_map_resource(&mut self, dev: DevId, phys: u64, len: u64, _dir: DmaDir) -> HResult<u64> {
        if len == 0 || self.vm().bar_holding(phys, len).is_none() {
            return Err(BadDma::GuestNotInBar { phys, len, vm: self.vm().name.clone() }.into());
        }
        self.track(dev, phys, len)
    }
    fn dma_unmap_resource(&mut self, dev: DevId, dma: u64, len: u64, _dir: DmaDir) -> HResult<()> {
        self.untrack(dev, dma, len)
    }
    fn request_irq(&mut self, dev: DevId, entry: u16, handler: u32) -> HResult<u8> {
        GuestOs::request_irq(self, dev, entry, handler)
    }
    fn free_irq(&mut self, dev: DevId, entry: u16) -> HResult<()> {
        GuestOs::free_irq(self, dev, entry)
    }
    fn irq_count(&mut self, vector: u8) -> u64 {
        GuestOs::irq_count(self, vector)
    }
}

impl GuestOs<'_> {
    /// A config write of the guest kernel (trapped by the hypervisor, see `config`).
    pub fn pci_write_config(&mut self, dev: DevId, off: usize, len: usize, value: u32) -> HResult<()> {
        self.vmm.config_write(self.c, self.vm, dev, off, len, value)
    }

    fn msix_slot(&self, dev: DevId, entry: u16) -> HResult<u64> {
        let d = self.vmm.dev(self.vm, dev)?;
        let cap = d.virt.msix.ok_or_else(|| HostError::from(BadIrq::GuestNoMsix { device: d.name.clone() }))?;
        if entry >= cap.entries {
            return Err(BadIrq::NoEntry { device: d.name.clone(), entries: cap.entries, entry }.into());
        }
        Ok(self.bar(dev, cap.bir)?.gpa + cap.offset + entry as u64 * MSIX_ENTRY_SIZE)
    }

    pub fn pci_msix_vec_count(&self, dev: DevId) -> HResult<u16> {
        let d = self.vmm.dev(self.vm, dev)?;
        d.virt.msix.map(|m| m.entries).ok_or_else(|| BadIrq::GuestNoMsix { device: d.name.clone() }.into())
    }

    fn new_vector(&mut self, dev: DevId, src: Src, handler: u32) -> HResult<u8> {
        let v = self.vm_mut()?;
        if let Some(x) = v.irqs.find(dev, src) {
            return Err(InUse::GuestVector { source: format!("{src:?}"), device: dev.0, vector: x }.into());
        }
        let vector = v.irqs.alloc().ok_or_else(|| HostError::from(OutOf::GuestVector { vm: v.name.clone() }))?;
        v.irqs.descs.insert(vector, GuestIrq { vector, dev, src, handler, count: 0, last_latency_ps: None });
        Ok(vector)
    }

    fn drop_vector(&mut self, vector: u8) {
        let vm = self.vm;
        if let Some(v) = self.vmm.vms.get_mut(&vm) {
            v.irqs.descs.remove(&vector);
        }
    }

    /// `request_irq` on MSI-X entry `entry`: a guest vector, the entry programmed (masked,
    /// address, data, unmasked) and MSI-X enabled, all through the trapped table and config
    /// space. Returns the guest vector. Nothing stays allocated on error.
    pub fn request_irq(&mut self, dev: DevId, entry: u16, handler: u32) -> HResult<u8> {
        let slot = self.msix_slot(dev, entry)?;
        let vector = self.new_vector(dev, Src::Msix(entry), handler)?;
        let r = (|| -> HResult<()> {
            self.write(slot + MSIX_ENTRY_CTRL, &MSIX_ENTRY_MASKED.to_le_bytes())?;
            self.write(slot, &(crate::config::GUEST_MSI.0 as u32).to_le_bytes())?;
            self.write(slot + 4, &0u32.to_le_bytes())?;
            self.write(slot + MSIX_ENTRY_DATA, &(vector as u32).to_le_bytes())?;
            let control = self.pci_read_config(dev, MSIX_CAP + 2, 2)?;
            if control as u16 & MSIX_ENABLE == 0 {
                self.pci_write_config(dev, MSIX_CAP + 2, 2, control | (MSIX_ENABLE | MSIX_MASKALL) as u32)?;
                self.pci_write_config(dev, MSIX_CAP + 2, 2, (control | MSIX_ENABLE as u32) & !(MSIX_MASKALL as u32))?;
            }
            self.write(slot + MSIX_ENTRY_CTRL, &0u32.to_le_bytes())
        })();
        if let Err(e) = r {
            let _ = self.write(slot + MSIX_ENTRY_CTRL, &MSIX_ENTRY_MASKED.to_le_bytes());
            self.drop_vector(vector);
            return Err(e);
        }
        Ok(vector)
    }

    /// `free_irq`: the entry masked and the vector released; the last one disables MSI-X.
    pub fn free_irq(&mut self, dev: DevId, entry: u16) -> HResult<()> {
        let vm = self.vm;
        let Some(vector) = self.vmm.vm(vm)?.irqs.find(dev, Src::Msix(entry)) else {
            return Err(BadIrq::GuestNotRequested { dev: dev.0, entry }.into());
        };
        let slot = self.msix_slot(dev, entry)?;
        self.write(slot + MSIX_ENTRY_CTRL, &MSIX_ENTRY_MASKED.to_le_bytes())?;
        self.drop_vector(vector);
        let left = self.vmm.vm(vm)?.irqs.descs.values().any(|d| d.dev == dev && matches!(d.src, Src::Msix(_)));
        if !left {
            let control = self.pci_read_config(dev, MSIX_CAP + 2, 2)?;
            self.pci_write_config(dev, MSIX_CAP + 2, 2, control & !((MSIX_ENABLE | MSIX_MASKALL) as u32))?;
        }
        Ok(())
    }

    /// A handler on the device's legacy INTx line (Linux `pci_intx(dev, 1)` + `request_irq`):
    /// a guest vector for the line, and Interrupt Disable cleared. Returns the guest vector.
    pub fn request_intx(&mut self, dev: DevId, handler: u32) -> HResult<u8> {
        let vector = self.new_vector(dev, Src::Intx, handler)?;
        let cmd = self.pci_read_config(dev, COMMAND, 2)?;
        if let Err(e) = self.pci_write_config(dev, COMMAND, 2, cmd & !(CMD_INTX_DISABLE as u32)) {
            self.drop_vector(vector);
            return Err(e);
        }
        Ok(vector)
    }

    pub fn free_intx(&mut self, dev: DevId) -> HResult<()> {
        let Some(vector) = self.vmm.vm(self.vm)?.irqs.find(dev, Src::Intx) else {
            return Err(BadIrq::GuestNoIntx { dev: dev.0 }.into());
        };
        let cmd = self.pci_read_config(dev, COMMAND, 2)?;
        self.pci_write_config(dev, COMMAND, 2, cmd | CMD_INTX_DISABLE as u32)?;
        self.drop_vector(vector);
        Ok(())
    }

    /// Interrupts the vCPU has injected on `vector` (on a machine, `irq_clock`).
    pub fn irq_count(&self, vector: u8) -> u64 {
        self.vm().irqs.descs.get(&vector).map_or(0, |d| d.count)
    }

    pub fn irq_spurious(&self) -> u64 {
        self.vm().irqs.spurious
    }

    /// The modelled latency of the last interrupt delivered on `vector` (device to handler, ps).
    pub fn irq_latency_ps(&self, vector: u8) -> Option<u64> {
        self.vm().irqs.descs.get(&vector).and_then(|d| d.last_latency_ps)
    }
}
