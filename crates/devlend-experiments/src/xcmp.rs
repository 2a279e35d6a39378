//! The comparison no paper made (issue 7): 004's kernel RDMA-write benchmark (round trip and
//! throughput, [`crate::xenib`]) with server A's HCA reached four ways, beside native Linux:
//!
//! - `basic`: Xen's basic split driver in a guest (004 §3.1-3.2): every verb through the device
//!   channel to the back-end in domain 0;
//! - `bypass`: Xen's device-domain bypass (004 §3.3): post and poll straight from the guest;
//! - `vfio`: a KVM guest with the HCA passed through by VFIO (000 §2.2, §5; devlend-vm
//!   `Vmm::assign_vfio`): the unmodified native driver runs in the guest, the HCA's DMA uses
//!   guest-physical addresses that server A's IOMMU translates, the guest's doorbell stores reach
//!   the BAR through the EPT (the same TLP as the host's), interrupts come through the host;
//! - `lending`: server A borrows an HCA installed in another host with Device Lending over PXH830
//!   NTBs (000 §4; devlend-host `Cluster::borrow`): its doorbell stores cross the NTB into the
//!   lender, the HCA's WQE and payload reads and its data and CQE writes cross it back and go
//!   through server A's IOMMU (the borrower's DMA API maps the buffers into the lender's window).
//!
//! The host software (Vmm, Cluster and their kernels' DMA API) programs the fabric; then the HCA
//! model of [`devlend_xenib::hca`] runs on it. For every configuration alike, the HCA's host interface is
//! timed from the routes it really uses ([`RouteCosts`], measured by devlend-engine: the CPU's
//! doorbell store to the UAR, a small DMA read's round trip and a write's one-way time into the
//! benchmark's memory, and the streaming rates), so the comparison is of access paths on one
//! PCIe-attached HCA (the Gen1 x8 slot the topologies give the card), not of 004's PCI-X bus.
//! Server B is native Linux in every case. The topologies: `xenib-back-to-back` (native, basic,
//! bypass), `xenib-vfio`, `xenib-lending` (python/devlend/topologies).

use crate::xenib::{self as bench, Mode};
use devlend_xenib::hca::{DomKind, DomMap, HostIf, RouteCosts, World, SERVER_A, SERVER_B};
use devlend_xenib::verbs::{Basic, Bypass, Native, Verbs};
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_host::{Cluster, DmaDir, Os};
use devlend_wire::Access;

pub const ACCESSES: [&str; 5] = ["native", "basic", "bypass", "vfio", "lending"];

/// Memory of the benchmarking domain on server A in the VFIO and lending set-ups.
const DOMAIN_BYTES: u64 = 64 << 20;
/// RAM of the VFIO guest.
const VM_RAM: u64 = 128 << 20;

/// The three testbeds as JSON.
#[derive(Clone, Copy, Debug)]
pub struct Topologies<'a> {
    pub local: &'a str,
    pub vfio: &'a str,
    pub lending: &'a str,
}

fn herr(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// What devlend-engine measures along one HCA's routes: `mem` is the address the HCA uses for the
/// benchmarking domain's memory, `uar` the one the CPU uses for the UAR BAR.
pub fn route_costs(f: &mut Fabric, cpu: Requester, dev: Requester, uar: u64, mem: u64) -> Result<RouteCosts, String> {
    let fail = |what: &str, e: devlend_fabric::route::Failure| format!("{what}: {e:?}");
    let lat = |f: &mut Fabric, r, a, acc, what: &str| devlend_engine::latency(f, r, a, acc).map_err(|e| fail(what, e));
    let doorbell_ps = lat(f, cpu, uar, Access::Write, "doorbell store to the UAR")?;
    let read_rtt_ps = lat(f, dev, mem, Access::Read, "HCA read of host memory")?;
    let write_ps = lat(f, dev, mem, Access::Write, "HCA write to host memory")?;
    // marginal rate of a long stream: the difference between two lengths, so latency drops out
    let (short, long) = (256u64 << 10, 512u64 << 10);
    let mut rate = |acc, what: &str| -> Result<u64, String> {
        let a = devlend_engine::dma(f, dev, mem, short, acc, true).map_err(|e| fail(what, e.failure))?.time_ps;
        let b = devlend_engine::dma(f, dev, mem, long, acc, true).map_err(|e| fail(what, e.failure))?.time_ps;
        Ok(b.saturating_sub(a) * 1000 / (long - short))
    };
    let read_fs_per_byte = rate(Access::Read, "HCA read stream")?;
    let write_fs_per_byte = rate(Access::Write, "HCA write stream")?;
    Ok(RouteCosts { doorbell_ps, read_rtt_ps, write_ps, read_fs_per_byte, write_fs_per_byte })
}

/// Time both HCAs' host interfaces from their routes (to the first domain on each server).
fn route_world(w: &mut World, a_dom: &str) -> Result<(), String> {
    let b_dom = w.dom("linux-b").ok_or("no domain on server B")?;
    let a_dom = w.dom(a_dom).ok_or_else(|| format!("no domain {a_dom} on server A"))?;
    for (node, dom) in [(SERVER_A, a_dom), (SERVER_B, b_dom)] {
        let mem = w.dma_addr(dom, w.domains[dom as usize].base);
        let (cpu, dev, uar) = (w.nodes[node].cpu, w.nodes[node].dev, w.nodes[node].uar_base);
        let c = route_costs(&mut w.fab, cpu, dev, uar, mem)?;
        w.nodes[node].host_if = HostIf::Routed(c);
    }
    Ok(())
}

/// The world of the VFIO set-up: a VM on server A with hca-a passed through; the benchmarking
/// domain is guest memory (guest-physical addresses, EPT chunks recorded for the CPU).
fn vfio_world(json: &str) -> Result<World, String> {
    let mut c = Cluster::from_json(json).map_err(herr)?;
    let mut vmm = devlend_vm::Vmm::default();
    let vm = vmm.create_vm(&mut c, "server-a", "vm1", VM_RAM).map_err(herr)?;
    let dev = vmm.assign_vfio(&mut c, vm, "hca-a").map_err(herr)?;
    let gpa = {
        let mut g = vmm.guest(&mut c, vm).map_err(herr)?;
        g.pci_set_master(dev).map_err(herr)?;
        g.kmalloc(DOMAIN_BYTES).map_err(herr)?
    };
    let chunk = devlend_vm::layout::CHUNK;
    let v = vmm.vm(vm).map_err(herr)?;
    let mut hpa = std::collections::BTreeMap::new();
    let mut g = gpa / chunk * chunk;
    while g < gpa + DOMAIN_BYTES {
        hpa.insert(g, v.pin(g).ok_or_else(|| format!("guest-physical {g:#x} has no backing"))?);
        g += chunk;
    }
    let Cluster { fabric, .. } = c;
    let mut w = World::on_fabric(fabric, false, None)?;
    w.add_domain_at(SERVER_A, "vm1", DomKind::Vm, gpa, DOMAIN_BYTES, DomMap::Guest { chunk, hpa });
    w.add_domain(SERVER_B, "linux-b", DomKind::Native)?;
    Ok(w)
}

/// The world of the lending set-up: server A borrows hca-a from the lender; its driver's buffers
/// are mapped for the device by server A's DMA API (into the lender's NTB window).
fn lending_world(json: &str) -> Result<World, String> {
    let mut c = Cluster::from_json(json).map_err(herr)?;
    let dev = c.borrow("server-a", "hca-a").map_err(herr)?;
    let uar = c.lends().iter().find(|l| l.dev == dev).and_then(|l| l.bars.iter().find(|b| b.index == 2).map(|b| b.cpu_addr)).ok_or("the lend has no UAR BAR (BAR 2)")?;
    let (phys, dma) = {
        let mut os = c.os("server-a").map_err(herr)?;
        os.pci_set_master(dev).map_err(herr)?;
        let phys = os.kmalloc(DOMAIN_BYTES).map_err(herr)?;
        (phys, os.dma_map_single(dev, phys, DOMAIN_BYTES, DmaDir::Bidirectional).map_err(herr)?)
    };
    let Cluster { fabric, .. } = c;
    let mut w = World::on_fabric(fabric, false, Some(uar))?;
    w.add_domain_at(SERVER_A, "linux-a", DomKind::Native, phys, DOMAIN_BYTES, DomMap::Offset { dma_base: dma });
    w.add_domain(SERVER_B, "linux-b", DomKind::Native)?;
    Ok(w)
}

/// The world and server A's verbs for one access path, server B's native verbs; host interfaces
/// timed from the routes.
pub fn testbed(t: &Topologies, access: &str) -> Result<(World, Box<dyn Verbs>, Native), String> {
    let (mut w, a_dom) = match access {
        "native" => (World::new(t.local, false, 0)?, "linux-a"),
        "basic" | "bypass" => (World::new(t.local, true, 1)?, "guest1"),
        "vfio" => (vfio_world(t.vfio)?, "vm1"),
        "lending" => (lending_world(t.lending)?, "linux-a"),
        _ => return Err(format!("access path '{access}': expected one of {}", ACCESSES.join(", "))),
    };
    route_world(&mut w, a_dom)?;
    let d = w.dom(a_dom).ok_or("no benchmarking domain")?;
    let a: Box<dyn Verbs> = match access {
        "basic" => Box::new(Basic::new(&w, d)),
        "bypass" => Box::new(Bypass::new(&w, d)),
        _ => Box::new(Native::new(&w, d)),
    };
    let b = Native::new(&w, w.dom("linux-b").ok_or("no domain on server B")?);
    Ok((w, a, b))
}

/// Server A's route costs for one access path (what the table reports beside the results).
pub fn costs(t: &Topologies, access: &str) -> Result<RouteCosts, String> {
    match testbed(t, access)?.0.nodes[SERVER_A].host_if {
        HostIf::Routed(c) => Ok(c),
        HostIf::PciX => Err("server A's host interface is not routed".into()),
    }
}

/// RDMA-write round trip (ps) per size.
pub fn latency(t: &Topologies, access: &str, sizes: &[u64], iters: u64) -> Result<Vec<(u64, u64)>, String> {
    bench::check_args(sizes, &[("iterations", iters)])?;
    let (w, a, b) = testbed(t, access)?;
    bench::latency_on(access, w, a, b, Mode::Rdma, sizes, iters, false)
}

/// RDMA-write throughput A to B (bytes/s) per size, at most `depth` outstanding.
pub fn bandwidth(t: &Topologies, access: &str, sizes: &[u64], iters: u64, depth: u64) -> Result<Vec<(u64, f64)>, String> {
    bench::check_args(sizes, &[("iterations", iters), ("depth", depth)])?;
    let (w, a, b) = testbed(t, access)?;
    bench::bandwidth_on(access, w, a, b, Mode::Rdma, sizes, iters, depth)
}

#[cfg(test)]
mod tests;
