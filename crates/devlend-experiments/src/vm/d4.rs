//! D4 (000 §7.3, Table 2, Figs 15-18): two GPUs of the expansion chassis passed through to a VM,
//! run by the unmodified GPU driver in the guest kernel, on `devlend_vm::fixtures`' testbed
//! (VMLoc: VFIO on the lender; VMRem: the mediated path on the remote host). A transfer is
//! peer-to-peer (the source's copy engine writes the target's BAR 1 at its guest-physical
//! address) or bounced through a buffer in guest RAM, staged in chunks as D2 is (`gpu_run::staged`);
//! the ping-pong is gpu_run's kernels, launched by the guest. Each runs on one machine: the GPUs
//! as actors, the guest kernel as a thread (`timed::GuestThreadOs`), as D1-D3 run natively.
//! The testbed's stated assumptions are in `devlend_vm::fixtures`. Guest CPU accesses cost what the host CPU's do (no EPT-walk or VM-exit cost is modelled).

use super::error::{guest, setup, stopped, RunCause, VResult, VmRunError};
use devlend_devices::gpu::Gpu;
use devlend_drivers::gpu_run::{fits, kernel_round_trip, launch, pattern, shared, staged, staging_chunk, timing, CopyTiming, Via};
use devlend_fabric::Requester;
use devlend_host::{Cluster, Os};
use devlend_vm::fixtures::{testbed, Scenario, Testbed};
use devlend_vm::irq::Src;
use devlend_vm::irq_clock::{Raiser, RAISE};
use devlend_vm::timed::{on_machine, Actor};
use devlend_vm::RunError;
use devlend_wire::Access;
use std::cell::RefCell;
use std::rc::Rc;

/// A run on the machine that failed, in set-up `sc`.
fn ran(sc: Scenario, what: &str) -> impl FnOnce(RunError) -> VmRunError + '_ {
    stopped(format!("VM {sc:?} ({what})"), RunCause::Guest)
}

fn actors(gpus: &[&Rc<RefCell<Gpu>>]) -> Vec<Actor> {
    gpus.iter().map(|g| (g.borrow().func, (*g).clone() as Rc<RefCell<dyn devlend_engine::machine::Device<Cluster>>>)).collect()
}

/// One GPU-to-GPU transfer of `len` bytes in the VM, checked at the target: the time the guest's
/// program took, from its first register store to seeing the last semaphore.
pub fn gpu_to_gpu(json: &str, sc: Scenario, via: Via, len: u64) -> VResult<CopyTiming> {
    let Testbed { mut c, mut vmm, vm, a, b } = testbed(json, sc).map_err(setup("the VM testbed"))?;
    fits(len, &a)?;
    fits(len, &b)?;
    let chunk = staging_chunk()?.min(len);
    let want = pattern(3, len);
    a.gpu.mem_write(&mut c.fabric, 0, &want)?;
    let stage = match via {
        Via::Peer => 0,
        Via::Ram => vmm.guest(&mut c, vm).map_err(guest("the guest kernel"))?.kmalloc(2 * chunk).map_err(guest("kmalloc"))?,
    };
    let (ga, gb) = (shared(a.gpu), shared(b.gpu));
    let (mut da, mut db, bdev) = (a.drv, b.drv, b.dev);
    let (m, _, ps) = on_machine(c, vmm, vm, actors(&[&ga, &gb]), move |os| match via {
        Via::Peer => da.memcpy_peer(os, 0, bdev, 0, len),
        Via::Ram => staged(os, &mut da, &mut db, stage, chunk, len),
    })
    .map_err(ran(sc, &format!("{via:?}")))?;
    if gb.borrow().mem_read(&m.world().fabric, 0, len as usize)? != want {
        return Err(VmRunError::Mismatch { scenario: format!("VM {sc:?} ({via:?})"), what: "the target's memory differs from what the source sent".into() });
    }
    Ok(timing(len, ps))
}

/// One ping-pong round trip in the VM, in ps: gpu_run's kernels, launched by the guest's driver
/// through the GPUs' BAR 0 at its guest-physical addresses, counters at the addresses the guest
/// mapped for them (the peer's BAR 1, or one guest buffer).
pub fn pingpong(json: &str, sc: Scenario, via: Via) -> VResult<u64> {
    let Testbed { mut c, mut vmm, vm, mut a, mut b } = testbed(json, sc).map_err(setup("the VM testbed"))?;
    let mut os = vmm.guest(&mut c, vm).map_err(guest("the guest kernel"))?;
    let (at_a, at_b) = match via {
        Via::Peer => (a.drv.map_peer(&mut os, b.dev, 0, 4)?, b.drv.map_peer(&mut os, a.dev, 0, 4)?),
        Via::Ram => {
            let buf = os.kmalloc(4).map_err(guest("kmalloc"))?;
            (a.drv.map_host(&mut os, buf, 4)?, b.drv.map_host(&mut os, buf, 4)?)
        }
    };
    let (bar_a, bar_b) = (os.pci_iomap(a.dev, 0).map_err(guest("pci_iomap"))?, os.pci_iomap(b.dev, 0).map_err(guest("pci_iomap"))?);
    let (poll_a, poll_b) = if via == Via::Ram { (at_a.dma, at_b.dma) } else { (0, 0) };
    let (pa, pb) = (shared(a.gpu), shared(b.gpu));
    on_machine(c, vmm, vm, actors(&[&pa, &pb]), move |os| {
        launch(os, bar_b, at_b.dma, poll_b, false)?;
        launch(os, bar_a, at_a.dma, poll_a, true)
    })
    .map_err(ran(sc, &format!("ping-pong, {via:?}")))?;
    kernel_round_trip(("gpu0", &pa), ("gpu1", &pb)).map_err(stopped(format!("VM {sc:?} ping-pong"), RunCause::Device))
}

/// The RAM-bounce data path in the VM as the fabric routes it: gpu0's write into a guest buffer
/// and the completion of gpu1's read of it: (hops, root complexes, NTB crossings) (000 Fig 17).
pub fn ram_bounce_path(json: &str, sc: Scenario) -> VResult<(usize, usize, usize)> {
    let mut t = testbed(json, sc).map_err(setup("the VM testbed"))?;
    let buf = t.vmm.guest(&mut t.c, t.vm).map_err(guest("the guest kernel"))?.kmalloc(4096).map_err(guest("kmalloc"))?;
    let (ga, gb) = (t.c.fabric.func_id("gpu0").map_err(setup("gpu0"))?, t.c.fabric.func_id("gpu1").map_err(setup("gpu1"))?);
    let w = t.c.fabric.route(Requester::Func(ga), buf, Access::Write);
    let r = t.c.fabric.route(Requester::Func(gb), buf, Access::Read);
    let undelivered = |what: &str| VmRunError::Mismatch { scenario: format!("VM {sc:?}"), what: format!("{what} was not delivered") };
    let back = r.completion.as_deref().ok_or_else(|| undelivered("gpu1's read of the guest buffer"))?;
    if w.delivered().is_none() {
        return Err(undelivered("gpu0's write into the guest buffer"));
    }
    Ok((w.hop_count() + back.hop_count(), w.roots() + back.roots(), w.ntb_crossings() + back.ntb_crossings()))
}

/// One interrupt of gpu0 in the D4 testbed's VM (MSI-X entry `e`, or INTx with MSI-X off),
/// raised by the device and taken by the guest's handler, on an idle machine: the device's
/// message and the chain of `irq_clock`. The latency, step by step (ps).
pub fn irq_latency(json: &str, sc: Scenario, src: Src) -> VResult<Vec<(String, u64)>> {
    let Testbed { mut c, mut vmm, vm, a, .. } = testbed(json, sc).map_err(setup("the VM testbed"))?;
    let mut os = vmm.guest(&mut c, vm).map_err(guest("the guest kernel"))?;
    let (gv, entry) = match src {
        Src::Msix(e) => (os.request_irq(a.dev, e, 1).map_err(guest("request_irq"))?, e),
        Src::Intx => (os.request_intx(a.dev, 1).map_err(guest("request_intx"))?, 0),
    };
    let bar0 = os.pci_iomap(a.dev, 0).map_err(guest("pci_iomap"))?;
    let raiser = Rc::new(RefCell::new(Raiser::new(entry)));
    let func = a.gpu.func;
    let (_m, vmm, _) = on_machine(c, vmm, vm, vec![(func, raiser.clone())], move |os| {
        os.write(bar0 + RAISE, &1u32.to_le_bytes())?;
        os.wait_irq(gv, 0).map(|_| ())
    })
    .map_err(ran(sc, "interrupt"))?;
    let vmm = vmm.borrow();
    let none = || VmRunError::NoInterrupt { scenario: format!("VM {sc:?}") };
    let r = vmm.irq_route(vm, a.dev, src).ok_or_else(none)?;
    let (sent, landed) = (raiser.borrow().sent.first().copied().ok_or_else(none)?, r.landed_ps.ok_or_else(none)?);
    let what = if src == Src::Intx { "Assert_INTx, device to root" } else { "MSI-X message, device to root" };
    let mut steps = vec![(what.to_string(), landed - sent)];
    steps.extend(r.steps.iter().cloned());
    Ok(steps)
}
