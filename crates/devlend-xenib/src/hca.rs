//! The HCA (004 §2.2: a Mellanox InfiniHost MT23108 on a MHXL-CF128-T card, PCI-X) and the world
//! it lives in: two servers on the fabric, their PCI-X buses, the back-to-back 4X link.
//!
//! What the HCA holds (004 §2.2): queue pairs (a send queue of WQEs, a receive queue), completion
//! queues, UAR pages (one per process or kernel user, each with its doorbell), and the translation
//! and protection table (TPT) indexed by keys: one entry per registered region with its protection
//! domain, access rights and page list (the MTT), giving local (lkey) and remote (rkey) access.
//! QP and CQ buffers may be registered memory themselves (the bypass driver's two-stage creation,
//! 004 §3.3): the HCA then reads WQEs and writes CQEs through the buffer's key.
//!
//! Timing is mechanism: a doorbell is a PCI-X write; the HCA fetches the WQE with a PCI-X read
//! (split transaction, read latency), translates the keys, reads the payload in MTU packets
//! (requests of at most MMRBC bytes, split completions disconnecting on the 128 B ADB), sends each
//! packet over the 4X link (8b/10b, IB headers), the responder checks the rkey and writes the data
//! with PCI-X memory writes, acknowledges, and the requester writes the CQE. Each stage is a
//! resource (the PCI-X bus of each host, the send engine, the link in each direction, the receive
//! engine), so messages pipeline packet by packet. Data really moves through the fabric: the HCA
//! reads and writes host RAM as its own requester, at the addresses its driver put in the MTT
//! (machine addresses under Xen, guest-physical ones in a VFIO guest, the lender's NTB window for a
//! borrowed HCA: [`DomMap`]). For the comparison beyond 004 ([`crate::cmp`]) the host interface is
//! [`HostIf::Routed`]: the doorbell, read round trip, write and streaming rates are what the timing
//! engine measured along the HCA's real routes (IOMMU, NTB), full duplex, instead of the PCI-X bus.

use crate::error::{XResult, XenIbError};
use crate::params::params;
use crate::types::*;
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use std::collections::{HashMap, VecDeque};

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

#[derive(Debug, Clone)]
pub struct Mpt {
    pub key: u32,
    pub pd: u32,
    pub owner: DomId,
    pub va: u64,
    pub len: u64,
    /// MTT: the machine address of each page.
    pub pages: Vec<u64>,
    pub access: u32,
}

#[derive(Debug, Clone)]
pub struct CqHw {
    pub owner: DomId,
    pub depth: u64,
    pub buf: Option<(u64, u32)>,
    /// (time the CQE is visible in the CQ buffer, the entry), in visibility order.
    pub entries: Vec<(u64, Wc)>,
    pub armed: bool,
    /// Times the HCA raised a completion event for this CQ (EQE + interrupt), not yet consumed.
    pub events: VecDeque<u64>,
    pub produced: u64,
}

#[derive(Debug, Clone)]
pub struct QpHw {
    pub owner: DomId,
    pub pd: u32,
    pub state: QpState,
    pub send_cq: u32,
    pub recv_cq: u32,
    pub uar: usize,
    pub depth: u64,
    pub buf: Option<(u64, u32)>,
    pub sq: VecDeque<SendWr>,
    pub rq: VecDeque<RecvWr>,
    pub remote: Option<(usize, u32)>,
    pub posted: u64,
}

#[derive(Debug, Default, Clone)]
pub struct HcaStats {
    pub doorbells: u64,
    pub ignored_doorbells: u64,
    pub wqes: u64,
    pub packets: u64,
    pub tpt_faults: u64,
    pub commands: u64,
}

#[derive(Debug, Default)]
pub struct Hca {
    pub uars: Vec<Option<DomId>>,
    pub pds: Vec<Option<DomId>>,
    pub tpt: HashMap<u32, Mpt>,
    pub next_key: u32,
    pub cqs: Vec<Option<CqHw>>,
    pub qps: Vec<Option<QpHw>>,
    pub sq_engine_free: u64,
    pub rx_engine_free: u64,
    pub stats: HcaStats,
}

/// Data an HCA wrote into a host's memory, and when it became visible there.
#[derive(Debug, Clone, Copy)]
pub struct Landing {
    pub addr: u64,
    pub len: u64,
    pub at: u64,
}

/// A resource used by one transfer at a time (a PCI-X bus, one direction of the link): busy
/// intervals in time order. A reservation takes the earliest gap at or after the requested time,
/// so work reserved later in program order but earlier in simulated time is not held up behind it.
#[derive(Debug, Default, Clone)]
pub struct Timeline {
    busy: Vec<(u64, u64)>,
}

impl Timeline {
    /// Reserve `d` ps at or after `t`; returns the end of the reservation.
    pub fn reserve(&mut self, t: u64, d: u64) -> u64 {
        let mut i = self.busy.partition_point(|&(_, e)| e <= t);
        let mut start = t;
        while i < self.busy.len() {
            let (s, e) = self.busy[i];
            if start + d <= s {
                break;
            }
            start = start.max(e);
            i += 1;
        }
        // merge with neighbours that touch
        self.busy.insert(i, (start, start + d));
        if i + 1 < self.busy.len() && self.busy[i + 1].0 == start + d {
            self.busy[i].1 = self.busy[i + 1].1;
            self.busy.remove(i + 1);
        }
        if i > 0 && self.busy[i - 1].1 == start {
            self.busy[i - 1].1 = self.busy[i].1;
            self.busy.remove(i);
        }
        if self.busy.len() > 65536 {
            self.busy.drain(..32768);
        }
        start + d
    }
}

/// How the HCA's host interface is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostIf {
    /// 004's card: the PCI-X bus of the MHXL-CF128-T (`[xenib]` pcix_*), half duplex.
    PciX,
    /// PCIe routes timed by the fabric's engine (see [`RouteCosts`]), full duplex.
    Routed(RouteCosts),
}

/// What the timing engine (devlend-engine) measured along the routes one HCA really uses: the
/// CPU's doorbell store into the UAR, and the HCA's reads and writes of the domain's memory
/// (through the IOMMU, an NTB ..., whatever the fabric's programming puts on the route).
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

pub struct Node {
    pub name: String,
    pub cpu: Requester,
    pub dev: Requester,
    /// Host-physical base of the UAR BAR (BAR 2).
    pub uar_base: u64,
    pub hca: Hca,
    /// The host's PCI-X bus; with a routed host interface, the direction towards memory.
    pub bus: Timeline,
    /// With a routed host interface: the direction towards the HCA (read completions).
    pub bus_down: Timeline,
    pub host_if: HostIf,
    /// The link direction leaving this node's port.
    pub tx: Timeline,
    pub landed: Vec<Landing>,
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
}

pub const HCA_NAMES: [&str; 2] = ["hca-a", "hca-b"];
pub const HCA_PROFILE: &str = "mhxl-cf128-t";
pub const HOST_NAMES: [&str; 2] = ["server-a", "server-b"];
/// Where the domains' memory starts in each host's RAM (byte offset) and how big each is.
const DOMAIN_RAM_OFFSET: u64 = 0x1000_0000;
const DOMAIN_RAM_SIZE: u64 = 0x1000_0000;

/// The testbed description as JSON (the same as `python/devlend/topologies/xenib-back-to-back.yaml`),
/// for Rust callers without the Python front end.
pub const TESTBED_JSON: &str = r#"{"name":"xenib-back-to-back","source":"004 §4.1","hosts":[{"name":"server-a","cpu":"generic-x86","ram":1073741824,"iommu":false,"root_ports":1},{"name":"server-b","cpu":"generic-x86","ram":1073741824,"iommu":false,"root_ports":1}],"devices":[{"name":"hca-a","profile":"mhxl-cf128-t"},{"name":"hca-b","profile":"mhxl-cf128-t"}],"links":[{"a":"server-a.rp0","b":"hca-a","gen":1,"width":8,"kind":"slot"},{"a":"server-b.rp0","b":"hca-b","gen":1,"width":8,"kind":"slot"}],"setup":[{"op":"bus_master","device":"hca-a","enable":true},{"op":"bus_master","device":"hca-b","enable":true}]}"#;

fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

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
    /// `HCA_NAMES[i]` (wherever it is installed) driven by the CPU of `HOST_NAMES[i]`; `uar_a`: the
    /// address server A's CPU uses for hca-a's UAR BAR when it is not the BAR's own (a borrowed HCA).
    pub fn on_fabric(fab: Fabric, xen_on_a: bool, uar_a: Option<u64>) -> XResult<World> {
        let mut nodes = Vec::new();
        let named = |what: String| move |error| XenIbError::Fabric { what, error };
        for (i, hca) in HCA_NAMES.iter().enumerate() {
            let dev = fab.requester(hca).map_err(named(format!("the HCA {hca}")))?;
            let cpu = fab.requester(&format!("{}:cpu", HOST_NAMES[i])).map_err(named(format!("the CPU of {}", HOST_NAMES[i])))?;
            let own = fab.resolve_expr(&format!("{hca}.bar2")).map_err(named(format!("the UAR BAR (BAR 2) of {hca}")))?;
            let uar_base = if i == SERVER_A { uar_a.unwrap_or(own) } else { own };
            // one 4 KiB UAR page per BAR 2 page (the profile's UAR BAR)
            let uar_bar = devlend_fabric::params::params().device.get(HCA_PROFILE).and_then(|d| d.bars.iter().find(|b| b.index == 2)).map_or(0x80_0000, |b| b.size);
            let uar_pages = (uar_bar / 4096).max(1);
            let hca = Hca { uars: vec![None; uar_pages as usize], next_key: 0x100, ..Default::default() };
            nodes.push(Node { name: HOST_NAMES[i].into(), cpu, dev, uar_base, hca, bus: Timeline::default(), bus_down: Timeline::default(), host_if: HostIf::PciX, tx: Timeline::default(), landed: Vec::new() });
        }
        Ok(World { fab, nodes, domains: Vec::new(), xen_on_a, xen: Default::default() })
    }

    /// A domain on `node` with its memory at the next fixed slot of that server's RAM, reached
    /// by CPU and HCA at the same addresses.
    pub fn add_domain(&mut self, node: usize, name: &str, kind: DomKind) -> XResult<DomId> {
        let n = self.domains.iter().filter(|d| d.node == node).count() as u64;
        let id = self.fab.host_id(HOST_NAMES[node]).map_err(|error| XenIbError::Fabric { what: format!("the host {}", HOST_NAMES[node]), error })?;
        let host = &self.fab.hosts[id as usize];
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
        let pb = params().page_bytes;
        let d = &mut self.domains[dom as usize];
        let len = div_ceil(len.max(1), pb) * pb;
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

    // ----- PCI-X bus -------------------------------------------------------------------------

    fn bus(&mut self, node: usize, t: u64, clocks: u64) -> u64 {
        let clk = devlend_fabric::tuning::default_timing().pcix_clock_ps;
        self.nodes[node].bus.reserve(t, clocks * clk)
    }

    /// A memory write by the HCA into host memory (or, on PCI-X, any write on the bus); returns
    /// when it is visible.
    pub fn dma_write(&mut self, node: usize, t: u64, bytes: u64) -> u64 {
        match self.nodes[node].host_if {
            HostIf::PciX => self.burst(node, t, bytes),
            HostIf::Routed(c) => self.nodes[node].bus.reserve(t, bytes.max(1) * c.write_fs_per_byte / 1000) + c.write_ps,
        }
    }

    /// The CPU's doorbell store into the UAR page, issued at `t`: when the HCA has it.
    pub fn doorbell_at(&mut self, node: usize, t: u64) -> u64 {
        match self.nodes[node].host_if {
            HostIf::PciX => self.burst(node, t + params().pio_write_ps, 8),
            HostIf::Routed(c) => t + c.doorbell_ps,
        }
    }

    /// Data phases of `bytes`, one disconnectable transaction per ADB-bounded chunk: other
    /// transactions on the bus may come between the chunks.
    fn burst(&mut self, node: usize, t: u64, bytes: u64) -> u64 {
        let p = params();
        let tm = devlend_fabric::tuning::default_timing();
        let mut left = bytes.max(1);
        let mut t = t;
        while left > 0 {
            let n = left.min(p.pcix_adb_bytes);
            t = self.bus(node, t, tm.pcix_overhead_clocks + div_ceil(n, tm.pcix_bytes_per_clock));
            left -= n;
        }
        t
    }

    /// A memory read by the HCA. PCI-X: request transactions (at most MMRBC each), the host bridge's read
    /// latency when `first` (later requests of a stream are issued ahead), split completions. Routed:
    /// the engine's read round trip when `first`, then the stream's rate on the link towards the HCA.
    pub fn dma_read(&mut self, node: usize, t: u64, bytes: u64, first: bool) -> u64 {
        if let HostIf::Routed(c) = self.nodes[node].host_if {
            let data = if first { t + c.read_rtt_ps } else { t };
            return self.nodes[node].bus_down.reserve(data, bytes.max(1) * c.read_fs_per_byte / 1000);
        }
        let p = params();
        let reqs = div_ceil(bytes.max(1), p.pcix_mmrbc);
        let req_end = self.bus(node, t, reqs * devlend_fabric::tuning::default_timing().pcix_overhead_clocks);
        let data = if first { req_end + p.pcix_read_latency_ps } else { req_end };
        self.burst(node, data, bytes)
    }

    fn ib_ser(&self, bytes: u64) -> u64 {
        (bytes as f64 * params().ib_ps_per_byte()).round() as u64
    }

    /// The HCA's side of one firmware command through the HCR: it reads the `bytes` of the
    /// mailbox by DMA and executes the command; returns when it raises the command's completion
    /// interrupt. Who takes that interrupt, and what it costs them, is the driver's and the
    /// hypervisor's part ([`World::kernel_irq_ps`]).
    pub fn firmware_cmd(&mut self, node: usize, t: u64, bytes: u64) -> u64 {
        self.nodes[node].hca.stats.commands += 1;
        self.dma_read(node, t, bytes.max(8), true) + params().hca_cmd_ps
    }

    // ----- TPT -------------------------------------------------------------------------------

    /// Translate (key, va, len) through the TPT: the entry must exist, belong to `pd` (when given),
    /// cover the range and allow `access` (0: local read). Returns machine segments.
    pub fn translate(&mut self, node: usize, key: u32, pd: Option<u32>, va: u64, len: u64, access: u32) -> Option<Vec<(u64, u64)>> {
        let pb = params().page_bytes;
        let hca = &mut self.nodes[node].hca;
        let ok = hca.tpt.get(&key).filter(|m| pd.is_none_or(|p| m.pd == p) && va >= m.va && va.saturating_add(len) <= m.va + m.len && (m.access & access) == access);
        let Some(m) = ok else {
            hca.stats.tpt_faults += 1;
            return None;
        };
        let mut segs = Vec::new();
        let mut off = va - m.va + (m.va % pb);
        let mut left = len;
        while left > 0 {
            let page = (off / pb) as usize;
            let within = off % pb;
            let n = left.min(pb - within);
            let phys = m.pages[page] + within;
            match segs.last_mut() {
                Some((a, l)) if *a + *l == phys => *l += n,
                _ => segs.push((phys, n)),
            }
            off += n;
            left -= n;
        }
        Some(segs)
    }

    // ----- completions -----------------------------------------------------------------------

    fn push_cqe(&mut self, node: usize, cq: u32, at: u64, wc: Wc) {
        // The HCA writes the CQE into the CQ buffer (through its key when the buffer is registered
        // memory of a guest: bypass), then raises the completion event if the CQ was armed.
        let buf = self.nodes[node].hca.cqs.get(cq as usize).and_then(|c| c.as_ref()).map(|c| (c.buf, c.produced, c.depth));
        let Some((buf, produced, depth)) = buf else { return };
        let cqe_bytes = params().cqe_bytes;
        if let Some((va, key)) = buf {
            let slot = va + (produced % depth) * cqe_bytes;
            if let Some(segs) = self.translate(node, key, None, slot, cqe_bytes, ACCESS_LOCAL_WRITE) {
                let dev = self.nodes[node].dev;
                let mut bytes = vec![0u8; cqe_bytes as usize];
                bytes[..8].copy_from_slice(&wc.wr_id.to_le_bytes());
                bytes[8] = wc.status as u8;
                self.fab.write(dev, segs[0].0, &bytes);
            }
        }
        let c = self.nodes[node].hca.cqs[cq as usize].as_mut().unwrap();
        c.produced += 1;
        let pos = c.entries.partition_point(|(t, _)| *t <= at);
        c.entries.insert(pos, (at, wc));
        if c.armed {
            c.armed = false;
            c.events.push_back(at);
        }
    }

    fn flush_qp(&mut self, node: usize, qpn: u32, at: u64) {
        let (cq, wrs) = {
            let q = self.nodes[node].hca.qps[qpn as usize].as_mut().unwrap();
            q.state = QpState::Err;
            (q.send_cq, q.sq.drain(..).collect::<Vec<_>>())
        };
        for wr in wrs {
            let op = match wr.op { SendOp::RdmaWrite { .. } => WcOpcode::RdmaWrite, SendOp::Send => WcOpcode::Send };
            self.push_cqe(node, cq, at, Wc { wr_id: wr.wr_id, status: WcStatus::WrFlushErr, opcode: op, byte_len: 0, qp_num: qpn });
        }
    }

    // ----- the HCA acting on a doorbell -------------------------------------------------------

    /// A doorbell write for `qpn` through UAR page `uar` reaches the HCA at `t`. A doorbell
    /// through a UAR that is not the QP's is ignored (UARs isolate users, 004 §2.2).
    pub fn doorbell(&mut self, node: usize, uar: usize, qpn: u32, t: u64) {
        let p = params();
        let hca = &mut self.nodes[node].hca;
        hca.stats.doorbells += 1;
        let ok = hca.qps.get(qpn as usize).and_then(|q| q.as_ref()).is_some_and(|q| q.uar == uar && q.state == QpState::Rts);
        if !ok {
            hca.stats.ignored_doorbells += 1;
            return;
        }
        let t_engine = t + p.hca_doorbell_ps;
        loop {
            let Some(q) = self.nodes[node].hca.qps[qpn as usize].as_mut() else { return };
            if q.state != QpState::Rts {
                return;
            }
            let Some(wr) = q.sq.pop_front() else { return };
            let slot = q.posted;
            q.posted += 1;
            self.execute(node, qpn, slot, wr, t_engine);
        }
    }

    /// Execute one send WQE; returns when the send engine may start the next.
    fn execute(&mut self, s: usize, qpn: u32, slot: u64, wr: SendWr, t0: u64) -> u64 {
        let p = params();
        self.nodes[s].hca.stats.wqes += 1;
        let q = self.nodes[s].hca.qps[qpn as usize].clone().unwrap();
        let opcode = match wr.op { SendOp::RdmaWrite { .. } => WcOpcode::RdmaWrite, SendOp::Send => WcOpcode::Send };
        let fail = |w: &mut World, at: u64, st: WcStatus| {
            w.push_cqe(s, q.send_cq, at, Wc { wr_id: wr.wr_id, status: st, opcode, byte_len: 0, qp_num: qpn });
            w.flush_qp(s, qpn, at);
            w.nodes[s].hca.sq_engine_free = at;
            at
        };
        // 1. WQE fetch from the QP buffer (through its key when it is registered guest memory).
        if let Some((va, key)) = q.buf {
            let a = va + (slot % q.depth) * p.wqe_bytes;
            if self.translate(s, key, None, a, p.wqe_bytes, 0).is_none() {
                return fail(self, t0, WcStatus::LocQpOpErr);
            }
        }
        let t_wqe = self.dma_read(s, t0, p.wqe_bytes, true);
        // the send engine parses it once it is done with the previous WQE's payload
        let t_parse = t_wqe.max(self.nodes[s].hca.sq_engine_free) + p.hca_send_wqe_ps;
        // 2. local key
        let Some(src) = self.translate(s, wr.sge.lkey, Some(q.pd), wr.sge.addr, wr.sge.length, 0) else {
            return fail(self, t_parse, WcStatus::LocProtErr);
        };
        let Some((r, rqpn)) = q.remote else { return fail(self, t_parse, WcStatus::RemAccessErr) };
        let len = wr.sge.length;
        let mut data = Vec::with_capacity(len as usize);
        let dev_s = self.nodes[s].dev;
        for (a, l) in &src {
            data.extend(self.fab.read(dev_s, *a, *l as usize).0);
        }
        // 3. packets through the pipeline: PCI-X read, link, receive engine, PCI-X write.
        let npk = div_ceil(len.max(1), p.ib_mtu);
        let (mut rd, mut tx, mut rx, mut wr_end) = (t_parse, 0u64, self.nodes[r].hca.rx_engine_free, 0u64);
        let mut dst: Option<(Vec<(u64, u64)>, Option<(u32, RecvWr)>)> = None;
        let mut nak: Option<(u64, WcStatus)> = None;
        for i in 0..npk {
            let b = (len - (i * p.ib_mtu).min(len)).min(p.ib_mtu);
            rd = self.dma_read(s, rd, b, i == 0);
            let hdr = p.ib_header_bytes + if i == 0 && matches!(wr.op, SendOp::RdmaWrite { .. }) { p.ib_reth_bytes } else { 0 };
            let ser = self.ib_ser(b + hdr);
            tx = self.nodes[s].tx.reserve(tx.max(rd), ser);
            self.nodes[s].hca.stats.packets += 1;
            let arr = tx + p.ib_wire_latency_ps;
            rx = rx.max(arr) + p.hca_rx_packet_ps;
            if i == 0 {
                // The responder validates: rkey for RDMA write, a receive WQE for a send.
                let rq = self.nodes[r].hca.qps.get(rqpn as usize).and_then(|x| x.clone()).filter(|x| x.state >= QpState::Rtr && x.state != QpState::Err);
                match (rq, wr.op) {
                    (None, _) => nak = Some((rx, WcStatus::RemAccessErr)),
                    (Some(rq), SendOp::RdmaWrite { remote_addr, rkey }) => match self.translate(r, rkey, Some(rq.pd), remote_addr, len, ACCESS_REMOTE_WRITE) {
                        Some(segs) => dst = Some((segs, None)),
                        None => nak = Some((rx, WcStatus::RemAccessErr)),
                    },
                    (Some(rq), SendOp::Send) => {
                        let recv = self.nodes[r].hca.qps[rqpn as usize].as_mut().unwrap().rq.pop_front();
                        match recv {
                            None => nak = Some((rx, WcStatus::RnrRetryExcErr)),
                            Some(rw) => {
                                rx = self.dma_read(r, rx, p.wqe_bytes, true);
                                match self.translate(r, rw.sge.lkey, Some(rq.pd), rw.sge.addr, len.min(rw.sge.length), ACCESS_LOCAL_WRITE).filter(|_| rw.sge.length >= len) {
                                    Some(segs) => dst = Some((segs, Some((rq.recv_cq, rw)))),
                                    None => {
                                        let cq = rq.recv_cq;
                                        self.push_cqe(r, cq, rx, Wc { wr_id: rw.wr_id, status: WcStatus::LocProtErr, opcode: WcOpcode::Recv, byte_len: 0, qp_num: rqpn });
                                        nak = Some((rx, WcStatus::RemAccessErr));
                                    }
                                }
                            }
                        }
                    }
                }
                if nak.is_some() {
                    break;
                }
            }
            wr_end = self.dma_write(r, rx, b);
        }
        self.nodes[r].hca.rx_engine_free = rx;
        self.nodes[s].hca.sq_engine_free = rd;
        // 4. acknowledgement (or NAK) back to the requester, then its CQE.
        let t_resp = match nak { Some((t, _)) => t, None => rx };
        let ack_ser = self.ib_ser(p.ib_ack_bytes);
        let ack_done = self.nodes[r].tx.reserve(t_resp, ack_ser);
        let t_ack = ack_done + p.ib_wire_latency_ps + p.hca_rx_packet_ps;
        if let Some((_, st)) = nak {
            fail(self, t_ack, st);
            return rd;
        }
        let (segs, recv) = dst.unwrap();
        let dev_r = self.nodes[r].dev;
        let mut off = 0usize;
        for (a, l) in &segs {
            self.fab.write(dev_r, *a, &data[off..off + *l as usize]);
            off += *l as usize;
        }
        let land_addr = match wr.op { SendOp::RdmaWrite { remote_addr, .. } => remote_addr, SendOp::Send => recv.map(|(_, rw)| rw.sge.addr).unwrap_or(0) };
        self.nodes[r].landed.push(Landing { addr: land_addr, len, at: wr_end });
        if let Some((rcq, rw)) = recv {
            let t = self.dma_write(r, wr_end, p.cqe_bytes);
            self.push_cqe(r, rcq, t, Wc { wr_id: rw.wr_id, status: WcStatus::Success, opcode: WcOpcode::Recv, byte_len: len, qp_num: rqpn });
        }
        if wr.signaled {
            let t = self.dma_write(s, t_ack, p.cqe_bytes);
            self.push_cqe(s, q.send_cq, t, Wc { wr_id: wr.wr_id, status: WcStatus::Success, opcode, byte_len: len, qp_num: qpn });
        }
        rd
    }

    /// Whether a landing covering `addr` on `node` is logged and not yet consumed.
    pub fn has_landing(&self, node: usize, addr: u64) -> bool {
        self.nodes[node].landed.iter().any(|x| addr >= x.addr && addr < x.addr + x.len.max(1))
    }

    /// The first landing covering `addr` on `node` not yet consumed: its time (the caller's poll
    /// of that memory sees it then), removed from the log.
    pub fn take_landing(&mut self, node: usize, addr: u64) -> Option<u64> {
        let l = &mut self.nodes[node].landed;
        let i = l.iter().position(|x| addr >= x.addr && addr < x.addr + x.len.max(1))?;
        Some(l.remove(i).at)
    }
}
