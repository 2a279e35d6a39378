//! Config-space virtualization: what a guest reads and writes in its devices' configuration
//! space and MSI-X tables goes through the hypervisor, never straight to the function (000 §5:
//! the mediated parent intercepts "accesses to the device's configuration space or setting up
//! interrupts"; VFIO does the same for local devices, Linux drivers/vfio/pci/vfio_pci_config.c).
//!
//! Writable by a guest, and virtualized:
//! - Command (0x04): Memory Space, Bus Master and Interrupt Disable (bit 10) are kept per guest
//!   device. Setting Bus Master is the write the mediated path borrows on (`Vmm::set_master`);
//!   Interrupt Disable and MSI-X enable decide which interrupt the hypervisor routes (`irq`).
//!   Other command bits are dropped, as vfio-pci drops them.
//! - BARs (0x10-0x24): the sizing protocol (all ones, then the size mask reads back) and writing
//!   back the guest-physical address the guest firmware gave the BAR. The physical BAR never
//!   moves; a write of another address is refused ("BAR relocation": moving the function's BAR
//!   in the lender would let it decode someone else's addresses). Guest-side BAR moves are not
//!   modelled.
//! - MSI-X Message Control: Enable and Function Mask, kept per guest device.
//! - The MSI-X table (in the BAR named by the capability): the pages holding it are not mapped
//!   for the guest (VFIO never lets a guest map them); its stores land in a virtual table. An
//!   entry's address must lie in the guest's MSI range (0xFEE0_0000-0xFEEF_FFFF): anything else
//!   is refused ("MSI-X table redirection": the device would write the data anywhere).
//!
//! Every other write that would change what the guest reads is refused, and so is any config
//! access to a bus/device/function that is not one of the guest's own devices (guest BDFs are
//! 00:(3+n).0 in the order devices were added): a guest cannot set Bus Master on another
//! function. Refusals are recorded in `Vmm::blocked` and returned as errors; nothing reaches the
//! function.

use crate::vm::{GuestDev, VmId};
use crate::vmm::Vmm;
use devlend_fabric::config::{BAR0, CMD_BUS_MASTER, CMD_MEMORY, COMMAND, MSIX_CAP, MSIX_ENABLE};
use devlend_host::irq::{msix_cap, MsixCap, MSIX_ENTRY_SIZE, MSIX_MASKALL};
use devlend_host::{BadIrq, BadVm, Cluster, DevId, HResult, HostError, InVm, NoSuch, Refusal};
use devlend_wire::Bdf;

/// Command register: Interrupt Disable (PCI Local Bus 3.0 §6.2.2).
pub const CMD_INTX_DISABLE: u16 = 1 << 10;
/// The guest's MSI address range (x86, Intel SDM vol. 3 §10.11.1).
pub const GUEST_MSI: (u64, u64) = (0xfee0_0000, 0xfef0_0000);
const PAGE: u64 = 0x1000;

/// One entry of a guest's virtual MSI-X table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsixEntry {
    pub addr: u64,
    pub data: u32,
    pub masked: bool,
}

/// A guest device's virtualized config state.
#[derive(Clone, Debug)]
pub struct VirtCfg {
    pub command: u16,
    pub msix_control: u16,
    /// BAR registers being sized (bit per register).
    pub sizing: u8,
    pub msix: Option<MsixCap>,
    pub table: Vec<MsixEntry>,
}

impl VirtCfg {
    pub(crate) fn new(c: &Cluster, func: u32) -> VirtCfg {
        let msix = msix_cap(&c.fabric, func).ok();
        let n = msix.map_or(0, |m| m.entries as usize);
        let table = vec![MsixEntry { masked: true, ..Default::default() }; n];
        VirtCfg { command: CMD_MEMORY | CMD_INTX_DISABLE, msix_control: 0, sizing: 0, msix, table }
    }

    pub fn msix_on(&self) -> bool {
        self.msix_control & MSIX_ENABLE != 0 && self.msix_control & MSIX_MASKALL == 0
    }
}

/// A guest access the hypervisor refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub vm: String,
    /// Which rule (`Refusal::what`: "BAR relocation", "MSI-X table redirection", "config write
    /// to a function outside the VM", "read-only config register"), the guest device (or the
    /// BDF the guest addressed, `Refusal::device`) and what was written.
    pub refusal: Refusal,
}

fn mask(len: usize) -> u32 {
    if len >= 4 {
        u32::MAX
    } else {
        (1u32 << (len * 8)) - 1
    }
}

/// The guest's BDF of its `n`th device.
pub fn guest_bdf(dev: DevId) -> Bdf {
    Bdf::new(0, 3 + dev.0 as u8, 0)
}

impl Vmm {
    fn refuse<T>(&mut self, vm: VmId, refusal: Refusal) -> HResult<T> {
        let name = self.vms.get(&vm).map(|v| v.name.clone()).unwrap_or_default();
        self.blocked.push(Blocked { vm: name.clone(), refusal: refusal.clone() });
        Err(BadVm::Refused { vm: name, refusal }.into())
    }

    fn check_cfg(off: usize, len: usize) -> HResult<()> {
        if !matches!(len, 1 | 2 | 4) || !off.is_multiple_of(len) || off + len > 4096 {
            return Err(BadVm::ConfigAccess { off, len }.into());
        }
        Ok(())
    }

    fn read_dword(&self, c: &Cluster, d: &GuestDev, off: usize) -> HResult<u32> {
        let phys = c.fabric.config_read(d.func, off & !3, 4)?;
        let v = &d.virt;
        Ok(match off & !3 {
            COMMAND => (phys & 0xffff_0000) | v.command as u32,
            o @ 0x10..=0x24 => {
                let reg = (o - BAR0) / 4;
                let mut out = phys;
                for b in &d.bars {
                    let i = b.index as usize;
                    let sz = b.size.next_power_of_two();
                    let bits64 = c.fabric.func(d.func).bars.iter().any(|x| x.index == b.index && x.bits == 64);
                    if reg == i {
                        let val = if v.sizing & (1 << i) != 0 { !(sz - 1) } else { b.gpa };
                        out = (val as u32 & !0xf) | (phys & 0xf);
                    } else if reg == i + 1 && bits64 {
                        let val = if v.sizing & (1 << (i + 1)) != 0 { !(sz - 1) } else { b.gpa };
                        out = (val >> 32) as u32;
                    }
                }
                out
            }
            MSIX_CAP if v.msix.is_some() => (phys & 0x3fff_ffff) | ((v.msix_control as u32 & 0xc000) << 16),
            _ => phys,
        })
    }

    /// A guest's config read of one of its devices.
    pub fn config_read(&self, c: &Cluster, vm: VmId, dev: DevId, off: usize, len: usize) -> HResult<u32> {
        Self::check_cfg(off, len)?;
        let d = self.dev(vm, dev)?;
        Ok((self.read_dword(c, d, off)? >> ((off & 3) * 8)) & mask(len))
    }

    /// A guest's config write to one of its devices (see the module docs for what is allowed).
    pub fn config_write(&mut self, c: &mut Cluster, vm: VmId, dev: DevId, off: usize, len: usize, value: u32) -> HResult<()> {
        Self::check_cfg(off, len)?;
        let d = self.dev(vm, dev)?.clone();
        let old = self.read_dword(c, &d, off)?;
        let shift = (off & 3) * 8;
        let m = mask(len) << shift;
        let new = (old & !m) | ((value << shift) & m);
        match off & !3 {
            COMMAND => {
                let cmd = (new as u16) & (CMD_MEMORY | CMD_BUS_MASTER | CMD_INTX_DISABLE);
                let before = d.virt.command;
                self.virt_mut(vm, dev)?.command = cmd;
                match (before & CMD_BUS_MASTER != 0, cmd & CMD_BUS_MASTER != 0) {
                    (false, true) => {
                        if let Err(e) = self.set_master(c, vm, dev) {
                            self.virt_mut(vm, dev)?.command = before;
                            return Err(e);
                        }
                    }
                    (true, false) => c.fabric.set_bus_master(d.func, false),
                    _ => {}
                }
                self.sync_irqs(c, vm, dev)
            }
            o @ 0x10..=0x24 if new != old => {
                let reg = (o - BAR0) / 4;
                if new == u32::MAX {
                    self.virt_mut(vm, dev)?.sizing |= 1 << reg;
                    return Ok(());
                }
                self.virt_mut(vm, dev)?.sizing &= !(1 << reg);
                let current = self.read_dword(c, self.dev(vm, dev)?, off)?;
                if new == current {
                    return Ok(());
                }
                let bar = c
                    .fabric
                    .func(d.func)
                    .bars
                    .iter()
                    .find(|b| b.index as usize == reg || (b.bits == 64 && b.index as usize + 1 == reg))
                    .map(|b| (b.index, b.addr));
                let (index, phys) = bar.unwrap_or((reg as u8, 0));
                let gpa = d.bars.iter().find(|b| b.index == index).map_or(0, |b| b.gpa);
                self.refuse(vm, Refusal::BarRelocation { device: d.name.clone(), bar: index, reg, new, phys, gpa })
            }
            MSIX_CAP if d.virt.msix.is_some() && (new >> 16) != (old >> 16) => {
                self.virt_mut(vm, dev)?.msix_control = (new >> 16) as u16 & 0xc000;
                self.sync_irqs(c, vm, dev)
            }
            _ if new != old => self.refuse(vm, Refusal::ReadOnly { device: d.name.clone(), off, value }),
            _ => Ok(()),
        }
    }

    /// A guest's config write addressed by bus/device/function (its config mechanism, trapped):
    /// only the guest's own devices answer.
    pub fn config_write_bdf(&mut self, c: &mut Cluster, vm: VmId, bdf: Bdf, off: usize, len: usize, value: u32) -> HResult<()> {
        let found = self.vm(vm)?.devices.values().find(|d| guest_bdf(d.id) == bdf).map(|d| d.id);
        match found {
            Some(dev) => self.config_write(c, vm, dev, off, len, value),
            None => {
                let host_func = c.fabric.funcs().iter().find(|f| f.bdf == bdf).map(|f| f.name.clone());
                self.refuse(vm, Refusal::OutsideVm { bdf, host_func, off })
            }
        }
    }

    fn virt_mut(&mut self, vm: VmId, dev: DevId) -> HResult<&mut VirtCfg> {
        self.vms
            .get_mut(&vm)
            .and_then(|v| v.devices.get_mut(&dev))
            .map(|d| &mut d.virt)
            .ok_or(HostError::NoDevice(NoSuch::Vm(InVm::VirtDevice { vm: vm.0, dev: dev.0 })))
    }

    /// The guest device and byte offset into its MSI-X table region, if a guest access at
    /// [gpa, gpa+len) touches the trapped page(s) that hold a table.
    pub(crate) fn msix_trap(&self, vm: VmId, gpa: u64, len: usize) -> Option<(DevId, u64)> {
        let v = self.vms.get(&vm)?;
        v.devices.values().find_map(|d| {
            let cap = d.virt.msix?;
            let bar = d.bars.iter().find(|b| b.index == cap.bir)?;
            let start = bar.gpa + (cap.offset & !(PAGE - 1));
            let end = bar.gpa + (cap.offset + cap.entries as u64 * MSIX_ENTRY_SIZE).next_multiple_of(PAGE);
            (gpa < end && gpa + len as u64 > start).then(|| (d.id, gpa.wrapping_sub(bar.gpa + cap.offset)))
        })
    }

    /// A guest load from the trapped table pages: the virtual table, zeros elsewhere (the PBA).
    pub(crate) fn msix_read(&self, vm: VmId, dev: DevId, at: u64, len: usize) -> HResult<Vec<u8>> {
        let d = self.dev(vm, dev)?;
        Ok((0..len as u64)
            .map(|i| {
                let o = at.wrapping_add(i);
                let (e, f) = ((o / MSIX_ENTRY_SIZE) as usize, o % MSIX_ENTRY_SIZE);
                let Some(x) = d.virt.table.get(e) else { return 0 };
                let words = [x.addr as u32, (x.addr >> 32) as u32, x.data, x.masked as u32];
                (words[(f / 4) as usize] >> ((f % 4) * 8)) as u8
            })
            .collect())
    }

    /// A guest store into the trapped table pages, dword by dword.
    pub(crate) fn msix_write(&mut self, c: &mut Cluster, vm: VmId, dev: DevId, at: u64, data: &[u8]) -> HResult<()> {
        let name = self.dev(vm, dev)?.name.clone();
        if !at.is_multiple_of(4) || !data.len().is_multiple_of(4) {
            return Err(BadIrq::TableStore { device: name, at, len: data.len() }.into());
        }
        for (i, w) in data.chunks(4).enumerate() {
            let o = at.wrapping_add(4 * i as u64);
            let value = u32::from_le_bytes(w.try_into().unwrap_or_default());
            let (e, f) = ((o / MSIX_ENTRY_SIZE) as usize, o % MSIX_ENTRY_SIZE);
            if e >= self.virt_mut(vm, dev)?.table.len() {
                continue; // the PBA and the rest of the page: read-only, stores dropped
            }
            match f {
                0 if !(GUEST_MSI.0..GUEST_MSI.1).contains(&(value as u64)) => {
                    return self.refuse(vm, Refusal::MsixAddress { device: name, entry: e, value, range: GUEST_MSI });
                }
                4 if value != 0 => {
                    return self.refuse(vm, Refusal::MsixUpper { device: name, entry: e, value });
                }
                _ => {}
            }
            let x = &mut self.virt_mut(vm, dev)?.table[e];
            match f {
                0 => x.addr = (x.addr & !0xffff_ffff) | value as u64,
                4 => x.addr = (x.addr & 0xffff_ffff) | (value as u64) << 32,
                8 => x.data = value,
                _ => x.masked = value & 1 != 0,
            }
        }
        self.sync_irqs(c, vm, dev)
    }
}
