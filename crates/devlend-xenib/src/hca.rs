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
//! Timing is mechanism, on the engine's one clock: the HCA is a device model ([`crate::device`])
//! on the machine, its DMA flows on the shared simulation (on 004's card through the PCI-X bus,
//! a half-duplex link of the engine). Data really moves through the fabric: the HCA reads and
//! writes host RAM as its own requester, at the addresses its driver put in the MTT (machine
//! addresses under Xen, guest-physical ones in a VFIO guest, the lender's NTB window for a
//! borrowed HCA: [`DomMap`]).

use crate::device::Packet;
use crate::error::{XResult, XenIbError};
use crate::params::params;
use crate::types::*;
use devlend_fabric::model::{FuncId, HostId};
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use std::collections::{HashMap, HashSet, VecDeque};

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
    /// Without `buf`: the DMA address of the CQ buffer the driver allocated in kernel memory.
    pub ring: u64,
    /// (time the CQE became visible in the CQ buffer, the entry), in visibility order.
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
    /// Without `buf`: the DMA address of the QP buffer the driver allocated in kernel memory.
    pub ring: u64,
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
    /// Firmware commands the HCA has completed (by the id the driver gave each), not yet taken.
    pub cmds_done: HashSet<u64>,
    pub next_cmd: u64,
    pub stats: HcaStats,
}

/// Data an HCA wrote into a host's memory, and when it became visible there.
#[derive(Debug, Clone, Copy)]
pub struct Landing {
    pub addr: u64,
    pub len: u64,
    pub at: u64,
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
    pub hca: Hca,
    /// Data the HCA has written into this host's memory, not yet seen by a poller.
    pub landed: Vec<Landing>,
    /// Packets on the link towards this node's HCA, by key.
    pub inbox: HashMap<u64, Packet>,
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

/// A WQE ready to send: the request, its slot and the QP's remote end (node, QP number).
pub type Wqe = (SendWr, u64, Option<(usize, u32)>);

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
            let hca = Hca { uars: vec![None; uar_pages as usize], next_key: 0x100, ..Default::default() };
            nodes.push(Node {
                name: HOST_NAMES[i].into(),
                cpu,
                host,
                dev,
                func,
                uar_base,
                hcr: bar0 + crate::device::HCR_OFFSET,
                mailbox: None,
                hca,
                landed: Vec::new(),
                inbox: HashMap::new(),
            });
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

    // ----- TPT -------------------------------------------------------------------------------

    /// Translate (key, va, len) through the TPT: the entry must exist, belong to `pd` (when given),
    /// cover the range and allow `access` (0: local read). Returns machine segments.
    pub fn translate(&mut self, node: usize, key: u32, pd: Option<u32>, va: u64, len: u64, access: u32) -> Option<Vec<(u64, u64)>> {
        let pb = params().page_bytes;
        let hca = &mut self.nodes[node].hca;
        let ok =
            hca.tpt.get(&key).filter(|m| pd.is_none_or(|p| m.pd == p) && va >= m.va && va.saturating_add(len) <= m.va + m.len && (m.access & access) == access);
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

    // ----- what the HCA model asks of the world ----------------------------------------------

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

    /// The next WQE of QP `qpn`'s send queue, if it is ready to send: the request, its slot and
    /// the QP's remote end.
    pub fn take_wqe(&mut self, node: usize, qpn: u32) -> Option<Wqe> {
        let q = self.nodes[node].hca.qps.get_mut(qpn as usize)?.as_mut().filter(|q| q.state == QpState::Rts)?;
        let wr = q.sq.pop_front()?;
        let slot = q.posted;
        q.posted += 1;
        let remote = q.remote;
        self.nodes[node].hca.stats.wqes += 1;
        Some((wr, slot, remote))
    }

    /// Where the HCA reads send WQE `slot` of QP `qpn` (through its key when the QP buffer is
    /// registered guest memory: bypass); None when it does not translate.
    pub fn wqe_addr(&mut self, node: usize, qpn: u32, slot: u64) -> Option<u64> {
        let q = self.nodes[node].hca.qps.get(qpn as usize)?.as_ref()?;
        let wqe = params().wqe_bytes;
        let (buf, ring, depth) = (q.buf, q.ring, q.depth);
        match buf {
            Some((va, key)) => self.translate(node, key, None, va + (slot % depth) * wqe, wqe, 0).map(|s| s[0].0),
            None => Some(ring + (slot % depth) * wqe),
        }
    }

    /// Where the HCA reads QP `qpn`'s next receive WQE (the receive queue follows the send queue
    /// in the QP buffer).
    pub fn recv_wqe_addr(&mut self, node: usize, qpn: u32) -> Option<u64> {
        let q = self.nodes[node].hca.qps.get(qpn as usize)?.as_ref()?;
        let wqe = params().wqe_bytes;
        let (buf, ring, depth) = (q.buf, q.ring, q.depth);
        match buf {
            Some((va, key)) => self.translate(node, key, None, va, wqe, 0).map(|s| s[0].0),
            None => Some(ring + depth * wqe),
        }
    }

    /// A packet leaves `from`'s HCA for the other one: its key in that node's inbox.
    pub fn send_packet(&mut self, from: usize, p: Packet) -> u64 {
        self.next_packet += 1;
        let key = self.next_packet;
        self.nodes[1 - from].inbox.insert(key, p);
        key
    }

    /// The responder's check of a message's first packet for its QP `qpn`: where the data goes
    /// (the rkey's segments, or a receive WQE's: then its CQ and the WQE), or the NAK's status.
    #[allow(clippy::type_complexity)]
    pub fn responder_accepts(&mut self, node: usize, qpn: u32, op: SendOp, len: u64) -> Result<(Vec<(u64, u64)>, Option<(u32, RecvWr)>), WcStatus> {
        let rq = self.nodes[node].hca.qps.get(qpn as usize).and_then(|x| x.as_ref()).filter(|x| x.state >= QpState::Rtr && x.state != QpState::Err);
        let Some((pd, rcq)) = rq.map(|q| (q.pd, q.recv_cq)) else { return Err(WcStatus::RemAccessErr) };
        match op {
            SendOp::RdmaWrite { remote_addr, rkey } => {
                self.translate(node, rkey, Some(pd), remote_addr, len, ACCESS_REMOTE_WRITE).map(|s| (s, None)).ok_or(WcStatus::RemAccessErr)
            }
            SendOp::Send => {
                let rw = self.nodes[node].hca.qps[qpn as usize].as_mut().unwrap().rq.pop_front().ok_or(WcStatus::RnrRetryExcErr)?;
                let segs =
                    self.translate(node, rw.sge.lkey, Some(pd), rw.sge.addr, len.min(rw.sge.length), ACCESS_LOCAL_WRITE).filter(|_| rw.sge.length >= len);
                match segs {
                    Some(s) => Ok((s, Some((rcq, rw)))),
                    None => {
                        let now = self.nodes[node].landed.last().map_or(0, |l| l.at);
                        self.cqe_landed(node, rcq, Wc { wr_id: rw.wr_id, status: WcStatus::LocProtErr, opcode: WcOpcode::Recv, byte_len: 0, qp_num: qpn }, now);
                        Err(WcStatus::RemAccessErr)
                    }
                }
            }
        }
    }

    /// A message's data has landed in `node`'s memory at `at`: a poller of it sees it now.
    pub fn landed(&mut self, node: usize, addr: u64, len: u64, at: u64) {
        self.nodes[node].landed.push(Landing { addr, len, at });
    }

    pub fn send_cq(&self, node: usize, qpn: u32) -> Option<u32> {
        self.nodes[node].hca.qps.get(qpn as usize)?.as_ref().map(|q| q.send_cq)
    }

    /// Where the HCA writes the next CQE of `cq` (through the CQ buffer's key for bypass).
    pub fn cqe_slot(&mut self, node: usize, cq: u32) -> Option<u64> {
        let c = self.nodes[node].hca.cqs.get_mut(cq as usize)?.as_mut()?;
        let cqe = params().cqe_bytes;
        let slot = c.produced % c.depth;
        c.produced += 1;
        let (buf, ring) = (c.buf, c.ring);
        match buf {
            Some((va, key)) => self.translate(node, key, None, va + slot * cqe, cqe, ACCESS_LOCAL_WRITE).map(|s| s[0].0),
            None => Some(ring + slot * cqe),
        }
    }

    /// A CQE of `cq` is visible from `at`; the completion event is raised then if the CQ was armed.
    pub fn cqe_landed(&mut self, node: usize, cq: u32, wc: Wc, at: u64) {
        let Some(c) = self.nodes[node].hca.cqs.get_mut(cq as usize).and_then(|c| c.as_mut()) else { return };
        c.entries.push((at, wc));
        if c.armed {
            c.armed = false;
            c.events.push_back(at);
        }
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
