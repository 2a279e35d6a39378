//! The attack suite of the VM issue (000 §8 "Security considerations": the lender's IOMMU
//! "guarantees that the device is only able to access the specific DMA windows to the VM it is
//! assigned to, and the IOMMU on the borrower guarantees that the same windows can only be used
//! to access the VM memory ... It is also not possible for software running in the VM to access
//! memory outside the device memory regions of assigned devices").
//!
//! Each case builds the expansion-chassis testbed (000 Fig 15), lets a rogue guest driver try
//! one thing, and checks that it was blocked (by the IOMMU on the data path, by interrupt
//! remapping for a device's MSI write, `msi_attacks`, or by the hypervisor's config-space
//! virtualization, `config`), recorded (a fault in the fabric's event
//! log, or an entry in `Vmm::blocked`), and changed no memory (the fabric's memory digest before
//! and after the attempt). A case returns `Err` when any of the three does not hold.

use crate::config::{guest_bdf, GUEST_MSI};
use crate::fixtures::{self, Scenario, Testbed};
use crate::vm::VmId;
use crate::vmm::Vmm;
use devlend_devices::gpu::Gpu;
use devlend_devices::gpu_driver::Driver;
use devlend_fabric::config::{BAR0, CMD_BUS_MASTER, COMMAND, MSIX_CAP};
use devlend_fabric::fabric::Event;
use devlend_host::{Cluster, Os};

/// What one case observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub case: &'static str,
    /// "IOMMU", "mediated parent" or "interrupt remapping" (`msi_attacks`).
    pub blocked_by: &'static str,
    /// The record: the fabric's fault message or the hypervisor's refusal.
    pub record: String,
}

type Case = fn(&str) -> Result<Outcome, String>;

/// Every case: (name, what the rogue guest tries, the case).
pub const CASES: &[(&str, &str, Case)] = &[
    ("dma_write_outside_guest_memory", "the device writes a guest-physical address above the guest's RAM", dma_write_outside),
    ("dma_read_outside_guest_memory", "the device reads 8 GiB, host RAM in both hosts but no address of the guest", dma_read_outside),
    ("dma_into_the_ntb_window", "the device writes the raw DMA window address through the NTB", dma_into_window),
    ("dma_into_another_vm", "the device writes the host page behind another VM's RAM", dma_into_other_vm),
    ("dma_stale_after_hot_remove", "the device writes a peer's BAR after the peer was hot-removed", dma_stale),
    ("config_bar_relocation", "the guest moves its device's BAR 1 in config space", bar_relocation),
    ("config_msix_table_redirection", "the guest points an MSI-X entry at its own RAM", msix_redirection),
    ("config_msix_table_move", "the guest rewrites the MSI-X capability's table offset", msix_table_move),
    ("config_bus_master_of_another_function", "the guest sets Bus Master on a function not passed through to it", bus_master_other),
    ("msi_from_passthrough_gpu_into_another_vm", "a GPU passed through to VM a writes the MSI of VM b's GPU", crate::msi_attacks::into_another_vm),
    ("msi_from_mediated_gpu_into_a_vm_on_the_lender", "a remote VM's mediated GPU writes the MSI of a VM's GPU on the lender", crate::msi_attacks::from_mediated_into_lender_vm),
];

pub fn names() -> Vec<&'static str> {
    CASES.iter().map(|c| c.0).collect()
}

/// Run one case by name.
pub fn run(name: &str, json: &str) -> Result<Outcome, String> {
    match CASES.iter().find(|c| c.0 == name) {
        Some(c) => (c.2)(json),
        None => Err(format!("no attack case '{name}' (cases: {})", names().join(", "))),
    }
}

pub(crate) fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

pub(crate) fn failures(c: &Cluster) -> Vec<String> {
    c.fabric.events.iter().filter_map(|e| match e {
        Event::Failed(f) => Some(c.fabric.failure_json(f)["message"].as_str().unwrap_or("").to_string()),
        _ => None,
    }).collect()
}

/// Let `attempt` run; it must fail, add exactly one fault to the fabric's log and change no memory.
fn by_iommu(case: &'static str, c: &mut Cluster, attempt: impl FnOnce(&mut Cluster) -> Result<Vec<u8>, String>) -> Result<Outcome, String> {
    let (digest, before) = (c.fabric.memory_digest(), failures(c).len());
    if let Ok(got) = attempt(c) {
        return Err(format!("{case}: the access went through ({} bytes)", got.len()));
    }
    let after = failures(c);
    if after.len() != before + 1 {
        return Err(format!("{case}: {} faults recorded, expected one", after.len() - before));
    }
    if c.fabric.memory_digest() != digest {
        return Err(format!("{case}: memory changed"));
    }
    Ok(Outcome { case, blocked_by: "IOMMU", record: after[before].clone() })
}

/// Let a guest config or table access run; it must be refused, recorded by the hypervisor and
/// change no memory, and `unchanged` (a check of the function's state) must still hold.
fn by_parent(case: &'static str, vmm: &mut Vmm, c: &mut Cluster, attempt: impl FnOnce(&mut Vmm, &mut Cluster) -> devlend_host::HResult<()>, unchanged: impl Fn(&Cluster) -> bool) -> Result<Outcome, String> {
    let (digest, before) = (c.fabric.memory_digest(), vmm.blocked.len());
    if attempt(vmm, c).is_ok() {
        return Err(format!("{case}: the write was accepted"));
    }
    if vmm.blocked.len() != before + 1 {
        return Err(format!("{case}: {} refusals recorded, expected one", vmm.blocked.len() - before));
    }
    if c.fabric.memory_digest() != digest || !unchanged(c) {
        return Err(format!("{case}: the function or memory changed"));
    }
    let b = &vmm.blocked[before];
    Ok(Outcome { case, blocked_by: "mediated parent", record: format!("{}: {}", b.what, b.detail) })
}

fn remote(json: &str) -> Result<Testbed, String> {
    fixtures::testbed(json, Scenario::VmRem)
}

fn dma_write_outside(json: &str) -> Result<Outcome, String> {
    let mut t = remote(json)?;
    let past = fixtures::GUEST_RAM + (64 << 20);
    by_iommu("dma_write_outside_guest_memory", &mut t.c, |c| t.a.gpu.store(&mut c.fabric, past, &[0xee; 64]).map(|_| vec![0; 64]))
}

fn dma_read_outside(json: &str) -> Result<Outcome, String> {
    let mut t = remote(json)?;
    let at = 8 << 30;
    if t.vmm.vm(t.vm).map_err(s)?.translate(at, 64).is_ok() {
        return Err("8 GiB is an address of the guest".into());
    }
    by_iommu("dma_read_outside_guest_memory", &mut t.c, |c| t.a.gpu.load(&mut c.fabric, at, 64))
}

fn dma_into_window(json: &str) -> Result<Outcome, String> {
    let mut t = remote(json)?;
    let window = t.c.lends().first().ok_or("nothing lent")?.window_addr;
    by_iommu("dma_into_the_ntb_window", &mut t.c, |c| t.a.gpu.store(&mut c.fabric, window, &[0xee; 64]).map(|_| vec![0; 64]))
}

fn dma_into_other_vm(json: &str) -> Result<Outcome, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let mut vmm = Vmm::default();
    let a = vmm.create_vm(&mut c, "lender", "a", fixtures::GUEST_RAM).map_err(s)?;
    let b = vmm.create_vm(&mut c, "lender", "b", fixtures::GUEST_RAM).map_err(s)?;
    let da = vmm.assign_vfio(&mut c, a, "gpu0").map_err(s)?;
    let func = c.fabric.func_id("gpu0").map_err(s)?;
    let mut gpu = Gpu::new(&mut c.fabric, func)?;
    Driver::probe(&mut vmm.guest(&mut c, a).map_err(s)?, da).map_err(s)?;
    let theirs = vmm.vm(b).map_err(s)?.pin(32 << 20).ok_or("VM b has no page at 32 MiB")?;
    by_iommu("dma_into_another_vm", &mut c, |c| gpu.store(&mut c.fabric, theirs, &[0xee; 64]).map(|_| vec![0; 64]))
}

fn dma_stale(json: &str) -> Result<Outcome, String> {
    let mut t = remote(json)?;
    let bar1 = t.vmm.dev(t.vm, t.b.dev).map_err(s)?.bars.iter().find(|b| b.index == 1).ok_or("gpu1 has no BAR 1")?.gpa;
    t.vmm.hot_remove(&mut t.c, t.vm, t.b.dev).map_err(s)?;
    by_iommu("dma_stale_after_hot_remove", &mut t.c, |c| t.a.gpu.store(&mut c.fabric, bar1, &[0xee; 64]).map(|_| vec![0; 64]))
}

fn phys_bar(c: &Cluster, dev: &str, index: u8) -> u64 {
    c.fabric.func_id(dev).ok().and_then(|f| c.fabric.funcs[f as usize].bars.iter().find(|b| b.index == index).map(|b| b.addr)).unwrap_or(0)
}

fn bar_relocation(json: &str) -> Result<Outcome, String> {
    let mut t = remote(json)?;
    let (vm, dev) = (t.vm, t.a.dev);
    let before = phys_bar(&t.c, "gpu0", 1);
    // Point BAR 1 at the lender's low RAM (where the lender's kernel lives).
    let reg = BAR0 + 4;
    by_parent("config_bar_relocation", &mut t.vmm, &mut t.c, |vmm, c| vmm.config_write(c, vm, dev, reg, 4, 0x0100_0000), |c| phys_bar(c, "gpu0", 1) == before)
}

fn msix_redirection(json: &str) -> Result<Outcome, String> {
    let mut t = remote(json)?;
    let (vm, dev) = (t.vm, t.a.dev);
    let mut os = t.vmm.guest(&mut t.c, vm).map_err(s)?;
    os.request_irq(dev, 0, 1).map_err(s)?;
    let buf = os.kmalloc(4096).map_err(s)?;
    let cap = t.vmm.dev(vm, dev).map_err(s)?.virt.msix.ok_or("gpu0 has no MSI-X")?;
    let slot = t.vmm.dev(vm, dev).map_err(s)?.bars.iter().find(|b| b.index == cap.bir).ok_or("no table BAR")?.gpa + cap.offset;
    let table = |c: &Cluster| c.kernel("lender").map(|k| k.irqs().iter().count() == 1).unwrap_or(false);
    let out = by_parent("config_msix_table_redirection", &mut t.vmm, &mut t.c, |vmm, c| vmm.guest(c, vm)?.write(slot, &(buf as u32).to_le_bytes()), table)?;
    // The guest's entry still holds its MSI address: its interrupts keep working.
    match t.vmm.dev(vm, dev).map_err(s)?.virt.table.first() {
        Some(e) if e.addr == GUEST_MSI.0 => Ok(out),
        e => Err(format!("the virtual entry changed: {e:?}")),
    }
}

fn msix_table_move(json: &str) -> Result<Outcome, String> {
    let mut t = remote(json)?;
    let (vm, dev) = (t.vm, t.a.dev);
    let func = t.c.fabric.func_id("gpu0").map_err(s)?;
    let before = t.c.fabric.config_read(func, MSIX_CAP + 4, 4).map_err(s)?;
    by_parent("config_msix_table_move", &mut t.vmm, &mut t.c, |vmm, c| vmm.config_write(c, vm, dev, MSIX_CAP + 4, 4, 0x10_0000), |c| c.fabric.config_read(func, MSIX_CAP + 4, 4).ok() == Some(before))
}

fn bus_master_other(json: &str) -> Result<Outcome, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let mut vmm = Vmm::default();
    let vm: VmId = vmm.create_vm(&mut c, "remote", "g", fixtures::GUEST_RAM).map_err(s)?;
    vmm.register_mdev(&c, "gpu0").map_err(s)?;
    let dev = vmm.assign_mdev(&mut c, vm, "gpu0").map_err(s)?;
    vmm.config_write(&mut c, vm, dev, COMMAND, 2, CMD_BUS_MASTER as u32).map_err(s)?;
    // gpu1, passed through to nobody: the guest addresses it by its real BDF, and by the guest
    // BDF next to its own device.
    let other = c.fabric.func_id("gpu1").map_err(s)?;
    let bdf = c.fabric.funcs[other as usize].bdf;
    let off = |c: &Cluster| !c.fabric.config[other as usize].bus_master();
    let out = by_parent("config_bus_master_of_another_function", &mut vmm, &mut c, |vmm, c| vmm.config_write_bdf(c, vm, bdf, COMMAND, 2, CMD_BUS_MASTER as u32), off)?;
    let next = guest_bdf(devlend_host::DevId(dev.0 + 1));
    by_parent("config_bus_master_of_another_function", &mut vmm, &mut c, |vmm, c| vmm.config_write_bdf(c, vm, next, COMMAND, 2, CMD_BUS_MASTER as u32), off)?;
    Ok(out)
}
