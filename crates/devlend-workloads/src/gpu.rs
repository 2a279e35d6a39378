//! A bandwidthTest-style copy: the runner's driver thread does one cudaMemcpy host<->device with
//! the device's real driver on its model, the device borrowed when it sits in another host. The
//! bytes are checked after the run. It is written against the device-copy service
//! (`devlend_drivers::service::copy`): the device is whatever type the registry says serves
//! copies (`registry::device_copy` of its kind: a GPU, its driver `gpu_driver` and its copy
//! engine in `devlend_devices::gpu`).

use crate::attach::{attach, check_kind, with_os, Guests, Runner};
use crate::error::{BadSpec, FailCause, WResult, WorkloadError};
use devlend_drivers::registry::{self, Serves};
use devlend_drivers::service::copy::{CopyDevice, CopyDriver, CopyType, Dir};
use devlend_engine::machine::{Machine, ThreadError};
use devlend_engine::queue::Ps;
use devlend_host::{Cluster, Os, ThreadKernel};

/// A copy started on the machine, and what to check when it has run.
pub(crate) struct GpuCopy {
    pub thread: usize,
    gpu: Box<dyn CopyDevice>,
    runner: Runner,
    buf: u64,
    dir: Dir,
    len: u64,
}

/// The source and the check go through the copy this many bytes at a time, so that no whole
/// copy of the payload is held beside the source and destination memories.
const CHUNK: u64 = 16 << 20;

/// Bytes `start..start + len` of the copy's pattern (a function of the offset alone).
fn pattern(start: u64, len: u64) -> Vec<u8> {
    (start..start + len).map(|i| (i as u8).wrapping_mul(29).wrapping_add((i >> 12) as u8).wrapping_add(5)).collect()
}

/// The copy's extent in chunks: (offset, length).
fn chunks(len: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..len).step_by(CHUNK as usize).map(move |off| (off, CHUNK.min(len - off)))
}

/// Simulated memory a copy of `len` bytes holds: the GPU's memory and the runner's buffer each
/// hold the copy.
pub fn copy_memory(len: u64) -> u64 {
    len.saturating_mul(2)
}

/// The driver's probe, the copy's size checked against the GPU's memory and the run's
/// simulated-memory budget (`held` of `budget` bytes taken; `limits.memory_bytes`) before
/// anything is allocated, and the runner's buffer (holding the source for a host-to-device copy).
fn prepare<O: Os>(
    os: &mut O,
    w: &str,
    (ty, dev, window): (CopyType, devlend_host::DevId, Option<(u64, &str)>),
    (dir, len): (Dir, u64),
    (held, budget): (u64, u64),
) -> WResult<(Box<dyn CopyDriver>, u64)> {
    let drv = (ty.probe)(os, dev).map_err(WorkloadError::setup(w))?;
    let mem_size = drv.mem_size();
    if len == 0 || len > mem_size {
        return Err(WorkloadError::invalid(w, BadSpec::CopySize { len, mem_size }));
    }
    if let Some((window, device)) = window.filter(|&(window, _)| len > window) {
        return Err(WorkloadError::invalid(w, BadSpec::DmaWindow { len, window, device: device.into() }));
    }
    if held.saturating_add(copy_memory(len)) > budget {
        return Err(WorkloadError::invalid(w, BadSpec::MemoryBudget { need: copy_memory(len), held, budget }));
    }
    let buf = os.kmalloc(len).map_err(WorkloadError::host_setup(w, "kmalloc"))?;
    if dir == Dir::HtoD {
        for (off, n) in chunks(len) {
            os.write(buf + off, &pattern(off, n)).map_err(WorkloadError::host_setup(w, "writing the source"))?;
        }
    }
    Ok((drv, buf))
}

/// Attach and probe `device` for `runner` (a host or a VM), fill the source, and start the
/// copy's thread at `at`. `memory`: the simulated memory the run's workloads hold already, and
/// its budget. A borrowed GPU maps the runner's buffer whole into its DMA window: a copy larger
/// than the window is refused here, not when the driver's mapping fails.
pub(crate) fn start(
    m: &mut Machine<Cluster>,
    guests: &Guests,
    w: &str,
    (runner, device): (&str, &str),
    (dir, len): (Dir, u64),
    memory: (u64, u64),
    at: Ps,
) -> WResult<GpuCopy> {
    let mut c = m.world();
    let ty = copy_type(&c, w, device)?;
    let a = attach(&mut c, guests, w, runner, device, Serves::DeviceCopy)?;
    let window = c.dma_window_size(a.func).map(|size| (size, device));
    let gpu = (ty.model)(&mut c.fabric, a.func).map_err(WorkloadError::setup(w))?;
    let prepared = with_os!(&a.runner, c, |os| Ok(prepare(os, w, (ty, a.dev, window), (dir, len), memory)));
    let (drv, buf) = prepared.map_err(WorkloadError::host_setup(w, "the runner's kernel"))??;
    if dir == Dir::DtoH {
        for (off, n) in chunks(len) {
            gpu.mem_write(&mut c.fabric, off, &pattern(off, n)).map_err(WorkloadError::setup(w))?;
        }
    }
    drop(c);
    m.add_device(a.func, gpu.model());
    let thread = match &a.runner {
        Runner::Host(h) => spawn(m, w, at, *h, drv, (dir, buf, len)),
        Runner::Vm(g) => spawn(m, w, at, g.clone(), drv, (dir, buf, len)),
    };
    Ok(GpuCopy { thread, gpu, runner: a.runner, buf, dir, len })
}

/// The registry's device-copy entry for `device`'s kind (checked to serve copies first).
fn copy_type(c: &Cluster, w: &str, device: &str) -> WResult<CopyType> {
    check_kind(c, w, device, Serves::DeviceCopy)?;
    registry::device_copy_of(&c.fabric, device).map_err(WorkloadError::setup(w))
}

fn spawn<K: ThreadKernel>(m: &mut Machine<Cluster>, w: &str, at: Ps, k: K, mut drv: Box<dyn CopyDriver>, (dir, buf, len): (Dir, u64, u64)) -> usize {
    m.spawn(w, at, move |t| {
        let mut os = k.on(t).map_err(ThreadError::other)?;
        let r = match dir {
            Dir::DtoH => drv.copy_dtoh(&mut os, 0, buf, len),
            Dir::HtoD => drv.copy_htod(&mut os, 0, buf, len),
        };
        r.map_err(ThreadError::other)
    })
}

impl GpuCopy {
    /// After the run: the destination holds what the source held (read and compared a chunk
    /// at a time).
    pub(crate) fn check(&self, m: &Machine<Cluster>, w: &str) -> WResult<()> {
        let mut c = m.world();
        for (off, n) in chunks(self.len) {
            let got = match self.dir {
                Dir::DtoH => with_os!(&self.runner, c, |os| os.read(self.buf + off, n as usize))
                    .map_err(|error| FailCause::Host { step: "reading the destination", error }),
                Dir::HtoD => self.gpu.mem_read(&c.fabric, off, n as usize).map_err(FailCause::from),
            };
            if got.map_err(WorkloadError::failed(w))? != pattern(off, n) {
                return Err(WorkloadError::Failed { workload: w.into(), cause: FailCause::Mismatch { dir: self.dir, len: self.len } });
            }
        }
        Ok(())
    }
}
