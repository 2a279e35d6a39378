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
//! model of [`devlend_devices::ib_hca`] runs on it as a device of the engine's machine: its doorbell
//! stores, WQE and payload reads and data and CQE writes travel the routes they really use. For
//! every configuration alike the card sits in a Gen1 x8 PCIe slot (the local testbed's PCI-X buses
//! are replaced by such slots), so the comparison is of access paths on one PCIe-attached HCA, not
//! of 004's PCI-X bus. [`RouteCosts`] reports what the engine measures along server A's routes.
//! Server B is native Linux in every case. The topologies: `xenib-back-to-back` (native, basic,
//! bypass), `xenib-vfio`, `xenib-lending` (python/devlend/topologies).

use crate::xenib::{self as bench, Mode};
use devlend_fabric::error::{JsonError, SpecError};
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_host::{Cluster, DmaDir, Os};
use devlend_wire::Access;
use devlend_xenib::error::{XResult, XenIbError};
use devlend_xenib::hca::{DomKind, DomMap, World, SERVER_A, SERVER_B};
use devlend_xenib::verbs::{Basic, Bypass, Native, Verbs};

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

/// The host layer's refusal of step `what` of a set-up.
fn herr(what: &'static str) -> impl Fn(devlend_host::HostError) -> XenIbError {
    move |error| XenIbError::Host { what, error }
}

/// What the engine measured along the routes one HCA really uses: the CPU's doorbell store into
/// the UAR, and the HCA's reads and writes of the domain's memory (through the IOMMU, an NTB ...,
/// whatever the fabric's programming puts on the route). A report beside the results: the HCA
/// model itself runs on those routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RouteCosts {
    /// One-way time of the CPU's 8-byte store to the UAR page.
    pub doorbell_ps: u64,
    /// Round trip of a small DMA read (request out, completion back), caches warm.
    pub read_rtt_ps: u64,
    /// One-way time of a small DMA write into memory.
    pub write_ps: u64,
    /// Streaming rates: femtoseconds per byte of a long read and a long write stream.
    pub read_fs_per_byte: u64,
    pub write_fs_per_byte: u64,
}

/// What devlend-engine measures along one HCA's routes: `mem` is the address the HCA uses for the
/// benchmarking domain's memory, `uar` the one the CPU uses for the UAR BAR.
pub fn route_costs(f: &mut Fabric, cpu: Requester, dev: Requester, uar: u64, mem: u64) -> XResult<RouteCosts> {
    let fail = |f: &Fabric, what: &'static str, addr: u64, failure| XenIbError::Route { what, addr, failure: Box::new(f.failure_report(&failure)) };
    let lat = |f: &mut Fabric, r, a, acc, what: &'static str| devlend_engine::latency(f, r, a, acc).map_err(|e| fail(f, what, a, e));
    let doorbell_ps = lat(f, cpu, uar, Access::Write, "doorbell store to the UAR")?;
    let read_rtt_ps = lat(f, dev, mem, Access::Read, "HCA read of host memory")?;
    let write_ps = lat(f, dev, mem, Access::Write, "HCA write to host memory")?;
    // marginal rate of a long stream: the difference between two lengths, so latency drops out
    let (short, long) = (256u64 << 10, 512u64 << 10);
    let mut rate = |acc, what: &'static str| -> XResult<u64> {
        let a = devlend_engine::dma(f, dev, mem, short, acc, true).map_err(|e| fail(f, what, e.addr, e.failure))?.time_ps;
        let b = devlend_engine::dma(f, dev, mem, long, acc, true).map_err(|e| fail(f, what, e.addr, e.failure))?.time_ps;
        Ok(b.saturating_sub(a) * 1000 / (long - short))
    };
    let read_fs_per_byte = rate(Access::Read, "HCA read stream")?;
    let write_fs_per_byte = rate(Access::Write, "HCA write stream")?;
    Ok(RouteCosts { doorbell_ps, read_rtt_ps, write_ps, read_fs_per_byte, write_fs_per_byte })
}

/// What the engine measures along the routes of server A's HCA for the benchmarking domain.
fn route_report(w: &mut World, a_dom: &str) -> XResult<RouteCosts> {
    let a_dom = dom(w, a_dom)?;
    let mem = w.dma_addr(a_dom, w.domains[a_dom as usize].base);
    let (cpu, dev, uar) = (w.nodes[SERVER_A].cpu, w.nodes[SERVER_A].dev, w.nodes[SERVER_A].uar_base);
    route_costs(&mut w.fab, cpu, dev, uar, mem)
}

/// The local testbed on the platform of the other two: its PCI-X buses as Gen1 x8 PCIe slots (the
/// card's enumeration link), without the xSeries 360 host bridge's own timing (its `params`).
fn in_pcie_slots(json: &str) -> XResult<String> {
    let mut v: serde_json::Value = serde_json::from_str(json).map_err(|e| XenIbError::Topology(SpecError::at("", JsonError::from(e))))?;
    if let Some(links) = v.get_mut("links").and_then(|l| l.as_array_mut()) {
        for l in links {
            l["kind"] = "slot".into();
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("params");
    }
    Ok(v.to_string())
}

/// The world of the VFIO set-up: a VM on server A with hca-a passed through; the benchmarking
/// domain is guest memory (guest-physical addresses, EPT chunks recorded for the CPU).
fn vfio_world(json: &str) -> XResult<World> {
    let mut c = Cluster::from_json(json).map_err(herr("the VFIO testbed"))?;
    let mut vmm = devlend_vm::Vmm::default();
    let vm = vmm.create_vm(&mut c, "server-a", "vm1", VM_RAM).map_err(herr("create the VM"))?;
    let dev = vmm.assign_vfio(&mut c, vm, "hca-a").map_err(herr("assign hca-a by VFIO"))?;
    let gpa = {
        let mut g = vmm.guest(&mut c, vm).map_err(herr("the guest's kernel"))?;
        g.pci_set_master(dev).map_err(herr("bus mastering in the guest"))?;
        g.kmalloc(DOMAIN_BYTES).map_err(herr("the guest's buffer"))?
    };
    let chunk = devlend_vm::layout::CHUNK;
    let v = vmm.vm(vm).map_err(herr("the VM"))?;
    let mut hpa = std::collections::BTreeMap::new();
    let mut g = gpa / chunk * chunk;
    while g < gpa + DOMAIN_BYTES {
        hpa.insert(g, v.pin(g).ok_or(XenIbError::Unbacked { gpa: g })?);
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
fn lending_world(json: &str) -> XResult<World> {
    let mut c = Cluster::from_json(json).map_err(herr("the lending testbed"))?;
    let dev = c.borrow("server-a", "hca-a").map_err(herr("borrow hca-a"))?;
    let bar = |i: u8| c.lends().iter().find(|l| l.dev == dev).and_then(|l| l.bars.iter().find(|b| b.index == i).map(|b| b.cpu_addr));
    let bars = bar(0).zip(bar(2)).ok_or_else(|| XenIbError::NoUarBar { device: "hca-a".into() })?;
    let (phys, dma) = {
        let mut os = c.os("server-a").map_err(herr("server A's kernel"))?;
        os.pci_set_master(dev).map_err(herr("bus mastering"))?;
        let phys = os.kmalloc(DOMAIN_BYTES).map_err(herr("the borrower's buffer"))?;
        (phys, os.dma_map_single(dev, phys, DOMAIN_BYTES, DmaDir::Bidirectional).map_err(herr("map the buffer for the HCA"))?)
    };
    let Cluster { fabric, .. } = c;
    let mut w = World::on_fabric(fabric, false, Some(bars))?;
    w.add_domain_at(SERVER_A, "linux-a", DomKind::Native, phys, DOMAIN_BYTES, DomMap::Offset { dma_base: dma });
    w.add_domain(SERVER_B, "linux-b", DomKind::Native)?;
    Ok(w)
}

/// The world and server A's verbs for one access path, server B's native verbs; host interfaces
/// timed from the routes.
pub fn testbed(t: &Topologies, access: &str) -> XResult<(World, Box<dyn Verbs>, Native)> {
    build(t, access).map(|(w, a, b, _)| (w, a, b))
}

/// [`testbed`], with server A's route costs.
fn build(t: &Topologies, access: &str) -> XResult<(World, Box<dyn Verbs>, Native, RouteCosts)> {
    let (mut w, a_dom) = match access {
        "native" => (World::new(&in_pcie_slots(t.local)?, false, 0)?, "linux-a"),
        "basic" | "bypass" => (World::new(&in_pcie_slots(t.local)?, true, 1)?, "guest1"),
        "vfio" => (vfio_world(t.vfio)?, "vm1"),
        "lending" => (lending_world(t.lending)?, "linux-a"),
        _ => return Err(XenIbError::unknown("access path", access, &ACCESSES)),
    };
    let costs = route_report(&mut w, a_dom)?;
    let d = dom(&w, a_dom)?;
    let a: Box<dyn Verbs> = match access {
        "basic" => Box::new(Basic::new(&w, d)),
        "bypass" => Box::new(Bypass::new(&w, d)),
        _ => Box::new(Native::new(&w, d)),
    };
    let b = Native::new(&w, dom(&w, "linux-b")?);
    Ok((w, a, b, costs))
}

/// Server A's route costs for one access path (what the table reports beside the results).
pub fn costs(t: &Topologies, access: &str) -> XResult<RouteCosts> {
    build(t, access).map(|b| b.3)
}

fn dom(w: &World, name: &str) -> XResult<devlend_xenib::DomId> {
    w.dom(name).ok_or_else(|| XenIbError::NoDomain { name: name.into() })
}

/// RDMA-write round trip (ps) per size.
pub fn latency(t: &Topologies, access: &str, sizes: &[u64], iters: u64) -> XResult<Vec<(u64, u64)>> {
    bench::check_args(sizes, &[("iterations", iters)])?;
    let (w, a, b) = testbed(t, access)?;
    bench::latency_on(access, w, a, b, Mode::Rdma, sizes, iters, false)
}

/// RDMA-write throughput A to B (bytes/s) per size, at most `depth` outstanding.
pub fn bandwidth(t: &Topologies, access: &str, sizes: &[u64], iters: u64, depth: u64) -> XResult<Vec<(u64, f64)>> {
    bench::check_args(sizes, &[("iterations", iters), ("depth", depth)])?;
    let (w, a, b) = testbed(t, access)?;
    bench::bandwidth_on(access, w, a, b, Mode::Rdma, sizes, iters, depth)
}

#[cfg(test)]
mod tests;
