//! The GPU without a clock, for kernels that have none (a VM's guest kernel in `devlend-vm`, the
//! functional tests): the driver's copies with the GPU model run at once between the doorbell
//! and the semaphore poll ([`Gpu::process`]), its DMA logged as [`Op`]s after the driver's own
//! stores, in program order, for `time_ops`. On the machine's clock use the driver directly.

use crate::gpu::Gpu;
use crate::gpu_driver::{Driver, GpuError};
use crate::Op;
use devlend_host::{DevId, Os};

fn run<O: Os>(gpu: &mut Gpu) -> impl FnMut(&mut O, &mut Vec<Op>) + '_ {
    move |os: &mut O, ops: &mut Vec<Op>| {
        os.run_hardware(|f| gpu.process(f));
        ops.append(&mut gpu.ops);
    }
}

/// cudaMemcpy device to host, the GPU run at once.
pub fn memcpy_dtoh<O: Os>(drv: &mut Driver, os: &mut O, gpu: &mut Gpu, dev_off: u64, host_buf: u64, len: u64) -> Result<(), GpuError> {
    drv.memcpy_dtoh_with(os, &mut run(gpu), dev_off, host_buf, len)
}

/// cudaMemcpy host to device, the GPU run at once.
pub fn memcpy_htod<O: Os>(drv: &mut Driver, os: &mut O, gpu: &mut Gpu, dev_off: u64, host_buf: u64, len: u64) -> Result<(), GpuError> {
    drv.memcpy_htod_with(os, &mut run(gpu), dev_off, host_buf, len)
}

/// cudaMemcpyPeer, the GPU run at once.
pub fn memcpy_peer<O: Os>(drv: &mut Driver, os: &mut O, gpu: &mut Gpu, src_off: u64, dst: DevId, dst_off: u64, len: u64) -> Result<(), GpuError> {
    drv.memcpy_peer_with(os, &mut run(gpu), src_off, dst, dst_off, len)
}
