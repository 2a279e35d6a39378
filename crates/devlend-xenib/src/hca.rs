//! The world the Xen-IB HCAs live in: two servers on the fabric, their PCI-X buses, the
//! back-to-back 4X link, each server's domains and the HCA it drives, and Xen on server A.
//!
//! The HCA itself (004 §2.2: a Mellanox InfiniHost MT23108 on a MHXL-CF128-T card, PCI-X) is a
//! device model of devlend-devices (`devlend_devices::ib_hca`): its tables (QPs, CQs, UAR
//! pages, the TPT) are each node's [`Node::hca`], and this world gives it what it asks through
//! `HcaWorld`. Timing is mechanism, on the engine's one clock: the HCA's DMA flows on the shared
//! simulation (on 004's card through the PCI-X bus, a half-duplex link of the engine). Data
//! really moves through the fabric: the HCA reads and writes host RAM as its own requester, at
//! the addresses its driver put in the MTT (machine addresses under Xen, guest-physical ones in
//! a VFIO guest, the lender's NTB window for a borrowed HCA: [`DomMap`]).

use crate::error::{XResult, XenIbError};
use crate::params::hca_params;
use crate::types::*;
use devlend_devices::ib_hca::types::Packet;
use devlend_devices::ib_hca::{HcaState, HcaWorld, HCR_OFFSET};
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomKind {
    /// A non-virtualised Linux host.
    Native,
    /// Xen's isolated device domain (domain 0), owner of the HCA (004 §2.1).
    Device,
    /// A guest domain, reaching the HCA through the front-end driver.
    Guest,
    /// A KVM guest with the HCA passed through by VFIO: the native driver in the guest drives the
    /// HCA directly; its DMA is translated by the host IOMMU, its interrupts come through the host.
    Vm,
}

/// A domain's memory: a range of machine pages (with paravirtualisation, DMA addresses are machine
/// addresses, 004 §3.2), handed out by a bump allocator.
#[derive(Debug, Clone)]
pub struct Domain {
    pub id: DomId,
    pub name: String,
    pub kind: DomKind,
    pub node: usize,
    pub base: u64,
    pub size: u64,
    pub next: u64,
    /// How the HCA and the CPU reach the domain's addresses.
    pub map: DomMap,
}

/// How a domain's addresses (what its kernel calls physical) reach host RAM, for the HCA's DMA and
/// for its own CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomMap {
    /// The same address for both: native Linux, and Xen's paravirtualised domains, whose DMA
    /// addresses are machine addresses (004 §3.2).
    Identity,
    /// A borrowed HCA (Device Lending): the CPU uses host-physical addresses, the HCA the bus
    /// address the borrower's DMA API returned for the region (`dma_base` for `base`), which
    /// leads through the lender's NTB window and the borrower's IOMMU (000 §4).
    Offset { dma_base: u64 },
    /// A VM with the HCA passed through (VFIO): the addresses are guest-physical; the HCA uses
    /// them as they are (IOVA = GPA, the host IOMMU translates), the CPU through the EPT: the host
    /// address of each 2 MiB chunk.
    Guest { chunk: u64, hpa: std::collections::BTreeMap<u64, u64> },
}

impl Domain {
    pub fn owns(&self, addr: u64, len: u64) -> bool {
        addr >= self.base && addr.saturating_add(len) <= self.base + self.size
    }
}

pub struct Node {
    pub name: String,
    pub cpu: Requester,
    pub host: HostId,
    pub dev: Requester,
    pub func: FuncId,
    /// Host-physical base of the UAR BAR (BAR 2), as this node's CPU reaches it.
    pub uar_base: u64,
    /// The HCR of the HCA (in BAR 0), as this node's CPU reaches it.
    pub hcr: u64,
    /// The command mailbox: one page of the driving kernel's memory (its DMA address), once used.
    pub mailbox: Option<u64>,
    /// The HCA's tables, its packet inbox and its log of landed data.
    pub hca: HcaState,
}

impl devlend_engine::machine::World for World {
    fn fabric(&mut self) -> &mut Fabric {
        &mut self.fab
    }
}

pub const SERVER_A: usize = 0;
pub const SERVER_B: usize = 1;

/// Both servers, their HCAs and domains, and Xen on server A.
pub struct World {
    pub fab: Fabric,
    pub nodes: Vec<Node>,
    pub domains: Vec<Domain>,
    /// Whether server A runs Xen (false: native Linux on server A, "gen2-native").
    pub xen_on_a: bool,
    pub xen: crate::xen::Xen,
    next_packet: u64,
}

pub const HCA_NAMES: [&str; 2] = ["hca-a", "hca-b"];
pub const HCA_PROFILE: &str = "mhxl-cf128-t";
pub const HOST_NAMES: [&str; 2] = ["server-a", "server-b"];
/// Where the domains' memory starts in each host's RAM (byte offset) and how big each is.
const DOMAIN_RAM_OFFSET: u64 = 0x1000_0000;
const DOMAIN_RAM_SIZE: u64 = 0x1000_0000;

/// The testbed description as JSON (the same as `python/devlend/topologies/xenib-back-to-back.yaml`),
/// for Rust callers without the Python front end.
pub const TESTBED_JSON: &str = r#"{"name":"xenib-back-to-back","source":"004 \u00a74.1","hosts":[{"name":"server-a","cpu":"generic-x86","ram":1073741824,"iommu":false,"root_ports":1},{"name":"server-b","cpu":"generic-x86","ram":1073741824,"iommu":false,"root_ports":1}],"devices":[{"name":"hca-a","profile":"mhxl-cf128-t"},{"name":"hca-b","profile":"mhxl-cf128-t"}],"links":[{"a":"server-a.rp0","b":"hca-a","gen":1,"width":8,"kind":"pcix"},{"a":"server-b.rp0","b":"hca-b","gen":1,"width":8,"kind":"pcix"}],"setup":[{"op":"bus_master","device":"hca-a","enable":true},{"op":"bus_master","device":"hca-b","enable":true}],"params":{"hosts":{"server-a":{"root_latency_ps":300000,"ram_completion_bytes":128},"server-b":{"root_latency_ps":300000,"ram_completion_bytes":128}},"devices":{"hca-a":{"max_read_request":4096},"hca-b":{"max_read_request":4096}}}}"#;

/// (offset, length) pieces of `[addr, addr + len)` that do not cross a 4 KiB page.
fn page_pieces(addr: u64, len: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < len {
        let a = addr + off as u64;
        let n = ((4096 - a % 4096) as usize).min(len - off);
        out.push((off, n));
        off += n;
    }
    out
}

impl World {
    /// Build the testbed. `xen_on_a`: server A runs Xen (domain 0 is the device domain) or native
    /// Linux. Domains: server A gets domain 0 (device domain, or native) and `guests` guest
    /// domains; server B one native domain.
    pub fn new(topology_json: &str, xen_on_a: bool, guests: usize) -> XResult<World> {
        if guests > 0 && !xen_on_a {
            return Err(XenIbError::GuestsNeedXen { guests });
        }
        let fab = devlend_fabric::build_json(topology_json).map_err(XenIbError::Topology)?;
        let mut w = World::on_fabric(fab, xen_on_a, None)?;
        let a_kind = if xen_on_a { DomKind::Device } else { DomKind::Native };
        w.add_domain(SERVER_A, if xen_on_a { "dom0" } else { "linux-a" }, a_kind)?;
        for g in 0..guests {
            w.add_domain(SERVER_A, &format!("guest{}", g + 1), DomKind::Guest)?;
        }
        w.add_domain(SERVER_B, "linux-b", DomKind::Native)?;
        Ok(w)
    }

    /// The two HCAs on a fabric already built (and programmed), no domains yet. Node `i` is the HCA
    /// `HCA_NAMES[i]` (wherever it is installed) driven by the CPU of `HOST_NAMES[i]`; `bars_a`:
    /// the addresses server A's CPU uses for hca-a's BAR 0 and BAR 2 when they are not the BARs'
    /// own (a borrowed HCA).
    pub fn on_fabric(fab: Fabric, xen_on_a: bool, bars_a: Option<(u64, u64)>) -> XResult<World> {
        let mut nodes = Vec::new();
        let named = |what: String| move |error| XenIbError::Fabric { what, error };
        for (i, hca) in HCA_NAMES.iter().enumerate() {
            let dev = fab.requester(hca).map_err(named(format!("the HCA {hca}")))?;
            let cpu = fab.requester(&format!("{}:cpu", HOST_NAMES[i])).map_err(named(format!("the CPU of {}", HOST_NAMES[i])))?;
            let host = fab.host_id(HOST_NAMES[i]).map_err(named(format!("the host {}", HOST_NAMES[i])))?;
            let (Requester::Func(func), Requester::Cpu(_)) = (dev, cpu) else { unreachable!("an HCA is a function, a CPU is a host's") };
            let bar0 = fab.resolve_expr(&format!("{hca}.bar0")).map_err(named(format!("the HCR BAR (BAR 0) of {hca}")))?;
            let bar2 = fab.resolve_expr(&format!("{hca}.bar2")).map_err(named(format!("the UAR BAR (BAR 2) of {hca}")))?;
            let (bar0, uar_base) = if i == SERVER_A { bars_a.unwrap_or((bar0, bar2)) } else { (bar0, bar2) };
            // one 4 KiB UAR page per BAR 2 page (the profile's UAR BAR)
            let uar_bar =
                devlend_fabric::params::params().device.get(HCA_PROFILE).and_then(|d| d.bars.iter().find(|b| b.index == 2)).map_or(0x80_0000, |b| b.size);
            let uar_pages = (uar_bar / 4096).max(1);
            let hca = HcaState { uars: vec![None; uar_pages as usize], next_key: 0x100, ..Default::default() };
            nodes.push(Node { name: HOST_NAMES[i].into(), cpu, host, dev, func, uar_base, hcr: bar0 + HCR_OFFSET, mailbox: None, hca });
        }
        Ok(World { fab, nodes, domains: Vec::new(), xen_on_a, xen: Default::default(), next_packet: 0 })
    }

    /// A domain on `node` with its memory at the next fixed slot of that server's RAM, reached
    /// by CPU and HCA at the same addresses.
    pub fn add_domain(&mut self, node: usize, name: &str, kind: DomKind) -> XResult<DomId> {
        let n = self.domains.iter().filter(|d| d.node == node).count() as u64;
        let id = self.fab.host_id(HOST_NAMES[node]).map_err(|error| XenIbError::Fabric { what: format!("the host {}", HOST_NAMES[node]), error })?;
        let host = self.fab.host(id);
        let too_small = || XenIbError::RamTooSmall { host: HOST_NAMES[node].into(), domain: name.into() };
        let base = self.fab.ram_offset_to_phys(host, DOMAIN_RAM_OFFSET + n * DOMAIN_RAM_SIZE).ok_or_else(too_small)?;
        Ok(self.add_domain_at(node, name, kind, base, DOMAIN_RAM_SIZE, DomMap::Identity))
    }

    /// A domain whose memory is `[base, base + size)` in its own addresses, mapped as `map` says.
    pub fn add_domain_at(&mut self, node: usize, name: &str, kind: DomKind, base: u64, size: u64, map: DomMap) -> DomId {
        let id = self.domains.len() as DomId;
        self.domains.push(Domain { id, name: name.into(), kind, node, base, size, next: base, map });
        id
    }

    /// The address the HCA uses for `addr` of domain `dom` (what a driver puts in the MTT).
    pub fn dma_addr(&self, dom: DomId, addr: u64) -> u64 {
        let d = &self.domains[dom as usize];
        match &d.map {
            DomMap::Identity | DomMap::Guest { .. } => addr,
            DomMap::Offset { dma_base } => dma_base + (addr - d.base),
        }
    }

    /// The host-physical address the domain's CPU reaches at `addr` (through the EPT for a VM).
    pub fn host_addr(&self, dom: DomId, addr: u64) -> u64 {
        match &self.domains[dom as usize].map {
            DomMap::Identity | DomMap::Offset { .. } => addr,
            DomMap::Guest { chunk, hpa } => {
                let c = addr / chunk * chunk;
                hpa.get(&c).map_or(addr, |h| h + (addr - c))
            }
        }
    }

    /// A store by domain `dom`'s CPU (functional; a VM's accesses go through its EPT, one page at a time).
    pub fn dom_write(&mut self, dom: DomId, addr: u64, data: &[u8]) {
        let node = self.domains[dom as usize].node;
        for (off, n) in page_pieces(addr, data.len()) {
            let a = self.host_addr(dom, addr + off as u64);
            self.cpu_write(node, a, &data[off..off + n]);
        }
    }
    pub fn dom_read(&mut self, dom: DomId, addr: u64, len: usize) -> Vec<u8> {
        let node = self.domains[dom as usize].node;
        let mut out = Vec::with_capacity(len);
        for (off, n) in page_pieces(addr, len) {
            let a = self.host_addr(dom, addr + off as u64);
            out.extend(self.cpu_read(node, a, n));
        }
        out
    }

    pub fn dom(&self, name: &str) -> Option<DomId> {
        self.domains.iter().find(|d| d.name == name).map(|d| d.id)
    }

    /// Allocate page-aligned memory of a domain (its pseudo-physical = machine pages).
    pub fn alloc(&mut self, dom: DomId, len: u64) -> VResult<u64> {
        let pb = hca_params().page_bytes;
        let d = &mut self.domains[dom as usize];
        let len = len.max(1).div_ceil(pb) * pb;
        if d.next + len > d.base + d.size {
            return Err(Status::NoMem);
        }
        let a = d.next;
        d.next += len;
        Ok(a)
    }

    /// Which domain owns a machine address.
    pub fn owner_of(&self, node: usize, addr: u64) -> Option<DomId> {
        self.domains.iter().find(|d| d.node == node && d.owns(addr, 1)).map(|d| d.id)
    }

    /// A CPU store by the owner of `dom` into its own memory (functional only).
    pub fn cpu_write(&mut self, node: usize, addr: u64, data: &[u8]) {
        let cpu = self.nodes[node].cpu;
        self.fab.write(cpu, addr, data);
    }
    pub fn cpu_read(&mut self, node: usize, addr: u64, len: usize) -> Vec<u8> {
        let cpu = self.nodes[node].cpu;
        self.fab.read(cpu, addr, len).0
    }

    // ----- the driving kernel ---------------------------------------------------------------

    /// The kernel that drives the HCA on `node`: its first domain (native Linux, domain 0, the
    /// VFIO guest, the borrower).
    pub fn kernel_dom(&self, node: usize) -> Option<DomId> {
        self.domains.iter().find(|d| d.node == node).map(|d| d.id)
    }

    /// A buffer of `len` bytes in the driving kernel's memory: its DMA address.
    pub fn kernel_buffer(&mut self, node: usize, len: u64) -> VResult<u64> {
        let k = self.kernel_dom(node).ok_or(Status::NoMem)?;
        let a = self.alloc(k, len)?;
        Ok(self.dma_addr(k, a))
    }
}

impl HcaWorld for World {
    fn hca(&mut self, node: usize) -> &mut HcaState {
        &mut self.nodes[node].hca
    }

    /// The link is back to back: a packet from one node's HCA goes to the other's.
    fn send_packet(&mut self, from: usize, p: Packet) -> u64 {
        self.next_packet += 1;
        let key = self.next_packet;
        self.nodes[1 - from].hca.inbox.insert(key, p);
        key
    }
}
