//! The kernel of one host, as far as Device Lending needs one (000 §4: "we insert a virtual
//! device into the borrower's local device tree"; Fig 4):
//!
//! - a device tree: the PCI functions this host sees, its own after enumeration (the fabric has
//!   already numbered buses and assigned BARs, as Linux does at boot) plus borrowed ones that
//!   the borrower agent hot-adds and hot-removes;
//! - BAR addresses as the host's CPUs reach them (`pci_iomap`): the BAR itself for a local
//!   device, the borrower's NTB window segment mapped onto the BAR for a borrowed one;
//! - a deterministic physical page allocator over the host's RAM (the first 16 MiB stay
//!   reserved for "the kernel image and firmware", so buffers never start at address 0);
//! - per local device, its DMA state (`localdma`): with the IOMMU on, one IOMMU domain per
//!   device named `dma:DEVICE`, attached at boot, as Linux gives each device a default domain;
//! - the host's interrupt vectors (`irq`): which device's MSI-X entry and which driver handler
//!   each belongs to, and how many interrupts each has taken.
//!
//! NTB adapters are listed but their DMA is not the drivers' business: Device Lending attaches
//! their requester IDs and DMA aliases to its own domains (see `lending`).

use crate::alloc::{align_up, RangeAlloc};
use crate::error::{size, BadAccess, HResult, HandleUse, HostError, InvalidRequest, NoSuch, OutOf};
use crate::irq::IrqTable;
use crate::localdma::LocalDma;
use devlend_fabric::model::{FuncId, Host, HostId, NodeKind};
use devlend_fabric::Fabric;
use devlend_wire::Bdf;
use std::collections::BTreeMap;
use std::fmt::Write;

pub const PAGE: u64 = 0x1000;
/// Low RAM kept out of the page allocator.
pub const KERNEL_RESERVED: u64 = 16 << 20;

/// A handle to a device in one host's device tree. Handles are never reused: a handle to a
/// returned (hot-removed) device stays invalid even if the device is borrowed again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Physically in this host.
    Local,
    /// Borrowed from another host and hot-added here.
    Borrowed { lender: HostId },
}

/// One BAR as this host's CPUs see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarView {
    pub index: u8,
    pub size: u64,
    /// Address in this host's physical address space (the BAR, or the NTB window onto it).
    pub cpu_addr: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciDevice {
    pub id: DevId,
    /// The function's name in the fabric (`gpu0`, `nic0.vf3`).
    pub name: String,
    pub func: FuncId,
    /// The function's requester ID in the host it physically sits in.
    pub bdf: Bdf,
    pub is_ntb: bool,
    pub origin: Origin,
    /// For a local device: the host it is lent to, if any.
    pub lent_to: Option<HostId>,
    pub bars: Vec<BarView>,
}

impl PciDevice {
    pub fn bar(&self, index: u8) -> HResult<&BarView> {
        self.bars.iter().find(|b| b.index == index).ok_or_else(|| InvalidRequest::NoBar { device: self.name.clone(), bar: index }.into())
    }

    /// The BAR holding [addr, addr+len) in this host's view, and the offset into it.
    pub fn bar_holding(&self, addr: u64, len: u64) -> Option<(&BarView, u64)> {
        self.bars.iter().find(|b| addr >= b.cpu_addr && addr.checked_add(len).is_some_and(|e| e <= b.cpu_addr + b.size)).map(|b| (b, addr - b.cpu_addr))
    }
}

pub struct Kernel {
    pub host: HostId,
    pub name: String,
    pub iommu: bool,
    devices: BTreeMap<DevId, PciDevice>,
    next_id: u32,
    ram: Vec<(u64, u64)>,
    pages: RangeAlloc,
    pub(crate) dma: BTreeMap<DevId, LocalDma>,
    pub(crate) irqs: IrqTable,
    /// Devices whose driver has been told they are gone (hot-plug removal): (function, when, ps).
    pub(crate) removals: Vec<(FuncId, u64)>,
}

/// The IOVA space handed out by this host's IOVA allocators: from 4 GiB up to the 64-bit MMIO
/// window. Below 4 GiB sit the MSI range and the 32-bit MMIO window; from the 64-bit MMIO base
/// on sit BARs and NTB windows, which Device Lending maps one-to-one (see `lending`). So an
/// allocated IOVA never collides with an identity mapping, and never looks like an MSI write.
pub fn iova_space(h: &Host) -> Vec<(u64, u64)> {
    vec![(1 << 32, h.mmio64.start)]
}

impl Kernel {
    /// Bytes the local drivers have mapped in IOMMU domain `domain` (`leftover`).
    pub(crate) fn local_mapped(&self, domain: devlend_fabric::iommu::DomainId) -> u64 {
        self.dma.values().filter(|d| d.domain == Some(domain)).map(|d| d.iommu_bytes()).sum()
    }

    /// Boot: list the host's functions (BDF order) and give each local non-NTB function its DMA state.
    pub fn boot(f: &mut Fabric, host: HostId) -> HResult<Kernel> {
        let h = f.host(host);
        let ram: Vec<(u64, u64)> = h.ram_regions.iter().map(|r| (r.start, r.end)).collect();
        let free: Vec<(u64, u64)> = ram.iter().map(|&(s, e)| (s.max(KERNEL_RESERVED), e)).collect();
        let mut k = Kernel {
            host,
            name: h.name.clone(),
            iommu: h.iommu,
            devices: BTreeMap::new(),
            next_id: 0,
            ram,
            pages: RangeAlloc::new(&free),
            dma: BTreeMap::new(),
            irqs: IrqTable::default(),
            removals: Vec::new(),
        };
        let mut funcs: Vec<FuncId> = (0..f.funcs().len() as FuncId).filter(|&x| f.func_host(x) == host).collect();
        funcs.sort_by_key(|&x| f.func(x).bdf);
        for func in funcs {
            let is_ntb = matches!(f.node(f.func(func).node).kind, NodeKind::Ntb { .. });
            let bars = f.func(func).bars.iter().map(|b| BarView { index: b.index, size: b.size, cpu_addr: b.addr }).collect();
            let fun = f.func(func);
            let dev = PciDevice { id: DevId(0), name: fun.name.clone(), func, bdf: fun.bdf, is_ntb, origin: Origin::Local, lent_to: None, bars };
            let id = k.hot_add(dev);
            if !is_ntb {
                let d = LocalDma::boot(f, host, func)?;
                k.dma.insert(id, d);
            }
        }
        Ok(k)
    }

    pub fn devices(&self) -> impl Iterator<Item = &PciDevice> {
        self.devices.values()
    }

    pub fn device(&self, id: DevId) -> HResult<&PciDevice> {
        self.devices.get(&id).ok_or_else(|| no_handle(&self.name, id, HandleUse::Read))
    }

    pub(crate) fn device_mut(&mut self, id: DevId) -> HResult<&mut PciDevice> {
        self.devices.get_mut(&id).ok_or_else(|| no_handle(&self.name, id, HandleUse::Change))
    }

    pub fn find(&self, name: &str) -> HResult<DevId> {
        self.devices.values().find(|d| d.name == name).map(|d| d.id).ok_or_else(|| {
            let sees = self.devices.values().map(|d| d.name.clone()).collect();
            HostError::NoDevice(NoSuch::DeviceName { host: self.name.clone(), name: name.into(), sees })
        })
    }

    pub fn by_func(&self, func: FuncId) -> Option<DevId> {
        self.devices.values().find(|d| d.func == func).map(|d| d.id)
    }

    /// The device and BAR whose view holds [addr, addr+len), with the offset into the BAR.
    /// A borrowed device's BARs lie inside the NTB window BARs of this host's adapter: the
    /// device wins over the adapter, and a smaller BAR over a larger one.
    pub fn resolve_bar(&self, addr: u64, len: u64) -> Option<(DevId, u8, u64)> {
        let hits = self.devices.values().filter_map(|d| d.bar_holding(addr, len).map(|(b, off)| (d, b, off)));
        hits.min_by_key(|(d, b, _)| (d.is_ntb, b.size)).map(|(d, b, off)| (d.id, b.index, off))
    }

    /// Insert a device into the tree (boot, or a hot-plug event for a borrowed device).
    pub(crate) fn hot_add(&mut self, mut dev: PciDevice) -> DevId {
        let id = DevId(self.next_id);
        self.next_id += 1;
        dev.id = id;
        self.devices.insert(id, dev);
        id
    }

    /// Remove a device from the tree (a hot-unplug event).
    pub(crate) fn hot_remove(&mut self, id: DevId) -> HResult<PciDevice> {
        self.dma.remove(&id);
        self.irqs.drop_device(id);
        self.devices.remove(&id).ok_or_else(|| no_handle(&self.name, id, HandleUse::Remove))
    }

    /// This host's interrupt vectors (what /proc/interrupts lists). Counts include only the
    /// messages taken so far: `HostOs::handle_irqs` (or `irq_count`) takes the new ones.
    pub fn irqs(&self) -> &IrqTable {
        &self.irqs
    }

    /// Whether [addr, addr+len) lies inside one RAM region of this host.
    pub fn is_ram(&self, addr: u64, len: u64) -> bool {
        self.ram.iter().any(|&(s, e)| addr >= s && addr.checked_add(len).is_some_and(|x| x <= e))
    }

    /// Allocate page-aligned, zero-filled-by-nature physical memory (kmalloc / alloc_pages).
    pub fn alloc_pages(&mut self, bytes: u64) -> HResult<u64> {
        let n = align_up(bytes.max(1), PAGE).ok_or_else(|| HostError::from(OutOf::HostBytes { host: self.name.clone(), bytes }))?;
        self.pages.alloc(n, PAGE).ok_or_else(|| OutOf::HostPages { host: self.name.clone(), asked: n, free: self.pages.available() }.into())
    }

    pub fn free_pages(&mut self, phys: u64) -> HResult<()> {
        match self.pages.free(phys) {
            Some(_) => Ok(()),
            None => Err(BadAccess::Kfree { host: self.name.clone(), phys }.into()),
        }
    }

    /// The allocation holding `phys`, as (start, size).
    pub fn allocation(&self, phys: u64) -> Option<(u64, u64)> {
        self.pages.find(phys)
    }

    /// A listing like `lspci`: one line per device, BARs as this host sees them.
    pub fn lspci(&self, f: &Fabric) -> String {
        let mut s = String::new();
        for d in self.devices.values() {
            let origin = match (d.origin, d.lent_to) {
                (Origin::Borrowed { lender }, _) => format!(" [borrowed from {}]", f.host(lender).name),
                (Origin::Local, Some(to)) => format!(" [lent to {}]", f.host(to).name),
                _ => String::new(),
            };
            let _ = write!(s, "{} {}{}{}", d.bdf, d.name, if d.is_ntb { " (NTB)" } else { "" }, origin);
            for b in &d.bars {
                let _ = write!(s, "  BAR{} {:#x} [{}]", b.index, b.cpu_addr, size(b.size));
            }
            s.push('\n');
        }
        s
    }
}

/// Host `host` has no device with handle `id`; `asked`: what the caller wanted of it.
fn no_handle(host: &str, id: DevId, asked: HandleUse) -> HostError {
    HostError::NoDevice(NoSuch::Handle { host: host.into(), handle: id.0, asked })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"{"name":"one","hosts":[{"name":"h","cpu":"intel-xeon-e5","ram":4294967296,"iommu":true,"root_ports":2}],
      "devices":[{"name":"gpu0","profile":"quadro-k420"},{"name":"nvme0","profile":"optane-900p"}],
      "links":[{"a":"h.rp0","b":"gpu0","gen":2,"width":16},{"a":"h.rp1","b":"nvme0","gen":3,"width":4}]}"#;

    #[test]
    fn boot_lists_local_functions_with_their_bars_and_a_domain_each() {
        let mut f = devlend_fabric::build_json(ONE).unwrap();
        let k = Kernel::boot(&mut f, 0).unwrap();
        let names: Vec<_> = k.devices().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["gpu0", "nvme0"]);
        let g = k.device(k.find("gpu0").unwrap()).unwrap();
        assert_eq!(g.bar(1).unwrap().cpu_addr, f.resolve_expr("gpu0.bar1").unwrap());
        assert!(g.bar(2).is_err());
        assert!(f.iommu_domain(0, "dma:gpu0").is_ok() && f.iommu_domain(0, "dma:nvme0").is_ok());
        assert!(k.find("gpu9").unwrap_err().to_string().contains("sees: gpu0, nvme0"));
        let bar1 = g.bar(1).unwrap().cpu_addr;
        assert_eq!(k.resolve_bar(bar1 + 0x10, 0x10), Some((g.id, 1, 0x10)));
        assert!(k.lspci(&f).contains("gpu0  BAR0"));
    }

    #[test]
    fn page_allocator_is_deterministic_and_checks_frees() {
        let mut f = devlend_fabric::build_json(ONE).unwrap();
        let mut k = Kernel::boot(&mut f, 0).unwrap();
        let a = k.alloc_pages(100).unwrap();
        let b = k.alloc_pages(0x2001).unwrap();
        assert_eq!((a, b), (KERNEL_RESERVED, KERNEL_RESERVED + PAGE));
        assert!(k.is_ram(b, 0x3000));
        assert_eq!(k.allocation(b + 0x2fff), Some((b, 0x3000)));
        k.free_pages(a).unwrap();
        assert!(k.free_pages(a).is_err());
        assert_eq!(k.alloc_pages(1).unwrap(), a);
        assert!(matches!(k.alloc_pages(1 << 40), Err(HostError::NoMemory(_))));
    }
}
