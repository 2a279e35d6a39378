//! The discrete-event simulation of TLPs moving along timed paths, and the planning that makes
//! those paths from the fabric's routes.
//!
//! Contents, in the order a flow meets them (the sections are marked `// ##` below):
//! 1. Planning: [`plan_route`] builds a route (and a read's completion route) into timed
//!    [`Path`]s with [`build_path`] (one stage per link crossed, with the latency of the
//!    switch, root complex or NTB at its far end, the IOMMU that translates there, the root
//!    that re-splits reads there: 000 §7.1; the path's Max_Payload_Size and the requester's
//!    Max_Read_Request_Size and tags, PCIe Base 3.0 §2.2.2); [`plan`] for an access named by its
//!    address; `load` puts a plan's paths into the simulation.
//! 2. The records: a TLP in flight (`InFlight`, its kind's flow-control class §2.6.1), the
//!    events, the [`Notice`]s the driver of the simulation acts on, a port (`Port`: a link
//!    direction's serialiser and its receiver's credits), a stage as the hot path reads it
//!    (`Hop`), a flow (`Flow`, [`FlowOpts`]) and an outstanding read (`Request`).
//! 3. [`Sim`]'s API: paths and flows added, timers, [`Sim::step`] (where a landing or a served
//!    read becomes a [`Notice`] for the machine).
//! 4. A TLP's way (after the helpers it shares: a flow's end, allocation, a port's wake-up):
//!    `issue` (a flow's TLPs at its source, within its tags), `enqueue`, `try_tx`
//!    (serialised when the link is free and the receiver has a credit, §2.6.1; DLLPs due go
//!    first), `arrive` (the component's latency, an IOMMU stage's IOTLB lookup, `iotlb`),
//!    `terminal` (a posted write lands in order, §2.4.1; a read is answered with completions).
//!
//! Off the path, in `sim/`: the DLLPs' timers (`dllp`, §3.5.3.1, §2.6.1.2), the statistics
//! (`stats`: [`PortStats`], [`Stats`]), the root complex that re-splits reads (`root`, 000
//! §7.1), building a simulation (`setup`: [`Sim::new`], [`Sim::tuned`], PCI-X buses), the events
//! packed into the queue's 8-byte entries (`packed`); tests in `wake_tests` and `inflight_tests`.
//!
//! Mechanisms (PCIe Base 3.0 §2.2, §2.6, §3.5; 000 §7.1):
//! - Each link direction is a port that serialises one TLP at a time: header/framing overhead per
//!   TLP kind, at the link's rate after 8b/10b or 128b/130b encoding.
//! - The receiver of a port acknowledges TLPs and returns credits with DLLPs on the other direction
//!   of the link: one Ack per AckNak latency period while TLPs arrive, one UpdateFC per credit type
//!   per period while credits are freed (§3.5.3.1, §2.6.1.2). A DLLP occupies the reverse port's
//!   serialiser: due while that port sends a TLP, it goes after it and delays the next one; due
//!   while the port is idle, it costs only its own bytes. Kept as timestamps, not events.
//! - The receiver of each port has finite buffers per traffic class (posted, non-posted,
//!   completion); a TLP starts only when the receiver has room, and the room comes back one
//!   UpdateFC later, after the TLP has left that receiver: back-pressure.
//! - Components add latency; cut-through switches may start forwarding once the header is in.
//! - Requesters keep at most `read_tags` reads open; completers answer after their memory latency
//!   with completions split at the RCB (RAM) or max payload (device memory).
//! - A root complex whose CPU profile re-splits reads turns each read passing through it into
//!   requests of `read_split_bytes`, issued with its own tag pool, and forwards their completions.
//! - An IOMMU stage costs an IOTLB hit, or a page walk that fills the IOTLB: one DRAM access per
//!   table level below the deepest page-walk-cache hit (`iotlb`); walks are serialised per IOMMU.
//!
//! Memory stays flat as transfers grow: a DMA engine keeps only a few TLPs queued at its port.
//!
//! Ties (the one clock's rule for events of the same picosecond): a port's transmit decision
//! (`TryTx`) runs after every other event of its picosecond (arrivals, issues, timers: the queue's
//! late phase), so it sees every TLP that is ready then, whenever its wake-up was scheduled.
//! Decisions of one picosecond run in the order they were scheduled; what they schedule for that
//! picosecond runs after them. After sending (or finding nothing to send), a port wakes at the
//! first moment one of its heads can go: the link free, the head ready, and a receiver buffer slot
//! free for its class (a slot already coming back is a timestamp; a class with none coming back
//! waits for `return_credit` to wake it). It does not wake only to find its heads held back by
//! flow control; the stall on credits that such a look would have noted is noted ahead, from the
//! moment a head is first held back (a send before then cancels it).

use crate::iotlb::HostIommu;
use crate::params::Timing;
use crate::path::{port_id, Limits, Path, PortId, Stage};
use crate::queue::{EventQueue, Ps, Ring, Waiting};
use devlend_fabric::model::{LinkId, NodeKind};
use devlend_fabric::route::{Failure, HopKind, Outcome, Requester, Route};
use devlend_fabric::{Fabric, Target};
use devlend_wire::{Access, FcClass, Overheads, TlpKind};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

mod dllp;
mod packed;
mod root;
mod setup;
mod stats;

use dllp::Dllps;
use root::RootWait;
use stats::Tally;
pub use stats::{PortStats, Stats};

// ## 1. Planning: a route into timed paths

/// The timed paths of one access: the request path and, for reads, the completion path. A plan
/// captures the route at the moment it is made, so an access can be timed after the mappings it
/// used are gone (a device's DMA into a buffer the driver has since unmapped).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    pub request: Path,
    pub completion: Option<Path>,
}

/// The route of `req`'s `access` at `addr` (the fabric's cached `route`), built into timed
/// paths ([`plan_route`]).
pub fn plan(f: &mut Fabric, req: Requester, addr: u64, access: Access) -> Result<Plan, Failure> {
    let route = f.route(req, addr, access);
    plan_route(f, &route)
}

/// A route built into timed paths: the request path and, for a read, the completion path; the
/// route's failure if it does not deliver, in either direction. A flow's route is found once, at
/// its issue (`machine`'s `Core::start`), and planned here; the flow carries it on to where its
/// TLPs land.
pub fn plan_route(f: &Fabric, route: &Route) -> Result<Plan, Failure> {
    if let Outcome::Failed(e) = route.outcome {
        return Err(e);
    }
    let is_read = route.access == Access::Read;
    let request = build_path(f, route, is_read);
    let completion = match &route.completion {
        Some(c) => match c.outcome {
            Outcome::Failed(e) => return Err(e),
            Outcome::Delivered(_) => Some(build_path(f, c, false)),
        },
        None => None,
    };
    Ok(Plan { request, completion })
}

/// One direction of route `r` as the stages its TLPs pass (see the module docs), with what its
/// TLPs may carry ([`Limits`]) and its target's latency.
pub fn build_path(f: &Fabric, r: &Route, is_read: bool) -> Path {
    let tu = &f.tuning();
    let t = &*tu.timing;
    let mut stages: Vec<Stage> = Vec::new();
    let mut origin_latency = 0;
    let mut limits = Limits {
        max_payload: u32::MAX,
        max_read_request: t.max_read_request,
        read_tags: t.read_tags,
        completion_bytes: 0,
        root_tags: 0,
        iotlb_hit_ps: t.iotlb_hit_ps,
        ram_write: None,
    };
    let hops = &r.hops;
    for (i, h) in hops.iter().enumerate() {
        match h.kind {
            HopKind::Start => match f.node(h.node).kind {
                NodeKind::RootComplex => {
                    let host = tu.host(h.host);
                    (limits.max_read_request, limits.read_tags) = (host.max_read_request, host.read_tags);
                    if i + 1 < hops.len() {
                        origin_latency = host.root_latency_ps;
                    }
                }
                NodeKind::Endpoint { device } => {
                    let d = tu.device(device);
                    (limits.max_read_request, limits.read_tags) = (d.max_read_request, d.read_tags);
                }
                _ => {}
            },
            HopKind::Link => {
                let link = h.aux as LinkId;
                limits.max_payload = limits.max_payload.min(tu.link(link).max_payload);
                let towards_down = f.links()[link as usize].down == h.node;
                stages.push(Stage { port: port_id(link, towards_down), latency: 0, cut_through: false, iommu: None, resplit: None, root: None });
            }
            HopKind::Forward => {
                let latency = match f.node(h.node).kind {
                    NodeKind::SwitchUp { .. } | NodeKind::SwitchDown { .. } => Some(t.switch_latency_ps),
                    NodeKind::ClusterPort { .. } => Some(t.cluster_switch_latency_ps),
                    _ => None,
                };
                if let (Some(l), Some(s)) = (latency, stages.last_mut()) {
                    s.latency += l;
                    s.cut_through = t.switch_cut_through;
                }
            }
            HopKind::Root => {
                let host = h.host;
                let continues = hops[i + 1..].iter().any(|x| x.kind == HopKind::Link);
                if let Some(s) = stages.last_mut() {
                    let root = tu.host(host);
                    s.latency += root.root_latency_ps;
                    s.root = Some(host);
                    let split = f.host(host).cpu.read_split_bytes;
                    if is_read && continues && split < limits.max_read_request {
                        s.resplit = Some(split);
                        limits.root_tags = root.read_tags;
                    }
                }
            }
            HopKind::Iommu => {
                let iova = hops[i - 1].addr;
                if let Some(s) = stages.last_mut() {
                    let levels = f.iommu(h.host).walk_levels(h.aux);
                    s.iommu = Some((h.host, iova, h.aux.trailing_zeros(), levels));
                }
            }
            HopKind::Ntb => {
                if let Some(s) = stages.last_mut() {
                    s.latency += t.ntb_latency_ps;
                }
            }
            HopKind::Deliver => {}
        }
    }
    if limits.max_payload == u32::MAX {
        limits.max_payload = t.max_payload; // no link crossed
    }
    let (target_latency, target_is_ram) = match r.outcome {
        devlend_fabric::Outcome::Delivered(Target::Ram { host, .. }) => {
            // The root complex's completion size, within the payload the path carries.
            limits.completion_bytes = tu.host(host).ram_completion_bytes.min(limits.max_payload);
            let (line, per_tlp) = (tu.host(host).ram_write_line_ps, tu.host(host).ram_write_tlp_ps);
            if !is_read && line > 0 {
                limits.ram_write = Some((host, line, per_tlp));
            }
            (t.dram_latency_ps, true)
        }
        devlend_fabric::Outcome::Delivered(Target::Bar { func, .. }) => {
            limits.completion_bytes = limits.max_payload;
            (devlend_fabric::tuning::endpoint_latency_ps(f, func), false)
        }
        _ => {
            limits.completion_bytes = limits.max_payload;
            (t.endpoint_latency_ps, false)
        }
    };
    Path { stages, origin_latency, target_latency, target_is_ram, limits }
}

/// A plan's paths added to `sim`: the request path, the completion path, and for each root on
/// the request path that re-splits reads, the completion path up to that root
/// ([`Sim::set_root_completion`]). Their ids: (request, completion).
pub(crate) fn load(sim: &mut Sim, plan: &Plan) -> (u32, Option<u32>) {
    let p = sim.add_path(plan.request.clone());
    let c = plan.completion.clone().map(|c| {
        let full = c.clone();
        let cid = sim.add_path(full);
        // Every re-split root on the request path gets the completion path up to that root.
        for (k, st) in plan.request.stages.iter().enumerate() {
            if st.resplit.is_some() {
                let host = st.root;
                if let Some(j) = c.stages.iter().position(|s| s.root.is_some() && s.root == host) {
                    let prefix = Path { stages: c.stages[..=j].to_vec(), ..c.clone() };
                    let pid = sim.add_path(prefix);
                    sim.set_root_completion(p, k as u32, pid, j as u32 + 1);
                }
            }
        }
        cid
    });
    (p, c)
}

// ## 2. The records

/// A wire TLP in flight: what the timing needs of the `devlend_wire::Tlp` it stands for (its
/// `TlpKind`, length, and offset in its flow, whose requester and address the header's are),
/// plus timing state (path, stage, arrival), in 32 bytes (two to a cache line; 48 bytes
/// straddled lines half the time). No payload: bytes move when it lands (`machine`).
#[derive(Clone, Copy, Debug)]
struct InFlight {
    offset: u64,
    /// When the whole TLP had arrived at its current stage (for cut-through ordering).
    full_arrival: Ps,
    path: u32,
    flow: u32,
    /// Read request this TLP belongs to (requests and completions), or u32::MAX.
    req: u32,
    /// Bits 0-12: the payload (posted, completion) or the bytes a read request asks for (at most
    /// 4096, PCIe Base 3.0 §2.2.2, checked by [`Sim::add_path`]); bits 13-14: the `TlpKind`;
    /// bit 15: created inside the path (by a re-splitting root), so it holds no buffer slot
    /// upstream.
    len_kind: u16,
    stage: u16,
}

const _: () = assert!(std::mem::size_of::<InFlight>() == 32);

const LEN_BITS: u32 = 13;
/// The largest payload or read request a TLP carries (PCIe Base 3.0 §2.2.2).
const MAX_TLP_BYTES: u32 = 4096;
const FRESH: u16 = 1 << 15;

impl InFlight {
    #[allow(clippy::too_many_arguments)]
    fn new(kind: TlpKind, len: u32, path: u32, stage: u32, flow: u32, req: u32, offset: u64, fresh: bool) -> InFlight {
        debug_assert!(len <= MAX_TLP_BYTES && stage <= u16::MAX as u32);
        let len_kind = len as u16 | (kind as u16) << LEN_BITS | if fresh { FRESH } else { 0 };
        InFlight { offset, full_arrival: 0, path, flow, req, len_kind, stage: stage as u16 }
    }

    #[inline]
    fn kind(&self) -> TlpKind {
        const BY_BITS: [TlpKind; 4] = [TlpKind::MemWrite, TlpKind::MemRead, TlpKind::Completion, TlpKind::Message];
        BY_BITS[(self.len_kind >> LEN_BITS) as usize & 3]
    }

    /// `self.kind().fc_class()`, read from the same bits in one step (the hot path asks per hop).
    #[inline]
    fn class(&self) -> FcClass {
        const BY_BITS: [FcClass; 4] = [FcClass::Posted, FcClass::NonPosted, FcClass::Completion, FcClass::Posted];
        BY_BITS[(self.len_kind >> LEN_BITS) as usize & 3]
    }

    #[inline]
    fn len(&self) -> u32 {
        (self.len_kind & ((1 << LEN_BITS) - 1)) as u32
    }

    /// Data bytes carried: a write's or a completion's payload, none for a read request.
    #[inline]
    fn payload(&self) -> u32 {
        if self.kind() == TlpKind::MemRead {
            0
        } else {
            self.len()
        }
    }

    #[inline]
    fn fresh(&self) -> bool {
        self.len_kind & FRESH != 0
    }

    #[inline]
    fn stage(&self) -> u32 {
        self.stage as u32
    }
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    TryTx(PortId),
    Arrive(u32),
    FlowIssue(u32),
    /// A data flow's posted TLP lands at its target now (the TLP record is freed then).
    Land(u32),
    /// A data flow's read request is served by its completer now (memory is sampled then).
    Serve(u32),
    /// A flow that asked to be told has ended.
    FlowEnd(u32),
    /// A flow that asked to be told has sent its last TLP out of its source.
    FlowSent(u32),
    /// A timer set by the one who drives the simulation: its token is `Sim::timers[i]` (kept out
    /// of the event so that it packs into a queue entry of 8 bytes).
    Timer(u32),
}

/// What the simulation tells the one who drives it ([`Sim::step`]): the moments actors act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// `len` bytes at `offset` of data flow `flow` land at its target (posted write).
    Landed {
        flow: u32,
        offset: u64,
        len: u32,
    },
    /// The completer of data flow `flow` reads `len` bytes at `offset` now (a read request arrived).
    Served {
        flow: u32,
        offset: u64,
        len: u32,
    },
    /// Flow `flow` has ended: every write landed, or every byte read has returned.
    FlowEnd(u32),
    /// Flow `flow`'s last TLP has left its source (a CPU's posted store is issued).
    FlowSent(u32),
    Timer(u64),
}

/// No DLLP pending.
const NONE: Ps = Ps::MAX;
/// A link direction: what the transmit decision reads (three cache lines), then its DLLPs
/// (`Dllps`) and what a send only adds to (`Tally`), one line each. TLPs wait in per-class FIFOs
/// with the time they become ready; receiver buffer slots come back as timestamps (`returns`)
/// rather than events, and a port wakes itself at the next time something can change (a TLP
/// ready, a slot back, the link free). The FIFOs' entries live in arenas shared by every port
/// (`Sim::fifo`, `Sim::slots`).
///
/// One record of five lines, not three arenas by PortId (issue 33): a hop touches the sending
/// port's five lines, the previous port's first and third and the DLLP line of its other
/// direction, and the next port's first two. In one record, and `p` beside `p ^ 1`, these fall in
/// two or three 4 KiB pages where three arenas spread them over five or six: at 1024 hosts (44k
/// ports, 14 MB of records) each page is a likely TLB miss.
#[repr(C, align(64))]
struct Port {
    // First cache line: what every decision, enqueue and returned slot reads.
    busy_until: Ps,
    /// Earliest TryTx already scheduled, or NONE.
    wake: Ps,
    /// Per class: when the first TLP of `queues` is ready, or NONE (the FIFO is empty): what the
    /// transmit decision compares, without reading the FIFOs.
    heads: [Ps; 3],
    credits: [u32; 3],
    /// A half-duplex bus (PCI-X): the fixed phases of one transaction, ps, or NONE; its two
    /// directions share one serialiser (`Sim::set_half_duplex`).
    bus_txn_ps: Ps,
    // Second: the TLPs waiting (what an enqueue writes).
    /// Per class: the TLPs waiting, in `Sim::fifo` (8-byte entries: each one's ready time as the
    /// difference from the one ahead; `heads` and `tails` hold the first's and the last's).
    queues: [Ring; 3],
    /// Per class: when the last TLP of `queues` is ready (meaningless while it is empty).
    tails: [Ps; 3],
    // Third: the slots coming back, and what a send costs.
    /// Per class: when each receiver buffer slot in use comes back, in `Sim::slots`.
    returns: [Ring; 3],
    /// Per class: its credits are 0 and a TLP waits (`credits[c] == 0 && heads[c] != NONE`),
    /// kept beside `returns` so that a slot returned to a class with credits reads no other line
    /// of the port (`Sim::return_credit`). Written where `credits` or `heads` change.
    held: [bool; 3],
    /// From the start of a TLP to its header at the far end (cut-through forwarding).
    header_ps: Ps,
    fp_ps_per_byte: u64,
    prop: Ps,
    // Fourth: the DLLPs this port sends for the other direction (alone touched on a direction
    // that carries no TLPs). Fifth: what its sends add up.
    dllps: Dllps,
    tally: Tally,
}

const _: () = assert!(std::mem::size_of::<Port>() == 320);
const _: () = assert!(std::mem::offset_of!(Port, queues) == 64 && std::mem::offset_of!(Port, returns) == 128);
const _: () = assert!(std::mem::offset_of!(Port, dllps) == 192 && std::mem::offset_of!(Port, tally) == 256);

/// What the hot path reads of a path's stage, 16 bytes, all stages of all paths in one table
/// (`Sim::hops`): one load, no per-path indirection, a small working set. What is rarer is read
/// when a flag says so: the IOMMU's translation from `Sim::hop_iommu` (same index), the re-split
/// size and the root from `Path::stages`.
#[derive(Clone, Copy, Debug)]
struct Hop {
    latency: Ps,
    port: PortId,
    cut_through: bool,
    iommu: bool,
    resplit: bool,
    /// The path's last stage.
    last: bool,
}

/// An IOMMU stage's translation: (host, address the TLP carries there, log2 of the page size,
/// table levels of a cold walk), as `Stage::iommu`.
type IommuAt = (u16, u64, u32, u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    Write,
    Read,
}

/// A DMA stream: `bytes` moved by one requester along `path` (and back along `cpl` for reads).
struct Flow {
    kind: FlowKind,
    path: u32,
    cpl: u32,
    total: u64,
    issued: u64,
    done: u64,
    tags: u32,
    queued: u32,
    start: Ps,
    end: Option<Ps>,
    /// Tell the driver of the simulation when the flow ends and when its last TLP left.
    notify: bool,
    /// Tell the driver when each TLP lands or is served, so bytes move at that moment.
    data: bool,
    /// [`FlowOpts::transfer`] and [`FlowOpts::interval`].
    transfer: u64,
    interval: Ps,
    /// When the engine may start its next transfer, and whether an issue event waits for then.
    next_transfer: Ps,
    wake_pending: bool,
}

impl Flow {
    /// Bytes left to issue before the end of the stream or of the current transfer.
    fn left_in_transfer(&self) -> u64 {
        let left = self.total - self.issued;
        if self.transfer == 0 {
            left
        } else {
            left.min(self.transfer - self.issued % self.transfer)
        }
    }

    /// Whether the next TLP starts a transfer the engine may not start yet (its issue rate).
    fn paced(&self, now: Ps) -> bool {
        self.interval > 0 && self.issued.is_multiple_of(self.transfer) && now < self.next_transfer
    }
}

/// How a flow reports to the one driving the simulation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowOpts {
    /// [`Notice::FlowEnd`] and [`Notice::FlowSent`].
    pub notify: bool,
    /// [`Notice::Landed`] / [`Notice::Served`] per TLP.
    pub data: bool,
    /// The requester's transfer size (a DMA descriptor's length, as pcie-bench's `SZ`): no TLP
    /// crosses a transfer's boundary, so a stream of 64-byte transfers is 64-byte reads or
    /// writes whatever the MPS and MRRS allow. 0: the whole stream is one transfer.
    pub transfer: u64,
    /// The requester's engine starts at most one transfer per this many ps (its issue rate,
    /// `dma_read_interval_ps` / `dma_write_interval_ps`); 0: no limit. Only with `transfer`.
    pub interval: Ps,
}

/// An outstanding read request: who asked, how much is still to come, and where its completions go.
#[derive(Clone, Copy)]
struct Request {
    flow: u32,
    remaining: u32,
    /// For a sub-request issued by a re-splitting root: the parent request.
    parent: u32,
    /// Completion path the completions take, and the stage they start from.
    cpl_path: u32,
    cpl_stage: u32,
}

pub struct Sim {
    /// The fabric's parameters; what varies per path (payload, requests, tags) is in `Path::limits`.
    t: Arc<Timing>,
    overheads: Overheads,
    q: EventQueue<Ev>,
    now: Ps,
    /// Every link direction's record, by PortId (`Port`: its decision, FIFOs, DLLPs and tally in
    /// one 320-byte record, `p` beside `p ^ 1`).
    ports: Vec<Port>,
    /// Per port: when the last posted TLP delivered through it landed (they land in order).
    last_posted: Vec<Ps>,
    /// Per host (grown on first use): when its root complex's intake of writes to RAM is free.
    ram_intake: Vec<Ps>,
    /// The entries of every port's TLP FIFOs (`Port::queues`, 8 bytes each) and slot returns
    /// (`Port::returns`).
    fifo: Waiting,
    slots: Vec<Ps>,
    paths: Vec<Path>,
    /// Every path's stages, flat: path `p`'s stage `s` is `hops[first_hop[p] + s]`.
    hops: Vec<Hop>,
    /// Beside `hops`, by the same index: an IOMMU stage's translation (`Stage::iommu`), read
    /// where `Hop::iommu` says so, so that a hop reads no `Path` and its `stages`, a block of
    /// its own per path (issue 33).
    hop_iommu: Vec<IommuAt>,
    first_hop: Vec<u32>,
    tlps: Vec<InFlight>,
    free_tlps: Vec<u32>,
    flows: Vec<Flow>,
    free_flows: Vec<u32>,
    reqs: Vec<Request>,
    free_reqs: Vec<u32>,
    /// Per re-splitting root complex (host): its free tags, shared by every route through it, and
    /// the sub-requests waiting for one, in arrival order: (re-split point (path, stage), parent
    /// request, bytes, offset).
    root_tags: HashMap<u16, (u32, VecDeque<RootWait>)>,
    /// Per host IOTLB, page-walk cache and walker, indexed by host (grown on first use).
    iotlb: Vec<HostIommu>,
    pub stats: Stats,
    /// Per re-split point (request path, root stage): the completion path of the root's own
    /// sub-requests (ending at the root) and the stage of the full completion path to resume at.
    sub_cpl: HashMap<(u32, u32), (u32, u32)>,
    /// The re-split point a root's completion path belongs to.
    sub_key: HashMap<u32, (u32, u32)>,
    /// Tokens of the timers pending, and the free slots.
    timers: Vec<u64>,
    free_timers: Vec<u32>,
    /// Check before every event that no port that can send lacks a look (`wake_tests`).
    #[cfg(test)]
    check_wakes: bool,
}

/// Store `item` in a recycled slot of `slab` (from `free`), or a new one; records never move.
fn alloc<T>(slab: &mut Vec<T>, free: &mut Vec<u32>, item: T) -> u32 {
    match free.pop() {
        Some(i) => {
            slab[i as usize] = item;
            i
        }
        None => {
            slab.push(item);
            slab.len() as u32 - 1
        }
    }
}

const SOURCE_QUEUE: u32 = 2;

// ## 3. The simulation's API

impl Sim {
    pub fn now(&self) -> Ps {
        self.now
    }

    /// When the next event is due, if any.
    pub fn next_time(&self) -> Option<Ps> {
        self.q.peek_time()
    }

    /// Time to send `tlp`, `wire` bytes, on port `p`: at the link's rate, or on a bus, the
    /// transaction's phases and its payload.
    fn ser_of(&self, p: PortId, tlp: &InFlight, wire: u64) -> Ps {
        let port = &self.ports[p as usize];
        if port.bus_txn_ps != NONE {
            port.bus_txn_ps + ((tlp.payload() as u64 * port.fp_ps_per_byte) >> 16)
        } else {
            (wire * port.fp_ps_per_byte) >> 16
        }
    }
    /// Add a path. Panics if it could carry a TLP larger than PCIe allows (4096 bytes of payload
    /// or of read request, §2.2.2), which the fabric's parameters never give, or if it has more
    /// than 65536 stages.
    pub fn add_path(&mut self, p: Path) -> u32 {
        let l = &p.limits;
        let largest = l.max_payload.max(l.max_read_request).max(l.completion_bytes);
        let split = p.stages.iter().filter_map(|s| s.resplit).max().unwrap_or(0);
        assert!(largest.max(split) <= MAX_TLP_BYTES, "a path's TLPs carry at most {MAX_TLP_BYTES} bytes (PCIe Base 3.0 §2.2.2), not {}", largest.max(split));
        assert!(p.stages.len() <= 1 << 16, "a path has at most 65536 stages, not {}", p.stages.len());
        self.first_hop.push(self.hops.len() as u32);
        let n = p.stages.len();
        self.hops.extend(p.stages.iter().enumerate().map(|(i, s)| Hop {
            latency: s.latency,
            port: s.port,
            cut_through: s.cut_through,
            iommu: s.iommu.is_some(),
            resplit: s.resplit.is_some(),
            last: i + 1 == n,
        }));
        self.hop_iommu.extend(p.stages.iter().map(|s| s.iommu.unwrap_or_default()));
        self.paths.push(p);
        self.paths.len() as u32 - 1
    }

    /// Start a DMA stream at time `at`. Returns the flow id.
    pub fn add_flow(&mut self, kind: FlowKind, path: u32, cpl: Option<u32>, bytes: u64, at: Ps) -> u32 {
        self.add_flow_with(kind, path, cpl, bytes, at, FlowOpts::default())
    }

    /// Start a stream at `at` that reports as `opts` asks. A flow id is reused after
    /// [`Sim::release_flow`].
    pub fn add_flow_with(&mut self, kind: FlowKind, path: u32, cpl: Option<u32>, bytes: u64, at: Ps, opts: FlowOpts) -> u32 {
        assert!(bytes > 0, "a flow moves at least one byte");
        let flow = Flow {
            kind,
            path,
            cpl: cpl.unwrap_or(u32::MAX),
            total: bytes,
            issued: 0,
            done: 0,
            tags: self.paths[path as usize].limits.read_tags,
            queued: 0,
            start: at,
            end: None,
            notify: opts.notify,
            data: opts.data,
            transfer: opts.transfer,
            interval: if opts.transfer > 0 { opts.interval } else { 0 },
            next_transfer: 0,
            wake_pending: false,
        };
        let id = alloc(&mut self.flows, &mut self.free_flows, flow);
        self.q.push(at.max(self.now), Ev::FlowIssue(id));
        id
    }

    /// Forget an ended flow; its id may be given to a later flow.
    pub fn release_flow(&mut self, flow: u32) {
        debug_assert!(self.flows[flow as usize].end.is_some(), "only an ended flow is released");
        self.free_flows.push(flow);
    }

    /// Stop issuing flow `flow` (a fault was found): what is in flight still travels and is
    /// reported, nothing more is sent. It ends when what was issued is done.
    pub fn stop_flow(&mut self, flow: u32) {
        let f = &mut self.flows[flow as usize];
        f.total = f.issued;
        if f.end.is_none() && f.done == f.total {
            self.finish(flow, self.now);
        }
    }

    pub fn flow_time(&self, flow: u32) -> Option<Ps> {
        let f = &self.flows[flow as usize];
        f.end.map(|e| e - f.start)
    }

    /// When flow `flow` ended, if it has.
    pub fn flow_end(&self, flow: u32) -> Option<Ps> {
        self.flows[flow as usize].end
    }

    /// Tell the driver of the simulation [`Notice::Timer`]`(token)` at `at`; the timer's number
    /// cancels it ([`Sim::cancel_timer`]).
    pub fn set_timer(&mut self, at: Ps, token: u64) -> u32 {
        let i = alloc(&mut self.timers, &mut self.free_timers, token);
        self.q.push(at.max(self.now), Ev::Timer(i));
        i
    }

    /// Take timer `i` out before it fires: its token, or None if it has fired (or was cancelled)
    /// already. What is pending next ([`Sim::next_time`]) is then as if it had never been set.
    pub fn cancel_timer(&mut self, i: u32) -> Option<u64> {
        if !self.q.remove(Ev::Timer(i)) {
            return None;
        }
        self.free_timers.push(i);
        Some(self.timers[i as usize])
    }

    /// Run everything.
    pub fn run(&mut self) {
        while self.step().is_some() {}
    }

    /// Run until the next notice for the one driving the simulation, or to the end (`None`).
    pub fn step(&mut self) -> Option<Notice> {
        while let Some((t, ev)) = self.q.pop() {
            #[cfg(test)]
            if self.check_wakes {
                assert_eq!(self.missed_wake(), None, "a port could send before its next look, at {} ps", self.now);
            }
            self.now = t;
            self.stats.events += 1;
            match ev {
                Ev::TryTx(p) => {
                    let port = &mut self.ports[p as usize];
                    if port.wake <= t {
                        port.wake = NONE;
                    }
                    self.try_tx(p);
                }
                Ev::Arrive(tlp) => self.arrive(tlp),
                Ev::FlowIssue(f) => self.issue(f),
                Ev::Land(id) => {
                    let tlp = self.tlps[id as usize];
                    self.free_tlps.push(id);
                    self.written(tlp.flow, tlp.len(), t);
                    return Some(Notice::Landed { flow: tlp.flow, offset: tlp.offset, len: tlp.len() });
                }
                Ev::Serve(id) => {
                    let tlp = self.tlps[id as usize];
                    self.free_tlps.push(id);
                    return Some(Notice::Served { flow: tlp.flow, offset: tlp.offset, len: tlp.len() });
                }
                Ev::FlowEnd(f) => return Some(Notice::FlowEnd(f)),
                Ev::FlowSent(f) => return Some(Notice::FlowSent(f)),
                Ev::Timer(i) => {
                    self.free_timers.push(i);
                    return Some(Notice::Timer(self.timers[i as usize]));
                }
            }
        }
        None
    }

    // ## 4. A TLP's way: a flow's end, the ports' queues (`enqueue`, `try_tx`), then `issue`,
    // `arrive`, `terminal`

    /// The flow has ended at `at`: record it and tell whoever asked.
    fn finish(&mut self, flow: u32, at: Ps) {
        let f = &mut self.flows[flow as usize];
        f.end = Some(at);
        if f.notify {
            self.q.push(at, Ev::FlowEnd(flow));
        }
    }

    /// `bytes` of write flow `flow` have landed.
    fn written(&mut self, flow: u32, bytes: u32, at: Ps) {
        let f = &mut self.flows[flow as usize];
        f.done += bytes as u64;
        if f.done == f.total {
            self.finish(flow, at);
        }
    }

    fn alloc_tlp(&mut self, tlp: InFlight) -> u32 {
        let id = alloc(&mut self.tlps, &mut self.free_tlps, tlp);
        self.stats.peak_tlps = self.stats.peak_tlps.max(self.tlps.len());
        id
    }

    fn alloc_req(&mut self, r: Request) -> u32 {
        alloc(&mut self.reqs, &mut self.free_reqs, r)
    }

    /// Make sure the port looks again at time `at` (one event per earliest wake-up), or when the
    /// link is free if that is later: a look while it is busy would only schedule that one.
    #[inline]
    fn kick(&mut self, p: PortId, at: Ps) {
        let port = &mut self.ports[p as usize];
        let at = at.max(self.now).max(port.busy_until);
        if at < port.wake {
            port.wake = at;
            self.q.push_late(at, Ev::TryTx(p));
        }
    }

    /// Stage `stage` of path `path`, as the hot path reads it.
    #[inline]
    fn hop(&self, path: u32, stage: u32) -> Hop {
        self.hops[(self.first_hop[path as usize] + stage) as usize]
    }

    /// Put a TLP in the queue of the port of its current stage, ready at time `at`.
    fn enqueue(&mut self, id: u32, at: Ps) {
        let tlp = self.tlps[id as usize];
        let port = self.hop(tlp.path, tlp.stage()).port;
        self.enqueue_at(port, tlp.class(), id, at);
    }

    /// Put TLP `id` of `class` in the queue of port `port`, ready at time `at`. A TLP behind the
    /// head of its FIFO changes nothing the port waits for, and reads only the port's second line
    /// (`queues`, `tails`: under congestion most enqueues, issue 33); a new head makes the port
    /// look again when it can go (`next_look`).
    #[inline]
    fn enqueue_at(&mut self, port: PortId, class: FcClass, id: u32, at: Ps) {
        let c = class as usize;
        let p = &mut self.ports[port as usize];
        let behind = !p.queues[c].is_empty();
        self.fifo.push(&mut p.queues[c], &mut p.tails[c], id, at);
        if behind {
            debug_assert!(p.heads[c] != NONE, "port {port}'s class {c} has a head");
            return;
        }
        p.heads[c] = at;
        if p.credits[c] > 0 {
            self.kick(port, at);
        } else {
            p.held[c] = true;
            self.next_look_held(port);
        }
    }

    /// A receiver buffer slot of `class` behind port `p` is free again at `at` (one UpdateFC later).
    fn return_credit(&mut self, p: PortId, class: FcClass, at: Ps) {
        self.dllp_event(p ^ 1, class as usize);
        let c = class as usize;
        let port = &mut self.ports[p as usize];
        port.returns[c].push(&mut self.slots, at);
        // Only a class out of credits can be held back by them: then look again when this slot is
        // back, and not before its head is ready (the head's own wake-up is already due then).
        debug_assert_eq!(port.held[c], port.credits[c] == 0 && port.heads[c] != NONE, "port {p}'s held flag of class {c}");
        if port.held[c] {
            let ready = port.heads[c];
            self.kick(p, at.max(ready));
        }
    }

    fn wire_bytes(&self, tlp: &InFlight) -> u64 {
        self.overheads.wire_bytes(tlp.kind(), tlp.payload() as u64)
    }

    fn try_tx(&mut self, p: PortId) {
        let now = self.now;
        if self.ports[p as usize].busy_until > now {
            // A look scheduled before the link took on more work.
            self.next_look(p);
            return;
        }
        // Oldest ready head among the classes that have room at the receiver; otherwise wake up
        // when the first head becomes ready or the first slot comes back.
        let port = &mut self.ports[p as usize];
        let slots = &self.slots;
        let mut best: Option<(Ps, usize)> = None;
        for c in 0..3 {
            let t = port.heads[c];
            if t == NONE {
                continue;
            }
            // Slots come back as timestamps, counted only when a TLP of the class waits for one.
            while port.returns[c].front(slots).is_some_and(|t| t <= now) {
                port.returns[c].drop_front();
                port.credits[c] += 1;
                port.held[c] = false;
            }
            if t <= now && port.credits[c] > 0 && best.is_none_or(|(bt, _)| t < bt) {
                best = Some((t, c));
            }
        }
        let Some((_, c)) = best else {
            self.next_look(p);
            return;
        };
        let port = &mut self.ports[p as usize];
        let ready = port.heads[c];
        let (id, next) = self.fifo.pop(&mut port.queues[c], ready);
        port.heads[c] = next.unwrap_or(NONE);
        port.credits[c] -= 1;
        port.held[c] = port.credits[c] == 0 && port.heads[c] != NONE;
        let tlp = self.tlps[id as usize];
        let hop = (self.first_hop[tlp.path as usize] + tlp.stage()) as usize;
        let wire = self.wire_bytes(&tlp);
        let ser = self.ser_of(p, &tlp, wire);
        // A cut-through component cannot finish sending before the TLP has fully arrived.
        let start = if tlp.stage > 0 { now.max(tlp.full_arrival.saturating_sub(ser)) } else { now };
        // DLLPs that came due while the previous TLP was being sent go first.
        let start = start.max(self.dllps_before(p, start));
        let tally = &mut self.ports[p as usize].tally;
        if tally.stalled_since != NONE {
            // A stall foreseen for later (`next_look`) had not begun.
            tally.stats.credit_stall_ps += now.saturating_sub(tally.stalled_since);
            tally.stalled_since = NONE;
        }
        let stats = &mut tally.stats;
        stats.tlps += 1;
        stats.wire_bytes += wire;
        stats.payload_bytes += tlp.payload() as u64;
        stats.busy_ps += ser;
        stats.queue_ps += start.saturating_sub(ready);
        let port = &mut self.ports[p as usize];
        port.busy_until = start + ser;
        let arrival = start + ser + port.prop;
        let bus = port.bus_txn_ps != NONE;
        port.dllps.gate = port.dllps.gate.max(start + ser);
        if bus {
            // A bus: the other direction waits for this transaction.
            let other = &mut self.ports[(p ^ 1) as usize];
            other.busy_until = other.busy_until.max(start + ser);
            let d = &mut other.dllps;
            d.gate = d.gate.max(start + ser);
        }
        self.stats.tlp_hops += 1;
        self.ack_event(p);
        // Leaving the previous receiver frees its buffer slot.
        if tlp.fresh() {
            self.tlps[id as usize].len_kind &= !FRESH;
        } else if tlp.stage > 0 {
            let prev = self.hops[hop - 1].port;
            self.return_credit(prev, tlp.class(), start + self.t.updatefc_ps);
        } else {
            self.source_left(tlp.flow, tlp.class());
        }
        let stage = self.hops[hop];
        self.tlps[id as usize].full_arrival = arrival;
        let ready = if stage.cut_through { start + self.ports[p as usize].header_ps } else { arrival };
        self.q.push(ready, Ev::Arrive(id));
        self.next_look(p);
    }

    /// Make sure port `p` looks again at the first moment one of its heads can go: the head
    /// ready, the link free, and a buffer slot free at the receiver for its class. A class out of
    /// credits with no slot yet coming back is looked at again when one is returned
    /// (`return_credit`). Moments when the port would only find its heads held back by flow
    /// control are skipped, and the stall they would have noted is noted now, from when a head is
    /// first held back (a foreseen stall that a send forestalls adds nothing).
    #[inline(always)]
    fn next_look(&mut self, p: PortId) {
        let port = &self.ports[p as usize];
        let (heads, credits) = (port.heads, port.credits);
        if (0..3).all(|c| heads[c] == NONE || credits[c] > 0) {
            // No head waits for credits (the common case): the first ready one goes.
            let at = heads[0].min(heads[1]).min(heads[2]);
            if at != NONE {
                self.kick(p, at);
            }
            return;
        }
        self.next_look_held(p);
    }

    /// `next_look` for a port with a head out of credits.
    #[inline(never)]
    fn next_look_held(&mut self, p: PortId) {
        let port = &self.ports[p as usize];
        let free = port.busy_until.max(self.now);
        let (mut go, mut stall) = (NONE, NONE);
        for c in 0..3 {
            if port.heads[c] == NONE {
                continue;
            }
            let ready = port.heads[c].max(free);
            if port.credits[c] > 0 {
                go = go.min(ready);
                continue;
            }
            let back = port.returns[c].front(&self.slots).unwrap_or(NONE);
            if back > ready {
                stall = stall.min(ready);
            }
            go = go.min(ready.max(back));
        }
        if stall < go {
            let since = &mut self.ports[p as usize].tally.stalled_since;
            *since = (*since).min(stall);
        }
        if go != NONE {
            self.kick(p, go);
        }
    }

    fn source_left(&mut self, flow: u32, class: FcClass) {
        if flow == u32::MAX || class == FcClass::Completion {
            return;
        }
        let f = &mut self.flows[flow as usize];
        f.queued -= 1;
        if f.issued < f.total {
            self.q.push(self.now, Ev::FlowIssue(flow));
        } else if f.queued == 0 && f.notify {
            self.q.push(self.now, Ev::FlowSent(flow));
        }
    }

    fn issue(&mut self, fid: u32) {
        // Not before its start: an issue event left by the flow that had this id before (a
        // returned tag's) must not start a flow that begins later.
        if self.now < self.flows[fid as usize].start {
            return;
        }
        let limits = self.paths[self.flows[fid as usize].path as usize].limits;
        let (mps, mrrs) = (limits.max_payload as u64, limits.max_read_request as u64);
        loop {
            let f = &self.flows[fid as usize];
            if f.issued >= f.total || f.queued >= SOURCE_QUEUE {
                return;
            }
            if f.paced(self.now) {
                // one wake-up at the engine's next start, however many events find it waiting
                if !f.wake_pending {
                    let at = f.next_transfer;
                    self.flows[fid as usize].wake_pending = true;
                    self.q.push(at, Ev::FlowIssue(fid));
                }
                return;
            }
            if f.wake_pending && self.now >= f.next_transfer {
                self.flows[fid as usize].wake_pending = false;
            }
            let f = &self.flows[fid as usize];
            if f.kind == FlowKind::Read && f.tags == 0 {
                return;
            }
            if f.interval > 0 && f.issued.is_multiple_of(f.transfer) {
                let next = self.now + f.interval;
                self.flows[fid as usize].next_transfer = next;
            }
            let f = &self.flows[fid as usize];
            let origin = self.paths[f.path as usize].origin_latency;
            let (kind, path, cpl, offset) = (f.kind, f.path, f.cpl, f.issued);
            match kind {
                FlowKind::Write => {
                    let n = mps.min(f.left_in_transfer()) as u32;
                    let id = self.alloc_tlp(InFlight::new(TlpKind::MemWrite, n, path, 0, fid, u32::MAX, offset, false));
                    let f = &mut self.flows[fid as usize];
                    f.issued += n as u64;
                    f.queued += 1;
                    self.enqueue(id, self.now + origin);
                }
                FlowKind::Read => {
                    if f.tags == 0 {
                        return;
                    }
                    let n = mrrs.min(f.left_in_transfer()) as u32;
                    let req = self.alloc_req(Request { flow: fid, remaining: n, parent: u32::MAX, cpl_path: cpl, cpl_stage: 0 });
                    let id = self.alloc_tlp(InFlight::new(TlpKind::MemRead, n, path, 0, fid, req, offset, false));
                    let f = &mut self.flows[fid as usize];
                    f.issued += n as u64;
                    f.tags -= 1;
                    f.queued += 1;
                    self.enqueue(id, self.now + origin);
                }
            }
        }
    }

    fn iommu_delay(&mut self, host: u16, iova: u64, shift: u32, levels: u32) -> Ps {
        while self.iotlb.len() <= host as usize {
            self.iotlb.push(HostIommu::new(&self.t));
        }
        let l = self.iotlb[host as usize].lookup(&self.t, self.now, iova, shift, levels);
        if l.hit {
            self.stats.iotlb_hits += 1;
        } else {
            self.stats.iotlb_misses += 1;
            self.stats.walk_reads += l.reads as u64;
        }
        l.delay
    }

    fn arrive(&mut self, id: u32) {
        let tlp = self.tlps[id as usize];
        let hop = (self.first_hop[tlp.path as usize] + tlp.stage()) as usize;
        let stage = self.hops[hop];
        let last = stage.last;
        let mut delay = stage.latency;
        if stage.iommu {
            let (host, iova, shift, levels) = self.hop_iommu[hop];
            delay += self.iommu_delay(host, iova + tlp.offset, shift, levels);
        }
        // A completion of a root's sub-request has reached that root: forward it on the rest of the path.
        if tlp.class() == FcClass::Completion && tlp.req != u32::MAX {
            let r = self.reqs[tlp.req as usize];
            if r.parent != u32::MAX && last {
                self.root_completion(id, tlp, delay);
                return;
            }
        }
        if tlp.class() == FcClass::NonPosted && !last && stage.resplit {
            if let Some(split) = self.paths[tlp.path as usize].stages[tlp.stage() as usize].resplit {
                self.resplit(id, tlp, split, delay);
                return;
            }
        }
        if last {
            self.terminal(id, tlp, delay);
            return;
        }
        self.tlps[id as usize].stage += 1;
        let next = self.hops[hop + 1].port;
        self.enqueue_at(next, tlp.class(), id, self.now + delay);
    }

    /// Delivered at the end of its path: a write lands, a read is answered, a completion is received.
    fn terminal(&mut self, id: u32, tlp: InFlight, delay: Ps) {
        let port = self.hop(tlp.path, tlp.stage()).port;
        // A write to RAM holds its receive buffer until the root complex has taken it in.
        let taken = self.ram_intake(&tlp);
        self.return_credit(port, tlp.class(), taken + self.t.updatefc_ps);
        // A data flow's TLP is kept until it lands or is served, when its bytes move. A root's
        // sub-request belongs to the flow of the request it was split from.
        let flow = self.data_flow(&tlp);
        let data = flow != u32::MAX && self.flows[flow as usize].data;
        if data {
            self.tlps[id as usize].flow = flow;
        }
        if !(data && tlp.class() != FcClass::Completion) {
            self.free_tlps.push(id);
        }
        match tlp.class() {
            FcClass::Posted => {
                // Posted writes land in order (PCIe Base 3.0 §2.4.1): one held back by a page walk
                // holds back those behind it, even when they hit the IOTLB.
                let last = &mut self.last_posted[port as usize];
                let at = (self.now + delay).max(taken).max(*last);
                *last = at;
                if data {
                    self.q.push(at, Ev::Land(id));
                } else {
                    self.written(tlp.flow, tlp.len(), at);
                }
            }
            FcClass::NonPosted => {
                if data {
                    self.q.push(self.now + delay, Ev::Serve(id));
                }
                let path = &self.paths[tlp.path as usize];
                let at = self.now + delay + path.target_latency;
                let chunk = path.limits.completion_bytes;
                let r = self.reqs[tlp.req as usize];
                let mut left = tlp.len();
                let mut off = tlp.offset;
                while left > 0 {
                    let n = chunk.min(left);
                    let c = self.alloc_tlp(InFlight::new(TlpKind::Completion, n, r.cpl_path, r.cpl_stage, tlp.flow, tlp.req, off, false));
                    let origin = if r.cpl_stage == 0 { self.paths[r.cpl_path as usize].origin_latency } else { 0 };
                    self.enqueue(c, at + origin);
                    left -= n;
                    off += n as u64;
                }
            }
            FcClass::Completion => self.request_progress(tlp.req, tlp.len(), self.now + delay),
        }
    }

    /// When a root complex has taken in posted write `tlp` to its RAM (`Limits::ram_write`): its
    /// intake takes one write after another, `ram_write_tlp_ps` per TLP and `ram_write_line_ps`
    /// per 64-byte line of payload (the posted-write path into the cache and memory). Anything else: now.
    fn ram_intake(&mut self, tlp: &InFlight) -> Ps {
        let Some((host, line, per_tlp)) = self.paths[tlp.path as usize].limits.ram_write else { return self.now };
        if tlp.class() != FcClass::Posted {
            return self.now;
        }
        let h = host as usize;
        if self.ram_intake.len() <= h {
            self.ram_intake.resize(h + 1, 0);
        }
        let done = self.now.max(self.ram_intake[h]) + per_tlp + (tlp.len() as u64).div_ceil(64) * line;
        self.ram_intake[h] = done;
        done
    }

    /// The flow a TLP's bytes belong to: its own, or for a re-splitting root's sub-request the
    /// flow of the original request (u32::MAX for none).
    fn data_flow(&self, tlp: &InFlight) -> u32 {
        if tlp.flow != u32::MAX || tlp.req == u32::MAX || tlp.class() != FcClass::NonPosted {
            return tlp.flow;
        }
        let parent = self.reqs[tlp.req as usize].parent;
        if parent == u32::MAX {
            u32::MAX
        } else {
            self.reqs[parent as usize].flow
        }
    }

    fn request_progress(&mut self, req: u32, bytes: u32, at: Ps) {
        let r = &mut self.reqs[req as usize];
        r.remaining -= bytes;
        let (flow, finished) = (r.flow, r.remaining == 0);
        let f = &mut self.flows[flow as usize];
        f.done += bytes as u64;
        if f.done == f.total {
            self.finish(flow, at);
        }
        if finished {
            self.free_reqs.push(req);
            self.flows[flow as usize].tags += 1;
            self.q.push(at, Ev::FlowIssue(flow));
        }
    }
}

#[cfg(test)]
mod wake_tests;

#[cfg(test)]
mod inflight_tests;
