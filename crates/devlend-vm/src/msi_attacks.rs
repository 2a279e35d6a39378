//! The attack suite's device-written interrupts (issue 17's audit: "a GPU passed through to VM
//! a raised VM b's interrupt, and a remote VM's mediated GPU raised an interrupt in a VM on the
//! lender"). A rogue guest driver makes its GPU write the message another VM's device holds in
//! its physical MSI-X entry, and the same vector in compatibility format (address 0xFEEx_xxxx,
//! data = vector). The hypervisor's routes use remappable-format entries validated by source ID
//! (`irq`, VT-d §5.1.4), so each write is blocked at the root, recorded as an interrupt
//! remapping fault and raises nothing; the victim's own device still interrupts its VM.

use crate::attacks::{failures, s, Outcome};
use crate::fixtures::GUEST_RAM;
use crate::irq::{device_interrupt, message, Message};
use crate::vm::{Path, VmId};
use crate::vmm::Vmm;
use devlend_devices::gpu::Gpu;
use devlend_devices::gpu_driver::Driver;
use devlend_host::Cluster;

/// A GPU of `vm` probed by the guest's driver (`path` as it reaches the VM); the rogue's tool.
fn guest_gpu(c: &mut Cluster, vmm: &mut Vmm, vm: VmId, name: &str, path: Path) -> Result<Gpu, String> {
    let dev = match path {
        Path::Vfio => vmm.assign_vfio(c, vm, name).map_err(s)?,
        Path::Mdev => {
            vmm.register_mdev(c, name).map_err(s)?;
            vmm.assign_mdev(c, vm, name).map_err(s)?
        }
    };
    let func = c.fabric.func_id(name).map_err(s)?;
    let gpu = Gpu::new(&mut c.fabric, func)?;
    Driver::probe(&mut vmm.guest(c, vm).map_err(s)?, dev).map_err(s)?;
    Ok(gpu)
}

/// The victim: `name` passed through to `vm`, its guest driver's interrupt on MSI-X entry 0.
/// Returns the guest vector.
fn victim(c: &mut Cluster, vmm: &mut Vmm, vm: VmId, name: &str) -> Result<u8, String> {
    guest_gpu(c, vmm, vm, name, Path::Vfio)?;
    let dev = vmm.vm(vm).map_err(s)?.devices.values().find(|d| d.name == name).map(|d| d.id).ok_or("the victim's device vanished")?;
    vmm.guest(c, vm).map_err(s)?.request_irq(dev, 0, 1).map_err(s)
}

fn guest_count(c: &mut Cluster, vmm: &mut Vmm, vm: VmId, gv: u8) -> Result<u64, String> {
    vmm.run_irqs(c);
    Ok(vmm.guest(c, vm).map_err(s)?.irq_count(gv))
}

/// One forged write by `rogue`: blocked, one interrupt remapping fault, no memory changed, and
/// the victim's guest saw nothing. Returns the fault's message.
fn forge(case: &str, c: &mut Cluster, vmm: &mut Vmm, rogue: &mut Gpu, (addr, data): (u64, u32), (vm, gv): (VmId, u8)) -> Result<String, String> {
    let (digest, before, seen) = (c.fabric.memory_digest(), failures(c).len(), guest_count(c, vmm, vm, gv)?);
    if rogue.store(&mut c.fabric, addr, &data.to_le_bytes()).is_ok() {
        return Err(format!("{case}: the message write to {addr:#x} went through"));
    }
    let after = failures(c);
    if after.len() != before + 1 || !after[before].contains("interrupt remapping fault") {
        return Err(format!("{case}: expected one interrupt remapping fault, got {:?}", &after[before..]));
    }
    if c.fabric.memory_digest() != digest {
        return Err(format!("{case}: memory changed"));
    }
    if guest_count(c, vmm, vm, gv)? != seen {
        return Err(format!("{case}: the victim VM took the forged interrupt"));
    }
    Ok(after[before].clone())
}

/// Forge the victim device's current message and its vector in compatibility format; then the
/// victim's own device interrupts, and its VM takes that one.
fn attack(case: &'static str, mut c: Cluster, mut vmm: Vmm, mut rogue: Gpu, victim_dev: &str, (vm, gv): (VmId, u8)) -> Result<Outcome, String> {
    let func = c.fabric.func_id(victim_dev).map_err(s)?;
    let Message::Msi { addr, data } = message(&c, func, 0).map_err(s)? else { return Err(format!("{victim_dev}'s MSI-X entry 0 is not live")) };
    let host = c.fabric.func_host(func);
    let vector = c.kernel(host).map_err(s)?.irqs().iter().find(|d| d.msg_addr == addr).map(|d| d.vector).ok_or("the victim's host vector is not found")?;
    let record = forge(case, &mut c, &mut vmm, &mut rogue, (addr, data), (vm, gv))?;
    let page = c.fabric.hosts[host as usize].msi.start;
    forge(case, &mut c, &mut vmm, &mut rogue, (page, vector as u32), (vm, gv))?;
    let seen = guest_count(&mut c, &mut vmm, vm, gv)?;
    device_interrupt(&mut c, victim_dev, 0).map_err(s)?;
    if guest_count(&mut c, &mut vmm, vm, gv)? != seen + 1 {
        return Err(format!("{case}: {victim_dev}'s own interrupt did not reach its VM"));
    }
    Ok(Outcome { case, blocked_by: "interrupt remapping", record })
}

/// gpu0 passed through to VM a on the lender writes the interrupt of gpu1, passed through to VM b.
pub(crate) fn into_another_vm(json: &str) -> Result<Outcome, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let mut vmm = Vmm::default();
    let a = vmm.create_vm(&mut c, "lender", "a", GUEST_RAM).map_err(s)?;
    let b = vmm.create_vm(&mut c, "lender", "b", GUEST_RAM).map_err(s)?;
    let rogue = guest_gpu(&mut c, &mut vmm, a, "gpu0", Path::Vfio)?;
    let gv = victim(&mut c, &mut vmm, b, "gpu1")?;
    attack("msi_from_passthrough_gpu_into_another_vm", c, vmm, rogue, "gpu1", (b, gv))
}

/// gpu0, lent through the mediated path to a VM on the remote host, writes the interrupt of
/// gpu1, passed through to a VM on the lender.
pub(crate) fn from_mediated_into_lender_vm(json: &str) -> Result<Outcome, String> {
    let mut c = Cluster::from_json(json).map_err(s)?;
    let mut vmm = Vmm::default();
    let r = vmm.create_vm(&mut c, "remote", "r", GUEST_RAM).map_err(s)?;
    let l = vmm.create_vm(&mut c, "lender", "l", GUEST_RAM).map_err(s)?;
    let rogue = guest_gpu(&mut c, &mut vmm, r, "gpu0", Path::Mdev)?;
    let gv = victim(&mut c, &mut vmm, l, "gpu1")?;
    attack("msi_from_mediated_gpu_into_a_vm_on_the_lender", c, vmm, rogue, "gpu1", (l, gv))
}
