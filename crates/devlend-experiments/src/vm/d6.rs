//! D6 (000 §7.5, Figs 20-21) in a VM: the host-to-device copy of one input batch by the guest's
//! GPU driver on the machine (the copy engine reads the guest buffer through whatever the VM's
//! path maps: VFIO's per-VM domain on the lender, or the mediated path's two IOMMUs and the NTB).
//! The training epoch itself, every set-up on one machine, is [`super::epoch`].

use super::error::{guest, setup, stopped, RunCause, VResult, VmRunError};
use devlend_drivers::gpu_run::{pattern, shared, timing, CopyTiming};
use devlend_host::Os;
use devlend_vm::fixtures::{testbed, Scenario, Testbed, GUEST_RAM};
use devlend_vm::timed::on_machine;

/// One cudaMemcpy host-to-device of `len` bytes from a guest buffer into gpu0, by the guest's
/// driver on the machine; the data is checked in the GPU's memory.
pub fn memcpy_htod(json: &str, sc: Scenario, len: u64) -> VResult<CopyTiming> {
    let Testbed { mut c, mut vmm, vm, a, .. } = testbed(json, sc).map_err(setup("the VM testbed"))?;
    if len == 0 || len > a.drv.mem_size || len > GUEST_RAM / 2 {
        return Err(VmRunError::Length { len, guest_ram: GUEST_RAM });
    }
    let want = pattern(17, len);
    let mut os = vmm.guest(&mut c, vm).map_err(guest("the guest kernel"))?;
    let buf = os.kmalloc(len).map_err(guest("kmalloc"))?;
    os.write(buf, &want).map_err(guest("write"))?;
    let gpu = shared(a.gpu);
    let func = gpu.borrow().func;
    let mut drv = a.drv;
    let (m, _, ps) = on_machine(c, vmm, vm, vec![(func, gpu.clone())], move |os| drv.memcpy_htod(os, 0, buf, len))
        .map_err(stopped(format!("VM {sc:?} host-to-device copy"), RunCause::Guest))?;
    if gpu.borrow().mem_read(&m.world().fabric, 0, len as usize)? != want {
        return Err(VmRunError::Mismatch { scenario: format!("VM {sc:?}"), what: format!("host-to-device copy of {len} bytes differs at the GPU") });
    }
    Ok(timing(len, ps))
}
