//! The attack suite's device-written interrupts (issue 17's audit: "a GPU passed through to VM
//! a raised VM b's interrupt, and a remote VM's mediated GPU raised an interrupt in a VM on the
//! lender"). A rogue guest driver makes its GPU write the message another VM's device holds in
//! its physical MSI-X entry, and the same vector in compatibility format (address 0xFEEx_xxxx,
//! data = vector). The hypervisor's routes use remappable-format entries validated by source ID
//! (`irq`, VT-d §5.1.4), so each write is blocked at the root, recorded as an interrupt
//! remapping fault and raises nothing; the victim's own device still interrupts its VM, on the
//! machine through the VM's interrupt path (`irq_clock`).

use crate::attacks::{failures, guest_gpu, host, CaseError, CaseResult, Outcome};
use crate::error::RunError;
use crate::error::SetupError;
use crate::fixtures::GUEST_RAM;
use crate::irq::{message, Message};
use crate::timed::raise_once;
use crate::vm::{Path, VmId};
use crate::vmm::Vmm;
use devlend_devices::gpu::Gpu;
use devlend_engine::machine::MachineError;
use devlend_fabric::model::HostId;
use devlend_fabric::route::Failure;
use devlend_host::Cluster;

/// The victim: `name` passed through to `vm`, its guest driver's interrupt on MSI-X entry 0.
/// Returns the guest vector.
fn victim(c: &mut Cluster, vmm: &mut Vmm, vm: VmId, name: &str) -> CaseResult<u8> {
    guest_gpu(c, vmm, vm, name, Path::Vfio)?;
    let dev = vmm
        .vm(vm)
        .map_err(host("looking up the victim's VM"))?
        .devices
        .values()
        .find(|d| d.name == name)
        .map(|d| d.id)
        .ok_or(CaseError::Testbed { what: "the victim's device vanished" })?;
    vmm.guest(c, vm).map_err(host("entering the victim's guest kernel"))?.request_irq(dev, 0, 1).map_err(host("request_irq"))
}

/// Interrupts host `host` took on `vector`.
fn host_count(c: &mut Cluster, h: HostId, vector: u8) -> CaseResult<u64> {
    Ok(c.os(h).map_err(host("the victim host's kernel"))?.irq_count(vector))
}

/// One forged write by `rogue`: blocked, one interrupt remapping fault, no memory changed, and
/// the victim's host took nothing on its vector (so nothing can reach the victim's guest).
/// Returns the fault's description.
fn forge(c: &mut Cluster, rogue: &mut Gpu, (addr, data): (u64, u32), (host, vector): (HostId, u8)) -> CaseResult<String> {
    let (digest, before, seen) = (c.fabric.memory_digest(), failures(c).len(), host_count(c, host, vector)?);
    if rogue.store(&mut c.fabric, addr, &data.to_le_bytes()).is_ok() {
        return Err(CaseError::WentThrough { addr, bytes: 4 });
    }
    let after = failures(c);
    if after.len() != before + 1 || !matches!(after[before], Failure::Interrupt { .. }) {
        return Err(CaseError::NotRemapped { got: after[before..].to_vec() });
    }
    if c.fabric.memory_digest() != digest {
        return Err(CaseError::MemoryChanged);
    }
    if host_count(c, host, vector)? != seen {
        return Err(CaseError::VictimInterrupted);
    }
    Ok(c.fabric.describe_failure(&after[before]))
}

/// On the machine: the victim device interrupts once and its VM's guest waits for it
/// (`timed::raise_once`). A wait that never ends: the interrupt was lost.
fn own_interrupt(c: Cluster, vmm: Vmm, (vm, gv): (VmId, u8), device: &str) -> CaseResult<()> {
    let func = c.fabric.func_id(device).map_err(|error| CaseError::Fabric { step: "looking up the victim device", error })?;
    let dev = vmm.vm(vm).map_err(host("looking up the victim's VM"))?.devices.values().find(|d| d.func == func).map(|d| d.id);
    let dev = dev.ok_or(CaseError::Testbed { what: "the victim's device vanished" })?;
    match raise_once(c, vmm, vm, dev, gv) {
        Ok(_) => Ok(()),
        Err(RunError::Machine(MachineError::Stuck { .. })) => Err(CaseError::OwnInterruptLost { device: device.to_string() }),
        Err(e) => Err(CaseError::Run { step: "raising the victim device's interrupt", error: Box::new(e) }),
    }
}

/// Forge the victim device's current message and its vector in compatibility format; then the
/// victim's own device interrupts, and its VM takes that one.
fn attack(case: &'static str, mut c: Cluster, vmm: Vmm, mut rogue: Gpu, victim_dev: &str, (vm, gv): (VmId, u8)) -> CaseResult<Outcome> {
    let func = c.fabric.func_id(victim_dev).map_err(|error| CaseError::Fabric { step: "looking up the victim device", error })?;
    let Message::Msi { addr, data } = message(&c, func, 0).map_err(host("reading the victim's MSI-X entry"))? else {
        return Err(CaseError::NotLive { device: victim_dev.to_string() });
    };
    let host_id = c.fabric.func_host(func);
    let kernel = c.kernel(host_id).map_err(host("the victim host's kernel"))?;
    let vector =
        kernel.irqs().iter().find(|d| d.msg_addr == addr).map(|d| d.vector).ok_or(CaseError::Testbed { what: "the victim's host vector is not found" })?;
    let record = forge(&mut c, &mut rogue, (addr, data), (host_id, vector))?;
    let page = c.fabric.host(host_id).msi.start;
    forge(&mut c, &mut rogue, (page, vector as u32), (host_id, vector))?;
    own_interrupt(c, vmm, (vm, gv), victim_dev)?;
    Ok(Outcome { case, blocked_by: "interrupt remapping", record })
}

/// A cluster with two VMs, `(host, name)` each.
fn two_vms(json: &str, a: (&str, &str), b: (&str, &str)) -> CaseResult<(Cluster, Vmm, VmId, VmId)> {
    let mut c = Cluster::from_json(json).map_err(SetupError::host("building the cluster", ""))?;
    let mut vmm = Vmm::default();
    let x = vmm.create_vm(&mut c, a.0, a.1, GUEST_RAM).map_err(SetupError::host("creating the rogue's VM", ""))?;
    let y = vmm.create_vm(&mut c, b.0, b.1, GUEST_RAM).map_err(SetupError::host("creating the victim's VM", ""))?;
    Ok((c, vmm, x, y))
}

/// gpu0 passed through to VM a on the lender writes the interrupt of gpu1, passed through to VM b.
pub(crate) fn into_another_vm(json: &str) -> CaseResult<Outcome> {
    let (mut c, mut vmm, a, b) = two_vms(json, ("lender", "a"), ("lender", "b"))?;
    let rogue = guest_gpu(&mut c, &mut vmm, a, "gpu0", Path::Vfio)?;
    let gv = victim(&mut c, &mut vmm, b, "gpu1")?;
    attack("msi_from_passthrough_gpu_into_another_vm", c, vmm, rogue, "gpu1", (b, gv))
}

/// gpu0, lent through the mediated path to a VM on the remote host, writes the interrupt of
/// gpu1, passed through to a VM on the lender.
pub(crate) fn from_mediated_into_lender_vm(json: &str) -> CaseResult<Outcome> {
    let (mut c, mut vmm, r, l) = two_vms(json, ("remote", "r"), ("lender", "l"))?;
    let rogue = guest_gpu(&mut c, &mut vmm, r, "gpu0", Path::Mdev)?;
    let gv = victim(&mut c, &mut vmm, l, "gpu1")?;
    attack("msi_from_mediated_gpu_into_a_vm_on_the_lender", c, vmm, rogue, "gpu1", (l, gv))
}
