//! D4 on the expansion-chassis testbed (000 §7.3). The fixture is
//! python/devlend/topologies/expansion-chassis-vm.yaml as JSON without its setup section
//! (what `devlend.experiments._gpu.topology_json` produces).

use devlend_devices::gpu_run::Via;
use devlend_experiments::gpu::{gpu_to_gpu, pingpong};
use devlend_experiments::vm::d4;
use devlend_vm::fixtures::{self, Scenario};
use devlend_vm::irq::{device_interrupt, Src};

const JSON: &str = include_str!("../../devlend-vm/tests/expansion-chassis-vm.json");
const H: u32 = 0xabc;
const MIB: u64 = 1 << 20;

fn gbps(t: &devlend_devices::gpu_run::CopyTiming) -> f64 {
    t.bandwidth() / 1e9
}

#[test]
fn ram_bounce_paths_have_7_and_21_hops() {
    assert_eq!(d4::ram_bounce_path(JSON, Scenario::VmLoc).unwrap().0, 7);
    assert_eq!(d4::ram_bounce_path(JSON, Scenario::VmRem).unwrap(), (21, 3, 2));
}

#[test]
fn vm_bandwidth_relations_of_fig_16() {
    let js = JSON.to_string();
    let loc = gbps(&d4::gpu_to_gpu(JSON, Scenario::VmLoc, Via::Peer, 4 * MIB).unwrap());
    let rem = gbps(&d4::gpu_to_gpu(JSON, Scenario::VmRem, Via::Peer, 4 * MIB).unwrap());
    let nat = gbps(&gpu_to_gpu(&js, "remote", "gpu0", "gpu1", Via::Peer, 4 * MIB).unwrap());
    let loc_ram = gbps(&d4::gpu_to_gpu(JSON, Scenario::VmLoc, Via::Ram, 4 * MIB).unwrap());
    let rem_ram = gbps(&d4::gpu_to_gpu(JSON, Scenario::VmRem, Via::Ram, 4 * MIB).unwrap());
    eprintln!("P2P loc {loc:.2} rem {rem:.2} natrem {nat:.2}; RAM loc {loc_ram:.2} rem {rem_ram:.2}");
    assert!((rem / loc - 1.0).abs() < 0.05, "VMRem-P2P ~ VMLoc-P2P at 4 MB");
    assert!((nat / rem - 1.0).abs() < 0.10, "NatRem-P2P-IOMMU comparable");
    assert!(rem_ram < 0.5 * loc_ram, "drastic drop for the 21-hop RAM bounce");
}

#[test]
fn vm_pingpong_p2p_remote_is_local() {
    let loc = d4::pingpong(JSON, Scenario::VmLoc, Via::Peer).unwrap();
    let rem = d4::pingpong(JSON, Scenario::VmRem, Via::Peer).unwrap();
    let rem_ram = d4::pingpong(JSON, Scenario::VmRem, Via::Ram).unwrap();
    let loc_ram = d4::pingpong(JSON, Scenario::VmLoc, Via::Ram).unwrap();
    let nat = pingpong(JSON, "remote", "gpu0", "gpu1", Via::Peer).unwrap();
    eprintln!("pingpong ns: loc {} rem {} nat {} loc_ram {} rem_ram {}", loc / 1000, rem / 1000, nat / 1000, loc_ram / 1000, rem_ram / 1000);
    assert_eq!(loc, rem, "same data path, same latency");
    assert_eq!(nat, rem);
    assert!(rem_ram > loc_ram);
}

#[test]
fn on_an_idle_machine_the_msix_path_takes_what_the_timeless_one_computes() {
    for sc in [Scenario::VmLoc, Scenario::VmRem] {
        let clock = d4::irq_latency(JSON, sc, Src::Msix(0)).unwrap();
        let mut t = fixtures::testbed(JSON, sc).unwrap();
        let gv = t.vmm.guest(&mut t.c, t.vm).unwrap().request_irq(t.a.dev, 0, H).unwrap();
        assert!(device_interrupt(&mut t.c, "gpu0", 0).unwrap());
        assert_eq!(t.vmm.guest(&mut t.c, t.vm).unwrap().irq_count(gv), 1);
        let timeless = t.vmm.irq_route(t.vm, t.a.dev, Src::Msix(0)).unwrap().steps.clone();
        assert_eq!(clock, timeless, "{sc:?}: the same steps, each as long");
    }
}

