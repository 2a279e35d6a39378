//! D6's training epoch as one run on one machine (000 §7.5): NVMe reads, the CPU's decoding, the
//! host-to-device copies of the input and the GPUs' peer-to-peer gradient exchange overlap as
//! Keras overlaps them.
//!
//! The schedule assumed: 000 §7.5 runs Keras 2.2.4 on TensorFlow 1.x with `multi_gpu_model`
//! (the batch split into one sub-batch per GPU). Its training loop, `fit_generator`, runs the
//! data generator "in parallel to the model ... on CPU in parallel to training your model on
//! GPU" (Keras documentation, `fit_generator`): a `GeneratorEnqueuer` with `workers = 1` thread
//! (the default, `use_multiprocessing = False`) fills a queue of at most `max_queue_size = 10`
//! batches (the default; a full queue blocks the worker's `put`), while the training loop takes
//! one batch per step and runs `train_on_batch`, which returns when the step is done. So:
//!
//! - `keras-enqueuer` (the runner's kernel; for the native remote set-ups, whose disk 000 §7.5
//!   installed locally, the lender's, which holds the modelled drive): per batch, the batch's
//!   image files read with the NVMe driver one request at a time, then the decoding (a timed CPU
//!   cost), then the batch is put in the queue (waiting while it holds `max_queue` batches);
//! - `tf-gpu0`, `tf-gpu1` (the runner's kernel: TensorFlow's per-GPU work): per step, take the
//!   batch (waiting for one), copy the GPU's sub-batch host-to-device with the GPU driver, compute
//!   (a timed device cost the thread waits for), wait for the other GPU, send this GPU's gradients
//!   to the other peer-to-peer (both directions at once), and wait for the other's to arrive:
//!   within a step nothing overlaps (TensorFlow 1.x feeds the inputs before the step and the
//!   update needs every gradient), across steps the next batch's reads and decoding overlap the
//!   step.
//!
//! What the run gives: when each step ended, and how long each part kept its thread busy.
//!
//! Why the epoch drives the GPU and NVMe types directly rather than the service traits
//! (`devlend_drivers::service`) that `fio` and `gpu_copy` use: the gradient exchange is a
//! peer-to-peer copy between two GPUs (`memcpy_peer`), which the copy service has no call for,
//! and its copy engines move no bytes (`Gpu::timing_only`), which a `CopyDevice` cannot ask for;
//! the drive is the controller at a size of its own (`DRIVE_BLOCKS`, which the reads' stride
//! wraps at), where the block-I/O entry gives the profile's capacity. The drive's half alone
//! could move (`probe` with one queue of 63 commands is `NvmeDriver::probe`), not the GPUs'.

use super::error::{guest, setup, stopped, RunCause, VResult, VmRunError};
use devlend_devices::gpu::Gpu;
use devlend_devices::nvme::{Controller, Media, BLOCK};
use devlend_drivers::gpu_driver::Driver as GpuDriver;
use devlend_drivers::gpu_run::{bind, shared};
use devlend_drivers::nvme_driver::Driver as NvmeDriver;
use devlend_engine::machine::{Machine, Thread, ThreadError};
use devlend_host::{Cluster, DevId, Os, ThreadKernel};
use devlend_vm::fixtures::{testbed, Scenario, Testbed};
use devlend_vm::GuestKernel;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// The epoch's workload, per step (from params `[workload.d6]`, computed by `experiments/d6.py`).
#[derive(Clone, Copy, Debug)]
pub struct EpochSpec {
    /// Steps to run on the machine.
    pub steps: u32,
    /// NVMe requests per batch, each of `read_blocks` 512-byte blocks.
    pub reads: u32,
    pub read_blocks: u16,
    /// The enqueuer's CPU time to decode one batch (ps).
    pub decode_ps: u64,
    /// Each GPU's sub-batch of input (bytes).
    pub input_bytes: u64,
    /// Each GPU's compute per step (ps).
    pub compute_ps: u64,
    /// Each GPU's gradients (bytes), sent to the other.
    pub exchange_bytes: u64,
    pub max_queue: u32,
}

/// When each step ended, and each part's busy time summed over the run (ps).
#[derive(Clone, Debug, Default)]
pub struct EpochRun {
    pub step_end_ps: Vec<u64>,
    pub nvme_ps: u64,
    pub cpu_ps: u64,
    pub input_ps: u64,
    pub compute_ps: u64,
    pub exchange_ps: u64,
}

/// Where gradients sit in device memory: sent from `GRADS`, received at `RECV` (inside the
/// peer's 256 MiB BAR 1 with room for VGG19's 80 MB).
const GRADS: u64 = 64 << 20;
const RECV: u64 = 160 << 20;
const DRIVE_BLOCKS: u64 = 1 << 24;

/// The queue and the step barrier the threads share.
#[derive(Default)]
struct Shared {
    produced: Cell<u32>,
    taken: Cell<u32>,
    computed: Cell<u32>,
    exchanged: Cell<u32>,
    run: RefCell<EpochRun>,
}

/// A set-up ready to run: the machine with its devices, and the pieces of each thread.
struct Ready<K: ThreadKernel, N: ThreadKernel> {
    m: Machine<Cluster>,
    gpus: K,
    reader: N,
    drivers: [(GpuDriver, DevId); 2],
    nvme: DevId,
    batch: u64,
    read_buf: u64,
}

fn fail<E: std::error::Error + 'static>(e: E) -> ThreadError {
    ThreadError::other(e)
}

/// Run the epoch's first `spec.steps` steps in set-up `scenario` (NatLoc, NatRem-SW,
/// NatRem-IOMMU with the topology's IOMMU as given; VMLoc, VMRem) on one machine.
pub fn epoch(json: &str, scenario: &str, spec: EpochSpec) -> VResult<EpochRun> {
    if spec.steps == 0 || spec.reads == 0 || spec.max_queue == 0 {
        return Err(VmRunError::Invalid { reason: "steps, reads per batch and the queue's size must be at least 1" });
    }
    match scenario {
        "VMLoc" | "VMRem" => run(in_vm(json, Scenario::parse(scenario).map_err(setup("the scenario"))?, spec)?, spec),
        "NatLoc" => run(native(json, "lender", spec)?, spec),
        "NatRem-SW" | "NatRem-IOMMU" => run(native(json, "remote", spec)?, spec),
        other => Err(VmRunError::UnknownSetup { given: other.to_string(), known: "NatLoc, NatRem-SW, NatRem-IOMMU, VMLoc, VMRem" }),
    }
}

fn controller(c: &mut Cluster) -> VResult<(devlend_fabric::model::FuncId, Rc<RefCell<Controller>>)> {
    let func = c.fabric.func_id("nvme0").map_err(setup("the drive"))?;
    let media = Media::of_device(&c.fabric, "nvme0").map_err(setup("the drive's media"))?;
    Ok((func, Rc::new(RefCell::new(Controller::new(&mut c.fabric, func, DRIVE_BLOCKS, media)))))
}

/// A machine on `c` with the drive's controller and both GPUs as its devices. The epoch asks only
/// when things end, not what the tensors hold: the GPUs' copy engines move no bytes
/// ([`Gpu::timing_only`]; the same flows, timed alike), so the inputs and gradients (hundreds of
/// MB a step) are neither read nor written.
fn machine(mut c: Cluster, gpus: [Gpu; 2]) -> VResult<Machine<Cluster>> {
    let (func, ctrl) = controller(&mut c)?;
    let mut m = Machine::new(c);
    m.add_device(func, ctrl);
    for mut g in gpus {
        g.timing_only = true;
        let g = shared(g);
        let f = g.borrow().func;
        m.add_device(f, g);
    }
    Ok(m)
}

/// Bare metal: `runner` drives both GPUs (borrowed when remote); the lender reads its drive.
fn native(json: &str, runner: &str, spec: EpochSpec) -> VResult<Ready<u16, u16>> {
    let mut c = Cluster::from_json(json).map_err(setup("the cluster"))?;
    let (a, b) = (bind(&mut c, runner, "gpu0").map_err(setup("gpu0"))?, bind(&mut c, runner, "gpu1").map_err(setup("gpu1"))?);
    let nvme = c.os("lender").map_err(setup("the lender"))?.find("nvme0").map_err(setup("the drive"))?;
    let batch = c.os(runner).map_err(setup("the runner"))?.kmalloc(2 * spec.input_bytes).map_err(guest("kmalloc"))?;
    let read_buf = c.os("lender").map_err(setup("the lender"))?.kmalloc(spec.read_blocks as u64 * BLOCK).map_err(guest("kmalloc"))?;
    let (gpus, reader) = (c.fabric.host_id(runner).map_err(setup("the runner"))?, c.fabric.host_id("lender").map_err(setup("the lender"))?);
    let m = machine(c, [a.gpu, b.gpu])?;
    Ok(Ready { m, gpus, reader, drivers: [(a.drv, b.dev), (b.drv, a.dev)], nvme, batch, read_buf })
}

/// In a VM: the testbed's VM with both GPUs, and the drive passed through (VMLoc) or mediated.
fn in_vm(json: &str, sc: Scenario, spec: EpochSpec) -> VResult<Ready<GuestKernel, GuestKernel>> {
    let Testbed { mut c, mut vmm, vm, a, b } = testbed(json, sc).map_err(setup("the VM testbed"))?;
    let nvme = match sc {
        Scenario::VmLoc => vmm.assign_vfio(&mut c, vm, "nvme0").map_err(setup("VFIO pass-through of the drive"))?,
        Scenario::VmRem => {
            vmm.register_mdev(&c, "nvme0").map_err(setup("the mediated drive"))?;
            vmm.assign_mdev(&mut c, vm, "nvme0").map_err(setup("the mediated path of the drive"))?
        }
    };
    let mut os = vmm.guest(&mut c, vm).map_err(guest("the guest kernel"))?;
    let batch = os.kmalloc(2 * spec.input_bytes).map_err(guest("kmalloc"))?;
    let read_buf = os.kmalloc(spec.read_blocks as u64 * BLOCK).map_err(guest("kmalloc"))?;
    let mut m = machine(c, [a.gpu, b.gpu])?;
    let vmm = Rc::new(RefCell::new(vmm));
    devlend_vm::irq_clock::spawn(&mut m, &vmm, vm).map_err(setup("the VM's interrupt path"))?;
    let k = GuestKernel { vmm, vm };
    Ok(Ready { m, gpus: k.clone(), reader: k, drivers: [(a.drv, b.dev), (b.drv, a.dev)], nvme, batch, read_buf })
}

fn run<K: ThreadKernel, N: ThreadKernel>(r: Ready<K, N>, spec: EpochSpec) -> VResult<EpochRun> {
    let Ready { mut m, gpus, reader, drivers, nvme, batch, read_buf } = r;
    let sh = Rc::new(Shared::default());
    let s = sh.clone();
    m.spawn("keras-enqueuer", 0, move |t| enqueuer(t, &reader, &s, nvme, read_buf, spec));
    for (g, (drv, peer)) in drivers.into_iter().enumerate() {
        let (s, k) = (sh.clone(), gpus.clone());
        let buf = batch + g as u64 * spec.input_bytes;
        m.spawn(&format!("tf-gpu{g}"), 0, move |t| trainer(t, &k, &s, (drv, peer, g), buf, spec));
    }
    m.run().map_err(stopped("D6 epoch".into(), RunCause::Machine))?;
    let out = sh.run.borrow().clone();
    Ok(out)
}

/// The `GeneratorEnqueuer`'s worker: read, decode and queue each batch.
fn enqueuer<N: ThreadKernel>(t: &mut Thread<'_, Cluster>, k: &N, sh: &Rc<Shared>, dev: DevId, buf: u64, spec: EpochSpec) -> Result<(), ThreadError> {
    let mut os = k.on(t).map_err(fail)?;
    let mut drv = NvmeDriver::probe(&mut os, dev).map_err(fail)?;
    let span = DRIVE_BLOCKS - spec.read_blocks as u64;
    let mut lba = 0u64;
    for _ in 0..spec.steps {
        let t0 = t.now();
        for _ in 0..spec.reads {
            // The files of a batch lie anywhere on the drive: a fixed stride stands for that.
            lba = (lba + 7_919 * spec.read_blocks as u64) % span;
            drv.read(&mut os, lba, spec.read_blocks, buf).map_err(fail)?;
        }
        let t1 = t.now();
        os.spend(spec.decode_ps);
        let s = sh.clone();
        t.wait_until("room in the batch queue", move |_: &mut Cluster| s.produced.get() - s.taken.get() < spec.max_queue);
        sh.produced.set(sh.produced.get() + 1);
        let mut run = sh.run.borrow_mut();
        run.nvme_ps += t1 - t0;
        run.cpu_ps += spec.decode_ps;
    }
    Ok(())
}

/// Wait until `count` reaches `n`.
fn until(t: &Thread<'_, Cluster>, what: &str, sh: &Rc<Shared>, count: fn(&Shared) -> &Cell<u32>, n: u32) {
    let s = sh.clone();
    t.wait_until(what, move |_: &mut Cluster| count(&s).get() >= n);
}

/// TensorFlow's work on GPU `g` in each step: its sub-batch in, compute, gradients out.
fn trainer<K: ThreadKernel>(
    t: &mut Thread<'_, Cluster>,
    k: &K,
    sh: &Rc<Shared>,
    (mut drv, peer, g): (GpuDriver, DevId, usize),
    buf: u64,
    spec: EpochSpec,
) -> Result<(), ThreadError> {
    let mut os = k.on(t).map_err(fail)?;
    for step in 0..spec.steps {
        until(t, "a batch in the queue", sh, |s| &s.produced, step + 1);
        if g == 0 {
            sh.taken.set(step + 1);
        }
        let t0 = t.now();
        drv.memcpy_htod(&mut os, 0, buf, spec.input_bytes).map_err(fail)?;
        let t1 = t.now();
        os.spend(spec.compute_ps);
        sh.computed.set(sh.computed.get() + 1);
        until(t, "the other GPU's compute", sh, |s| &s.computed, 2 * (step + 1));
        let t2 = t.now();
        drv.memcpy_peer(&mut os, GRADS, peer, RECV, spec.exchange_bytes).map_err(fail)?;
        sh.exchanged.set(sh.exchanged.get() + 1);
        until(t, "the other GPU's gradients", sh, |s| &s.exchanged, 2 * (step + 1));
        let mut run = sh.run.borrow_mut();
        if g == 0 {
            run.input_ps += t1 - t0;
            run.compute_ps += spec.compute_ps;
            run.exchange_ps += t.now() - t2;
            run.step_end_ps.push(t.now());
        }
    }
    Ok(())
}
