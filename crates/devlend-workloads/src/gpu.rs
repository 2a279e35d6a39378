//! A bandwidthTest-style copy: the runner's driver thread does one cudaMemcpy host<->device with
//! the real driver (`gpu_driver`) on the GPU actor (`gpu_actor`), its GPU borrowed when it sits
//! in another host. The bytes are checked after the run.

use crate::attach::{attach, with_os, Guests, Runner};
use crate::error::{BadSpec, FailCause, WResult, WorkloadError};
use devlend_devices::gpu::Gpu;
use devlend_devices::gpu_driver::Driver;
use devlend_devices::gpu_run::Dir;
use devlend_engine::machine::{Machine, ThreadError};
use devlend_engine::queue::Ps;
use devlend_host::{Cluster, Os, ThreadKernel};
use std::cell::RefCell;
use std::rc::Rc;

/// A copy started on the machine, and what to check when it has run.
pub(crate) struct GpuCopy {
    pub thread: usize,
    gpu: Rc<RefCell<Gpu>>,
    runner: Runner,
    buf: u64,
    dir: Dir,
    want: Vec<u8>,
}

fn pattern(len: u64) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(29).wrapping_add((i >> 12) as u8).wrapping_add(5)).collect()
}

/// The most bytes one copy may hold in simulated memory (its source pattern, the GPU's memory and
/// the runner's buffer each hold the copy): assumed, so that a run stays within a workstation's
/// RAM; a copy over it is refused before any memory is taken.
pub const COPY_BUDGET: u64 = 1 << 30;

/// The driver's probe, the copy's size checked against the GPU's memory and `COPY_BUDGET` before
/// anything is allocated, and the runner's buffer (holding the source for a host-to-device copy,
/// `want`, filled once the size is accepted).
fn prepare<O: Os>(os: &mut O, w: &str, dev: devlend_host::DevId, (dir, len, want): (Dir, u64, &mut Vec<u8>)) -> WResult<(Driver, u64)> {
    let drv = Driver::probe(os, dev).map_err(WorkloadError::setup(w))?;
    if len == 0 || len > drv.mem_size {
        return Err(WorkloadError::invalid(w, BadSpec::CopySize { len, mem_size: drv.mem_size }));
    }
    if len > COPY_BUDGET {
        return Err(WorkloadError::invalid(w, BadSpec::CopyBudget { len, budget: COPY_BUDGET }));
    }
    let buf = os.kmalloc(len).map_err(WorkloadError::host_setup(w, "kmalloc"))?;
    *want = pattern(len);
    if dir == Dir::HtoD {
        os.write(buf, want).map_err(WorkloadError::host_setup(w, "writing the source"))?;
    }
    Ok((drv, buf))
}

/// Attach and probe `device` for `runner` (a host or a VM), fill the source, and start the
/// copy's thread at `at`.
pub(crate) fn start(m: &mut Machine<Cluster>, guests: &Guests, w: &str, (runner, device): (&str, &str), dir: Dir, len: u64, at: Ps) -> WResult<GpuCopy> {
    let mut c = m.world();
    let a = attach(&mut c, guests, w, runner, device, "gpu")?;
    let gpu = Gpu::new(&mut c.fabric, a.func).map_err(WorkloadError::setup(w))?;
    let mut want = Vec::new();
    let prepared = with_os!(&a.runner, c, |os| Ok(prepare(os, w, a.dev, (dir, len, &mut want))));
    let (drv, buf) = prepared.map_err(WorkloadError::host_setup(w, "the runner's kernel"))??;
    if dir == Dir::DtoH {
        gpu.mem_write(&mut c.fabric, 0, &want).map_err(WorkloadError::setup(w))?;
    }
    drop(c);
    let gpu = Rc::new(RefCell::new(gpu));
    m.add_device(a.func, gpu.clone());
    let thread = match &a.runner {
        Runner::Host(h) => spawn(m, w, at, *h, drv, (dir, buf, len)),
        Runner::Vm(g) => spawn(m, w, at, g.clone(), drv, (dir, buf, len)),
    };
    Ok(GpuCopy { thread, gpu, runner: a.runner, buf, dir, want })
}

fn spawn<K: ThreadKernel>(m: &mut Machine<Cluster>, w: &str, at: Ps, k: K, mut drv: Driver, (dir, buf, len): (Dir, u64, u64)) -> usize {
    m.spawn(w, at, move |t| {
        let mut os = k.on(t).map_err(ThreadError::other)?;
        let r = match dir {
            Dir::DtoH => drv.memcpy_dtoh(&mut os, 0, buf, len),
            Dir::HtoD => drv.memcpy_htod(&mut os, 0, buf, len),
        };
        r.map_err(ThreadError::other)
    })
}

impl GpuCopy {
    /// After the run: the destination holds what the source held.
    pub(crate) fn check(&self, m: &Machine<Cluster>, w: &str) -> WResult<()> {
        let mut c = m.world();
        let len = self.want.len();
        let got = match self.dir {
            Dir::DtoH => with_os!(&self.runner, c, |os| os.read(self.buf, len)).map_err(|error| FailCause::Host { step: "reading the destination", error }),
            Dir::HtoD => self.gpu.borrow().mem_read(&c.fabric, 0, len).map_err(FailCause::from),
        };
        match got.map_err(WorkloadError::failed(w))? {
            g if g == self.want => Ok(()),
            _ => Err(WorkloadError::Failed { workload: w.into(), cause: FailCause::Mismatch { dir: self.dir, len: len as u64 } }),
        }
    }
}
