//! Cold migration of a VM with its devices (000 §8 "VM migration"): the guest driver's state
//! survives, data written before the move is read back after it, interrupts still arrive; a
//! target without a path to a lender is refused with everything made for the attempt undone.

use devlend_devices::gpu::Gpu;
use devlend_drivers::gpu_driver::Driver;
use devlend_host::{Cluster, HostError, Os};
use devlend_vm::timed::{back, on_machine, raise_once};
use devlend_vm::{GuestThreadOs, Path, Vmm};
use std::cell::RefCell;
use std::rc::Rc;

/// VM host `a`; target `b` reaches both lenders; `island` reaches only `l1` (gpu0), not `l2` (gpu1).
fn cluster() -> Cluster {
    let host = |n: &str, rp: u32| format!(r#"{{"name":"{n}","cpu":"intel-xeon-e5","ram":17179869184,"iommu":true,"root_ports":{rp}}}"#);
    let pairs = [("a", "l1"), ("a", "l2"), ("b", "l1"), ("b", "l2"), ("island", "l1")];
    let mut ntbs = Vec::new();
    let mut links = vec![r#"{"a":"l1.rp0","b":"gpu0","gen":2,"width":16}"#.to_string(), r#"{"a":"l2.rp0","b":"gpu1","gen":2,"width":16}"#.to_string()];
    let mut port = std::collections::BTreeMap::from([("l1", 1), ("l2", 1)]);
    for (x, y) in pairs {
        for (me, peer) in [(x, y), (y, x)] {
            let p = port.entry(me).or_insert(0);
            ntbs.push(format!(r#"{{"name":"ntb-{me}-{peer}","profile":"pxh830"}}"#));
            links.push(format!(r#"{{"a":"{me}.rp{p}","b":"ntb-{me}-{peer}","gen":3,"width":8}}"#));
            *p += 1;
        }
        links.push(format!(r#"{{"a":"ntb-{x}-{y}.cable","b":"ntb-{y}-{x}.cable","gen":3,"width":8,"kind":"cable"}}"#));
    }
    let hosts = [host("a", 2), host("b", 2), host("island", 1), host("l1", 4), host("l2", 3)].join(",");
    let json = format!(
        r#"{{"name":"migration","hosts":[{hosts}],"devices":[{{"name":"gpu0","profile":"quadro-k420"}},{{"name":"gpu1","profile":"quadro-k420"}}],"ntbs":[{}],"links":[{}]}}"#,
        ntbs.join(","),
        links.join(",")
    );
    Cluster::from_json(&json).unwrap()
}

const RAM: u64 = 64 << 20;

struct Bed {
    c: Cluster,
    vmm: Vmm,
    vm: devlend_vm::VmId,
    gpus: Vec<(devlend_host::DevId, Gpu, Driver)>,
}

fn bed() -> Bed {
    let mut c = cluster();
    let mut vmm = Vmm::default();
    let vm = vmm.create_vm(&mut c, "a", "g", RAM).unwrap();
    let mut gpus = Vec::new();
    for name in ["gpu0", "gpu1"] {
        vmm.register_mdev(&c, name).unwrap();
        let dev = vmm.assign_mdev(&mut c, vm, name).unwrap();
        let func = c.fabric.func_id(name).unwrap();
        let gpu = Gpu::new(&mut c.fabric, func).unwrap();
        let drv = Driver::probe(&mut vmm.guest(&mut c, vm).unwrap(), dev).unwrap();
        gpus.push((dev, gpu, drv));
    }
    Bed { c, vmm, vm, gpus }
}

fn owned<T>(r: Rc<RefCell<T>>) -> T {
    Rc::try_unwrap(r).ok().expect("the machine let go of it").into_inner()
}

/// Run `body` in the guest kernel on a machine with GPU `i` as an actor, then take the cluster,
/// the hypervisor, the GPU and its driver back.
fn on_clock(t: Bed, i: usize, body: impl FnOnce(&mut GuestThreadOs, &mut Driver) -> Result<(), String> + 'static) -> Bed {
    let Bed { c, vmm, vm, mut gpus } = t;
    let (dev, gpu, drv) = gpus.remove(i);
    let (gpu, drv) = (Rc::new(RefCell::new(gpu)), Rc::new(RefCell::new(drv)));
    let (func, d) = (gpu.borrow().func, drv.clone());
    let (m, vmm, _) = on_machine(c, vmm, vm, vec![(func, gpu.clone())], move |os| body(os, &mut d.borrow_mut())).unwrap();
    let (c, vmm) = back(m, vmm).unwrap();
    gpus.insert(i, (dev, owned(gpu), owned(drv)));
    Bed { c, vmm, vm, gpus }
}

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed)).collect()
}

#[test]
fn a_migrated_vm_keeps_its_devices_driver_state_memory_and_interrupts() {
    let mut t = bed();
    let data = pattern(7, 8192);
    let mut os = t.vmm.guest(&mut t.c, t.vm).unwrap();
    let buf = os.kmalloc(8192).unwrap();
    os.write(buf, &data).unwrap();
    let dev0 = t.gpus[0].0;
    let gv = os.request_irq(dev0, 0, 1).unwrap();
    t = on_clock(t, 0, move |os, drv| drv.memcpy_htod(os, 0, buf, 8192).map_err(|e| e.to_string()));
    for target in ["b", "l1"] {
        t.vmm.migrate(&mut t.c, t.vm, target).unwrap();
        let v = t.vmm.vm(t.vm).unwrap();
        assert_eq!(t.c.fabric.host(v.host).name, target);
        let path = v.devices[&t.gpus[0].0].path;
        assert_eq!(path, if target == "l1" { Path::Vfio } else { Path::Mdev }, "gpu0 is local to l1");
        assert!(t.c.lends().iter().all(|l| l.borrower == target), "{:?}", t.c.lends());
        // The same guest driver objects keep working: the memory image moved, the GPU kept its memory.
        let mut os = t.vmm.guest(&mut t.c, t.vm).unwrap();
        assert_eq!(os.read(buf, 8192).unwrap(), data, "guest RAM moved with the VM");
        let back = os.kmalloc(8192).unwrap();
        t = on_clock(t, 0, move |os, drv| drv.memcpy_dtoh(os, 0, back, 8192).map_err(|e| e.to_string()));
        let mut os = t.vmm.guest(&mut t.c, t.vm).unwrap();
        assert_eq!(os.read(back, 8192).unwrap(), data, "{target}: device memory written before the move, read by DMA after it");
        os.kfree(back).unwrap();
        let n = os.irq_count(gv);
        let (c, vmm) = raise_once(t.c, t.vmm, t.vm, dev0, gv).unwrap();
        (t.c, t.vmm) = (c, vmm);
        assert_eq!(t.vmm.guest(&mut t.c, t.vm).unwrap().irq_count(gv), n + 1, "{target}: the guest's vector still gets gpu0's interrupts");
        if target == "b" {
            // gpu1 (l2) has no path from l1: leave it behind before the move into l1.
            let d1 = t.gpus[1].0;
            t.vmm.hot_remove(&mut t.c, t.vm, d1).unwrap();
        }
    }
    t.vmm.shutdown(&mut t.c, t.vm).unwrap();
    assert!(t.vmm.idle() && t.c.lending_idle() && t.vmm.anomalies.is_empty() && t.c.anomalies().is_empty());
}

#[test]
fn a_target_without_a_path_to_a_lender_is_refused_and_nothing_is_left_half_mapped() {
    let mut t = bed();
    let data = pattern(3, 4096);
    let mut os = t.vmm.guest(&mut t.c, t.vm).unwrap();
    let buf = os.kmalloc(4096).unwrap();
    os.write(buf, &data).unwrap();
    let dev1 = t.gpus[1].0;
    os.request_irq(dev1, 0, 2).unwrap();
    t = on_clock(t, 1, move |os, drv| drv.memcpy_htod(os, 0, buf, 4096).map_err(|e| e.to_string()));
    let before = t.c.fabric.programmed();
    let digest = t.c.fabric.memory_digest();
    let lends = t.c.lends();
    let island = t.c.host_id("island").unwrap() as usize;
    let island_free = t.c.kernel("island").unwrap().allocation(0x4000_0000);
    // gpu0's lender l1 is reachable from island, gpu1's lender l2 is not: gpu0 is attached from
    // island first, then gpu1 fails and gpu0's new mappings must all be undone.
    let e = t.vmm.migrate(&mut t.c, t.vm, "island").unwrap_err();
    assert!(matches!(e, HostError::Unreachable(_)), "{e}");
    let m = e.to_string();
    assert!(m.contains("cannot migrate VM g to island: gpu1") && m.contains("no NTB joins") && m.contains("stays on a"), "{m}");
    assert_eq!(t.c.fabric.programmed(), before, "every IOMMU, NTB and interrupt mapping made for the failed step is undone");
    assert_eq!(t.c.fabric.memory_digest(), digest, "no memory changed");
    let strip = |v: Vec<devlend_host::LendInfo>| v.into_iter().map(|l| devlend_host::LendInfo { dev: devlend_host::DevId(0), ..l }).collect::<Vec<_>>();
    assert_eq!(strip(t.c.lends()), strip(lends), "both devices lent to a as before (new handles: they were returned and borrowed again)");
    assert_eq!(t.c.fabric.iommus()[island].domains.iter().map(|d| d.mapped_bytes).sum::<u64>(), 0);
    assert_eq!(t.c.kernel("island").unwrap().allocation(0x4000_0000), island_free, "the target's chunks were freed");
    assert!(t.vmm.anomalies.is_empty() && t.c.anomalies().is_empty());
    // The VM still runs on a with both devices.
    let back = t.vmm.guest(&mut t.c, t.vm).unwrap().kmalloc(4096).unwrap();
    t = on_clock(t, 1, move |os, drv| drv.memcpy_dtoh(os, 0, back, 4096).map_err(|e| e.to_string()));
    assert_eq!(t.vmm.guest(&mut t.c, t.vm).unwrap().read(back, 4096).unwrap(), data);
    // Bad targets named clearly.
    assert!(t.vmm.migrate(&mut t.c, t.vm, "a").unwrap_err().to_string().contains("already runs on a"));
    assert!(t.vmm.migrate(&mut t.c, t.vm, "nowhere").is_err());
}
