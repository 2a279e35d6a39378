//! The GPU model and its unmodified driver on a local GPU and on borrowed ones (000 §7.1-7.2):
//! the bytes arrive, a borrowed GPU's DMA crosses the NTB, peer-to-peer reaches the target's BAR 1
//! in both multi-device cases, the timing keeps the paper's relations, and mistakes are errors.
//! Fixtures: the shipped pxh830-two-host.yaml and three-host-cluster.yaml without `setup`.

use devlend_devices::gpu::*;
use devlend_drivers::gpu_driver::{Driver, GpuError};
use devlend_drivers::gpu_run::*;
use devlend_experiments::gpu::*;
use devlend_fabric::route::{HopKind, Requester};
use devlend_fabric::spec::LinkKind;
use devlend_host::{Cluster, Os, ThreadOs};
use devlend_wire::Access;

const TWO: &str = include_str!("../../../devlend-drivers/tests/pxh830-two-host.json");
const THREE: &str = include_str!("../../../devlend-drivers/tests/three-host-cluster.json");
const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// The fixture with the IOMMU of the named hosts turned on.
fn with_iommu(json: &str, hosts: &[&str]) -> String {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    for h in v["hosts"].as_array_mut().unwrap() {
        if hosts.contains(&h["name"].as_str().unwrap()) {
            h["iommu"] = true.into();
        }
    }
    v.to_string()
}

fn pattern(seed: u8, n: u64) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect()
}

/// What the owning host's CPU reads in a GPU's BAR 1.
fn bar1(c: &mut Cluster, gpu: &str, off: u64, len: usize) -> Vec<u8> {
    let func = c.fabric.func_id(gpu).unwrap();
    let host = c.fabric.func_host(func);
    let addr = c.fabric.resolve_expr(&format!("{gpu}.bar1")).unwrap() + off;
    let (v, fail) = c.fabric.read(Requester::Cpu(host), addr, len);
    assert_eq!(fail, None);
    v
}

/// NTB crossings of a write by `gpu` to `dma`, and whether it goes through adapter `ntb`.
fn crossings(c: &mut Cluster, gpu: &str, dma: u64, ntb: &str) -> (usize, bool) {
    let f = c.fabric.func_id(gpu).unwrap();
    let node = c.fabric.ntb(c.fabric.ntb_id(ntb).unwrap()).node;
    let r = c.fabric.route(Requester::Func(f), dma, Access::Write);
    assert!(r.delivered().is_some(), "{gpu} reaches {dma:#x}");
    (r.ntb_crossings(), r.hops.iter().any(|h| h.kind == HopKind::Ntb && h.node == node))
}

type Ran = (devlend_engine::machine::Machine<Cluster>, Vec<std::rc::Rc<std::cell::RefCell<Gpu>>>);

/// The GPUs `gpus` bound by `runner`, `prep` run on the cluster (its answer goes to `body`), then
/// `body` with the first GPU's driver on a thread of `runner` on one machine with the GPUs as
/// actors: the machine after the run (its world) and the GPU models, or the run's error.
fn run_with(
    json: &str,
    runner: &str,
    gpus: &[&str],
    prep: impl FnOnce(&mut Cluster, &mut [Bound]) -> u64,
    body: impl FnOnce(&mut ThreadOs, &mut Driver, u64, &[devlend_host::DevId]) -> Result<(), GpuError> + 'static,
) -> Result<Ran, String> {
    let mut c = Cluster::from_json(json).unwrap();
    let mut bound: Vec<Bound> = gpus.iter().map(|g| bind(&mut c, runner, g).unwrap()).collect();
    let arg = prep(&mut c, &mut bound);
    let host = c.fabric.host_id(runner).unwrap();
    let devs: Vec<_> = bound.iter().map(|b| b.dev).collect();
    let mut drvs = Vec::new();
    let mut models = Vec::new();
    for b in bound {
        drvs.push(b.drv);
        models.push(shared(b.gpu));
    }
    let mut drv = drvs.remove(0);
    let (m, _) = on_machine(c, &models, host, move |os| body(os, &mut drv, arg, &devs)).map_err(|e| e.to_string())?;
    Ok((m, models))
}

#[test]
fn local_and_borrowed_copies_move_the_right_bytes() {
    for runner in ["lender", "borrower"] {
        for dir in [Dir::DtoH, Dir::HtoD] {
            memcpy(TWO, runner, "gpu0", dir, 3 * 4096 + 100).unwrap();
        }
        // Unaligned offsets on both sides, through the driver directly.
        let prep = |c: &mut Cluster, g: &mut [Bound]| {
            g[0].gpu.mem_write(&mut c.fabric, 0x1234, &pattern(1, 9000)).unwrap();
            c.os(runner).unwrap().kmalloc(16 * KIB).unwrap()
        };
        let (m, gpus) = run_with(TWO, runner, &["gpu0"], prep, |os, drv, buf, _| {
            drv.memcpy_dtoh(os, 0x1234, buf + 100, 9000)?;
            let got = os.read(buf + 100, 9000).map_err(|error| GpuError::Os { what: "read", error })?;
            assert!(got == pattern(1, 9000), "device to host: the bytes differ");
            os.write(buf, &pattern(2, 5000)).map_err(|error| GpuError::Os { what: "write", error })?;
            drv.memcpy_htod(os, 0x80_0000, buf, 5000)
        })
        .unwrap();
        assert_eq!(bar1(&mut m.world(), "gpu0", 0x80_0000, 5000), pattern(2, 5000), "{runner}: host to device lands in BAR 1");
        assert_eq!(gpus[0].borrow().copies, 2);
    }
}

#[test]
fn a_borrowed_gpus_dma_goes_through_the_ntb() {
    for (runner, ntbs) in [("lender", 0), ("borrower", 1)] {
        let mut c = Cluster::from_json(TWO).unwrap();
        let mut g = bind(&mut c, runner, "gpu0").unwrap();
        let mut os = c.os(runner).unwrap();
        let buf = os.kmalloc(4096).unwrap();
        let m = g.drv.map_host(&mut os, buf, 4096).unwrap();
        assert_eq!(crossings(&mut c, "gpu0", m.dma, "ntb-l"), (ntbs, ntbs == 1), "{runner}");
    }
    // On the machine: the copy engine's stream, the semaphore and the completions of its fetches
    // of the GPFIFO entry (16 bytes) and the methods (32) cross the cable towards the borrower,
    // the driver's doorbell the other way; the methods themselves stay in the borrower's RAM.
    let prep = |c: &mut Cluster, _: &mut [Bound]| c.os("borrower").unwrap().kmalloc(8192).unwrap();
    let (m, gpus) = run_with(TWO, "borrower", &["gpu0"], prep, |os, drv, buf, _| drv.memcpy_dtoh(os, 0, buf, 8192)).unwrap();
    let cable = m.world().fabric.links().iter().position(|l| l.kind == LinkKind::Cable).unwrap() as u32;
    let over: Vec<_> = m.link_stats().into_iter().filter(|l| l.link == cable).collect();
    assert_eq!(over.len(), 2, "both directions of the cable carried TLPs: {over:?}");
    assert_eq!(
        over.iter().map(|l| l.stats.payload_bytes).sum::<u64>(),
        8192 + 4 + 16 + 32 + 4,
        "the copy, the semaphore, the fetched entry and methods, the doorbell"
    );
    let mut w = m.world();
    let dev = w.lends()[0].dev;
    let bar0 = w.os("borrower").unwrap().pci_iomap(dev, 0).unwrap();
    let borrower = w.fabric.host_id("borrower").unwrap();
    let r = w.fabric.route(Requester::Cpu(borrower), bar0 + CE_SRC, Access::Write);
    assert_eq!((r.ntb_crossings(), r.delivered()), (1, Some(devlend_fabric::route::Target::Bar { func: gpus[0].borrow().func, bar: 0, offset: CE_SRC })));
}

#[test]
fn peer_to_peer_between_borrowed_gpus_lands_in_the_targets_bar1() {
    // Same lender (000 §6 case 2) and different lenders (case 3), lenders' IOMMUs off and on.
    for iommu in [false, true] {
        let json = if iommu { with_iommu(THREE, &["lender-a", "lender-b"]) } else { THREE.to_string() };
        for (src, dst, ntbs, via) in [("gpu0", "gpu1", 0, "ntb-a-b"), ("gpu2", "gpu3", 1, "ntb-a-c")] {
            let data = pattern(5, 64 * KIB + 8);
            let (n, d) = (data.len() as u64, data.clone());
            let prep = move |c: &mut Cluster, g: &mut [Bound]| {
                g[0].gpu.mem_write(&mut c.fabric, 0x2000, &d).unwrap();
                let peer = g[1].dev;
                let m = g[0].drv.map_peer(&mut c.os("borrower").unwrap(), peer, 0, 4096).unwrap();
                assert_eq!(crossings(c, src, m.dma, via), (ntbs, ntbs == 1), "{src} -> {dst}: the lender-side path");
                0
            };
            let (m, _) = run_with(&json, "borrower", &[src, dst], prep, move |os, drv, _, devs| drv.memcpy_peer(os, 0x2000, devs[1], 0x10_0000, n)).unwrap();
            let mut c = m.into_world().ok().unwrap();
            assert_eq!(bar1(&mut c, dst, 0x10_0000, data.len()), data, "{src} -> {dst}, IOMMU {iommu}");

            for via in [Via::Peer, Via::Ram] {
                gpu_to_gpu(&json, "borrower", src, dst, via, 4 * KIB).unwrap();
            }
        }
    }
}

fn bw(json: &str, runner: &str, dir: Dir, len: u64) -> f64 {
    memcpy(json, runner, "gpu0", dir, len).unwrap().bandwidth()
}

#[test]
fn remote_small_copies_are_slower_and_large_ones_converge() {
    // 000 §7.1: "slightly better [locally] for smaller transfer sizes ... for sizes of 1 megabyte
    // and more ... the bandwidths start to converge".
    for dir in [Dir::DtoH, Dir::HtoD] {
        let (loc, rem) = (memcpy(TWO, "lender", "gpu0", dir, 4 * KIB).unwrap(), memcpy(TWO, "borrower", "gpu0", dir, 4 * KIB).unwrap());
        assert!(rem.total_ps > loc.total_ps + 500_000, "{dir:?} 4 KiB: local {} ps, borrowed {} ps", loc.total_ps, rem.total_ps);
        let (l, r) = (bw(TWO, "lender", dir, 4 * MIB), bw(TWO, "borrower", dir, 4 * MIB));
        assert!((l - r).abs() / l < 0.05, "{dir:?} 4 MiB: local {l:.3e} B/s, borrowed {r:.3e} B/s");
    }
}

#[test]
fn reads_through_a_lender_root_with_its_iommu_on_are_much_slower() {
    // 000 §7.1, Fig 10: Rem-IOMMU; the root re-issues each read as 64-byte requests.
    let json = with_iommu(TWO, &["lender"]);
    let (write, read) = (bw(&json, "borrower", Dir::DtoH, MIB), bw(&json, "borrower", Dir::HtoD, MIB));
    assert!(read < 0.35 * write, "Rem-IOMMU: DMA read {read:.3e} B/s, write {write:.3e} B/s");
    let sw_read = bw(TWO, "borrower", Dir::HtoD, MIB);
    assert!(read < 0.35 * sw_read, "Rem-IOMMU read {read:.3e} B/s vs Rem-SW {sw_read:.3e} B/s");
    assert!((4.5e9..6e9).contains(&sw_read), "001 §7.3.1: 'a little under 6 GB/s', got {sw_read:.3e}");
}

#[test]
fn gpu_to_gpu_keeps_the_relations_of_000_fig_12() {
    let io_a = with_iommu(THREE, &["lender-a"]);
    let g = |json: &str, runner, src, dst, via| gpu_to_gpu(json, runner, src, dst, via, 4 * MIB).unwrap().bandwidth();
    let loc_sw = g(THREE, "lender-a", "gpu0", "gpu1", Via::Peer);
    let rem_sw = g(THREE, "borrower", "gpu0", "gpu1", Via::Peer);
    assert!((loc_sw - rem_sw).abs() / loc_sw < 0.05, "1L-P2P-SW {rem_sw:.3e} ~ Loc-P2P-SW {loc_sw:.3e} at 4 MiB");
    let ram_iommu = g(&io_a, "borrower", "gpu0", "gpu1", Via::Ram);
    assert!(ram_iommu < 0.3 * rem_sw, "1L-RAM-IOMMU {ram_iommu:.3e} drops drastically");
    let loc_ram = g(THREE, "lender-a", "gpu0", "gpu1", Via::Ram);
    let two_ram = g(THREE, "borrower", "gpu2", "gpu3", Via::Ram);
    assert!((loc_ram - two_ram).abs() / loc_ram < 0.05, "2L-RAM-SW {two_ram:.3e} ~ Loc-RAM-Root {loc_ram:.3e}");
}

#[test]
fn pingpong_round_trips_follow_the_data_path() {
    // 000 §7.2, Fig 14: 1L-P2P-SW = Loc-P2P-SW; the second lender adds the NTB both ways; RAM is slower.
    let loc = pingpong(THREE, "lender-a", "gpu0", "gpu1", Via::Peer).unwrap();
    let one = pingpong(THREE, "borrower", "gpu0", "gpu1", Via::Peer).unwrap();
    let two = pingpong(THREE, "borrower", "gpu2", "gpu3", Via::Peer).unwrap();
    let ram = pingpong(THREE, "borrower", "gpu0", "gpu1", Via::Ram).unwrap();
    assert_eq!(loc, one);
    assert!((700_000..1_200_000).contains(&(two - one)), "2L adds {} ps", two - one);
    assert!(ram > 2 * two, "RAM {ram} ps vs 2L-P2P {two} ps");
}

/// A copy by the borrower's driver on a fresh two-host cluster: the run's error, if any.
fn borrower_copy(
    prep: impl FnOnce(&mut Cluster, &mut [Bound]) -> u64,
    body: impl FnOnce(&mut ThreadOs, &mut Driver, u64, &[devlend_host::DevId]) -> Result<(), GpuError> + 'static,
) -> Result<(), String> {
    run_with(TWO, "borrower", &["gpu0"], prep, body).map(|_| ())
}

fn buffer(c: &mut Cluster, _: &mut [Bound]) -> u64 {
    c.os("borrower").unwrap().kmalloc(8192).unwrap()
}

#[test]
fn mistakes_give_clear_errors() {
    // The K420's 1 GB of device memory (its BAR 1 shows only the first 256 MiB).
    let end = 1 << 30;
    let e = borrower_copy(buffer, move |os, drv, buf, _| drv.memcpy_dtoh(os, end - 4096, buf, 8192)).unwrap_err();
    assert!(e.contains("past the end of the GPU's 0x40000000 bytes"), "{e}");
    let e = borrower_copy(buffer, |os, drv, _, _| drv.memcpy_htod(os, 0, 0xf000_0000, 4096)).unwrap_err();
    assert!(e.contains("mapping the host buffer") && e.contains("is not RAM of host borrower"), "{e}");
    assert!(borrower_copy(buffer, |os, drv, buf, _| drv.memcpy_dtoh(os, 0, buf, 0)).is_err());
    // A GPU that may not master the bus: the copy engine faults and cannot even write its error
    // notifier; the driver's copy watchdog ends the wait, finds the engine idle and reports its
    // status; with bus mastering back the same copy goes through.
    let no_master = |c: &mut Cluster, g: &mut [Bound]| {
        c.os("borrower").unwrap().pci_clear_master(g[0].dev).unwrap();
        buffer(c, g)
    };
    let e = borrower_copy(no_master, |os, drv, buf, _| drv.memcpy_dtoh(os, 0, buf, 4096)).unwrap_err();
    assert!(e.contains("copy engine DMA fault") && e.contains("may not master the bus"), "{e}");
    borrower_copy(buffer, |os, drv, buf, devs| {
        os.pci_clear_master(devs[0]).map_err(|error| GpuError::Os { what: "pci_clear_master", error })?;
        os.pci_set_master(devs[0]).map_err(|error| GpuError::Os { what: "pci_set_master", error })?;
        drv.memcpy_dtoh(os, 0, buf, 4096)
    })
    .unwrap();
    let e = memcpy(TWO, "borrower", "gpu0", Dir::DtoH, 1 << 31).unwrap_err();
    assert!(e.to_string().contains("do not fit the GPU's 1073741824 bytes"), "{e}");
    // Peer-to-peer past the end of the target's memory.
    let e = run_with(THREE, "borrower", &["gpu0", "gpu1"], |_, _| 0, |os, drv, _, devs| drv.memcpy_peer(os, 0, devs[1], 0x0fff_f000, 0x2000)).err().unwrap();
    assert!(e.contains("not inside the peer's 0x10000000-byte BAR 1"), "{e}");
    // The lender cannot drive the GPU it lent away.
    let mut c = Cluster::from_json(TWO).unwrap();
    bind(&mut c, "borrower", "gpu0").unwrap();
    let dev = c.os("lender").unwrap().find("gpu0").unwrap();
    let e = Driver::probe(&mut c.os("lender").unwrap(), dev).err().unwrap();
    assert!(e.to_string().contains("lent to host borrower"), "{e}");
}

#[test]
fn the_copy_engine_reports_bad_commands_in_its_status_register() {
    // Registers programmed by hand (a buggy driver, with no GPFIFO: the doorbell takes the
    // registers), on a borrowed GPU, on the machine: each refused command writes its status to
    // the error notifier, which the thread polls.
    let mut c = Cluster::from_json(TWO).unwrap();
    let g = bind(&mut c, "borrower", "gpu0").unwrap();
    // The last page of the DMA window the lender opened: the borrower's IOMMU maps nothing there.
    let unmapped = c.lends()[0].window_addr + c.lends()[0].window_size - 4096;
    let mut os = c.os("borrower").unwrap();
    let regs = os.pci_iomap(g.dev, 0).unwrap();
    let note = os.kmalloc(4096).unwrap();
    let note_dma = os.dma_map_single(g.dev, note, 4096, devlend_host::DmaDir::Bidirectional).unwrap();
    let host = c.fabric.host_id("borrower").unwrap();
    let gpu = shared(g.gpu);
    let got = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let out = got.clone();
    let (m, _) = on_machine(c, std::slice::from_ref(&gpu), host, move |os| {
        let w = |os: &mut ThreadOs, reg: u64, v: &[u8]| os.write(regs + reg, v).map_err(|e| e.to_string());
        w(os, CE_NOTIFY_ADDR, &note_dma.to_le_bytes())?;
        w(os, CE_GPFIFO_ADDR, &0u64.to_le_bytes())?;
        let cmds = [
            (0x3fff_f000, 0x1000, 0x2000, DIR_DEV_TO_BUS, 1u32),
            (0, 0x1000, 0x100, 7, 2),
            (0, 0x1000, 0, DIR_DEV_TO_BUS, 3),
            (0, unmapped, 4096, DIR_DEV_TO_BUS, 4),
            (0, unmapped, 4096, DIR_DEV_TO_BUS, 4),
        ];
        for (k, (src, dst, len, dir, bell)) in cmds.into_iter().enumerate() {
            os.write(note, &[0; 4]).map_err(|e| e.to_string())?;
            for (reg, v) in [(CE_SRC, src), (CE_DST, dst), (CE_LEN, len)] {
                w(os, reg, &v.to_le_bytes())?;
            }
            w(os, CE_DIR, &dir.to_le_bytes())?;
            w(os, CE_DOORBELL, &bell.to_le_bytes())?;
            if k < 4 {
                os.poll(note, 4, "the error notifier", |v| v != [0; 4]).map_err(|e| e.to_string())?;
            }
            let status = os.read(regs + CE_STATUS, 4).map_err(|e| e.to_string())?;
            out.borrow_mut().push(u32::from_le_bytes(status.try_into().unwrap()));
        }
        let fault = os.read(regs + CE_FAULT_ADDR, 8).map_err(|e| e.to_string())?;
        out.borrow_mut().push(u64::from_le_bytes(fault.try_into().unwrap()) as u32);
        Ok::<_, String>(())
    })
    .unwrap();
    // The same doorbell value again (the last command) is not a new command: the status stays.
    assert_eq!(*got.borrow(), [STATUS_OUT_OF_RANGE, STATUS_INVALID, STATUS_INVALID, STATUS_DMA_FAULT, STATUS_DMA_FAULT, unmapped as u32]);
    assert_eq!(gpu.borrow().copies, 4);
    let w = m.world();
    let fault = w.fabric.iommu(w.fabric.host_id("borrower").unwrap()).faults.last().copied();
    assert!(fault.is_some(), "the borrower's IOMMU logged the fault");
}

/// The fixture with every GPU of profile `profile`.
fn with_profile(json: &str, profile: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    for d in v["devices"].as_array_mut().unwrap() {
        d["profile"] = profile.into();
    }
    v.to_string()
}

#[test]
fn a_k40c_copies_into_its_12_gb_beyond_the_256_mib_bar1_that_peers_reach() {
    let json = with_profile(TWO, "tesla-k40c");
    let mut c = Cluster::from_json(&json).unwrap();
    let g = bind(&mut c, "lender", "gpu0").unwrap();
    assert_eq!((g.drv.mem_size, g.gpu.bar1_size), (12 << 30, 256 * MIB));
    fits(1 << 30, &g).unwrap();
    // Host to device at 11 GiB, where no BAR 1 reaches: the copy engine gets there.
    let at = 11 << 30;
    let prep = |c: &mut Cluster, _: &mut [Bound]| {
        let buf = c.os("borrower").unwrap().kmalloc(64 * KIB).unwrap();
        c.os("borrower").unwrap().write(buf, &pattern(5, 64 * KIB)).unwrap();
        buf
    };
    let (m, gpus) = run_with(&json, "borrower", &["gpu0"], prep, move |os, drv, buf, _| drv.memcpy_htod(os, at, buf, 64 * KIB)).unwrap();
    assert_eq!(gpus[0].borrow().mem_read(&m.world().fabric, at, 64 * KIB as usize).unwrap(), pattern(5, 64 * KIB));
    // A peer's store just past BAR 1 does not reach device memory (the driver refuses to map it,
    // and the address is not BAR 1 of the target).
    let json3 = with_profile(THREE, "tesla-k40c");
    let e = run_with(&json3, "borrower", &["gpu0", "gpu1"], |_, _| 0, |os, drv, _, devs| drv.memcpy_peer(os, 0, devs[1], 256 * MIB, 4096)).err().unwrap();
    assert!(e.contains("not inside the peer's 0x10000000-byte BAR 1"), "{e}");
    let mut c = Cluster::from_json(&json3).unwrap();
    let (src, dst) = (c.fabric.func_id("gpu0").unwrap(), c.fabric.func_id("gpu1").unwrap());
    let end = c.fabric.resolve_expr("gpu1.bar1").unwrap() + 256 * MIB;
    let r = c.fabric.route(Requester::Func(src), end, Access::Write);
    assert!(!matches!(r.delivered(), Some(devlend_fabric::route::Target::Bar { func, bar: 1, .. }) if func == dst), "{:?}", r.delivered());
}

#[test]
#[ignore = "prints D1-D3 through the driver; --ignored --nocapture"]
fn print_numbers() {
    let rem_iommu = with_iommu(TWO, &["lender"]);
    for size in [4 * KIB, MIB, 4 * MIB] {
        for (name, json, runner) in [("Loc", TWO, "lender"), ("Rem-SW", TWO, "borrower"), ("Rem-IOMMU", rem_iommu.as_str(), "borrower")] {
            for dir in [Dir::DtoH, Dir::HtoD] {
                let t = memcpy(json, runner, "gpu0", dir, size).unwrap();
                println!("D1 {name:10} {dir:?} {size:>8} B: {:>9} ns {:.3} GB/s", t.total_ps / 1000, t.bandwidth() / 1e9);
            }
        }
    }
    let (io_a, io_ab) = (with_iommu(THREE, &["lender-a"]), with_iommu(THREE, &["lender-a", "lender-b"]));
    let scenarios: [(&str, &str, &str, &str, &str, Via); 11] = [
        ("Loc-P2P-SW", THREE, "lender-a", "gpu0", "gpu1", Via::Peer),
        ("Loc-P2P-Root", THREE, "lender-a", "gpu0", "gpu2", Via::Peer),
        ("Loc-RAM-Root", THREE, "lender-a", "gpu0", "gpu1", Via::Ram),
        ("1L-P2P-SW", THREE, "borrower", "gpu0", "gpu1", Via::Peer),
        ("1L-P2P-IOMMU", &io_a, "borrower", "gpu0", "gpu1", Via::Peer),
        ("1L-RAM-SW", THREE, "borrower", "gpu0", "gpu1", Via::Ram),
        ("1L-RAM-IOMMU", &io_a, "borrower", "gpu0", "gpu1", Via::Ram),
        ("2L-P2P-SW", THREE, "borrower", "gpu2", "gpu3", Via::Peer),
        ("2L-P2P-IOMMU", &io_ab, "borrower", "gpu2", "gpu3", Via::Peer),
        ("2L-RAM-SW", THREE, "borrower", "gpu2", "gpu3", Via::Ram),
        ("2L-RAM-IOMMU", &io_ab, "borrower", "gpu2", "gpu3", Via::Ram),
    ];
    for (name, json, runner, src, dst, via) in scenarios {
        let mut line = format!("D2 {name:14}");
        for size in [4 * KIB, 64 * KIB, MIB, 4 * MIB] {
            line += &format!(" {:>7.3}", gpu_to_gpu(json, runner, src, dst, via, size).unwrap().bandwidth() / 1e9);
        }
        println!("{line} GB/s (4 KiB, 64 KiB, 1 MiB, 4 MiB); D3 round trip {} ns", pingpong(json, runner, src, dst, via).unwrap() / 1000);
    }
}
