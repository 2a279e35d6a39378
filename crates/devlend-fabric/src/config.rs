//! PCI configuration space of each function, as software sees it through config reads and writes
//! (PCI Local Bus 3.0 §6.1-6.2; PCIe Base 3.0 §7.5, §7.7 for MSI-X).
//!
//! Modelled registers: vendor/device ID, command (Memory Space Enable bit 1, Bus Master Enable
//! bit 2), status (capabilities list), class, header type, the six BARs with the sizing protocol
//! (write all ones, read back the size mask) and relocation, the capabilities pointer and an MSI-X
//! capability (table in BAR 0 at `MSIX_TABLE_OFFSET`, PBA after it). Other offsets read as zero and ignore writes.

use crate::model::Function;

pub const COMMAND: usize = 0x04;
pub const CMD_MEMORY: u16 = 1 << 1;
pub const CMD_BUS_MASTER: u16 = 1 << 2;
pub const BAR0: usize = 0x10;
pub const CAP_PTR: usize = 0x34;
pub const MSIX_CAP: usize = 0x40;
pub const MSIX_ENABLE: u16 = 1 << 15;
/// devlend places every function's MSI-X table in BAR 0 at this offset (8 KiB, above the
/// register page), 16 bytes per vector (address low, high, data, vector control), PBA after it.
pub const MSIX_TABLE_OFFSET: u64 = 0x2000;

#[derive(Clone, Debug, Default)]
pub struct ConfigState {
    pub command: u16,
    /// BAR registers (by index) written with all ones and not yet rewritten: reads return the size mask.
    pub sizing: u8,
    pub msix_control: u16,
}

impl ConfigState {
    pub fn memory_enabled(&self) -> bool {
        self.command & CMD_MEMORY != 0
    }
    pub fn bus_master(&self) -> bool {
        self.command & CMD_BUS_MASTER != 0
    }
}

/// Read a 32-bit aligned dword of config space.
pub fn read_dword(f: &Function, st: &ConfigState, off: usize) -> u32 {
    match off & !3 {
        0x00 => (f.device_id as u32) << 16 | f.vendor as u32,
        0x04 => {
            let status: u32 = if f.msix_vectors > 0 { 1 << 4 } else { 0 };
            status << 16 | st.command as u32
        }
        0x08 => f.class_code << 8,
        0x0c => 0, // header type 0, single function view
        o @ 0x10..=0x24 => bar_register(f, st, (o - BAR0) / 4),
        0x34 if f.msix_vectors > 0 => MSIX_CAP as u32,
        0x40 if f.msix_vectors > 0 => {
            let control = (f.msix_vectors as u32 - 1) | st.msix_control as u32 & 0xc000;
            control << 16 | 0x11
        }
        0x44 if f.msix_vectors > 0 => MSIX_TABLE_OFFSET as u32, // table: BIR 0
        0x48 if f.msix_vectors > 0 => (MSIX_TABLE_OFFSET as u32 + f.msix_vectors as u32 * 16 + 7) & !7, // PBA: BIR 0, after the table
        _ => 0,
    }
}

fn bar_register(f: &Function, st: &ConfigState, reg: usize) -> u32 {
    // A 64-bit BAR occupies registers index and index+1.
    for b in &f.bars {
        let i = b.index as usize;
        let flags: u32 = (if b.bits == 64 { 0b100 } else { 0 }) | if b.pref { 0b1000 } else { 0 };
        let sizing = st.sizing & (1 << i) != 0;
        let value = if sizing { !(b.size - 1) } else { b.addr };
        if reg == i {
            return (value as u32 & !0xf) | flags;
        }
        if reg == i + 1 && b.bits == 64 {
            let hi_sizing = st.sizing & (1 << (i + 1)) != 0;
            let v = if hi_sizing { !(b.size - 1) } else { b.addr };
            return (v >> 32) as u32;
        }
    }
    0
}

/// The result of a config write that changes how the fabric routes.
pub enum WriteEffect {
    None,
    Command,
    /// BAR `index` of the function now decodes at this address.
    Relocate {
        index: u8,
        addr: u64,
    },
}

pub fn write_dword(f: &Function, st: &mut ConfigState, off: usize, value: u32) -> WriteEffect {
    match off & !3 {
        0x04 => {
            st.command = value as u16 & (CMD_MEMORY | CMD_BUS_MASTER);
            WriteEffect::Command
        }
        o @ 0x10..=0x24 => {
            let reg = (o - BAR0) / 4;
            if value == u32::MAX {
                st.sizing |= 1 << reg;
                return WriteEffect::None;
            }
            st.sizing &= !(1 << reg);
            for b in &f.bars {
                let i = b.index as usize;
                if reg == i {
                    let addr = (b.addr & !0xffff_ffff) | (value as u64 & !(b.size - 1) & 0xffff_fff0);
                    return WriteEffect::Relocate { index: b.index, addr };
                }
                if reg == i + 1 && b.bits == 64 {
                    let addr = (value as u64) << 32 | (b.addr & 0xffff_ffff);
                    return WriteEffect::Relocate { index: b.index, addr };
                }
            }
            WriteEffect::None
        }
        0x40 if f.msix_vectors > 0 => {
            st.msix_control = (value >> 16) as u16 & 0xc000;
            WriteEffect::None
        }
        _ => WriteEffect::None,
    }
}
