//! The NT port's doorbell and scratchpad registers as a device on the machine (003 §2.2, Fig 6).
//!
//! Register map (PLX NT ports, as FreeBSD's `ntb_hw_plx.c` drives them; devlend uses it for every
//! NT adapter, whose control BAR is 256 KiB like the PLX register space): BAR 0 maps the NT
//! registers of both sides, the virtual side's interface at `0x3E000`, the link side's at
//! `0x3F000`. A side's doorbell register (IRQ set: virtual `+0xC4C`, link `+0xC5C`) reads its
//! doorbell bits, and a store to it through the other side's BAR sets them (`ntb_peer_db_set`);
//! its IRQ clear register (virtual `+0xC50`, link `+0xC60`) clears them; its scratchpads are at
//! `+0xC6C`, 4 bytes each. So 003 §3's doorbells at `0x3EC4C` and `0x3FC5C` are the virtual and
//! the link side's.
//!
//! Every access is a CPU load or store on the machine: a store travels to the NT endpoint as a
//! posted TLP and acts when it lands ([`NtRegs`] is told, as a device, and changes the fabric's
//! NTB state); a doorbell bit that is not masked makes the rung side's endpoint send its MSI-X
//! message into its host, a flow on that host's links; a load is a round trip and returns the
//! register as it is when the request reaches the endpoint (the device keeps BAR 0 in step with
//! the NTB state). A pair whose names do not say which side is virtual takes the NT adapter listed
//! first as the virtual side.

use crate::error::{MResult, ModelError};
use crate::plx_dma::{reg_read, reg_write};
use devlend_engine::machine::{Cx, Device, World};
use devlend_fabric::config::MSIX_TABLE_OFFSET;
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_wire::Tlp;

pub const VIRTUAL_BASE: u64 = 0x3E000;
pub const LINK_BASE: u64 = 0x3F000;
const DB_VIRTUAL: u64 = 0xC4C;
const DB_LINK: u64 = 0xC5C;
const CLEAR_VIRTUAL: u64 = 0xC50;
const CLEAR_LINK: u64 = 0xC60;
const SPAD0: u64 = 0xC6C;
/// MSI data of an NT endpoint's doorbell vector (devlend's choice; the DMA channels use 0x41..).
pub const DB_MSI_DATA: u32 = 0x61;
/// The register space a control BAR must span.
const SPAN: u64 = 0x40000;

/// One side of an NTB: its adapter, function, host and register block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Side {
    pub ntb: u32,
    pub func: FuncId,
    pub host: HostId,
    pub virt: bool,
    /// Bus address of its BAR 0 (the CPU's address of the registers).
    pub bar0: u64,
}

impl Side {
    fn block(virt: bool) -> u64 {
        if virt {
            VIRTUAL_BASE
        } else {
            LINK_BASE
        }
    }
    /// Offset in BAR 0 of this side's doorbell register.
    pub fn db(&self) -> u64 {
        Side::block(self.virt) + if self.virt { DB_VIRTUAL } else { DB_LINK }
    }
    /// Offset of its IRQ clear register.
    pub fn clear(&self) -> u64 {
        Side::block(self.virt) + if self.virt { CLEAR_VIRTUAL } else { CLEAR_LINK }
    }
    /// Offset of its scratchpad `i`.
    pub fn spad(&self, i: usize) -> u64 {
        Side::block(self.virt) + SPAD0 + 4 * i as u64
    }
}

/// Both sides of the NTB of adapter `ntb` (this side first).
pub fn sides(f: &Fabric, ntb: u32) -> MResult<[Side; 2]> {
    let n = f.ntb(ntb);
    let peer = n.peer.ok_or_else(|| ModelError::NoPeer { ntb: n.name.clone() })?;
    let p = f.ntb(peer);
    let virt = n.name.contains("virtual") || (!p.name.contains("virtual") && ntb < peer);
    let side = |id: u32, virt: bool| -> MResult<Side> {
        let x = f.ntb(id);
        let bar = f.func(x.func).bars.iter().find(|b| b.index == 0).filter(|b| b.size >= SPAN);
        let bar = bar.ok_or_else(|| ModelError::NoControlBar { ntb: x.name.clone(), span: SPAN })?;
        Ok(Side { ntb: id, func: x.func, host: x.host, virt, bar0: bar.addr })
    };
    Ok([side(ntb, virt)?, side(peer, !virt)?])
}

/// The device serving both NT endpoints of one NTB.
pub struct NtRegs {
    sides: [Side; 2],
}

impl NtRegs {
    /// The registers of the NTB of adapter `ntb`: each endpoint's doorbell vector aimed at its
    /// host, BAR 0 in step with the NTB's state.
    pub fn new(f: &mut Fabric, ntb: u32) -> MResult<NtRegs> {
        let sides = sides(f, ntb)?;
        for s in &sides {
            let mut entry = [0u8; 16];
            let mut addr = f.host(s.host).msi.start;
            if f.intr_remap_on(s.host) {
                // A remapping entry validating the adapter's requester ID, as Linux's ntb_hw
                // driver gets from request_irq on a host with interrupt remapping on.
                let source = devlend_fabric::intremap::Source::Rid(f.func(s.func).bdf);
                let irte = devlend_fabric::intremap::Irte { vector: DB_MSI_DATA as u8, source };
                let held = f.iommu(s.host).irt.as_ref().and_then(|t| t.entries.iter().position(|e| *e == Some(irte)));
                let handle = match held {
                    Some(h) => h as u32,
                    None => f.irte_alloc(s.host, irte)?,
                };
                addr = devlend_fabric::intremap::remappable_addr(addr, handle);
            }
            entry[0..8].copy_from_slice(&addr.to_le_bytes());
            entry[8..12].copy_from_slice(&DB_MSI_DATA.to_le_bytes());
            reg_write(f, s.func, MSIX_TABLE_OFFSET, &entry);
        }
        let regs = NtRegs { sides };
        for k in 0..2 {
            regs.mirror(f, k)?;
        }
        Ok(regs)
    }

    /// The two endpoints' functions this model serves.
    pub fn funcs(&self) -> [FuncId; 2] {
        [self.sides[0].func, self.sides[1].func]
    }

    /// Side `k`'s doorbell and scratchpads into its BAR 0.
    fn mirror(&self, f: &mut Fabric, k: usize) -> Result<(), devlend_fabric::FabricError> {
        let s = self.sides[k];
        let db = f.db_read(s.ntb) as u32;
        reg_write(f, s.func, s.db(), &db.to_le_bytes());
        for i in 0..f.ntb(s.ntb).spads.len() {
            let v = f.spad_read(s.ntb, i)?;
            reg_write(f, s.func, s.spad(i), &v.to_le_bytes());
        }
        Ok(())
    }

    /// Set doorbell bits of side `k` (a store from the other side); its MSI if one is unmasked.
    fn ring<W: World>(&self, cx: &mut Cx<W>, k: usize, bits: u64) {
        let (s, other) = (self.sides[k], self.sides[1 - k]);
        let Ok(fires) = cx.fabric().peer_db_set(other.ntb, bits) else { return };
        let _ = self.mirror(cx.fabric(), k);
        let f = cx.fabric();
        let addr = reg_read(f, s.func, MSIX_TABLE_OFFSET, 8);
        let data = reg_read(f, s.func, MSIX_TABLE_OFFSET + 8, 4) as u32;
        let masked = reg_read(f, s.func, MSIX_TABLE_OFFSET + 12, 4) & 1 != 0;
        if fires && addr != 0 && !masked {
            let _ = cx.dma_write_as(s.func, addr, data.to_le_bytes().to_vec(), 0);
        }
    }
}

impl<W: World> Device<W> for NtRegs {
    fn mmio_write(&mut self, cx: &mut Cx<W>, bar: u8, offset: u64, tlp: &Tlp) {
        let Some(me) = self.sides.iter().position(|s| s.func == cx.func()) else { return };
        if bar != 0 || tlp.payload.len() < 4 {
            return;
        }
        let v = u32::from_le_bytes(tlp.payload[..4].try_into().expect("4 bytes"));
        let (own, other) = (self.sides[me], self.sides[1 - me]);
        if offset == other.db() {
            return self.ring(cx, 1 - me, v as u64);
        }
        if offset == own.clear() {
            cx.fabric().db_clear(own.ntb, v as u64);
            let _ = self.mirror(cx.fabric(), me);
            return;
        }
        for (k, s) in [(me, own), (1 - me, other)] {
            let n = cx.fabric().ntb(s.ntb).spads.len() as u64;
            if offset >= s.spad(0) && offset < s.spad(n as usize) && (offset - s.spad(0)).is_multiple_of(4) {
                let i = ((offset - s.spad(0)) / 4) as usize;
                let done = if k == me { cx.fabric().spad_write(own.ntb, i, v) } else { cx.fabric().peer_spad_write(own.ntb, i, v) };
                if done.is_ok() {
                    let _ = self.mirror(cx.fabric(), k);
                }
                return;
            }
        }
    }
}

/// Where a CPU on one side finds the registers it uses: its own doorbell, clear and scratchpads,
/// and the peer's doorbell and scratchpads (bus addresses in its BAR 0).
#[derive(Clone, Copy, Debug)]
pub struct CpuRegs {
    pub host: HostId,
    pub own: Side,
    pub peer: Side,
}

impl CpuRegs {
    pub fn of(f: &Fabric, ntb: u32) -> MResult<CpuRegs> {
        let [own, peer] = sides(f, ntb)?;
        Ok(CpuRegs { host: own.host, own, peer })
    }
    pub fn db(&self) -> u64 {
        self.own.bar0 + self.own.db()
    }
    pub fn clear(&self) -> u64 {
        self.own.bar0 + self.own.clear()
    }
    pub fn spad(&self, i: usize) -> u64 {
        self.own.bar0 + self.own.spad(i)
    }
    pub fn peer_db(&self) -> u64 {
        self.own.bar0 + self.peer.db()
    }
    pub fn peer_spad(&self, i: usize) -> u64 {
        self.own.bar0 + self.peer.spad(i)
    }
}

/// How many doorbell interrupts of `host` (MSIs with [`DB_MSI_DATA`]) were recorded from event
/// number `since` on.
pub fn doorbell_irq_count(f: &Fabric, host: HostId, since: u64) -> usize {
    f.events().since(since).filter(|e| matches!(e, devlend_fabric::fabric::Event::Msi { host: h, data, .. } if *h == host && *data == DB_MSI_DATA)).count()
}

/// The CPU store that rings the peer's doorbell bits, done timelessly (the handshake's READY).
pub fn ring_now(f: &mut Fabric, ntb: u32, bits: u64) -> MResult<()> {
    let r = CpuRegs::of(f, ntb)?;
    f.peer_db_set(ntb, bits)?;
    f.write(Requester::Cpu(r.host), r.peer_db(), &(bits as u32).to_le_bytes());
    Ok(())
}
