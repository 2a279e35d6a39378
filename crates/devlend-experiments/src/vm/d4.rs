//! D4 (000 §7.3, Table 2, Figs 15-18): two GPUs of the expansion chassis passed through to a VM,
//! run by the unmodified GPU driver in the guest kernel, on `devlend_vm::fixtures`' testbed
//! (VMLoc: VFIO on the lender; VMRem: the mediated path on the remote host). A transfer is
//! peer-to-peer (the source's copy engine writes the target's BAR 1 at its guest-physical
//! address) or bounced through a buffer in guest RAM, staged in chunks as D2 is (`gpu_run::staged`);
//! the ping-pong is gpu_run's kernels, launched by the guest. Each runs on one machine: the GPUs
//! as actors, the guest kernel as a thread (`timed::GuestThreadOs`), as D1-D3 run natively.
//! The testbed's stated assumptions are in `devlend_vm::fixtures`. Guest CPU accesses cost what the host CPU's do (no EPT-walk or VM-exit cost is modelled).

use devlend_vm::fixtures::{testbed, Scenario, Testbed};
use devlend_vm::irq::Src;
use devlend_vm::irq_clock::{Raiser, RAISE};
use devlend_vm::timed::{on_machine, Actor};
use devlend_devices::gpu::Gpu;
use devlend_devices::gpu_run::{fits, kernel_round_trip, launch, pattern, shared, staged, staging_chunk, timing, CopyTiming, Via};
use devlend_fabric::Requester;
use devlend_host::{Cluster, Os};
use std::cell::RefCell;
use std::rc::Rc;
use devlend_wire::Access;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn actors(gpus: &[&Rc<RefCell<Gpu>>]) -> Vec<Actor> {
    gpus.iter().map(|g| (g.borrow().func, (*g).clone() as Rc<RefCell<dyn devlend_engine::machine::Device<Cluster>>>)).collect()
}

/// One GPU-to-GPU transfer of `len` bytes in the VM, checked at the target: the time the guest's
/// program took, from its first register store to seeing the last semaphore.
pub fn gpu_to_gpu(json: &str, sc: Scenario, via: Via, len: u64) -> Result<CopyTiming, String> {
    let Testbed { mut c, mut vmm, vm, a, b } = testbed(json, sc)?;
    fits(len, &a)?;
    fits(len, &b)?;
    let chunk = staging_chunk()?.min(len);
    let want = pattern(3, len);
    a.gpu.mem_write(&mut c.fabric, 0, &want)?;
    let stage = match via {
        Via::Peer => 0,
        Via::Ram => vmm.guest(&mut c, vm).map_err(s)?.kmalloc(2 * chunk).map_err(s)?,
    };
    let (ga, gb) = (shared(a.gpu), shared(b.gpu));
    let (mut da, mut db, bdev) = (a.drv, b.drv, b.dev);
    let (m, _, ps) = on_machine(c, vmm, vm, actors(&[&ga, &gb]), move |os| match via {
        Via::Peer => da.memcpy_peer(os, 0, bdev, 0, len).map_err(s),
        Via::Ram => staged(os, &mut da, &mut db, stage, chunk, len).map_err(s),
    })
    .map_err(|e| format!("VM {sc:?} ({via:?}): {e}"))?;
    if gb.borrow().mem_read(&m.world().fabric, 0, len as usize)? != want {
        return Err(format!("VM {sc:?} ({via:?}): the target's memory differs from what the source sent"));
    }
    Ok(timing(len, ps))
}

/// One ping-pong round trip in the VM, in ps: gpu_run's kernels, launched by the guest's driver
/// through the GPUs' BAR 0 at its guest-physical addresses, counters at the addresses the guest
/// mapped for them (the peer's BAR 1, or one guest buffer).
pub fn pingpong(json: &str, sc: Scenario, via: Via) -> Result<u64, String> {
    let Testbed { mut c, mut vmm, vm, mut a, mut b } = testbed(json, sc)?;
    let mut os = vmm.guest(&mut c, vm).map_err(s)?;
    let (at_a, at_b) = match via {
        Via::Peer => (a.drv.map_peer(&mut os, b.dev, 0, 4).map_err(s)?, b.drv.map_peer(&mut os, a.dev, 0, 4).map_err(s)?),
        Via::Ram => {
            let buf = os.kmalloc(4).map_err(s)?;
            (a.drv.map_host(&mut os, buf, 4).map_err(s)?, b.drv.map_host(&mut os, buf, 4).map_err(s)?)
        }
    };
    let (bar_a, bar_b) = (os.pci_iomap(a.dev, 0).map_err(s)?, os.pci_iomap(b.dev, 0).map_err(s)?);
    let (poll_a, poll_b) = if via == Via::Ram { (at_a.dma, at_b.dma) } else { (0, 0) };
    let (pa, pb) = (shared(a.gpu), shared(b.gpu));
    on_machine(c, vmm, vm, actors(&[&pa, &pb]), move |os| {
        launch(os, bar_b, at_b.dma, poll_b, false)?;
        launch(os, bar_a, at_a.dma, poll_a, true)
    })
    .map_err(|e| format!("VM {sc:?} ping-pong ({via:?}): {e}"))?;
    kernel_round_trip(("gpu0", &pa), ("gpu1", &pb))
}

/// The RAM-bounce data path in the VM as the fabric routes it: gpu0's write into a guest buffer
/// and the completion of gpu1's read of it: (hops, root complexes, NTB crossings) (000 Fig 17).
pub fn ram_bounce_path(json: &str, sc: Scenario) -> Result<(usize, usize, usize), String> {
    let mut t = testbed(json, sc)?;
    let buf = t.vmm.guest(&mut t.c, t.vm).map_err(s)?.kmalloc(4096).map_err(s)?;
    let (ga, gb) = (t.c.fabric.func_id("gpu0").map_err(s)?, t.c.fabric.func_id("gpu1").map_err(s)?);
    let w = t.c.fabric.route(Requester::Func(ga), buf, Access::Write);
    let r = t.c.fabric.route(Requester::Func(gb), buf, Access::Read);
    let back = r.completion.as_deref().ok_or("gpu1's read of the guest buffer was not delivered")?;
    if w.delivered().is_none() {
        return Err("gpu0's write into the guest buffer was not delivered".into());
    }
    Ok((w.hop_count() + back.hop_count(), w.roots() + back.roots(), w.ntb_crossings() + back.ntb_crossings()))
}

/// One interrupt of gpu0 in the D4 testbed's VM (MSI-X entry `e` or INTx), raised by the device
/// and taken by the guest's handler: the latency, step by step (ps). MSI-X runs on the machine
/// (the device's message and the chain of `irq_clock`, on an idle machine); INTx, which the
/// engine does not carry, through `Vmm::run_irqs` with its steps timed alone.
pub fn irq_latency(json: &str, sc: Scenario, src: Src) -> Result<Vec<(String, u64)>, String> {
    let Src::Msix(entry) = src else { return irq_latency_intx(json, sc) };
    let Testbed { mut c, mut vmm, vm, a, .. } = testbed(json, sc)?;
    let mut os = vmm.guest(&mut c, vm).map_err(s)?;
    let gv = os.request_irq(a.dev, entry, 1).map_err(s)?;
    let bar0 = os.pci_iomap(a.dev, 0).map_err(s)?;
    let raiser = Rc::new(RefCell::new(Raiser { entry, sent: Vec::new() }));
    let func = a.gpu.func;
    let (_m, vmm, _) = on_machine(c, vmm, vm, vec![(func, raiser.clone())], move |os| {
        os.write(bar0 + RAISE, &1u32.to_le_bytes()).map_err(s)?;
        os.wait_irq(gv, 0).map(|_| ()).map_err(s)
    })?;
    let vmm = vmm.borrow();
    let r = vmm.irq_route(vm, a.dev, src).ok_or("no route")?;
    let (sent, landed) = (raiser.borrow().sent[0], r.landed_ps.ok_or("the interrupt did not reach the guest")?);
    let mut steps = vec![("MSI-X message, device to root".to_string(), landed - sent)];
    steps.extend(r.steps.iter().cloned());
    Ok(steps)
}

fn irq_latency_intx(json: &str, sc: Scenario) -> Result<Vec<(String, u64)>, String> {
    let mut t = testbed(json, sc)?;
    let dev = t.a.dev;
    let gv = t.vmm.guest(&mut t.c, t.vm).map_err(s)?.request_intx(dev, 1).map_err(s)?;
    devlend_vm::irq::device_interrupt(&mut t.c, "gpu0", 0).map_err(s)?;
    if t.vmm.guest(&mut t.c, t.vm).map_err(s)?.irq_count(gv) != 1 {
        return Err("the interrupt did not reach the guest".into());
    }
    t.vmm.irq_route(t.vm, dev, Src::Intx).map(|r| r.steps.clone()).ok_or_else(|| "no route".into())
}
