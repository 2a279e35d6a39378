//! A second device type that exists only in this test (see `service.rs`): a copy engine, a
//! device with memory (BAR 1) and one DMA engine, its driver, and its device-copy entry, which
//! the `gpu_copy` workload (`Scenario::add_gpu_copy`) drives unchanged, its own code naming no
//! device type. Its kind, `copyengine`, and its profile are registered as the RAM disk's are
//! ([`PROFILE`]).
//!
//! The engine's registers in BAR 0: host DMA address, device offset, length, direction (1: to
//! the device), the DMA address of a word in host RAM the engine writes the copy's sequence
//! number into when done, and a doorbell that takes the sequence number and starts the copy.

use crate::service::topology_with;
use devlend_drivers::error::{DResult, DeviceError};
use devlend_drivers::registry::{self, Registered};
use devlend_drivers::service::copy::{CopyDevice, CopyDriver, CopyType};
use devlend_drivers::service::kernel::DynOs;
use devlend_engine::machine::{Cx, Device, FlowDone};
use devlend_fabric::model::FuncId;
use devlend_fabric::params::register_profiles;
use devlend_fabric::Fabric;
use devlend_host::{Cluster, DevId, DmaDir, HostError};
use devlend_wire::Tlp;
use devlend_workloads::*;
use std::cell::RefCell;
use std::rc::Rc;

const MEM: u64 = 1 << 20;
const HOST: u64 = 0x00;
const OFF: u64 = 0x08;
const LEN: u64 = 0x10;
const TO_DEVICE: u64 = 0x18;
const DONE_AT: u64 = 0x20;
const DOORBELL: u64 = 0x28;
const DATA: u64 = 1;

/// The copy engine's profile and its kind's table, as params/hardware.toml would hold them.
const PROFILE: &str = r#"
[device.test-copyengine]
kind = "copyengine"
class_code = 0x120000
vendor = 0x1af4
device = 0x10f2
max_gen = 3
max_width = 8
bars = [ { index = 0, size = 0x1000, bits = 32, pref = false }, { index = 1, size = 0x100000, bits = 64, pref = true } ]
msix_vectors = 0
source = "devlend-workloads tests/it/service_copy.rs: a copy engine that exists only in this test"

[device_kind.copyengine]
import_classes = ["12"]
source = "devlend-workloads tests/it/service_copy.rs"
"#;

/// The model: its function, and the copy running (sequence number, device offset, to the device).
struct Copier {
    func: FuncId,
    running: Option<(u32, u64, bool)>,
}

fn reg(f: &Fabric, func: FuncId, off: u64, n: usize) -> u64 {
    let mut b = vec![0u8; n];
    if let Some(m) = f.bar_mem(func, 0) {
        m.read(off, &mut b);
    }
    b.iter().rev().fold(0, |a, x| a << 8 | *x as u64)
}

impl Device<Cluster> for Copier {
    fn mmio_write(&mut self, cx: &mut Cx<Cluster>, bar: u8, offset: u64, _: &Tlp) {
        if bar != 0 || offset != DOORBELL || self.running.is_some() {
            return;
        }
        let (func, f) = (self.func, cx.fabric());
        let (host, off, len) = (reg(f, func, HOST, 8), reg(f, func, OFF, 8), reg(f, func, LEN, 8));
        let (to_device, seq) = (reg(f, func, TO_DEVICE, 4) == 1, reg(f, func, DOORBELL, 4) as u32);
        self.running = Some((seq, off, to_device));
        let started = match to_device {
            true => cx.dma_read(host, len, DATA),
            false => {
                let mut b = vec![0u8; len as usize];
                if let Some(m) = cx.fabric().bar_mem(func, 1) {
                    m.read(off, &mut b);
                }
                cx.dma_write(host, b, DATA)
            }
        };
        if started.is_err() {
            self.running = None;
        }
    }

    fn dma_done(&mut self, cx: &mut Cx<Cluster>, done: FlowDone) {
        let Some((seq, off, to_device)) = self.running.take().filter(|_| done.token == DATA && done.fault.is_none()) else { return };
        if to_device {
            let func = self.func;
            cx.fabric().bar_store(func, 1, off, &done.data);
        }
        let at = reg(cx.fabric(), self.func, DONE_AT, 8);
        let _ = cx.dma_write(at, seq.to_le_bytes().to_vec(), 0);
    }
}

struct CopierModel(Rc<RefCell<Copier>>);

impl CopyDevice for CopierModel {
    fn model(&self) -> Rc<RefCell<dyn Device<Cluster>>> {
        self.0.clone()
    }
    fn mem_write(&self, fabric: &mut Fabric, off: u64, data: &[u8]) -> DResult<()> {
        fabric.bar_store(self.0.borrow().func, 1, off, data);
        Ok(())
    }
    fn mem_read(&self, fabric: &Fabric, off: u64, len: usize) -> DResult<Vec<u8>> {
        let mut b = vec![0u8; len];
        if let Some(m) = fabric.bar_mem(self.0.borrow().func, 1) {
            m.read(off, &mut b);
        }
        Ok(b)
    }
}

/// The driver: BAR 0's CPU address, device memory's size, the done word (CPU, DMA), the last
/// sequence number.
struct CopierDriver {
    dev: DevId,
    bar0: u64,
    mem: u64,
    done: (u64, u64),
    seq: u32,
}

fn os_err(what: &'static str) -> impl FnOnce(HostError) -> DeviceError {
    move |error| DeviceError::Host { what, device: "copier".into(), error }
}

fn written(b: &[u8]) -> bool {
    b.iter().any(|x| *x != 0)
}

impl CopierDriver {
    fn copy(&mut self, os: &mut dyn DynOs, off: u64, buf: u64, len: u64, to_device: bool) -> DResult<()> {
        if len == 0 || off.checked_add(len).is_none_or(|e| e > self.mem) {
            return Err(DeviceError::CopySize { len, mem_size: self.mem });
        }
        let dir = if to_device { DmaDir::ToDevice } else { DmaDir::FromDevice };
        let dma = os.dma_map_single(self.dev, buf, len, dir).map_err(os_err("dma_map_single"))?;
        self.seq += 1;
        os.write(self.done.0, &[0; 4]).map_err(os_err("clear done"))?;
        let regs = [dma.to_le_bytes(), off.to_le_bytes(), len.to_le_bytes(), (to_device as u64).to_le_bytes()].concat();
        os.write(self.bar0 + HOST, &regs).map_err(os_err("write registers"))?;
        os.write(self.bar0 + DOORBELL, &self.seq.to_le_bytes()).map_err(os_err("ring doorbell"))?;
        let got = os.poll_for(self.done.0, 4, "copier done", written, 1_000_000_000_000).map_err(os_err("poll"))?;
        os.dma_unmap_single(self.dev, dma, len, dir).map_err(os_err("dma_unmap_single"))?;
        match got {
            Some(b) if b[..4] == self.seq.to_le_bytes() => Ok(()),
            _ => Err(DeviceError::Mismatch { what: format!("copier copy {}: not done in 1 s", self.seq) }),
        }
    }
}

impl CopyDriver for CopierDriver {
    fn mem_size(&self) -> u64 {
        self.mem
    }
    fn copy_dtoh(&mut self, os: &mut dyn DynOs, dev_off: u64, host_buf: u64, len: u64) -> DResult<()> {
        self.copy(os, dev_off, host_buf, len, false)
    }
    fn copy_htod(&mut self, os: &mut dyn DynOs, dev_off: u64, host_buf: u64, len: u64) -> DResult<()> {
        self.copy(os, dev_off, host_buf, len, true)
    }
}

fn model(_: &mut Fabric, func: FuncId) -> DResult<Box<dyn CopyDevice>> {
    Ok(Box::new(CopierModel(Rc::new(RefCell::new(Copier { func, running: None })))))
}

fn probe(os: &mut dyn DynOs, dev: DevId) -> DResult<Box<dyn CopyDriver>> {
    let bar0 = os.pci_iomap(dev, 0).map_err(os_err("pci_iomap"))?;
    let mem = os.pci_resource_len(dev, 1).map_err(os_err("pci_resource_len"))?;
    os.pci_set_master(dev).map_err(os_err("pci_set_master"))?;
    let done = os.dma_alloc_coherent(dev, 4096).map_err(os_err("dma_alloc_coherent"))?;
    os.write(bar0 + DONE_AT, &done.1.to_le_bytes()).map_err(os_err("write DONE_AT"))?;
    Ok(Box::new(CopierDriver { dev, bar0, mem, done, seq: 0 }))
}

/// The copy engine's device-copy entry.
const COPIER: CopyType = CopyType { model, probe };

/// The copy engine's profile and kind, and its type for kind `copyengine`.
fn register() {
    register_profiles(PROFILE).unwrap_or_else(|e| panic!("{e}"));
    registry::register(Registered { kind: "copyengine", block_io: None, device_copy: Some(COPIER) });
}

#[test]
fn gpu_copy_drives_a_test_only_copy_engine_through_the_registry() {
    register();
    let json = topology_with(r#"{"name":"copier0","profile":"test-copyengine"}"#, "copier0");
    assert_eq!(MEM, 0x100000, "the profile's BAR 1");
    for (runner, dir) in [("lender", Dir::HtoD), ("borrower", Dir::HtoD), ("borrower", Dir::DtoH)] {
        let mut s = Scenario::new(Cluster::from_json(&json).unwrap());
        s.add_gpu_copy("c", runner, "copier0", dir, MEM / 2, 0).unwrap();
        let r = s.run().unwrap_or_else(|e| panic!("{runner} {dir:?}: {e}"));
        assert!(r.workloads[0].bandwidth().is_some_and(|b| b > 0.0), "{runner} {dir:?}");
    }
    let mut big = Scenario::new(Cluster::from_json(&json).unwrap());
    let e = big.add_gpu_copy("c", "borrower", "copier0", Dir::HtoD, 2 * MEM, 0).unwrap_err();
    assert!(e.to_string().contains(&MEM.to_string()), "{e}");
}
