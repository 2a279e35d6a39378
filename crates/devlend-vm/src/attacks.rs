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
use crate::error::SetupError;
use crate::fixtures::{self, Scenario, Testbed};
use crate::vm::{Path, VmId};
use crate::vmm::Vmm;
use devlend_devices::error::MResult;
use devlend_devices::gpu::Gpu;
use devlend_fabric::config::{BAR0, CMD_BUS_MASTER, COMMAND, MSIX_CAP};
use devlend_fabric::fabric::Event;
use devlend_fabric::route::Failure;
use devlend_host::{Cluster, HostError, Os};

mod error;
pub use error::{AttackError, CaseError, CaseResult};

/// What one case observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub case: &'static str,
    /// "IOMMU", "mediated parent" or "interrupt remapping" (`msi_attacks`).
    pub blocked_by: &'static str,
    /// The record: the fabric's fault message or the hypervisor's refusal.
    pub record: String,
}

type Case = fn(&str) -> CaseResult<Outcome>;

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
    (
        "msi_from_mediated_gpu_into_a_vm_on_the_lender",
        "a remote VM's mediated GPU writes the MSI of a VM's GPU on the lender",
        crate::msi_attacks::from_mediated_into_lender_vm,
    ),
];

pub fn names() -> Vec<&'static str> {
    CASES.iter().map(|c| c.0).collect()
}

/// Run one case by name.
pub fn run(name: &str, json: &str) -> Result<Outcome, AttackError> {
    match CASES.iter().find(|c| c.0 == name) {
        Some(&(case, _, f)) => f(json).map_err(|error| AttackError::Case { case, error }),
        None => Err(AttackError::UnknownCase { name: name.to_string() }),
    }
}

/// A step of a case that the host layer refused.
pub(crate) fn host(step: &'static str) -> impl Fn(HostError) -> CaseError {
    move |error| CaseError::Host { step, error }
}

/// The data-path failures in the fabric's event log, in order.
pub(crate) fn failures(c: &Cluster) -> Vec<Failure> {
    c.fabric
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Failed(f) => Some(*f),
            _ => None,
        })
        .collect()
}

/// Let the rogue device access `addr` (a store of 64 bytes, or a load of 64 when `read`); it must
/// fail, add exactly one fault to the fabric's log and change no memory.
fn by_iommu(case: &'static str, c: &mut Cluster, gpu: &mut Gpu, addr: u64, read: bool) -> CaseResult<Outcome> {
    let (digest, before) = (c.fabric.memory_digest(), failures(c).len());
    let r: MResult<usize> = if read { gpu.load(&mut c.fabric, addr, 64).map(|d| d.len()) } else { gpu.store(&mut c.fabric, addr, &[0xee; 64]).map(|_| 64) };
    if let Ok(bytes) = r {
        return Err(CaseError::WentThrough { addr, bytes });
    }
    let after = failures(c);
    if after.len() != before + 1 {
        return Err(CaseError::Faults { recorded: after.len() - before });
    }
    if c.fabric.memory_digest() != digest {
        return Err(CaseError::MemoryChanged);
    }
    Ok(Outcome { case, blocked_by: "IOMMU", record: c.fabric.describe_failure(&after[before]) })
}

/// Let a guest config or table access run; it must be refused, recorded by the hypervisor and
/// change no memory, and `unchanged` (a check of the function's state) must still hold.
fn by_parent(
    case: &'static str,
    vmm: &mut Vmm,
    c: &mut Cluster,
    attempt: impl FnOnce(&mut Vmm, &mut Cluster) -> devlend_host::HResult<()>,
    unchanged: impl Fn(&Cluster) -> bool,
) -> CaseResult<Outcome> {
    let (digest, before) = (c.fabric.memory_digest(), vmm.blocked.len());
    if attempt(vmm, c).is_ok() {
        return Err(CaseError::Accepted);
    }
    if vmm.blocked.len() != before + 1 {
        return Err(CaseError::Refusals { recorded: vmm.blocked.len() - before });
    }
    if c.fabric.memory_digest() != digest || !unchanged(c) {
        return Err(CaseError::FunctionChanged);
    }
    let b = &vmm.blocked[before];
    Ok(Outcome { case, blocked_by: "mediated parent", record: format!("{}: {}", b.refusal.what(), b.refusal) })
}

fn remote(json: &str) -> CaseResult<Testbed> {
    Ok(fixtures::testbed(json, Scenario::VmRem)?)
}

fn dma_write_outside(json: &str) -> CaseResult<Outcome> {
    let mut t = remote(json)?;
    let past = fixtures::GUEST_RAM + (64 << 20);
    by_iommu("dma_write_outside_guest_memory", &mut t.c, &mut t.a.gpu, past, false)
}

fn dma_read_outside(json: &str) -> CaseResult<Outcome> {
    let mut t = remote(json)?;
    let at = 8 << 30;
    if t.vmm.vm(t.vm).map_err(host("looking up the VM"))?.translate(at, 64).is_ok() {
        return Err(CaseError::Testbed { what: "8 GiB is an address of the guest" });
    }
    by_iommu("dma_read_outside_guest_memory", &mut t.c, &mut t.a.gpu, at, true)
}

fn dma_into_window(json: &str) -> CaseResult<Outcome> {
    let mut t = remote(json)?;
    let window = t.c.lends().first().ok_or(CaseError::Testbed { what: "nothing lent" })?.window_addr;
    by_iommu("dma_into_the_ntb_window", &mut t.c, &mut t.a.gpu, window, false)
}

fn dma_into_other_vm(json: &str) -> CaseResult<Outcome> {
    let mut c = Cluster::from_json(json).map_err(SetupError::host("building the cluster", ""))?;
    let mut vmm = Vmm::default();
    let a = vmm.create_vm(&mut c, "lender", "a", fixtures::GUEST_RAM).map_err(SetupError::host("creating VM a", ""))?;
    let b = vmm.create_vm(&mut c, "lender", "b", fixtures::GUEST_RAM).map_err(SetupError::host("creating VM b", ""))?;
    let mut gpu = fixtures::bind(&mut c, &mut vmm, a, "gpu0", false)?.gpu;
    let theirs = vmm.vm(b).map_err(host("looking up VM b"))?.pin(32 << 20).ok_or(CaseError::Testbed { what: "VM b has no page at 32 MiB" })?;
    by_iommu("dma_into_another_vm", &mut c, &mut gpu, theirs, false)
}

fn dma_stale(json: &str) -> CaseResult<Outcome> {
    let mut t = remote(json)?;
    let bar1 = t
        .vmm
        .dev(t.vm, t.b.dev)
        .map_err(host("looking up gpu1"))?
        .bars
        .iter()
        .find(|b| b.index == 1)
        .ok_or(CaseError::Testbed { what: "gpu1 has no BAR 1" })?
        .gpa;
    t.vmm.hot_remove(&mut t.c, t.vm, t.b.dev).map_err(host("hot-removing gpu1"))?;
    by_iommu("dma_stale_after_hot_remove", &mut t.c, &mut t.a.gpu, bar1, false)
}

fn phys_bar(c: &Cluster, dev: &str, index: u8) -> u64 {
    c.fabric.func_id(dev).ok().and_then(|f| c.fabric.func(f).bars.iter().find(|b| b.index == index).map(|b| b.addr)).unwrap_or(0)
}

fn bar_relocation(json: &str) -> CaseResult<Outcome> {
    let mut t = remote(json)?;
    let (vm, dev) = (t.vm, t.a.dev);
    let before = phys_bar(&t.c, "gpu0", 1);
    // Point BAR 1 at the lender's low RAM (where the lender's kernel lives).
    let reg = BAR0 + 4;
    by_parent("config_bar_relocation", &mut t.vmm, &mut t.c, |vmm, c| vmm.config_write(c, vm, dev, reg, 4, 0x0100_0000), |c| phys_bar(c, "gpu0", 1) == before)
}

fn msix_redirection(json: &str) -> CaseResult<Outcome> {
    let mut t = remote(json)?;
    let (vm, dev) = (t.vm, t.a.dev);
    let mut os = t.vmm.guest(&mut t.c, vm).map_err(host("entering the guest kernel"))?;
    os.request_irq(dev, 0, 1).map_err(host("request_irq"))?;
    let buf = os.kmalloc(4096).map_err(host("kmalloc"))?;
    let d = t.vmm.dev(vm, dev).map_err(host("looking up gpu0"))?;
    let cap = d.virt.msix.ok_or(CaseError::Testbed { what: "gpu0 has no MSI-X" })?;
    let slot = d.bars.iter().find(|b| b.index == cap.bir).ok_or(CaseError::Testbed { what: "no table BAR" })?.gpa + cap.offset;
    let table = |c: &Cluster| c.kernel("lender").map(|k| k.irqs().iter().count() == 1).unwrap_or(false);
    let out = by_parent("config_msix_table_redirection", &mut t.vmm, &mut t.c, |vmm, c| vmm.guest(c, vm)?.write(slot, &(buf as u32).to_le_bytes()), table)?;
    // The guest's entry still holds its MSI address: its interrupts keep working.
    match t.vmm.dev(vm, dev).map_err(host("looking up gpu0"))?.virt.table.first() {
        Some(e) if e.addr == GUEST_MSI.0 => Ok(out),
        e => Err(CaseError::EntryChanged { entry: e.copied() }),
    }
}

fn msix_table_move(json: &str) -> CaseResult<Outcome> {
    let mut t = remote(json)?;
    let (vm, dev) = (t.vm, t.a.dev);
    let func = t.c.fabric.func_id("gpu0").map_err(|error| CaseError::Fabric { step: "looking up gpu0", error })?;
    let before = t.c.fabric.config_read(func, MSIX_CAP + 4, 4).map_err(|error| CaseError::Fabric { step: "reading the MSI-X table offset", error })?;
    by_parent(
        "config_msix_table_move",
        &mut t.vmm,
        &mut t.c,
        |vmm, c| vmm.config_write(c, vm, dev, MSIX_CAP + 4, 4, 0x10_0000),
        |c| c.fabric.config_read(func, MSIX_CAP + 4, 4).ok() == Some(before),
    )
}

fn bus_master_other(json: &str) -> CaseResult<Outcome> {
    let mut c = Cluster::from_json(json).map_err(SetupError::host("building the cluster", ""))?;
    let mut vmm = Vmm::default();
    let vm: VmId = vmm.create_vm(&mut c, "remote", "g", fixtures::GUEST_RAM).map_err(SetupError::host("creating the VM", ""))?;
    vmm.register_mdev(&c, "gpu0").map_err(SetupError::host("registering with the mediated parent", "gpu0"))?;
    let dev = vmm.assign_mdev(&mut c, vm, "gpu0").map_err(SetupError::host("assigning through the mediated parent", "gpu0"))?;
    vmm.config_write(&mut c, vm, dev, COMMAND, 2, CMD_BUS_MASTER as u32).map_err(host("enabling bus mastering"))?;
    // gpu1, passed through to nobody: the guest addresses it by its real BDF, and by the guest
    // BDF next to its own device.
    let other = c.fabric.func_id("gpu1").map_err(|error| CaseError::Fabric { step: "looking up gpu1", error })?;
    let bdf = c.fabric.func(other).bdf;
    let off = |c: &Cluster| !c.fabric.config_state(other).bus_master();
    let out = by_parent(
        "config_bus_master_of_another_function",
        &mut vmm,
        &mut c,
        |vmm, c| vmm.config_write_bdf(c, vm, bdf, COMMAND, 2, CMD_BUS_MASTER as u32),
        off,
    )?;
    let next = guest_bdf(devlend_host::DevId(dev.0 + 1));
    by_parent("config_bus_master_of_another_function", &mut vmm, &mut c, |vmm, c| vmm.config_write_bdf(c, vm, next, COMMAND, 2, CMD_BUS_MASTER as u32), off)?;
    Ok(out)
}

/// A GPU of `vm` probed by the guest's driver (`path` as it reaches the VM); the rogue's tool.
pub(crate) fn guest_gpu(c: &mut Cluster, vmm: &mut Vmm, vm: VmId, name: &str, path: Path) -> CaseResult<Gpu> {
    Ok(fixtures::bind(c, vmm, vm, name, path == Path::Mdev)?.gpu)
}
