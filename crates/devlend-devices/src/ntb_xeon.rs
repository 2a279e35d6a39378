//! An Intel Xeon NTB, first generation (Sandy Bridge-EP to Broadwell, back to back), as Linux's
//! in-tree `ntb_hw_intel` drives it (drivers/ntb/hw/intel/ntb_hw_gen1.c, ntb_hw_gen1.h): a face of
//! devlend's NTB component, as `plx_ntregs` is its PLX face. One model, two faces: the
//! windows, translations, doorbells, masks, scratchpads and link state are the fabric's
//! (`devlend_fabric::ntb`); this module only decodes the Intel register interface onto them.
//!
//! Why this NTB: of the kernel's NTB hardware drivers, IDT has no scratchpads (messages only)
//! and `ntb_transport` (so `ntb_netdev`) needs `NTB_TRANSPORT_MIN_SPADS`; Switchtec brings a
//! management interface (`switchtec` char device, the GAS partition map) that the driver needs
//! before the NTB comes up; the Xeon gen1 NTB is one endpoint per host with a flat register file
//! in BAR 0 that the driver documents register by register (offsets from ntb_hw_gen1.h).
//!
//! What is modelled (both sides B2B: PPD says USD for the first adapter of the pair, DSD for the
//! second; the PCI device ID is `0x3C0D`, NTB_B2B_SNB, so the driver applies the SNB errata: it
//! reaches the peer's registers through its last memory window, `b2b_mw_idx`):
//! - BAR 0 registers: PBAR23/45 LMT and XLAT (outbound), SBAR23/45 LMT, XLAT and BASE and
//!   SBAR0BASE (the secondary side's decode on the back-to-back link), NTBCNTL, PDOORBELL and
//!   PDBMSK (read; written 1 to clear and as the mask by the own host; rung from the link side),
//!   SPAD (16), B2B_SPAD and B2B_DOORBELL (forwarded to the peer), B2B_XLAT, SPCICMD.
//! - The back-to-back address decode: an outbound XLAT equal to the peer's SBAR23/45BASE leads
//!   that window to the peer's inbound translation (SBARxXLAT, sized by SBARxLMT: 0 is the whole
//!   BAR, a limit equal to the base closes it); equal to the peer's SBAR0BASE, to the peer's
//!   register BAR. Each is programmed into the fabric as the peer's inbound translation of that
//!   window (`mw_set_trans`), so accesses cross the NTB as timed TLPs like every other.
//! - Config space: PBARxxSZ, SBARxxSZ (written by the driver), PPD, and the link status the
//!   driver reads (`XEON_LINK_STATUS_OFFSET`, a PCIe Link Status: active, speed, width of the cable).
//! - Interrupts: MSI-X vector `bit / 5` for doorbell bits 0-14, vector 3 for the link bit 15
//!   (XEON_DB_MSIX_VECTOR_SHIFT); a doorbell that is masked when rung fires when it is unmasked;
//!   a link change sets bit 15 ([`XeonNtb::link_changed`]).
//!
//! Registers the driver may read that are not modelled (USMEMMISS, WCCNTRL, the error status
//! and device control registers its debugfs `info` file shows) are recorded as
//! [`Unimplemented`], never answered silently.

use devlend_engine::machine::{Cx, Device, World};
use devlend_fabric::config::MSIX_TABLE_OFFSET;
use devlend_fabric::model::FuncId;
use devlend_fabric::ntb::Inbound;
use devlend_fabric::Fabric;
use devlend_wire::Tlp;
use std::cell::RefCell;
use std::rc::Rc;

pub const VENDOR_INTEL: u16 = 0x8086;
/// PCI_DEVICE_ID_INTEL_NTB_B2B_SNB.
pub const DEVICE_B2B_SNB: u16 = 0x3C0D;

// BAR 0 (ntb_hw_gen1.h).
pub const PBAR23LMT: u64 = 0x00;
pub const PBAR45LMT: u64 = 0x08;
pub const PBAR23XLAT: u64 = 0x10;
pub const PBAR45XLAT: u64 = 0x18;
pub const SBAR23LMT: u64 = 0x20;
pub const SBAR45LMT: u64 = 0x28;
pub const SBAR23XLAT: u64 = 0x30;
pub const SBAR45XLAT: u64 = 0x38;
pub const SBAR0BASE: u64 = 0x40;
pub const SBAR23BASE: u64 = 0x48;
pub const SBAR45BASE: u64 = 0x50;
pub const NTBCNTL: u64 = 0x58;
pub const PDOORBELL: u64 = 0x60;
pub const PDBMSK: u64 = 0x62;
pub const SPAD: u64 = 0x80;
pub const SPAD_COUNT: usize = 16;
pub const B2B_SPAD: u64 = 0x100;
pub const B2B_DOORBELL: u64 = 0x140;
pub const B2B_XLAT: u64 = 0x144;
pub const SPCICMD: u64 = 0x504;
// Config space.
pub const PBAR23SZ: usize = 0xd0;
pub const PBAR45SZ: usize = 0xd1;
pub const SBAR23SZ: usize = 0xd2;
pub const SBAR45SZ: usize = 0xd3;
pub const PPD: usize = 0xd4;
pub const LINK_STATUS: usize = 0x1a2;
/// PPD: back to back (XEON_PPD_CONN_B2B), upstream or downstream side (XEON_PPD_DEV_DSD).
pub const PPD_B2B_USD: u8 = 0x01;
pub const PPD_B2B_DSD: u8 = 0x11;
/// PCIe Link Status: Data Link Layer Link Active (NTB_LNK_STA_ACTIVE_BIT).
pub const LNK_STA_ACTIVE: u16 = 0x2000;
/// The token of [`Machine::signal`](devlend_engine::machine::Machine::signal) that tells the face
/// its cable's state may have changed.
pub const LINK_SIGNAL: u64 = 0x11c;
/// Doorbell bit 15 reports link changes (XEON_DB_LINK); bits per MSI-X vector (XEON_DB_MSIX_VECTOR_SHIFT).
pub const DB_LINK_BIT: u64 = 1 << 15;
const DB_VECTOR_SHIFT: u32 = 5;
const LINK_VECTOR: u16 = 3;

/// How the register block was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// A register the driver touched that the model does not implement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unimplemented {
    /// The NTB adapter's name.
    pub ntb: String,
    /// "bar0" or "config".
    pub space: &'static str,
    pub offset: u64,
    pub len: usize,
    pub access: Access,
}

/// One endpoint of the pair.
#[derive(Clone, Copy, Debug)]
struct Side {
    ntb: u32,
    func: FuncId,
    ppd: u8,
    /// Config bytes SBAR23SZ, SBAR45SZ as the driver wrote them.
    sbar_sz: [u8; 2],
}

/// Both endpoints of one back-to-back pair of Xeon NTBs, on the machine for both functions.
pub struct XeonNtb {
    sides: [Side; 2],
    unimplemented: Vec<Unimplemented>,
    /// Link state last reported by a doorbell (bit 15).
    link_up: bool,
}

fn log2(size: u64) -> u8 {
    size.trailing_zeros() as u8
}

impl XeonNtb {
    /// The pair of adapter `ntb` and its peer (the first of the two by index is the USD side).
    pub fn new(f: &mut Fabric, ntb: u32) -> Result<XeonNtb, devlend_fabric::FabricError> {
        let peer = f.ntb(ntb).peer.ok_or_else(|| devlend_fabric::FabricError::from(devlend_fabric::BadNtb::NoB2bPeer { ntb: f.ntb(ntb).name.clone() }))?;
        let (a, b) = (ntb.min(peer), ntb.max(peer));
        let side = |n: u32, ppd| Side { ntb: n, func: f.ntb(n).func, ppd, sbar_sz: [0; 2] };
        let x = XeonNtb { sides: [side(a, PPD_B2B_USD), side(b, PPD_B2B_DSD)], unimplemented: Vec::new(), link_up: f.ntb_link_is_up(a) };
        for k in 0..2 {
            x.mirror(f, k);
        }
        Ok(x)
    }

    /// Put it on the machine for both endpoints; the shared handle.
    pub fn add_to<W: World>(self, m: &mut devlend_engine::machine::Machine<W>) -> Rc<RefCell<XeonNtb>> {
        let funcs = [self.sides[0].func, self.sides[1].func];
        let dev = Rc::new(RefCell::new(self));
        for func in funcs {
            m.add_device(func, dev.clone());
        }
        dev
    }

    /// The functions it is on the machine for.
    pub fn funcs(&self) -> [FuncId; 2] {
        [self.sides[0].func, self.sides[1].func]
    }

    /// The adapters it serves.
    pub fn ntbs(&self) -> [u32; 2] {
        [self.sides[0].ntb, self.sides[1].ntb]
    }

    fn side_of(&self, func: FuncId) -> Option<usize> {
        self.sides.iter().position(|s| s.func == func)
    }

    /// The registers the driver touched that are not modelled, so far.
    pub fn unimplemented(&self) -> &[Unimplemented] {
        &self.unimplemented
    }

    fn record(&mut self, f: &Fabric, k: usize, space: &'static str, offset: u64, len: usize, access: Access) {
        let u = Unimplemented { ntb: f.ntb(self.sides[k].ntb).name.clone(), space, offset, len, access };
        if !self.unimplemented.contains(&u) {
            self.unimplemented.push(u);
        }
    }

    fn bar_size(f: &Fabric, func: FuncId, index: u8) -> u64 {
        f.func(func).bars.iter().find(|b| b.index == index).map_or(0, |b| b.size)
    }

    // ----- config space -----

    /// A config byte of function `func` that this face answers (None: the fabric's generic
    /// config space answers). Offsets it does not model above the header are recorded.
    pub fn config_read(&mut self, f: &Fabric, func: FuncId, off: usize) -> Option<u8> {
        let k = self.side_of(func)?;
        let s = self.sides[k];
        let ids = (DEVICE_B2B_SNB as u32) << 16 | VENDOR_INTEL as u32;
        Some(match off {
            0..=3 => (ids >> (8 * off)) as u8,
            PBAR23SZ => log2(Self::bar_size(f, func, 2)),
            PBAR45SZ => log2(Self::bar_size(f, func, 4)),
            SBAR23SZ | SBAR45SZ => s.sbar_sz[off - SBAR23SZ],
            PPD => s.ppd,
            o if o == LINK_STATUS || o == LINK_STATUS + 1 => (self.link_status(f, k) >> (8 * (o - LINK_STATUS))) as u8,
            0xd5..=0xff | 0x100.. => {
                self.record(f, k, "config", off as u64, 1, Access::Read);
                0
            }
            _ => return None,
        })
    }

    /// A config write this face takes (true), or leaves to the generic config space (false).
    pub fn config_write(&mut self, f: &Fabric, func: FuncId, off: usize, value: u8) -> bool {
        let Some(k) = self.side_of(func) else { return false };
        match off {
            SBAR23SZ | SBAR45SZ => self.sides[k].sbar_sz[off - SBAR23SZ] = value,
            0xd0..=0xff | 0x100.. => self.record(f, k, "config", off as u64, 1, Access::Write),
            _ => return false,
        }
        true
    }

    fn link_status(&self, f: &Fabric, k: usize) -> u16 {
        let n = f.ntb(self.sides[k].ntb);
        match n.cable.filter(|_| f.ntb_link_is_up(self.sides[k].ntb)) {
            Some(c) => {
                let l = &f.links()[c as usize];
                LNK_STA_ACTIVE | (l.width as u16) << 4 | l.gen as u16
            }
            None => 0,
        }
    }

    /// Whether a load of `len` bytes at `offset` of BAR `bar` of `func` reads a modelled
    /// register (the MSI-X table is the caller's); a load of another is recorded.
    pub fn check_read(&mut self, f: &Fabric, func: FuncId, bar: u8, offset: u64, len: usize) -> bool {
        let Some(k) = self.side_of(func) else { return true };
        if bar != 0 || Self::modelled(offset, len) {
            return true;
        }
        self.record(f, k, "bar0", offset, len, Access::Read);
        false
    }

    fn modelled(off: u64, len: usize) -> bool {
        let end = off + len as u64;
        let within = |a: u64, b: u64| off >= a && end <= b;
        within(0, NTBCNTL + 4)
            || within(PDOORBELL, PDOORBELL + 4)
            || within(SPAD, SPAD + 4 * SPAD_COUNT as u64)
            || within(B2B_SPAD, B2B_DOORBELL + 2)
            || within(B2B_XLAT, B2B_XLAT + 8)
            || within(SPCICMD, SPCICMD + 2)
            || off >= MSIX_TABLE_OFFSET
    }

    // ----- BAR 0 -----

    fn reg(f: &mut Fabric, func: FuncId, off: u64, len: usize) -> u64 {
        let mut b = [0u8; 8];
        if let Some(m) = f.bar_mem(func, 0) {
            m.read(off, &mut b[..len]);
        }
        u64::from_le_bytes(b)
    }

    fn set_reg(f: &mut Fabric, func: FuncId, off: u64, len: usize, v: u64) {
        f.bar_store(func, 0, off, &v.to_le_bytes()[..len]);
    }

    /// Side `k`'s doorbell, mask and scratchpads into its BAR 0 (and the peer's scratchpads
    /// into its B2B_SPAD, which a load reads across the link).
    fn mirror(&self, f: &mut Fabric, k: usize) {
        let (s, p) = (self.sides[k], self.sides[1 - k]);
        let (db, mask) = (f.db_read(s.ntb), f.ntb(s.ntb).doorbell_mask);
        Self::set_reg(f, s.func, PDOORBELL, 2, db);
        Self::set_reg(f, s.func, PDBMSK, 2, mask);
        for i in 0..f.ntb(s.ntb).spads.len().min(SPAD_COUNT) {
            let (own, peer) = (f.ntb(s.ntb).spads[i], f.ntb(p.ntb).spads.get(i).copied().unwrap_or(0));
            Self::set_reg(f, s.func, SPAD + 4 * i as u64, 4, own as u64);
            Self::set_reg(f, s.func, B2B_SPAD + 4 * i as u64, 4, peer as u64);
        }
    }

    /// Send MSI-X vector `v` of side `k`, if the entry is programmed and unmasked.
    fn interrupt<W: World>(&self, cx: &mut Cx<W>, k: usize, v: u16) {
        let s = self.sides[k];
        let f = cx.fabric();
        let e = MSIX_TABLE_OFFSET + 16 * v as u64;
        let (addr, data, ctrl) = (Self::reg(f, s.func, e, 8), Self::reg(f, s.func, e + 8, 4) as u32, Self::reg(f, s.func, e + 12, 4));
        if addr != 0 && ctrl & 1 == 0 {
            let _ = cx.dma_write_as(s.func, addr, data.to_le_bytes().to_vec(), 0);
        }
    }

    /// Interrupt side `k` for doorbell bits `bits` that are set and unmasked.
    fn fire<W: World>(&self, cx: &mut Cx<W>, k: usize, bits: u64) {
        let n = self.sides[k].ntb;
        let live = bits & cx.fabric().db_read(n) & !cx.fabric().ntb(n).doorbell_mask;
        let mut vectors: Vec<u16> =
            (0..16).filter(|b| live & (1 << b) != 0).map(|b| if b == 15 { LINK_VECTOR } else { (b / DB_VECTOR_SHIFT) as u16 }).collect();
        vectors.dedup();
        for v in vectors {
            self.interrupt(cx, k, v);
        }
    }

    /// Ring doorbell bits of side `k` (a store from the link side).
    fn ring<W: World>(&mut self, cx: &mut Cx<W>, k: usize, bits: u64) {
        let other = self.sides[1 - k].ntb;
        if cx.fabric().peer_db_set(other, bits).is_err() {
            return;
        }
        self.mirror(cx.fabric(), k);
        self.fire(cx, k, bits);
    }

    /// The link of the pair changed (a cable pulled or restored): doorbell bit 15 on both sides,
    /// as the hardware reports it; the driver then reads the link status.
    pub fn link_changed<W: World>(&mut self, cx: &mut Cx<W>) {
        let up = cx.fabric().ntb_link_is_up(self.sides[0].ntb);
        if up == self.link_up {
            return;
        }
        self.link_up = up;
        for k in 0..2 {
            let n = self.sides[k].ntb;
            cx.fabric().ntb_mut(n).doorbell |= DB_LINK_BIT;
            self.mirror(cx.fabric(), k);
            self.fire(cx, k, DB_LINK_BIT);
        }
    }

    /// Program the fabric's inbound translation of window `w` on side `k` from what the
    /// back-to-back decode gives: the peer's outbound XLAT against side `k`'s secondary BARs.
    fn decode(&mut self, f: &mut Fabric, k: usize, w: usize) {
        let (s, p) = (self.sides[k], self.sides[1 - k]);
        let xlat = Self::reg(f, p.func, [PBAR23XLAT, PBAR45XLAT][w], 8);
        let bar = [2u8, 4][w];
        let size = Self::bar_size(f, s.func, bar);
        let base = Self::reg(f, s.func, [SBAR23BASE, SBAR45BASE][w], 8) & !0xf;
        let target = if xlat != 0 && xlat == Self::reg(f, s.func, SBAR0BASE, 8) & !0xf {
            let bar0 = f.func(s.func).bars.iter().find(|b| b.index == 0).map(|b| (b.addr, b.size));
            bar0.map(|(a, n)| (a, n.min(size)))
        } else if xlat != 0 && xlat == base {
            let lmt = Self::reg(f, s.func, [SBAR23LMT, SBAR45LMT][w], 8);
            let len = if lmt == 0 { size } else { lmt.saturating_sub(base).min(size) };
            let addr = Self::reg(f, s.func, [SBAR23XLAT, SBAR45XLAT][w], 8);
            (len > 0).then_some((addr, len))
        } else {
            None
        };
        let want = target.map_or(Inbound::Unset, |(addr, size)| Inbound::Direct { addr, size });
        if f.ntb(s.ntb).inbound.first().and_then(|v| v.get(w)) == Some(&want) {
            return;
        }
        let out = match target {
            Some((addr, len)) => f.mw_set_trans(s.ntb, w, addr, len),
            None => f.mw_clear_trans(s.ntb, w),
        };
        if out.is_err() {
            // A translation the fabric refuses (unaligned, outside the host) leaves the window closed.
            let _ = f.mw_clear_trans(s.ntb, w);
        }
    }

    fn redecode(&mut self, f: &mut Fabric) {
        for k in 0..2 {
            for w in 0..f.ntb(self.sides[k].ntb).windows.len().min(2) {
                self.decode(f, k, w);
            }
        }
    }
}

impl<W: World> Device<W> for XeonNtb {
    fn timer(&mut self, cx: &mut Cx<W>, token: u64) {
        if token == LINK_SIGNAL {
            self.link_changed(cx);
        }
    }

    fn mmio_write(&mut self, cx: &mut Cx<W>, bar: u8, offset: u64, tlp: &Tlp) {
        let Some(me) = self.side_of(cx.func()) else { return };
        if bar != 0 {
            return;
        }
        let own = self.sides[me];
        let bus = cx.fabric().func(own.func).bdf.bus();
        // A store that crossed the link carries one of this adapter's requester aliases.
        let from_link = tlp.header.requester.0 != 0 && tlp.header.requester.bus() == bus;
        let len = tlp.payload.len().min(8);
        let mut b = [0u8; 8];
        b[..len].copy_from_slice(&tlp.payload[..len]);
        let v = u64::from_le_bytes(b);
        let f = cx.fabric();
        match offset {
            PDOORBELL if from_link => self.ring(cx, me, v & 0xffff),
            PDOORBELL => {
                f.db_clear(own.ntb, v & 0xffff);
                self.mirror(f, me);
            }
            PDBMSK => {
                let before = f.ntb(own.ntb).doorbell_mask;
                f.db_set_mask(own.ntb, v & 0xffff);
                self.mirror(f, me);
                // Bits rung while masked interrupt when unmasked.
                self.fire(cx, me, before & !(v & 0xffff));
            }
            B2B_DOORBELL => self.ring(cx, 1 - me, v & 0xffff),
            o if (SPAD..SPAD + 4 * SPAD_COUNT as u64).contains(&o) => {
                let i = ((o - SPAD) / 4) as usize;
                if f.spad_write(own.ntb, i, v as u32).is_ok() {
                    self.mirror(f, me);
                    self.mirror(f, 1 - me);
                }
            }
            o if (B2B_SPAD..B2B_DOORBELL).contains(&o) => {
                let i = ((o - B2B_SPAD) / 4) as usize;
                if f.peer_spad_write(own.ntb, i, v as u32).is_ok() {
                    self.mirror(f, 1 - me);
                    self.mirror(f, me);
                }
            }
            o if o < NTBCNTL => self.redecode(f),
            o if Self::modelled(o, len) => {}
            o => self.record(f, me, "bar0", o, len, Access::Write),
        }
    }
}
