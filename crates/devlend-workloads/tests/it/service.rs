//! A device type that exists only in this test, driven by the workloads unchanged: a RAM disk,
//! its model, its driver, and its registration (`registry::register`) with the block-I/O
//! service. The fio workload (`Scenario::add_fio`, `fio_job::fio`) looks the device's kind up
//! in the registry and runs its jobs on the RAM disk as it runs them on an NVMe drive, its own
//! code naming neither; the disk is borrowed through the NTB as a drive is.
//!
//! The type has its own kind, `ramdisk`, and a profile of it, added as a type in
//! params/hardware.toml would be ([`PROFILE`]: the profile and the kind's table, registered with
//! `devlend_fabric::params::register_profiles`, checked as the compiled-in ones are): the fabric
//! takes the profile and the kind by name, and the kind's own setting `ramdisk_bytes` (the disk's
//! size) in its unit, which the drive reads (`Tuning::own_settings`). Nothing outside this file
//! changes for it.
//!
//! The RAM disk: per queue q, registers at `q * REGS` in BAR 0 hold a command (the buffer's
//! DMA address, LBA, blocks, direction, tag) and the DMA address of the queue's completion
//! ring; a store into the queue's doorbell runs the command: a DMA read of the buffer into the
//! disk (a write) or a DMA write of the disk's blocks into it (a read), then a DMA write of
//! (tag, status, phase) into the ring's next entry, which the driver polls by its phase bit
//! (as NVMe's completion queue: the bit flips each time round, so nothing is cleared).

use devlend_drivers::error::{DResult, DeviceError};
use devlend_drivers::registry::{self, Registered};
use devlend_drivers::service::block::{BlockDriver, BlockQueue, Drive, BLOCK};
use devlend_drivers::service::kernel::DynOs;
use devlend_engine::machine::{Cx, Device, FlowDone};
use devlend_fabric::model::FuncId;
use devlend_fabric::params::register_profiles;
use devlend_fabric::Fabric;
use devlend_host::{Cluster, DevId, DmaDir, HostError, InUse};
use devlend_wire::Tlp;
use devlend_workloads::fio_job::{fio, Job};
use devlend_workloads::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

const QUEUES: u16 = 4;
const DEPTH: u32 = 8;
/// The disk's size where the topology's `params` gives none.
const CAPACITY: u64 = 1 << 20;

/// The RAM disk's profile and its kind's table, as params/hardware.toml would hold them.
const PROFILE: &str = r#"
[device.test-ramdisk]
kind = "ramdisk"
class_code = 0x018000
vendor = 0x1af4
device = 0x10f1
max_gen = 3
max_width = 4
bars = [ { index = 0, size = 0x1000, bits = 64, pref = false } ]
msix_vectors = 0
source = "devlend-workloads tests/it/service.rs: a RAM disk that exists only in this test"

[device_kind.ramdisk]
import_classes = ["0180"]
settings = [ { key = "ramdisk_bytes", unit = "bytes", default = "1 MiB (service.rs CAPACITY)" } ]
source = "devlend-workloads tests/it/service.rs"
"#;
/// Bytes of one queue's registers: command at 0 (dma, lba: u64; blocks, write, tag: u32),
/// completion slots' DMA address at `CQ`, doorbell at `DOORBELL`.
const REGS: u64 = 0x40;
const CQ: u64 = 0x20;
const DOORBELL: u64 = 0x28;
const PHASE: u32 = 1 << 31;
const COMPLETION: u64 = u64::MAX;

/// The model: the disk's bytes, the commands whose data is moving (by DMA token: queue, tag,
/// write, offset, length), and each queue's completion ring position (entry, phase).
struct RamDisk {
    func: FuncId,
    data: Vec<u8>,
    moving: HashMap<u64, (u64, u32, bool, usize, usize)>,
    next: u64,
    tails: [(u64, bool); QUEUES as usize],
}

fn reg(f: &Fabric, func: FuncId, off: u64, n: usize) -> u64 {
    let mut b = vec![0u8; n];
    if let Some(m) = f.bar_mem(func, 0) {
        m.read(off, &mut b);
    }
    b.iter().rev().fold(0, |a, x| a << 8 | *x as u64)
}

impl RamDisk {
    /// Post (tag, status) into queue `q`'s ring.
    fn complete(&mut self, cx: &mut Cx<Cluster>, q: u64, tag: u32, status: u16) {
        let cq = reg(cx.fabric(), self.func, q * REGS + CQ, 8);
        let (tail, phase) = &mut self.tails[q as usize];
        let entry = tag | (status as u32) << 16 & !PHASE | if *phase { PHASE } else { 0 };
        let _ = cx.dma_write(cq + *tail * 4, entry.to_le_bytes().to_vec(), COMPLETION);
        *tail = (*tail + 1) % DEPTH as u64;
        *phase ^= *tail == 0;
    }
}

impl Device<Cluster> for RamDisk {
    fn mmio_write(&mut self, cx: &mut Cx<Cluster>, bar: u8, offset: u64, _: &Tlp) {
        if bar != 0 || offset % REGS != DOORBELL {
            return;
        }
        let (base, func, q) = (offset - DOORBELL, self.func, offset / REGS);
        let f = cx.fabric();
        let (dma, lba, blocks) = (reg(f, func, base, 8), reg(f, func, base + 8, 8), reg(f, func, base + 16, 4));
        let (write, tag) = (reg(f, func, base + 20, 4) != 0, reg(f, func, base + 24, 4) as u32);
        let (off, len) = ((lba * BLOCK) as usize, (blocks * BLOCK) as usize);
        if off + len > self.data.len() {
            return self.complete(cx, q, tag, 0x80);
        }
        let token = self.next;
        self.next += 1;
        self.moving.insert(token, (q, tag, write, off, len));
        let started = match write {
            true => cx.dma_read(dma, len as u64, token),
            false => cx.dma_write(dma, self.data[off..off + len].to_vec(), token),
        };
        if started.is_err() {
            self.moving.remove(&token);
            self.complete(cx, q, tag, 0x4);
        }
    }

    fn dma_done(&mut self, cx: &mut Cx<Cluster>, done: FlowDone) {
        let Some((q, tag, write, off, len)) = self.moving.remove(&done.token) else { return };
        if done.fault.is_some() {
            return self.complete(cx, q, tag, 0x4);
        }
        if write {
            self.data[off..off + len].copy_from_slice(&done.data);
        }
        self.complete(cx, q, tag, 0);
    }
}

/// The driver's queue q: its registers (CPU address), completion ring (CPU, DMA) and position
/// in it (entry, phase expected), and the DMA mappings of the commands in flight by tag. Tags
/// count up (skipping those in flight), so a tag just reaped is not reused before its user has
/// seen its completion.
struct RamQueue {
    dev: DevId,
    q: u16,
    regs: u64,
    cq: (u64, u64),
    head: (u64, bool),
    next: u16,
    inflight: HashMap<u32, (u64, u64, DmaDir)>,
    done: Vec<(u16, u16)>,
}

fn os_err(what: &'static str) -> impl FnOnce(HostError) -> DeviceError {
    move |error| DeviceError::Host { what, device: "ramdisk".into(), error }
}

fn phase_set(b: &[u8]) -> bool {
    b[3] & 0x80 != 0
}

fn phase_clear(b: &[u8]) -> bool {
    b[3] & 0x80 == 0
}

impl RamQueue {
    /// Poll the ring's head entry until its phase is the expected one; take it and every
    /// entry after it that has that phase.
    fn collect(&mut self, os: &mut dyn DynOs) -> DResult<()> {
        let at = |h: (u64, bool)| self.cq.0 + h.0 * 4;
        let posted = if self.head.1 { phase_set } else { phase_clear };
        let got = os.poll_for(at(self.head), 4, "ramdisk completion", posted, 1_000_000_000_000).map_err(os_err("poll"))?;
        let mut entry = got.ok_or_else(|| os_err("poll")(HostError::from(InUse::NoCompletion { device: "ramdisk".into(), seconds: 1 })))?;
        while posted(&entry) {
            let v = u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]);
            let (tag, status) = (v & 0xffff, (v & !PHASE) >> 16);
            let (dma, len, dir) = self.inflight.remove(&tag).ok_or_else(|| self.unknown_tag(tag as u16))?;
            os.dma_unmap_single(self.dev, dma, len, dir).map_err(os_err("dma_unmap_single"))?;
            self.done.push((tag as u16, status as u16));
            self.head.0 = (self.head.0 + 1) % DEPTH as u64;
            if self.head.0 == 0 {
                self.head.1 = !self.head.1;
                return Ok(());
            }
            entry = os.read(at(self.head), 4).map_err(os_err("read completion"))?;
        }
        Ok(())
    }
}

impl BlockQueue for RamQueue {
    fn id(&self) -> u16 {
        self.q + 1
    }

    fn submit(&mut self, os: &mut dyn DynOs, write: bool, lba: u64, blocks: u16, buf: u64) -> DResult<u16> {
        if self.inflight.len() >= DEPTH as usize {
            return Err(os_err("submit")(HostError::from(InUse::QueueFull { device: "ramdisk".into() })));
        }
        while self.inflight.contains_key(&(self.next as u32)) {
            self.next = self.next.wrapping_add(1);
        }
        let tag = self.next as u32;
        self.next = self.next.wrapping_add(1);
        let (len, dir) = (blocks as u64 * BLOCK, if write { DmaDir::ToDevice } else { DmaDir::FromDevice });
        let dma = os.dma_map_single(self.dev, buf, len, dir).map_err(os_err("dma_map_single"))?;
        self.inflight.insert(tag, (dma, len, dir));
        let mut cmd = [dma.to_le_bytes(), lba.to_le_bytes()].concat();
        for v in [blocks as u32, write as u32, tag] {
            cmd.extend_from_slice(&v.to_le_bytes());
        }
        os.write(self.regs, &cmd).map_err(os_err("write command"))?;
        os.write(self.regs + DOORBELL, &1u32.to_le_bytes()).map_err(os_err("ring doorbell"))?;
        Ok(tag as u16)
    }

    fn reap(&mut self, os: &mut dyn DynOs) -> DResult<Vec<(u16, u16)>> {
        if self.done.is_empty() && !self.inflight.is_empty() {
            self.collect(os)?;
        }
        Ok(std::mem::take(&mut self.done))
    }

    fn read(&mut self, os: &mut dyn DynOs, lba: u64, blocks: u16, buf: u64) -> DResult<()> {
        let tag = self.submit(os, false, lba, blocks, buf)?;
        loop {
            if let Some(i) = self.done.iter().position(|d| d.0 == tag) {
                let (_, status) = self.done.remove(i);
                return if status == 0 { Ok(()) } else { Err(self.status_error(false, lba, status)) };
            }
            self.collect(os)?;
        }
    }

    fn status_error(&self, write: bool, lba: u64, status: u16) -> DeviceError {
        DeviceError::Mismatch { what: format!("ramdisk {} at LBA {lba}: status {status:#x}", if write { "write" } else { "read" }) }
    }

    fn unknown_tag(&self, tag: u16) -> DeviceError {
        DeviceError::Mismatch { what: format!("ramdisk queue {}: completion for tag {tag}, not in flight", self.q + 1) }
    }
}

struct RamDriver(Vec<Option<RamQueue>>);

impl BlockDriver for RamDriver {
    fn take_queue(&mut self, q: u16) -> Option<Box<dyn BlockQueue>> {
        let q = self.0.get_mut(q as usize - 1)?.take()?;
        Some(Box::new(q))
    }
}

/// The disk as the topology describes it: its size.
struct RamDrive(u64);

fn ramdisk(f: &Fabric, device: &str) -> DResult<Rc<dyn Drive>> {
    let d = f.devices().iter().position(|d| d.name == device).ok_or_else(|| DeviceError::Mismatch { what: format!("no device {device}") })?;
    Ok(Rc::new(RamDrive(f.tuning().own_settings(d as u32).get("ramdisk_bytes").copied().unwrap_or(CAPACITY))))
}

impl Drive for RamDrive {
    fn capacity(&self) -> u64 {
        self.0
    }
    fn max_queues(&self) -> u16 {
        QUEUES
    }
    fn max_depth(&self) -> u32 {
        DEPTH
    }
    fn params(&self) -> Vec<(String, String)> {
        vec![("ramdisk_bytes".into(), self.0.to_string())]
    }
    fn model(&self, _: &mut Fabric, func: FuncId) -> DResult<Rc<RefCell<dyn Device<Cluster>>>> {
        let tails = [(0, true); QUEUES as usize];
        Ok(Rc::new(RefCell::new(RamDisk { func, data: vec![0; self.0 as usize], moving: HashMap::new(), next: 0, tails })))
    }
    fn probe(&self, os: &mut dyn DynOs, dev: DevId, queues: u16, iodepth: u32) -> DResult<Box<dyn BlockDriver>> {
        assert!(queues <= QUEUES && iodepth <= DEPTH, "the workload checked its jobs against the drive's limits");
        let bar0 = os.pci_iomap(dev, 0).map_err(os_err("pci_iomap"))?;
        os.pci_set_master(dev).map_err(os_err("pci_set_master"))?;
        let mut qs = Vec::new();
        for q in 0..queues {
            let cq = os.dma_alloc_coherent(dev, DEPTH as u64 * 4).map_err(os_err("dma_alloc_coherent"))?;
            os.write(cq.0, &[0; DEPTH as usize * 4]).map_err(os_err("clear completions"))?;
            let regs = bar0 + q as u64 * REGS;
            os.write(regs + CQ, &cq.1.to_le_bytes()).map_err(os_err("write CQ address"))?;
            let (inflight, done) = (HashMap::new(), Vec::new());
            qs.push(Some(RamQueue { dev, q, regs, cq, head: (0, true), next: 0, inflight, done }));
        }
        Ok(Box::new(RamDriver(qs)))
    }
}

/// The b2b testbed with the drive replaced by device `name` as `json` describes it.
pub(crate) fn topology_with(json: &str, name: &str) -> String {
    let b2b = include_str!("../../../devlend-drivers/tests/b2b.json");
    let t = b2b.replace(r#"{"name":"nvme0","profile":"optane-900p"}"#, json).replace(r#""b":"nvme0""#, &format!(r#""b":"{name}""#));
    assert!(t.contains(name) && !t.contains("nvme0"));
    t
}

/// The b2b testbed with the drive replaced by a RAM disk of its profile.
fn topology() -> String {
    topology_with(r#"{"name":"disk0","profile":"test-ramdisk"}"#, "disk0")
}

/// The test's RAM disk: its profile and kind, and its type for kind `ramdisk` (the same
/// registration from every test, so the order they run in does not matter).
fn register() {
    register_profiles(PROFILE).unwrap_or_else(|e| panic!("{e}"));
    registry::register(Registered { kind: "ramdisk", block_io: Some(ramdisk), device_copy: None });
}

#[test]
fn fio_drives_a_test_only_block_device_through_the_registry() {
    register();
    let json = topology();
    for runner in ["lender", "borrower"] {
        let job = Job { rw: Rw::RandWrite, iodepth: 4, numjobs: 2, ios: 50, verify: true, size_blocks: Some(1024) };
        let r = fio(&json, runner, "disk0", job).unwrap_or_else(|e| panic!("{runner}: {e}"));
        assert_eq!((r.ios, r.mismatches), (100, 0), "{runner}");
        assert!(r.verified > 0 && r.lat_mean_ps > 0.0, "{runner}: {r:?}");
    }
}

#[test]
fn a_scenario_runs_fio_on_the_test_only_device_with_its_parameters() {
    register();
    let mut s = Scenario::new(Cluster::from_json(&topology()).unwrap());
    s.add_fio("f", "borrower", "disk0", FioSpec { rw: Rw::RandRead, bs: 4096, iodepth: 8, numjobs: 4, ios: 40 }, 0).unwrap();
    let r = s.run().unwrap();
    assert_eq!(r.workloads[0].fio.as_ref().map(|f| f.ios), Some(160));
    assert!(s.params().iter().any(|(k, v)| k == "disk0.ramdisk_bytes" && *v == CAPACITY.to_string()));
    let f = devlend_fabric::build_json(&topology()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(registry::kind_of(&f, "disk0").as_deref(), Some("ramdisk"));
    let mut deep = Scenario::new(Cluster::from_json(&topology()).unwrap());
    let e = deep.add_fio("f", "borrower", "disk0", FioSpec { rw: Rw::RandRead, bs: 4096, iodepth: 9, numjobs: 1, ios: 1 }, 0).unwrap_err();
    assert!(e.to_string().contains("at most 8 commands"), "{e}");
}

/// The kind's own setting sizes the disk: a job past it is refused naming it, a smaller one runs.
#[test]
fn the_kinds_own_setting_sizes_the_test_only_disk() {
    register();
    let json =
        topology().replace(r#"{"name":"nvme-back-to-back","#, r#"{"name":"nvme-back-to-back","params":{"devices":{"disk0":{"ramdisk_bytes":"256 KiB"}}},"#);
    assert!(json.contains("ramdisk_bytes"));
    let job = Job { rw: Rw::RandWrite, iodepth: 4, numjobs: 1, ios: 20, verify: true, size_blocks: Some(1024) };
    let e = fio(&json, "borrower", "disk0", job).unwrap_err();
    assert!(e.to_string().contains("262144"), "{e}");
    let r = fio(&json, "borrower", "disk0", Job { size_blocks: Some(512), ..job }).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.ios, r.mismatches), (20, 0));
}
