//! Interrupts: MSI-X vectors of a host, as Linux hands them to drivers (`request_irq`,
//! `free_irq`; see `HostOs`), and the programming of a device's MSI-X table.
//!
//! What is modelled, and where it comes from:
//! - MSI/MSI-X (000 §2.1): "MSI-capable devices post a memory write TLP to the root using a
//!   pre-determined address. The write TLP is then interpreted by the CPU, which uses the payload
//!   to raise an interrupt". The fabric delivers a device's write into a host's MSI range as
//!   `Target::Msi` and records it as `Event::Msi`; the kernel of that host takes these events
//!   (its local APIC accepting the messages) and counts them per vector (`IrqTable::accept`).
//! - Message format (Intel SDM vol. 3 §10.11.1-2): address 0xFEE0_0000 | destination APIC ID
//!   << 12 (devlend's hosts have one interrupt destination, ID 0, so every vector of a host uses
//!   the page at `Host.msi.start`), data = the vector in bits 7:0 (fixed delivery, edge).
//! - Vectors (Linux arch/x86/include/asm/irq_vectors.h): device interrupts get IDT vectors from
//!   `FIRST_EXTERNAL_VECTOR` (0x20) up to below the system vectors (`LOCAL_TIMER_VECTOR`, 0xec);
//!   lowest free first, so runs are deterministic. A message whose vector no driver requested is
//!   counted as spurious (Linux: "No irq handler for vector").
//! - MSI-X capability and table (PCIe Base 3.0 §6.1.4, §7.7): Message Control bit 15 enables
//!   MSI-X, bit 14 masks the whole function; the table (found through the capability's Table
//!   Offset/BIR) has 16 bytes per entry: address low, address high, data, vector control (bit 0
//!   masks the entry). Software programs an entry masked and unmasks it last; Linux
//!   (drivers/pci/msi: `msix_capability_init`) enables MSI-X with the function masked while it
//!   sets entries up. The table is written by CPU stores through the BAR mapping
//!   (`pci_iomap`), which for a borrowed device is the NTB window onto the BAR in the lender.
//! - Borrowed devices: the table entry holds the lender-side address of the borrower's MSI page,
//!   which the lender maps through its NTB (000 §4; see `lending::msi`).
//!
//! Legacy INTx lines of a host's own functions: see `forward` (a borrower cannot take them,
//! 000 §4 footnote 2; the VM layer forwards them, 000 §5). Not modelled: plain MSI
//! (the device profiles carry MSI-X), interrupt remapping, affinity, shared IRQs.

use crate::error::{BadIrq, HResult, HostError};
use crate::kernel::DevId;
use devlend_fabric::config::MSIX_ENABLE;
use devlend_fabric::fabric::Event;
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::{Fabric, Requester};
use std::collections::BTreeMap;

/// First vector handed to device interrupts (Linux x86 `FIRST_EXTERNAL_VECTOR`).
pub const FIRST_DEVICE_VECTOR: u8 = 0x20;
/// First system vector (Linux x86 `LOCAL_TIMER_VECTOR`); devices get vectors below it.
pub const FIRST_SYSTEM_VECTOR: u8 = 0xec;
/// MSI-X Message Control: Function Mask (PCIe Base 3.0 §7.7.2).
pub const MSIX_MASKALL: u16 = 1 << 14;
/// PCI capability ID of MSI-X.
pub const CAP_ID_MSIX: u8 = 0x11;
/// Bytes per MSI-X table entry, and the offsets inside one.
pub const MSIX_ENTRY_SIZE: u64 = 16;
pub const MSIX_ENTRY_DATA: u64 = 8;
pub const MSIX_ENTRY_CTRL: u64 = 12;
pub const MSIX_ENTRY_MASKED: u32 = 1;

/// One requested interrupt (one line of /proc/interrupts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrqDesc {
    /// The CPU vector: the message data the device writes.
    pub vector: u8,
    pub dev: DevId,
    /// The device's MSI-X table entry.
    pub entry: u16,
    /// The driver's handler (an id of its choosing).
    pub handler: u32,
    /// The message address in the device's table entry: this host's MSI page, or for a
    /// borrowed device the lender-side address of it.
    pub msg_addr: u64,
    /// Interrupts delivered so far.
    pub count: u64,
    /// The interrupt remapping entry of this vector, when the host remaps interrupts.
    pub irte: Option<u32>,
}

/// A host's interrupt vectors.
#[derive(Clone, Debug, Default)]
pub struct IrqTable {
    descs: BTreeMap<u8, IrqDesc>,
    spurious: u64,
    /// Legacy INTx lines of this host's own functions with a handler (see `forward`).
    pub(crate) intx: BTreeMap<FuncId, IntxLine>,
    /// INTx assertions no handler took.
    pub(crate) intx_unhandled: u64,
}

/// A function's legacy INTx line as a handler holds it, with the assertions it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntxLine {
    pub handler: u32,
    pub count: u64,
}

impl IrqTable {
    pub fn get(&self, vector: u8) -> Option<&IrqDesc> {
        self.descs.get(&vector)
    }

    pub fn iter(&self) -> impl Iterator<Item = &IrqDesc> {
        self.descs.values()
    }

    /// The vector of a device's table entry, if requested.
    pub fn find(&self, dev: DevId, entry: u16) -> Option<u8> {
        self.descs.values().find(|d| d.dev == dev && d.entry == entry).map(|d| d.vector)
    }

    /// How many vectors a device holds.
    pub fn of(&self, dev: DevId) -> usize {
        self.descs.values().filter(|d| d.dev == dev).count()
    }

    /// Messages that arrived for a vector nobody requested.
    pub fn spurious(&self) -> u64 {
        self.spurious
    }

    /// The INTx line of one of this host's functions, if a handler holds it.
    pub fn intx(&self, func: FuncId) -> Option<&IntxLine> {
        self.intx.get(&func)
    }

    /// INTx assertions that arrived with no handler on the line.
    pub fn intx_unhandled(&self) -> u64 {
        self.intx_unhandled
    }

    pub(crate) fn alloc(&self) -> Option<u8> {
        (FIRST_DEVICE_VECTOR..FIRST_SYSTEM_VECTOR).find(|v| !self.descs.contains_key(v))
    }

    pub(crate) fn insert(&mut self, d: IrqDesc) {
        self.descs.insert(d.vector, d);
    }

    pub(crate) fn remove(&mut self, vector: u8) -> Option<IrqDesc> {
        self.descs.remove(&vector)
    }

    /// Forget every vector of a device (it was hot-removed).
    pub(crate) fn drop_device(&mut self, dev: DevId) {
        self.descs.retain(|_, d| d.dev != dev);
    }

    /// Take the MSI writes delivered to `host` from the fabric's event log and count them per
    /// vector; returns how many were taken. Other events (faults, other hosts' MSIs) stay.
    pub(crate) fn accept(&mut self, f: &mut Fabric, host: HostId) -> usize {
        let mut taken = Vec::new();
        f.retain_events(|e| match *e {
            Event::Msi { host: h, data, .. } if h == host => {
                taken.push(data);
                false
            }
            _ => true,
        });
        for data in &taken {
            match self.descs.get_mut(&((data & 0xff) as u8)) {
                Some(d) => d.count += 1,
                None => self.spurious += 1,
            }
        }
        taken.len()
    }
}

/// A function's MSI-X capability, as config space describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsixCap {
    /// Config-space offset of the capability.
    pub pos: usize,
    /// Table size (entries).
    pub entries: u16,
    /// BAR holding the table, and the table's offset in it.
    pub bir: u8,
    pub offset: u64,
}

/// Find the MSI-X capability by walking the capability list (Linux `pci_find_capability`).
pub fn msix_cap(f: &Fabric, func: FuncId) -> HResult<MsixCap> {
    let rd = |off: usize, len: usize| f.config_read(func, off, len).map_err(HostError::from);
    let name = &f.func(func).name;
    let status = rd(0x06, 2)?;
    let mut pos = if status & (1 << 4) != 0 { rd(devlend_fabric::config::CAP_PTR, 1)? as usize & !3 } else { 0 };
    for _ in 0..48 {
        if pos < 0x40 {
            break;
        }
        if rd(pos, 1)? as u8 == CAP_ID_MSIX {
            let control = rd(pos + 2, 2)?;
            let table = rd(pos + 4, 4)?;
            return Ok(MsixCap { pos, entries: (control & 0x7ff) as u16 + 1, bir: (table & 7) as u8, offset: (table & !7) as u64 });
        }
        pos = rd(pos + 1, 1)? as usize & !3;
    }
    Err(BadIrq::NoMsix { device: name.to_string() }.into())
}

pub fn msix_control(f: &Fabric, func: FuncId, cap: &MsixCap) -> HResult<u16> {
    Ok(f.config_read(func, cap.pos + 2, 2)? as u16)
}

pub fn set_msix_control(f: &mut Fabric, func: FuncId, cap: &MsixCap, value: u16) -> HResult<()> {
    Ok(f.config_write(func, cap.pos + 2, 2, value as u32)?)
}

/// The lender takes its device back: if MSI-X is on, every table entry is masked by its own
/// CPU and MSI-X is disabled, so the device raises nothing towards the former borrower.
/// Returns failures of those stores (recorded by the fabric as well).
pub(crate) fn quiesce_msix(f: &mut Fabric, func: FuncId) -> Vec<HostError> {
    let Ok(cap) = msix_cap(f, func) else { return Vec::new() };
    let Ok(control) = msix_control(f, func, &cap) else { return Vec::new() };
    if control & MSIX_ENABLE == 0 {
        return Vec::new();
    }
    let mut errs = Vec::new();
    let _ = set_msix_control(f, func, &cap, control | MSIX_MASKALL);
    let host = f.func_host(func);
    if let Some(bar) = f.func(func).bars.iter().find(|b| b.index == cap.bir).copied() {
        for i in 0..cap.entries as u64 {
            let at = cap.offset + i * MSIX_ENTRY_SIZE + MSIX_ENTRY_CTRL;
            if at + 4 > bar.size {
                break;
            }
            if let (_, Some(fail)) = f.write(Requester::Cpu(host), bar.addr + at, &MSIX_ENTRY_MASKED.to_le_bytes()) {
                errs.push(HostError::fault(f, bar.addr + at, fail));
                break;
            }
        }
    }
    let _ = set_msix_control(f, func, &cap, control & !(MSIX_ENABLE | MSIX_MASKALL));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_allocated_lowest_first_and_unknown_ones_are_spurious() {
        let mut f = devlend_fabric::build_json(
            r#"{"name":"one","hosts":[{"name":"h","cpu":"intel-xeon-e5","ram":4294967296,"iommu":true,"root_ports":1}],
          "devices":[{"name":"nvme0","profile":"optane-900p"}],"links":[{"a":"h.rp0","b":"nvme0","gen":3,"width":4}]}"#,
        )
        .unwrap();
        let mut t = IrqTable::default();
        assert_eq!(t.alloc(), Some(FIRST_DEVICE_VECTOR));
        t.insert(IrqDesc { vector: 0x20, dev: DevId(0), entry: 0, handler: 7, msg_addr: 0xfee0_0000, count: 0, irte: None });
        assert_eq!(t.alloc(), Some(0x21));
        assert_eq!((t.find(DevId(0), 0), t.find(DevId(0), 1), t.of(DevId(0))), (Some(0x20), None, 1));
        f.record_event(Event::Msi { host: 0, addr: 0xfee0_0000, data: 0x20 });
        f.record_event(Event::Msi { host: 0, addr: 0xfee0_0000, data: 0x55 });
        f.record_event(Event::Msi { host: 1, addr: 0xfee0_0000, data: 0x20 });
        assert_eq!(t.accept(&mut f, 0), 2);
        assert_eq!((t.get(0x20).unwrap().count, t.spurious()), (1, 1));
        assert_eq!(f.events().len(), 1, "another host's message stays in the log");
        let func = f.func_id("nvme0").unwrap();
        let cap = msix_cap(&f, func).unwrap();
        assert_eq!((cap.pos, cap.entries, cap.bir, cap.offset), (0x40, 32, 0, devlend_fabric::config::MSIX_TABLE_OFFSET));
        t.drop_device(DevId(0));
        assert_eq!(t.alloc(), Some(0x20));
        for v in FIRST_DEVICE_VECTOR..FIRST_SYSTEM_VECTOR {
            t.insert(IrqDesc { vector: v, dev: DevId(1), entry: v as u16, handler: 0, msg_addr: 0xfee0_0000, count: 0, irte: None });
        }
        assert_eq!((t.alloc(), t.of(DevId(1))), (None, 204), "0x20-0xeb: 204 device vectors, then none");
    }
}
