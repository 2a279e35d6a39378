//! The guest kernel: what a driver in the VM calls (`devlend_host::Os`), so the same GPU driver
//! runs in a guest unmodified (000 §5). The guest believes guest-physical is physical: it has no
//! IOMMU of its own, so its DMA API is Linux's `dma-direct` (the bus address of a buffer or of a
//! peer's BAR is its guest-physical address), and the pass-through domain makes that true for
//! the device. CPU loads and stores go through the EPT (`Vm::translate`) to the host's RAM or,
//! for a BAR, to where the host's CPUs reach it (the BAR itself, or the NTB window onto it).
//! Setting Bus Master Enable is a config write the hypervisor intercepts (`Vmm::set_master`).

use crate::vm::VmId;
use crate::vmm::Vmm;
use devlend_fabric::model::HostId;
use devlend_fabric::{Fabric, Requester};
use devlend_host::{Cluster, DevId, DmaDir, HResult, HostError, Os};

pub struct GuestOs<'a> {
    pub(crate) c: &'a mut Cluster,
    pub(crate) vmm: &'a mut Vmm,
    pub(crate) vm: VmId,
}

fn inv<T>(m: String) -> HResult<T> {
    Err(HostError::Invalid(m))
}

impl GuestOs<'_> {
    fn vm(&self) -> &crate::vm::Vm {
        &self.vmm.vms[&self.vm]
    }

    fn bar(&self, dev: DevId, bar: u8) -> HResult<&crate::vm::GuestBar> {
        let d = self.vmm.dev(self.vm, dev)?;
        d.bars.iter().find(|b| b.index == bar).ok_or_else(|| HostError::Invalid(format!("{} has no BAR {bar}", d.name)))
    }

    /// A CPU access of the guest: EPT translation, then the host CPU's access in the fabric.
    fn access(&mut self, gpa: u64, len: usize, data: Option<&[u8]>) -> HResult<Vec<u8>> {
        let pieces = self.vm().translate(gpa, len).map_err(HostError::Fault)?;
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
                let j = self.c.fabric.failure_json(&f);
                return Err(HostError::Fault(j["message"].as_str().unwrap_or("access failed").to_string()));
            }
            at += n;
        }
        Ok(out)
    }

    fn track(&mut self, dev: DevId, dma: u64, len: u64) -> HResult<u64> {
        let vm = self.vm;
        let d = self.vmm.vms.get_mut(&vm).and_then(|v| v.devices.get_mut(&dev)).ok_or_else(|| HostError::NoDevice(format!("guest has no device {}", dev.0)))?;
        d.dma_maps.push((dma, len));
        Ok(dma)
    }

    fn untrack(&mut self, dev: DevId, dma: u64, len: u64) -> HResult<()> {
        let vm = self.vm;
        let d = self.vmm.vms.get_mut(&vm).and_then(|v| v.devices.get_mut(&dev)).ok_or_else(|| HostError::NoDevice(format!("guest has no device {}", dev.0)))?;
        match d.dma_maps.iter().position(|&m| m == (dma, len)) {
            Some(i) => {
                d.dma_maps.remove(i);
                Ok(())
            }
            None => inv(format!("dma_unmap: {} has no mapping of {len} bytes at {dma:#x}", d.name)),
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
        v.devices.values().find(|d| d.name == name).map(|d| d.id).ok_or_else(|| HostError::NoDevice(format!("VM {} sees no device named '{name}'", v.name)))
    }
    fn pci_iomap(&self, dev: DevId, bar: u8) -> HResult<u64> {
        Ok(self.bar(dev, bar)?.gpa)
    }
    fn pci_resource_len(&self, dev: DevId, bar: u8) -> HResult<u64> {
        Ok(self.bar(dev, bar)?.size)
    }
    fn pci_set_master(&mut self, dev: DevId) -> HResult<()> {
        self.vmm.set_master(self.c, self.vm, dev)
    }
    fn pci_clear_master(&mut self, dev: DevId) -> HResult<()> {
        let f = self.vmm.dev(self.vm, dev)?.func;
        self.c.fabric.set_bus_master(f, false);
        Ok(())
    }
    fn pci_read_config(&self, dev: DevId, off: usize, len: usize) -> HResult<u32> {
        Ok(self.c.fabric.config_read(self.vmm.dev(self.vm, dev)?.func, off, len)?)
    }
    fn kmalloc(&mut self, size: u64) -> HResult<u64> {
        let vm = self.vm;
        let v = self.vmm.vms.get_mut(&vm).ok_or_else(|| HostError::NoDevice("VM is gone".into()))?;
        v.kmalloc(size).ok_or_else(|| HostError::NoMemory(format!("VM {}: out of guest memory allocating {size} bytes", v.name)))
    }
    fn kfree(&mut self, phys: u64) -> HResult<()> {
        let vm = self.vm;
        let v = self.vmm.vms.get_mut(&vm).ok_or_else(|| HostError::NoDevice("VM is gone".into()))?;
        if v.kfree(phys) { Ok(()) } else { inv(format!("guest kfree of {phys:#x}, which is not the start of an allocation")) }
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> HResult<()> {
        self.access(addr, data.len(), Some(data)).map(|_| ())
    }
    fn read(&mut self, addr: u64, len: usize) -> HResult<Vec<u8>> {
        self.access(addr, len, None)
    }
    fn dma_map_single(&mut self, dev: DevId, phys: u64, len: u64, _dir: DmaDir) -> HResult<u64> {
        if len == 0 || !self.vm().layout.is_ram(phys, len) {
            return inv(format!("dma_map_single: {phys:#x}+{len:#x} is not RAM of VM {}", self.vm().name));
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
            return inv(format!("dma_map_resource: {phys:#x}+{len:#x} is not inside one BAR of a device in VM {}", self.vm().name));
        }
        self.track(dev, phys, len)
    }
    fn dma_unmap_resource(&mut self, dev: DevId, dma: u64, len: u64, _dir: DmaDir) -> HResult<()> {
        self.untrack(dev, dma, len)
    }
}
