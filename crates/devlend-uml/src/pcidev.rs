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

use crate::error::{UmlError, UmlResult};
use crate::mem::GuestMem;
use devlend_devices::nvme::Controller;
use devlend_engine::machine::{Effects, Later, Machine};
use devlend_fabric::config::{MSIX_CAP, MSIX_TABLE_OFFSET};
use devlend_fabric::events::Event;
use devlend_fabric::model::{FuncId, HostId};
use devlend_host::{Cluster, DevId, DmaDir, FaultKind};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// UML's PCI (arch/um/drivers/virt-pci.c): one 256 MiB 32-bit window for every BAR, 32 MSI vectors.
pub const UML_BAR_WINDOW: u64 = 256 << 20;
pub const UML_MSI_VECTORS: u16 = 32;
/// The fault kind that is the lender taking its device back ([`NvmeDevice::revoke_at`]).
pub const REVOKE: &str = "revoke";

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
    pub faults: Vec<String>,
}

/// A fault that struck: its kind, target, and whether the host layer could not apply it then.
#[derive(Clone, Debug)]
pub struct Struck {
    pub kind: &'static str,
    pub target: String,
    pub failed: bool,
}

/// Where a load's answer arrives: the bytes, or all ones when the fabric refused it.
pub type LoadCell = Rc<RefCell<Option<Result<Vec<u8>, Vec<u8>>>>>;

/// A load's answer: at once, or when its read completes on the machine.
pub enum Load {
    Now(Vec<u8>),
    Later(LoadCell),
}

pub struct NvmeDevice {
    pub machine: Machine<Cluster>,
    pub ctrl: Rc<RefCell<Controller>>,
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
    struck: Rc<RefCell<Vec<Struck>>>,
    /// When the guest's host was told that the device is gone (set by a fault's follow-up on
    /// the engine), and whether the server has acted on it.
    unplug: Rc<Cell<Option<u64>>>,
    unplugged: bool,
}

/// A step of devlend's model that failed, as the error the server reports.
fn model<E: std::error::Error + 'static>(during: &'static str) -> impl FnOnce(E) -> UmlError {
    move |e| UmlError::Model { during, error: Box::new(e) }
}

impl NvmeDevice {
    /// Drive `device` of the topology for guest host `host` (borrowed when it sits elsewhere), with `blocks` blocks.
    pub fn new(topology_json: &str, host: &str, device: &str, blocks: u64) -> UmlResult<NvmeDevice> {
        let (machine, ctrl, host_id, dev) =
            devlend_devices::nvme_run::machine(topology_json, host, device, Some(blocks)).map_err(model("setting up the drive on the topology"))?;
        let func = ctrl.borrow().func;
        let mut d = NvmeDevice {
            machine,
            ctrl,
            host: host_id,
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
            struck: Rc::new(RefCell::new(Vec::new())),
            unplug: Rc::new(Cell::new(None)),
            unplugged: false,
        };
        d.read_bars(device)?;
        Ok(d)
    }

    fn read_bars(&mut self, device: &str) -> UmlResult<()> {
        let mut w = self.machine.world();
        let f = &w.fabric.funcs[self.func as usize];
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
    pub fn attach(&mut self, mem: &GuestMem) -> UmlResult<()> {
        let (mut lo, mut hi) = (u64::MAX, 0);
        let mut w = self.machine.world();
        for (base, size, ptr) in mem.regions() {
            if !w.kernel(self.host).is_ok_and(|k| k.is_ram(base, size)) {
                return Err(UmlError::NotRam { base, size });
            }
            // SAFETY: `mem` maps the region for as long as the session runs; the machine is dropped with it.
            unsafe { w.fabric.ram[self.host as usize].attach(base, ptr, size) };
            (lo, hi) = (lo.min(base), hi.max(base + size));
        }
        let bus = w
            .os(self.host)
            .and_then(|mut os| os.dma_map_single(self.dev, lo, hi - lo, DmaDir::Bidirectional))
            .map_err(model("mapping the guest's RAM for the device"))?;
        self.ctrl.borrow_mut().dma_offset = bus.wrapping_sub(lo);
        Ok(())
    }

    // ----- config space -----

    /// Whether the guest's host still reaches the device's configuration space, as devlend's
    /// own `pci_read_config` finds it: all ones once the device is removed, hangs or its lend's
    /// cable is out, an error once the host has hot-removed it.
    fn present(&mut self) -> bool {
        let (host, dev) = (self.host, self.dev);
        self.machine.world().os(host).and_then(|os| os.pci_read_config(dev, 0, 4)).is_ok_and(|id| id != u32::MAX)
    }

    /// A configuration read: all ones where no device answers (PCIe Base 4.0 §2.3.2, §7.5.1.1;
    /// Linux takes a Vendor ID of FFFFh as a device that is gone).
    pub fn cfg_read(&mut self, off: usize, size: usize) -> u64 {
        self.counts.cfg_reads += 1;
        if !self.present() {
            self.counts.read_faults += 1;
            return u64::MAX >> (64 - 8 * size.clamp(1, 8));
        }
        let mut v = 0u64;
        for i in (0..size).rev() {
            v = v << 8 | self.cfg_byte(off + i) as u64;
        }
        v
    }

    fn cfg_byte(&mut self, off: usize) -> u8 {
        if (0x10..0x28).contains(&off) {
            return (self.bar_register((off - 0x10) / 4) >> ((off % 4) * 8)) as u8;
        }
        if off >= 0x100 || (0x30..0x34).contains(&off) {
            return 0;
        }
        self.machine.world().fabric.config_read(self.func, off, 1).unwrap_or(0xff) as u8
    }

    fn bar_register(&mut self, i: usize) -> u32 {
        if i > 0 && self.bar_64[i - 1] {
            let mask = !((self.bar_size[i - 1] - 1) >> 32) as u32;
            return self.guest_bar[i] & mask;
        }
        if self.bar_size[i] == 0 {
            return 0;
        }
        let flags = self.machine.world().fabric.config_read(self.func, 0x10 + 4 * i, 4).unwrap_or(0) & 0xf;
        (self.guest_bar[i] & !(self.bar_size[i] as u32).wrapping_sub(1) & !0xf) | flags
    }

    /// A configuration write; dropped where no device answers.
    pub fn cfg_write(&mut self, off: usize, size: usize, value: u64) {
        self.counts.cfg_writes += 1;
        if !self.present() {
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
        if off >= 0x100 || (0x30..0x34).contains(&off) {
            return;
        }
        let mut w = self.machine.world();
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
    pub fn mmio_read(&mut self, bar: u8, off: u64, size: usize, at: u64) -> UmlResult<Load> {
        self.counts.mmio_reads += 1;
        if let Some((e, field)) = self.table(bar, off) {
            if !self.present() {
                self.counts.read_faults += 1;
                return Ok(Load::Now(vec![0xff; size]));
            }
            let mut b = [0u8; 16];
            let m = self.msix[e];
            b[0..8].copy_from_slice(&m.addr.to_le_bytes());
            b[8..12].copy_from_slice(&m.data.to_le_bytes());
            b[12..16].copy_from_slice(&m.ctrl.to_le_bytes());
            let f = field as usize;
            return Ok(Load::Now(b[f..(f + size).min(16)].to_vec()));
        }
        let addr = self.bar_addr(bar, off, size as u64)?;
        let out: LoadCell = Rc::new(RefCell::new(None));
        let (o, host) = (out.clone(), self.host);
        self.machine.spawn("guest load", at, move |t| {
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
    pub fn mmio_write(&mut self, bar: u8, off: u64, data: &[u8], at: u64) -> UmlResult<()> {
        self.counts.mmio_writes += 1;
        if let Some((e, field)) = self.table(bar, off) {
            if !self.present() {
                self.write_faults.set(self.write_faults.get() + 1);
                return Ok(());
            }
            return self.msix_write(e, field as usize, data);
        }
        let addr = self.bar_addr(bar, off, data.len() as u64)?;
        let (d, host, dropped) = (data.to_vec(), self.host, self.write_faults.clone());
        // A store the fabric refuses (a link down, a removed device) is dropped, as a posted
        // write is; counted.
        self.machine.spawn("guest store", at, move |t| {
            if t.cpu_write(host, addr, &d).is_err() {
                dropped.set(dropped.get() + 1);
            }
            Ok(())
        });
        Ok(())
    }

    /// Inject fault `kind` (devlend_host::fault's names: surprise-removal, link-down, ...) at
    /// `target` at time `at` (ps), on the engine: the fabric and the device change then, and the
    /// guest's kernel finds out as real hardware would let it (stores dropped, loads reading all
    /// ones, no completions). When the fault ends the device's lend or removes it, the guest's
    /// host learns so at the first hot-plug step devlend's host layer gives it
    /// (`devlend_host::fault`: Device Lending's notice to a borrower, a slot's hot-plug interrupt
    /// to the owner): then the server ends the device's connection, UML's hot-unplug
    /// ([`NvmeDevice::take_unplug`]).
    /// Besides devlend's fault kinds, [`REVOKE`]: see [`NvmeDevice::revoke_at`].
    pub fn fault_at(&mut self, at: u64, kind: &str, target: &str) -> UmlResult<()> {
        if kind == REVOKE {
            return self.revoke_at(at, target);
        }
        let k = FaultKind::parse(kind).map_err(model("the fault's kind"))?;
        self.machine.world().fault_target(k, target).map_err(model("the fault's target"))?;
        let (t, log) = (target.to_string(), self.struck.clone());
        let name = k.name();
        let (func, host, unplug) = (self.func, self.host, self.unplug.clone());
        self.machine.inject(at, move |c: &mut Cluster| match c.inject(k, &t) {
            Ok(r) => {
                log.borrow_mut().push(Struck { kind: name, target: t, failed: false });
                let told = r.notices.iter().filter(|n| n.func == func).flat_map(|n| n.steps.iter()).find(|s| s.1 == host).map(|s| s.0);
                let later = told.map(|delay| {
                    let act: Later<Cluster> = Box::new(move |_: &mut Cluster, now| {
                        unplug.set(Some(now));
                        Effects::default()
                    });
                    (delay, act)
                });
                Effects { halted: r.halted, crashed: r.crashed, links_down: r.links_down, later: later.into_iter().collect() }
            }
            Err(_) => {
                log.borrow_mut().push(Struck { kind: name, target: t, failed: true });
                Effects::default()
            }
        });
        Ok(())
    }

    /// The lender takes the borrowed device `target` back at `at` (ps) whatever the borrower
    /// still holds (`Cluster::return_device_force`: the lend's mappings, window and interrupts
    /// undone, the device's bus mastering and MSI-X off); the guest's host learns it with Device
    /// Lending's notice (`timing.dl_notice_ps` later, 000 §4) and the guest hot-unplugs it.
    pub fn revoke_at(&mut self, at: u64, target: &str) -> UmlResult<()> {
        let (func, host, dev) = (self.func, self.host, self.dev);
        {
            let w = self.machine.world();
            let named = w.fabric.func_id(target).map_err(model("the revoke's target"))?;
            if named != func || w.fabric.func_host(func) == host {
                let e = devlend_host::HostError::Invalid(format!("{target} is not the device this guest borrows: only a lend can be revoked"));
                return Err(model("the revoke's target")(e));
            }
        }
        let (log, unplug, t) = (self.struck.clone(), self.unplug.clone(), target.to_string());
        self.machine.inject(at, move |c: &mut Cluster| {
            let taken = c.return_device_force(host, dev).is_ok();
            log.borrow_mut().push(Struck { kind: REVOKE, target: t, failed: !taken });
            let notice = c.fabric.tuning.timing.dl_notice_ps;
            let act: Later<Cluster> = Box::new(move |_: &mut Cluster, now| {
                unplug.set(Some(now));
                Effects::default()
            });
            Effects { later: if taken { vec![(notice, act)] } else { Vec::new() }, ..Effects::default() }
        });
        Ok(())
    }

    /// The faults that have struck so far.
    pub fn struck(&self) -> Vec<Struck> {
        self.struck.borrow().clone()
    }

    /// Stores the fabric refused (dropped).
    pub fn write_faults(&self) -> u64 {
        self.write_faults.get()
    }

    /// When the machine's next event is due (ps), if anything is left to happen.
    pub fn next_event(&self) -> Option<u64> {
        self.machine.next_event_at()
    }

    /// Run the machine up to `until` (ps), stopping
    /// early after the event that records something in the fabric's log (an interrupt, a
    /// fault) or tells the guest's host that the device is gone. True when it stopped early.
    pub fn advance(&mut self, until: u64) -> UmlResult<bool> {
        let before = self.machine.world().fabric.events.total();
        let (unplug, armed) = (self.unplug.clone(), !self.unplugged);
        self.machine
            .run_until_or(until, move |w: &mut Cluster| w.fabric.events.total() != before || (armed && unplug.get().is_some()))
            .map_err(model("the engine"))
    }

    /// True once, when the guest's host has been told that the device is gone.
    pub fn take_unplug(&mut self) -> bool {
        let due = !self.unplugged && self.unplug.get().is_some();
        self.unplugged |= due;
        due
    }

    /// When the guest's host was told that the device is gone (ps), if it was.
    pub fn unplugged_at(&self) -> Option<u64> {
        self.unplug.get()
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
    fn msix_write(&mut self, e: usize, field: usize, data: &[u8]) -> UmlResult<()> {
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
            let v = self
                .machine
                .world()
                .os(self.host)
                .and_then(|mut os| os.request_irq(self.dev, e as u16, e as u32))
                .map_err(|err| UmlError::MsixEntry { entry: e, error: Box::new(err) })?;
            self.msix[e].vector = Some(v);
            self.by_vector.insert(v, e as u16);
        }
        if self.msix[e].vector.is_some() {
            let ctrl = self.msix[e].ctrl.to_le_bytes();
            let at = MSIX_TABLE_OFFSET + 16 * e as u64 + 12;
            self.machine.world().fabric.bar_mem.entry((self.func, 0)).or_default().write(at, &ctrl);
        }
        Ok(())
    }

    /// The MSI-X messages that reached the guest's host since the last call, as the data the
    /// guest programmed (its IRQ numbers); faults and other events are recorded.
    pub fn take_interrupts(&mut self) -> Vec<u32> {
        let mut events = Vec::new();
        self.machine.world().fabric.events.retain(|e| {
            events.push(*e);
            false
        });
        let mut out = Vec::new();
        for ev in events {
            match ev {
                Event::Msi { host, data, .. } if host == self.host => {
                    if let Some(&e) = self.by_vector.get(&((data & 0xff) as u8)) {
                        self.counts.msis += 1;
                        out.push(self.msix[e as usize].data);
                    }
                }
                other => self.counts.faults.push(format!("{other:?}")),
            }
        }
        out
    }

    /// MSI-X enabled and not function-masked (Message Control, PCIe 3.0 §7.7.2).
    pub fn msix_enabled(&mut self) -> bool {
        let c = self.machine.world().fabric.config_read(self.func, MSIX_CAP + 2, 2).unwrap_or(0);
        c & 0x8000 != 0 && c & 0x4000 == 0
    }
}
