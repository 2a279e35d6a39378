//! The GPU as an actor on the machine's clock: a doorbell landing starts the copy, the driver
//! spins on the semaphore; the two copy engines work at once; a DMA fault in one engine's copy
//! sets its status and fault address while the other engine's copy completes; bytes are checked.

use devlend_devices::gpu::*;
use devlend_drivers::gpu_run::*;
use devlend_host::{Cluster, Os};
use std::cell::Cell;
use std::rc::Rc;

const TWO: &str = include_str!("../pxh830-two-host.json");
const KIB: u64 = 1 << 10;

fn pattern(seed: u8, n: u64) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect()
}

/// A borrowed gpu0 with `dev` bytes of pattern 1 at device offset 0 and a borrower buffer of
/// `host` bytes of pattern 2; returns the cluster, the bound GPU and the buffer.
fn setup(dev: u64, host: u64) -> (Cluster, Bound, u64) {
    let mut c = Cluster::from_json(TWO).unwrap();
    let g = bind(&mut c, "borrower", "gpu0").unwrap();
    g.gpu.mem_write(&mut c.fabric, 0, &pattern(1, dev)).unwrap();
    let mut os = c.os("borrower").unwrap();
    let buf = os.kmalloc(host).unwrap();
    os.write(buf, &pattern(2, host)).unwrap();
    (c, g, buf)
}

/// A device-to-host copy on engine 1 and a host-to-device copy on engine 0, together or one
/// after the other, by copy engines that move bytes or only time ([`Gpu::timing_only`]): the
/// thread's time, and the bytes each destination holds afterwards.
fn two_copies(together: bool, timing_only: bool) -> (u64, Vec<u8>, Vec<u8>) {
    const N: u64 = 512 * KIB;
    let (c, mut g, buf) = setup(N, 2 * N);
    let host = c.fabric.host_id("borrower").unwrap();
    g.gpu.timing_only = timing_only;
    let gpu = shared(g.gpu);
    let mut drv = g.drv;
    let (m, ps) = on_machine(c, std::slice::from_ref(&gpu), host, move |os| {
        let m = drv.map_host(os, buf, 2 * N).map_err(|e| e.to_string())?;
        let s = |e: devlend_drivers::gpu_driver::GpuError| e.to_string();
        if together {
            let w = drv.memcpy_dtoh_async(os, 1, 0, m.dma + N, N).map_err(s)?;
            let r = drv.memcpy_htod_async(os, 0, m.dma, N, N).map_err(s)?;
            drv.sync(os, w).map_err(s)?;
            drv.sync(os, r).map_err(s)?;
        } else {
            let w = drv.memcpy_dtoh_async(os, 1, 0, m.dma + N, N).map_err(s)?;
            drv.sync(os, w).map_err(s)?;
            let r = drv.memcpy_htod_async(os, 0, m.dma, N, N).map_err(s)?;
            drv.sync(os, r).map_err(s)?;
        }
        Ok::<_, String>(())
    })
    .unwrap();
    let in_host = m.world().os("borrower").unwrap().read(buf + N, N as usize).unwrap();
    let in_dev = gpu.borrow().mem_read(&m.world().fabric, N, N as usize).unwrap();
    (ps, in_host, in_dev)
}

#[test]
fn two_copy_engines_work_at_once() {
    let (together, h1, d1) = two_copies(true, false);
    let (serial, h2, d2) = two_copies(false, false);
    const N: u64 = 512 * KIB;
    for (h, d) in [(&h1, &d1), (&h2, &d2)] {
        assert_eq!(*h, pattern(1, N), "device memory reached the host buffer");
        assert_eq!(*d, pattern(2, 2 * N)[..N as usize], "the host buffer reached device memory");
    }
    // Opposite directions use opposite link directions: run together they overlap.
    assert!((together as f64) < 0.8 * serial as f64, "together {together} ps, back to back {serial} ps");
}

/// A workload that asks only timing (D6's epoch): the same copies take the same time to the
/// picosecond, and neither end's bytes change; the data path above carries them.
#[test]
fn a_timing_only_copy_takes_the_same_time_and_moves_no_bytes() {
    const N: u64 = 512 * KIB;
    let (with_data, h, d) = two_copies(true, false);
    let (timed, h_t, d_t) = two_copies(true, true);
    assert_eq!(timed, with_data, "timing-only {timed} ps, with data {with_data} ps");
    assert_eq!(h, pattern(1, N), "the data path carried the device's bytes");
    assert_eq!(d, pattern(2, 2 * N)[..N as usize], "the data path carried the host's bytes");
    assert_eq!(h_t, pattern(2, 2 * N)[N as usize..], "a timing-only copy left the host buffer as it was");
    assert_eq!(d_t, vec![0; N as usize], "a timing-only copy left device memory as it was");
}

#[test]
fn a_fault_in_one_engine_leaves_the_other_engines_copy_whole() {
    const N: u64 = 64 * KIB;
    let (m, gpu, buf) = fault_in_one_engine(false);
    // Bytes before the fault moved; the other engine's copy is whole.
    let got = m.world().os("borrower").unwrap().read(buf, 8 * KIB as usize).unwrap();
    assert_eq!(got, pattern(1, 8 * KIB));
    let dev = gpu.borrow().mem_read(&m.world().fabric, 0x10_0000, N as usize).unwrap();
    let mut want = pattern(1, 8 * KIB);
    want.extend_from_slice(&pattern(2, N)[8 * KIB as usize..]);
    assert_eq!(dev, want, "engine 1 read the buffer as engine 0 had left it");
}

/// A copy engine that asks only timing still meets a fault part-way: a transfer that does not
/// route whole when it starts takes the data path, which stops at the fault's address, the bytes
/// before it moved; the other engine's copy, which routes whole, moves none.
#[test]
fn a_timing_only_copy_that_does_not_route_whole_faults_where_the_data_path_does() {
    const N: u64 = 64 * KIB;
    let (m, gpu, buf) = fault_in_one_engine(true);
    let got = m.world().os("borrower").unwrap().read(buf, 8 * KIB as usize).unwrap();
    assert_eq!(got, pattern(1, 8 * KIB), "the faulting copy took the data path");
    let dev = gpu.borrow().mem_read(&m.world().fabric, 0x10_0000, N as usize).unwrap();
    assert_eq!(dev, vec![0; N as usize], "the other copy moved no bytes");
}

/// Engine 0 writes past the end of its mapping while engine 1 reads the whole buffer: the fault's
/// status and address are checked here; the machine, the GPU and the buffer for the bytes.
fn fault_in_one_engine(timing_only: bool) -> (devlend_engine::machine::Machine<Cluster>, Rc<std::cell::RefCell<Gpu>>, u64) {
    const N: u64 = 64 * KIB;
    let (c, mut g, buf) = setup(N, N);
    let host = c.fabric.host_id("borrower").unwrap();
    g.gpu.timing_only = timing_only;
    let gpu = shared(g.gpu);
    let mut drv = g.drv;
    let fault_at = Rc::new(Cell::new(0));
    let seen = fault_at.clone();
    let (m, _) = on_machine(c, std::slice::from_ref(&gpu), host, move |os| {
        let s = |e: devlend_drivers::gpu_driver::GpuError| e.to_string();
        // Engine 0 writes 8 KiB past the end of its 8 KiB mapping; engine 1 reads the whole buffer.
        let whole = drv.map_host(os, buf, N).map_err(s)?;
        let small = drv.map_host(os, buf, 8 * KIB).map_err(s)?;
        let bad = drv.memcpy_dtoh_async(os, 0, 0, small.dma, 16 * KIB).map_err(s)?;
        let good = drv.memcpy_htod_async(os, 1, whole.dma, 0x10_0000, N).map_err(s)?;
        let e = drv.sync(os, bad).unwrap_err().to_string();
        if !e.contains(&format!("copy engine DMA fault at bus address {:#x}", small.dma + 8 * KIB)) {
            return Err(format!("unexpected error: {e}"));
        }
        seen.set(small.dma + 8 * KIB);
        drv.sync(os, good).map_err(s)
    })
    .unwrap();
    let func = gpu.borrow().func;
    let reg = |off: u64, n: usize| {
        let mut b = vec![0u8; n];
        m.world().fabric.bar_mem(func, 0).expect("BAR 0 written").read(off, &mut b);
        b.iter().rev().fold(0u64, |a, x| a << 8 | *x as u64)
    };
    assert_eq!(reg(ce_reg(0, CE_STATUS), 4) as u32, STATUS_DMA_FAULT);
    assert_eq!(reg(ce_reg(0, CE_FAULT_ADDR), 8), fault_at.get());
    assert_eq!(reg(ce_reg(1, CE_STATUS), 4) as u32, STATUS_DONE);
    (m, gpu, buf)
}

#[test]
fn an_engine_takes_one_copy_at_a_time_and_keeps_the_semaphore_it_was_rung_with() {
    const N: u64 = 256 * KIB;
    let (c, g, buf) = setup(N, N);
    let host = c.fabric.host_id("borrower").unwrap();
    let (gpu, dev) = (shared(g.gpu), g.dev);
    let mut drv = g.drv;
    on_machine(c, &[gpu], host, move |os| {
        let s = |e: devlend_drivers::gpu_driver::GpuError| e.to_string();
        let m = drv.map_host(os, buf, N).map_err(s)?;
        let first = drv.memcpy_dtoh_async(os, 0, 0, m.dma, N).map_err(s)?;
        // The driver refuses a second copy on the engine: its register stores would reprogram it.
        let e = drv.memcpy_htod_async(os, 0, m.dma, 0, N).unwrap_err().to_string();
        if !e.contains("copy engine 0 still runs copy") {
            return Err(format!("unexpected error: {e}"));
        }
        // A store to the semaphore value register while the copy runs does not change its release.
        let bar0 = os.pci_iomap(dev, 0).map_err(|e| e.to_string())?;
        os.write(bar0 + ce_reg(0, CE_SEM_VALUE), &0xdeadu32.to_le_bytes()).map_err(|e| e.to_string())?;
        drv.sync(os, first).map_err(s)?;
        // Once waited for, the engine takes the next copy.
        let next = drv.memcpy_htod_async(os, 0, m.dma, N, N).map_err(s)?;
        drv.sync(os, next).map_err(s)
    })
    .unwrap();
}

#[test]
fn a_kernel_spinning_on_a_counter_that_never_comes_gives_up() {
    use devlend_devices::gpu_kernel::*;
    let (c, g, buf) = setup(KIB, 4);
    let host = c.fabric.host_id("borrower").unwrap();
    let (gpu, dev) = (shared(g.gpu), g.dev);
    let mut drv = g.drv;
    // A pong kernel waits for counter 1 in RAM that holds pattern 2 and that no ping ever writes.
    on_machine(c, std::slice::from_ref(&gpu), host, move |os| {
        let m = drv.map_host(os, buf, 4).map_err(|e| e.to_string())?;
        let bar0 = os.pci_iomap(dev, 0).map_err(|e| e.to_string())?;
        let regs: [(u64, Vec<u8>); 6] = [
            (K_STORE_AT, m.dma.to_le_bytes().to_vec()),
            (K_POLL_AT, m.dma.to_le_bytes().to_vec()),
            (K_OWN_OFF, 0u64.to_le_bytes().to_vec()),
            (K_ROUNDS, 1u32.to_le_bytes().to_vec()),
            (K_FIRST, 0u32.to_le_bytes().to_vec()),
            (K_LAUNCH, 1u32.to_le_bytes().to_vec()),
        ];
        regs.iter().try_for_each(|(r, v)| os.write(bar0 + r, v).map_err(|e| e.to_string()))
    })
    .unwrap();
    let k = gpu.borrow().kernel.clone();
    let g = k.gave_up.expect("the machine ended, so the kernel stopped spinning");
    assert_eq!((g.expected, g.last_read), (1, u32::from_le_bytes(pattern(2, 4).try_into().unwrap())));
    assert!(k.done && k.seen.is_empty());
    let e = devlend_drivers::gpu_run::kernel_round_trip(("gpu0", &gpu), ("gpu0", &gpu)).unwrap_err();
    let want = KernelStop::GaveUp(g);
    assert!(matches!(&e, devlend_drivers::error::DeviceError::Kernel { gpu, stop } if gpu == "gpu0" && *stop == want), "{e}");
}

#[test]
fn a_copy_whose_read_comes_back_poisoned_fails_at_once_with_a_copy_error() {
    const N: u64 = 64 * KIB;
    let (c, g, buf) = setup(N, N);
    let (host, func) = (c.fabric.host_id("borrower").unwrap(), c.fabric.func_id("gpu0").unwrap());
    let watchdog = c.fabric.tuning().timing.gpu_watchdog_ps;
    let gpu = shared(g.gpu);
    let mut drv = g.drv;
    let got = Rc::new(std::cell::RefCell::new(None));
    let out = got.clone();
    let (m, ps) = on_machine(c, std::slice::from_ref(&gpu), host, move |os| {
        let m = drv.map_host(os, buf, N).map_err(|e| e.to_string())?;
        // Every completion to or from gpu0 is poisoned from now on (devlend_host's `poisoned`).
        os.run_hardware(|f| f.func_poison(func));
        let r = drv.memcpy_htod_async(os, 0, m.dma, 0, N).map_err(|e| e.to_string())?;
        *out.borrow_mut() = Some(drv.sync(os, r));
        Ok::<_, String>(())
    })
    .unwrap();
    let e = got.borrow_mut().take().unwrap().unwrap_err();
    assert!(matches!(e, devlend_drivers::gpu_driver::GpuError::Poisoned { ce: 0 }), "{e}");
    assert!(e.to_string().contains("poisoned completion"), "{e}");
    assert!(ps < watchdog / 1000, "the driver saw the failed copy after {ps} ps, not at its watchdog ({watchdog} ps)");
    assert_ne!(gpu.borrow().mem_read(&m.world().fabric, 0, N as usize).unwrap(), pattern(2, N), "no poisoned data was taken in whole");
    let poisoned =
        m.world().fabric.events().iter().any(|e| matches!(e, devlend_fabric::events::Event::Failed(devlend_fabric::route::Failure::Poisoned { .. })));
    assert!(poisoned, "the fabric recorded the poisoned completion");
}

/// The GPU model asks nothing of its world but the fabric: on a machine over a bare `Fabric` (no
/// hosts' kernels), a CPU thread programs copy engine 0's registers directly and rings its
/// doorbell; the bytes reach device memory and the semaphore is released in RAM.
#[test]
fn the_gpu_model_copies_on_a_machine_over_a_bare_fabric() {
    use devlend_engine::machine::Machine;
    use devlend_fabric::config::{CMD_BUS_MASTER, CMD_MEMORY, COMMAND};
    let mut f = devlend_fabric::build_json(
        r#"{"name":"bare","hosts":[{"name":"h","cpu":"intel-xeon-e5","ram":1073741824,"iommu":false,"root_ports":1}],
          "devices":[{"name":"gpu0","profile":"quadro-k420"}],
          "links":[{"a":"h.rp0","b":"gpu0","gen":2,"width":16}]}"#,
    )
    .unwrap();
    let (host, func) = (f.host_id("h").unwrap(), f.func_id("gpu0").unwrap());
    f.config_write(func, COMMAND, 2, (CMD_MEMORY | CMD_BUS_MASTER) as u32).unwrap();
    let gpu = devlend_devices::gpu::Gpu::new(&mut f, func).unwrap();
    let (src, sem) = (f.resolve_expr("h.ram+0x100000").unwrap(), f.resolve_expr("h.ram+0x200000").unwrap());
    let bar0 = f.resolve_expr("gpu0.bar0").unwrap();
    let data = pattern(3, 8 * KIB);
    f.ram_store(host, src, &data);
    let gpu = Rc::new(std::cell::RefCell::new(gpu));
    let mut m = Machine::new(f);
    m.add_device(func, gpu.clone());
    m.spawn("cpu", 0, move |t| {
        for (reg, v) in [(CE_SRC, src), (CE_DST, 0), (CE_LEN, 8 * KIB), (CE_SEM_ADDR, sem)] {
            t.cpu_write(host, bar0 + ce_reg(0, reg), &v.to_le_bytes())?;
        }
        t.cpu_write(host, bar0 + ce_reg(0, CE_DIR), &DIR_BUS_TO_DEV.to_le_bytes())?;
        t.cpu_write(host, bar0 + ce_reg(0, CE_SEM_VALUE), &7u32.to_le_bytes())?;
        t.cpu_write(host, bar0 + ce_reg(0, CE_DOORBELL), &1u32.to_le_bytes())?;
        t.wait_until("the semaphore", move |f: &mut devlend_fabric::Fabric| f.read(devlend_fabric::Requester::Cpu(host), sem, 4).0 == [7, 0, 0, 0]);
        Ok(())
    });
    m.run().unwrap();
    assert_eq!(gpu.borrow().mem_read(&m.world(), 0, data.len()).unwrap(), data);
}
