//! One devlend NVMe controller as a UML PCI device: config space, BAR 0 and MSI-X of the model,
//! every MMIO access a CPU load or store of the guest's host through the modelled fabric (for a
//! borrowed drive: the NTB window onto the lender's BAR), every DMA of the controller a flow on
//! the engine into the guest's own memory (attached as that host's RAM).
//!
//! What the server does in the borrower's place (Device Lending's shim, which the unmodified
//! guest kernel lacks): it maps the guest's RAM for the device once (`dma_map_single` of the
//! whole RAM; the controller adds the mapping's offset to every address the driver programs),
//! and it sets up each MSI-X entry the guest programs with devlend's `request_irq`, so the
//! message crosses the fabric to the guest's host; arriving, it is passed to the guest as the
//! data the guest wrote into that entry (UML's MSI message is its IRQ number).
//!
//! Config space accesses are timeless (in Device Lending they are relayed by software, not by
//! TLPs the model times); BAR registers are the guest's own view (UML assigns BARs in its one
//! 256 MiB window; the fabric's BARs stay where the lender put them).

use crate::engine::Engine;
use crate::error::{UmlError, UmlResult};
use crate::mem::GuestMem;
use devlend_devices::ntb_xeon::XeonNtb;
use devlend_devices::nvme::Controller;
use devlend_fabric::config::{MSIX_CAP, MSIX_TABLE_OFFSET};
use devlend_fabric::events::Event;
use devlend_fabric::model::{FuncId, HostId};
use devlend_host::{DevId, DmaDir};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// UML's PCI (arch/um/drivers/virt-pci.c): one 256 MiB 32-bit window for every BAR, 32 MSI vectors.
pub const UML_BAR_WINDOW: u64 = 256 << 20;
pub const UML_MSI_VECTORS: u16 = 32;

#[derive(Clone, Copy, Default)]
struct MsixEntry {
    addr: u64,
    data: u32,
    ctrl: u32,
    vector: Option<u8>,
}

/// What a session did, for its summary.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    pub cfg_reads: u64,
    pub cfg_writes: u64,
    pub mmio_reads: u64,
    pub mmio_writes: u64,
    pub msis: u64,
    /// Loads the fabric refused (read as all ones).
    pub read_faults: u64,
}

/// Where a load's answer arrives: the bytes, or all ones when the fabric refused it.
pub type LoadCell = Rc<RefCell<Option<Result<Vec<u8>, Vec<u8>>>>>;

/// A load's answer: at once, or when its read completes on the machine.
pub enum Load {
    Now(Vec<u8>),
    Later(LoadCell),
}

/// What a function is in devlend's model: the device behind its registers.
pub enum Model {
    /// An NVMe controller (devlend_devices::nvme).
    Nvme(Rc<RefCell<Controller>>),
    /// One endpoint of a back-to-back pair of Intel Xeon gen1 NTBs (devlend_devices::ntb_xeon):
    /// a face of the fabric's NTB, shared with the peer's endpoint.
    XeonNtb(Rc<RefCell<XeonNtb>>),
}

/// One PCI function of a guest: a device of the topology, on the run's one engine.
pub struct PciFunction {
    pub model: Model,
    host: HostId,
    dev: DevId,
    func: FuncId,
    bar_cpu: [u64; 6],
    bar_size: [u64; 6],
    bar_64: [bool; 6],
    guest_bar: [u32; 6],
    msix: Vec<MsixEntry>,
    by_vector: HashMap<u8, u16>,
    pub counts: Counts,
    write_faults: Rc<Cell<u64>>,
    /// The guest's host has been told that the device is gone and the server acted on it.
    unplugged: bool,
}

/// A step of devlend's model that failed, as the error the server reports.
pub(crate) fn model<E: std::error::Error + 'static>(during: &'static str) -> impl FnOnce(E) -> UmlError {
    move |e| UmlError::Model { during, error: Box::new(e) }
}

impl PciFunction {
    /// Drive `device` of the engine's topology for guest host `host` (borrowed when it sits
    /// elsewhere), with `blocks` blocks; its controller joins the engine.
    pub fn nvme(e: &mut Engine, host: &str, device: &str, blocks: u64) -> UmlResult<PciFunction> {
        let (ctrl, host_id, dev) =
            devlend_drivers::nvme_run::attach(&mut e.machine, host, device, Some(blocks)).map_err(model("setting up the drive on the topology"))?;
        let func = ctrl.borrow().func;
        PciFunction::new(e, Model::Nvme(ctrl), host_id, dev, func, device)
    }

    /// NTB adapter `ntb` of guest host `host`, as an Intel Xeon gen1 NTB (its pair's face joins
    /// the engine once, for both endpoints).
    pub fn xeon_ntb(e: &mut Engine, host: &str, ntb: &str) -> UmlResult<PciFunction> {
        let face = e.xeon_face(ntb)?;
        let mut w = e.machine.world();
        let host_id = w.fabric.host_id(host).map_err(model("the guest's host"))?;
        let func = w.fabric.ntb(w.fabric.ntb_id(ntb).map_err(model("the NTB"))?).func;
        if w.fabric.func_host(func) != host_id {
            return Err(UmlError::NotHers { host: host.into(), device: ntb.into() });
        }
        let dev = w.os(host).and_then(|os| os.find(ntb)).map_err(model("the guest host's kernel"))?;
        drop(w);
        PciFunction::new(e, Model::XeonNtb(face), host_id, dev, func, ntb)
    }

    fn new(e: &mut Engine, model: Model, host: HostId, dev: DevId, func: FuncId, name: &str) -> UmlResult<PciFunction> {
        let mut d = PciFunction {
            model,
            host,
            dev,
            func,
            bar_cpu: [0; 6],
            bar_size: [0; 6],
            bar_64: [false; 6],
            guest_bar: [0; 6],
            msix: Vec::new(),
            by_vector: HashMap::new(),
            counts: Counts::default(),
            write_faults: Rc::new(Cell::new(0)),
            unplugged: false,
        };
        d.read_bars(e, name)?;
        Ok(d)
    }

    /// NVMe commands the controller completed (0 for another device).
    pub fn commands(&self) -> u64 {
        match &self.model {
            Model::Nvme(c) => c.borrow().commands,
            Model::XeonNtb(_) => 0,
        }
    }

    fn read_bars(&mut self, e: &mut Engine, device: &str) -> UmlResult<()> {
        let mut w = e.machine.world();
        let f = w.fabric.func(self.func);
        let (bars, vectors) = (f.bars.clone(), f.msix_vectors);
        let total: u64 = bars.iter().map(|b| b.size).sum();
        if total > UML_BAR_WINDOW {
            return Err(UmlError::BarWindow { device: device.into(), total, window: UML_BAR_WINDOW });
        }
        if vectors > UML_MSI_VECTORS {
            return Err(UmlError::MsiVectors { device: device.into(), vectors, limit: UML_MSI_VECTORS });
        }
        let os = w.os(self.host).map_err(model("the guest host's kernel"))?;
        for b in &bars {
            let i = b.index as usize;
            self.bar_cpu[i] = os.pci_iomap(self.dev, b.index).map_err(model("mapping the drive's BARs"))?;
            self.bar_size[i] = b.size;
            self.bar_64[i] = b.bits == 64;
        }
        self.msix = vec![MsixEntry { ctrl: 1, ..Default::default() }; vectors as usize];
        Ok(())
    }

    /// The guest's memory becomes the RAM of its host in the fabric, mapped once for the device.
    pub fn attach(&mut self, e: &mut Engine, mem: &GuestMem) -> UmlResult<()> {
        let (mut lo, mut hi) = (u64::MAX, 0);
        let mut w = e.machine.world();
        for (base, size, ptr) in mem.regions() {
            if !w.kernel(self.host).is_ok_and(|k| k.is_ram(base, size)) {
                return Err(UmlError::NotRam { base, size });
            }
            // SAFETY: `mem` maps the region for as long as the session runs; the machine is dropped with it.
            unsafe { w.fabric.attach_ram(self.host, base, ptr, size) };
            (lo, hi) = (lo.min(base), hi.max(base + size));
        }
        // An NTB endpoint masters nothing of its own: what crosses it lands where the guest's
        // kernel translated its inbound windows (guest-physical: UML has no IOMMU).
        if let Model::Nvme(c) = &self.model {
            let bus = w
                .os(self.host)
                .and_then(|mut os| os.dma_map_single(self.dev, lo, hi - lo, DmaDir::Bidirectional))
                .map_err(model("mapping the guest's RAM for the device"))?;
            c.borrow_mut().dma_offset = bus.wrapping_sub(lo);
        }
        Ok(())
    }

    // ----- config space -----

    /// Whether the guest's host still reaches the device's configuration space, as devlend's
    /// own `pci_read_config` finds it: all ones once the device is removed, hangs or its lend's
    /// cable is out, an error once the host has hot-removed it.
    fn present(&self, e: &mut Engine) -> bool {
        let (host, dev) = (self.host, self.dev);
        e.machine.world().os(host).and_then(|os| os.pci_read_config(dev, 0, 4)).is_ok_and(|id| id != u32::MAX)
    }

    /// A configuration read: all ones where no device answers (PCIe Base 4.0 §2.3.2, §7.5.1.1;
    /// Linux takes a Vendor ID of FFFFh as a device that is gone).
    pub fn cfg_read(&mut self, e: &mut Engine, off: usize, size: usize) -> u64 {
        self.counts.cfg_reads += 1;
        if !self.present(e) {
            self.counts.read_faults += 1;
            return u64::MAX >> (64 - 8 * size.clamp(1, 8));
        }
        let mut v = 0u64;
        for i in (0..size).rev() {
            v = v << 8 | self.cfg_byte(e, off + i) as u64;
        }
        v
    }

    fn cfg_byte(&mut self, e: &mut Engine, off: usize) -> u8 {
        if (0x10..0x28).contains(&off) {
            return (self.bar_register(e, (off - 0x10) / 4) >> ((off % 4) * 8)) as u8;
        }
        if let Model::XeonNtb(x) = &self.model {
            if let Some(b) = x.borrow_mut().config_read(&e.machine.world().fabric, self.func, off) {
                return b;
            }
        }
        if off >= 0x100 || (0x30..0x34).contains(&off) {
            return 0;
        }
        e.machine.world().fabric.config_read(self.func, off, 1).unwrap_or(0xff) as u8
    }

    fn bar_register(&mut self, e: &mut Engine, i: usize) -> u32 {
        if i > 0 && self.bar_64[i - 1] {
            let mask = !((self.bar_size[i - 1] - 1) >> 32) as u32;
            return self.guest_bar[i] & mask;
        }
        if self.bar_size[i] == 0 {
            return 0;
        }
        let flags = e.machine.world().fabric.config_read(self.func, 0x10 + 4 * i, 4).unwrap_or(0) & 0xf;
        (self.guest_bar[i] & !(self.bar_size[i] as u32).wrapping_sub(1) & !0xf) | flags
    }

    /// A configuration write; dropped where no device answers.
    pub fn cfg_write(&mut self, e: &mut Engine, off: usize, size: usize, value: u64) {
        self.counts.cfg_writes += 1;
        if !self.present(e) {
            self.write_faults.set(self.write_faults.get() + 1);
            return;
        }
        if (0x10..0x28).contains(&off) {
            let i = (off - 0x10) / 4;
            let mut b = self.guest_bar[i].to_le_bytes();
            for k in 0..size.min(4 - off % 4) {
                b[off % 4 + k] = (value >> (8 * k)) as u8;
            }
            self.guest_bar[i] = u32::from_le_bytes(b);
            return;
        }
        if let Model::XeonNtb(x) = &self.model {
            let w = e.machine.world();
            let mut x = x.borrow_mut();
            if (0..size).fold(false, |took, k| x.config_write(&w.fabric, self.func, off + k, (value >> (8 * k)) as u8) | took) {
                return;
            }
        }
        if off >= 0x100 || (0x30..0x34).contains(&off) {
            return;
        }
        let mut w = e.machine.world();
        for k in 0..size {
            let _ = w.fabric.config_write(self.func, off + k, 1, (value >> (8 * k)) as u32 & 0xff);
        }
    }

    // ----- BARs -----

    fn table(&self, bar: u8, off: u64) -> Option<(usize, u64)> {
        let end = MSIX_TABLE_OFFSET + 16 * self.msix.len() as u64;
        (bar == 0 && (MSIX_TABLE_OFFSET..end).contains(&off)).then(|| (((off - MSIX_TABLE_OFFSET) / 16) as usize, off % 16))
    }

    /// A guest load of `size` bytes at `off` in BAR `bar`, issued at `at` (ps): a CPU read on
    /// the machine, answered when it completes there (the MSI-X table, kept here, at once). A
    /// load the fabric refuses (an unsupported request, a removed device) reads all ones, as a
    /// master abort does on x86, and is counted.
    pub fn mmio_read(&mut self, e: &mut Engine, bar: u8, off: u64, size: usize, at: u64) -> UmlResult<Load> {
        self.counts.mmio_reads += 1;
        if let Some((entry, field)) = self.table(bar, off) {
            if !self.present(e) {
                self.counts.read_faults += 1;
                return Ok(Load::Now(vec![0xff; size]));
            }
            let mut b = [0u8; 16];
            let m = self.msix[entry];
            b[0..8].copy_from_slice(&m.addr.to_le_bytes());
            b[8..12].copy_from_slice(&m.data.to_le_bytes());
            b[12..16].copy_from_slice(&m.ctrl.to_le_bytes());
            let f = field as usize;
            return Ok(Load::Now(b[f..(f + size).min(16)].to_vec()));
        }
        let addr = self.bar_addr(bar, off, size as u64)?;
        if let Model::XeonNtb(x) = &self.model {
            x.borrow_mut().check_read(&e.machine.world().fabric, self.func, bar, off, size);
        }
        let out: LoadCell = Rc::new(RefCell::new(None));
        let (o, host) = (out.clone(), self.host);
        e.machine.spawn("guest load", at, move |t| {
            *o.borrow_mut() = Some(t.cpu_read(host, addr, size).map_err(|_| vec![0xff; size]));
            Ok(())
        });
        Ok(Load::Later(out))
    }

    /// The value of a load that has completed, if it has.
    pub fn load_done(&mut self, cell: &LoadCell) -> Option<Vec<u8>> {
        let done = cell.borrow_mut().take()?;
        Some(done.unwrap_or_else(|ones| {
            self.counts.read_faults += 1;
            ones
        }))
    }

    /// A guest store at `at` (ps): a posted CPU write on the machine, landing when the fabric
    /// takes it there (the MSI-X table, kept here, at once).
    pub fn mmio_write(&mut self, e: &mut Engine, bar: u8, off: u64, data: &[u8], at: u64) -> UmlResult<()> {
        self.counts.mmio_writes += 1;
        if let Some((entry, field)) = self.table(bar, off) {
            if !self.present(e) {
                self.write_faults.set(self.write_faults.get() + 1);
                return Ok(());
            }
            return self.msix_write(e, entry, field as usize, data);
        }
        let addr = self.bar_addr(bar, off, data.len() as u64)?;
        let (d, host, dropped) = (data.to_vec(), self.host, self.write_faults.clone());
        // A store the fabric refuses (a link down, a removed device) is dropped, as a posted
        // write is; counted.
        e.machine.spawn("guest store", at, move |t| {
            if t.cpu_write(host, addr, &d).is_err() {
                dropped.set(dropped.get() + 1);
            }
            Ok(())
        });
        Ok(())
    }

    /// Stores the fabric refused (dropped).
    pub fn write_faults(&self) -> u64 {
        self.write_faults.get()
    }

    /// True once, when the guest's host has been told that the device is gone
    /// ([`Engine::told_gone`]): the server then hot-unplugs it.
    pub fn take_unplug(&mut self, e: &Engine) -> bool {
        let due = !self.unplugged && self.unplugged_at(e).is_some();
        self.unplugged |= due;
        due
    }

    /// When the guest's host was told that the device is gone (ps), if it was.
    pub fn unplugged_at(&self, e: &Engine) -> Option<u64> {
        e.told_gone(self.func, self.host)
    }

    fn bar_addr(&self, bar: u8, off: u64, len: u64) -> UmlResult<u64> {
        let i = bar as usize;
        if i >= 6 || off.checked_add(len).is_none_or(|e| e > self.bar_size[i]) {
            return Err(UmlError::Address { what: "an MMIO access outside the device's BAR", addr: off, len });
        }
        Ok(self.bar_cpu[i] + off)
    }

    /// The guest programs MSI-X entry `e`: address and data stay here; once it has data the
    /// entry gets a vector of the guest's host through devlend's `request_irq`; the mask bit
    /// goes to the device's table.
    fn msix_write(&mut self, eng: &mut Engine, e: usize, field: usize, data: &[u8]) -> UmlResult<()> {
        let mut b = [0u8; 16];
        let m = self.msix[e];
        b[0..8].copy_from_slice(&m.addr.to_le_bytes());
        b[8..12].copy_from_slice(&m.data.to_le_bytes());
        b[12..16].copy_from_slice(&m.ctrl.to_le_bytes());
        let n = data.len().min(16 - field);
        b[field..field + n].copy_from_slice(&data[..n]);
        let m = &mut self.msix[e];
        m.addr = u64::from_le_bytes(b[0..8].try_into().unwrap());
        m.data = u32::from_le_bytes(b[8..12].try_into().unwrap());
        m.ctrl = u32::from_le_bytes(b[12..16].try_into().unwrap());
        if field + n > 8 && field < 12 && m.vector.is_none() {
            let v = self.vector(eng, e).map_err(|err| UmlError::MsixEntry { entry: e, error: Box::new(err) })?;
            self.msix[e].vector = Some(v);
            self.by_vector.insert(v, e as u16);
        }
        if self.msix[e].vector.is_some() {
            let ctrl = self.msix[e].ctrl.to_le_bytes();
            let at = MSIX_TABLE_OFFSET + 16 * e as u64 + 12;
            eng.machine.world().fabric.bar_store(self.func, 0, at, &ctrl);
        }
        Ok(())
    }

    /// A vector of the guest's host for MSI-X entry `e`: devlend's `request_irq` for a drive; for
    /// an NTB endpoint, whose interrupts its own driver handles, a vector from the host's
    /// `alloc_vector` written into the entry as the NTB driver would, so the face's doorbell
    /// messages raise it.
    fn vector(&mut self, eng: &mut Engine, e: usize) -> Result<u8, devlend_host::HostError> {
        let mut w = eng.machine.world();
        if let Model::Nvme(_) = self.model {
            return w.os(self.host).and_then(|mut os| os.request_irq(self.dev, e as u16, e as u32));
        }
        let (msi, bdf) = (w.fabric.host(self.host).msi.start, w.fabric.func(self.func).bdf);
        let (v, addr) = w.alloc_vector(self.host, self.dev, e as u16, e as u32, (msi, bdf))?;
        let at = MSIX_TABLE_OFFSET + 16 * e as u64;
        w.fabric.bar_store(self.func, 0, at, &addr.to_le_bytes());
        w.fabric.bar_store(self.func, 0, at + 8, &(v as u32).to_le_bytes());
        Ok(v)
    }

    /// The MSI-X messages among `events` that are this function's, as the data the guest
    /// programmed (its IRQ numbers).
    pub fn take_interrupts(&mut self, events: &[Event]) -> Vec<u32> {
        let mut out = Vec::new();
        for ev in events {
            if let Event::Msi { host, data, .. } = *ev {
                if host == self.host {
                    if let Some(&e) = self.by_vector.get(&((data & 0xff) as u8)) {
                        self.counts.msis += 1;
                        out.push(self.msix[e as usize].data);
                    }
                }
            }
        }
        out
    }

    /// MSI-X enabled and not function-masked (Message Control, PCIe 3.0 §7.7.2).
    pub fn msix_enabled(&mut self, e: &mut Engine) -> bool {
        let c = e.machine.world().fabric.config_read(self.func, MSIX_CAP + 2, 2).unwrap_or(0);
        c & 0x8000 != 0 && c & 0x4000 == 0
    }
}
