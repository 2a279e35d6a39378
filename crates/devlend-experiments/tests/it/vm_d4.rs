//! D4 on the expansion-chassis testbed (000 §7.3). The fixture is
//! python/devlend/topologies/expansion-chassis-vm.yaml as JSON without its setup section
//! (what `devlend.experiments._gpu.topology_json` produces).

use devlend_drivers::gpu_run::Via;
use devlend_experiments::gpu::{gpu_to_gpu, pingpong};
use devlend_experiments::vm::d4;
use devlend_vm::fixtures::Scenario;
use devlend_vm::irq::Src;

const JSON: &str = include_str!("../../../devlend-vm/tests/expansion-chassis-vm.json");
const MIB: u64 = 1 << 20;

fn gbps(t: &devlend_drivers::gpu_run::CopyTiming) -> f64 {
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
fn on_an_idle_machine_the_interrupt_path_is_its_message_then_its_software_steps() {
    // MSI-X and INTx take the same chain after the message: the first host's entry (and for
    // VMRem the lender-side handler, the notification through the NTB and the borrower's entry),
    // eventfd/irqfd, the guest's entry; nothing waits on an idle machine.
    let p = devlend_vm::params::params();
    let entry = devlend_fabric::tuning::default_timing().irq_entry_ps;
    for sc in [Scenario::VmLoc, Scenario::VmRem] {
        let msix = d4::irq_latency(JSON, sc, Src::Msix(0)).unwrap();
        let intx = d4::irq_latency(JSON, sc, Src::Intx).unwrap();
        assert_eq!((msix[0].0.as_str(), intx[0].0.as_str()), ("MSI-X message, device to root", "Assert_INTx, device to root"));
        assert!(msix[0].1 > 0 && intx[0].1 > 0);
        assert_eq!(msix[1..], intx[1..], "{sc:?}: the same chain after the message");
        let software: u64 = msix[1..].iter().filter(|s| s.0 != "notification through the NTB").map(|s| s.1).sum();
        let hops = if sc == Scenario::VmRem { 2 * entry + p.lender_forward_ps } else { entry };
        assert_eq!(software, hops + p.eventfd_irqfd_ps + p.guest_irq_entry_ps, "{sc:?}: {msix:?}");
    }
}
