//! D6 (000 §7.5, Figs 20-21): the data movements of one training step, in a VM. The training
//! epoch itself is a workload model composed in Python (`experiments/d6.py`): per batch, images
//! read from NVMe, the input batch copied from RAM to each GPU, compute, and the gradient exchange
//! between the GPUs peer-to-peer. The GPU-to-GPU transfer in a VM is [`crate::d4::gpu_to_gpu`];
//! this module adds the host-to-device copy of the input batch by the guest's GPU driver (the
//! copy engine reads the guest buffer through whatever the VM's path maps: VFIO's per-VM domain on
//! the lender, or the mediated path's two IOMMUs and the NTB).

use crate::d4::{host_ops, testbed, Scenario, Testbed};
use devlend_devices::gpu_bench::{time_steps, CopyTiming};
use devlend_host::Os;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// One cudaMemcpy host-to-device of `len` bytes from a guest buffer into gpu0, by the guest's
/// driver; the data is checked in the GPU's memory and the accesses are timed.
pub fn memcpy_htod(json: &str, sc: Scenario, len: u64) -> Result<CopyTiming, String> {
    let mut t = testbed(json, sc)?;
    if len == 0 || len > t.a.drv.mem_size || len > crate::d4::GUEST_RAM / 2 {
        return Err(format!("{len} bytes: expected 1 byte to half the guest's {} bytes of RAM", crate::d4::GUEST_RAM));
    }
    let Testbed { c, vmm, vm, a, .. } = &mut t;
    let want: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(17).wrapping_add((i >> 12) as u8)).collect();
    let mut os = vmm.guest(c, *vm).map_err(s)?;
    let buf = os.kmalloc(len).map_err(s)?;
    os.write(buf, &want).map_err(s)?;
    a.drv.ops.clear();
    devlend_devices::gpu_functional::memcpy_htod(&mut a.drv, &mut os, &mut a.gpu, 0, buf, len).map_err(s)?;
    let got = os.run_hardware(|f| a.gpu.mem_read(f, 0, len as usize))?;
    if got != want {
        return Err(format!("VM {sc:?}: host-to-device copy of {len} bytes differs at the GPU"));
    }
    let ops = host_ops(vmm.vm(*vm).map_err(s)?, &a.drv.ops)?;
    time_steps(c, &ops, len)
}
