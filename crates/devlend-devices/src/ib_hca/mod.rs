//! The InfiniBand HCA of seed 004 (a Mellanox InfiniHost MT23108 on a MHXL-CF128-T card, PCI-X,
//! 004 §2.2) as a device model on the engine's one clock, generic over the world it lives in.
//!
//! What lands in its BARs drives it: a command in the HCR (BAR 0) makes it read the command's
//! mailbox by DMA, execute it and raise its completion; a doorbell in a UAR page (BAR 2)
//! schedules the QP's send queue. The send engine (`send.rs`) fetches each WQE by DMA, parses it
//! and translates its keys, and reads the payload in MTU packets by DMA; the packets go onto the
//! 4X link in order. The link is not PCIe (a cable between two HCAs): it is this device's own
//! resource, timed with the machine's clock, and it signals the other HCA when a packet has
//! arrived. The responder's receive engine (`receive.rs`) checks each packet and writes its data
//! by DMA where the rkey (or the receive WQE it fetched) says; once a message's last write has
//! left it, it acknowledges on its own link direction, and the requester writes the CQE by DMA.
//! A CQE is visible when its write has landed; a completion event is raised then if the CQ was
//! armed. Every DMA is a flow on the machine's one simulation: on 004's card through the PCI-X
//! bus (a half-duplex link of the engine), elsewhere along whatever route the fabric gives the
//! HCA (the lender's NTB window for a borrowed HCA, the host IOMMU for a VFIO guest).
//!
//! What the HCA holds (QPs, CQs, UAR pages, the TPT) is [`state::HcaState`]; its hardware
//! types are [`types`], its values from `params/hardware.toml`'s `[xenib]` table [`params`].
//! What it asks of its world is [`HcaWorld`]: the tables of the HCA it is, and a way to put a
//! packet on its link to the other HCA. `devlend-xenib` (Xen domains, the split driver, verbs)
//! implements it on its two-server testbed and fills the tables as its driver's firmware
//! commands would.

pub mod params;
mod receive;
mod send;
pub mod state;
pub mod types;

use devlend_engine::machine::{Cx, Device, FlowDone, World};
use devlend_fabric::model::FuncId;
use devlend_wire::Tlp;
use params::params;
pub use state::HcaState;
use std::collections::{HashMap, VecDeque};
use types::*;

/// BAR 0 offset of the HCR (Linux mthca_cmd.c `MTHCA_HCR_BASE`).
pub const HCR_OFFSET: u64 = 0x80680;
/// Doorbell offsets in a UAR page (Linux mthca_doorbell.h: send, receive, CQ).
pub const SEND_DOORBELL: u64 = 0x10;
pub const RECV_DOORBELL: u64 = 0x18;
pub const CQ_DOORBELL: u64 = 0x20;

/// What an HCA asks of the world it lives in.
pub trait HcaWorld: World {
    /// The tables of the HCA that is node `node` of the world.
    fn hca(&mut self, node: usize) -> &mut HcaState;
    /// A packet leaves node `from`'s HCA for the HCA at the other end of its link: the key under
    /// which it waits in that HCA's inbox.
    fn send_packet(&mut self, from: usize, p: Packet) -> u64;
}

/// A message in the requester's pipeline.
struct Msg {
    qpn: u32,
    wr: SendWr,
    rqpn: u32,
    /// Payload packets and the reads each still waits for.
    data: Vec<Vec<u8>>,
    reads: Vec<u32>,
}

/// A message being received.
#[derive(Default)]
struct RxMsg {
    /// The message's address as its owner sees it (the rkey's virtual address, the receive
    /// buffer), for a poller of that memory.
    addr: u64,
    dst: Vec<(u64, u64)>,
    recv: Option<(u32, u32, RecvWr)>,
    writes: u32,
    last_seen: bool,
    refused: bool,
}

/// What a DMA or timer token of the HCA stands for when it comes back.
enum Job {
    CmdRead(u64),
    CmdDone(u64),
    Doorbell(u32),
    Wqe(u64),
    Parsed(u64),
    Payload { msg: u64, index: usize, offset: usize },
    TxFree,
    RxDone(u64),
    RecvWqe(u64),
    Written(u64),
    Cqe { cq: u32, wc: Wc },
}

/// One HCA: `node` of the world, `peer` the function of the HCA at the other end of its link.
pub struct Hca {
    node: usize,
    peer: FuncId,
    jobs: HashMap<u64, Job>,
    next: u64,
    msgs: HashMap<u64, Msg>,
    rx: HashMap<u64, RxMsg>,
    /// QPs rung and waiting for the send engine, in doorbell order.
    ready: VecDeque<u32>,
    engine_busy: bool,
    /// What waits for this HCA's link direction, in order: (message, packet), or an answer.
    tx: VecDeque<Out>,
    tx_free: u64,
    tx_timer: bool,
    /// When the receive engine is done with the packets it has.
    rx_free: u64,
}

/// The bit that marks a timer token as a packet arriving from the other HCA (its inbox key).
const PACKET: u64 = 1 << 63;

/// What goes onto the link next: a data packet (message, index) or an answer (message, NAK).
enum Out {
    Data(u64, usize),
    Ack(u64, Option<WcStatus>),
}

impl Hca {
    pub fn new(node: usize, peer: FuncId) -> Hca {
        Hca {
            node,
            peer,
            jobs: HashMap::new(),
            next: 1,
            msgs: HashMap::new(),
            rx: HashMap::new(),
            ready: VecDeque::new(),
            engine_busy: false,
            tx: VecDeque::new(),
            tx_free: 0,
            tx_timer: false,
            rx_free: 0,
        }
    }

    fn token(&mut self, j: Job) -> u64 {
        let t = self.next;
        self.next += 1;
        self.jobs.insert(t, j);
        t
    }

    fn read<W: HcaWorld>(&mut self, cx: &mut Cx<W>, addr: u64, len: u64, j: Job) -> bool {
        let t = self.token(j);
        let ok = cx.dma_read(addr, len, t).is_ok();
        if !ok {
            self.jobs.remove(&t);
        }
        ok
    }

    fn write<W: HcaWorld>(&mut self, cx: &mut Cx<W>, addr: u64, data: Vec<u8>, j: Job) -> bool {
        let t = self.token(j);
        let ok = cx.dma_write(addr, data, t).is_ok();
        if !ok {
            self.jobs.remove(&t);
        }
        ok
    }

    fn after<W: HcaWorld>(&mut self, cx: &mut Cx<W>, delay: u64, j: Job) {
        let t = self.token(j);
        cx.set_timer(delay, t);
    }
}

impl<W: HcaWorld> Device<W> for Hca {
    fn mmio_write(&mut self, cx: &mut Cx<W>, bar: u8, offset: u64, tlp: &Tlp) {
        match (bar, offset) {
            (0, HCR_OFFSET) => self.hcr(cx, tlp),
            (2, _) => self.uar(cx, offset, tlp),
            _ => {}
        }
    }

    fn dma_done(&mut self, cx: &mut Cx<W>, done: FlowDone) {
        let Some(job) = self.jobs.remove(&done.token) else { return };
        match job {
            Job::CmdRead(id) => self.after(cx, params().hca_cmd_ps, Job::CmdDone(id)),
            Job::Wqe(id) => self.after(cx, params().hca_send_wqe_ps, Job::Parsed(id)),
            Job::Payload { msg, index, offset } => self.payload(cx, msg, index, offset, done),
            Job::RecvWqe(msg) | Job::Written(msg) => self.written(cx, msg, true),
            Job::Cqe { cq, wc } => {
                let now = cx.now();
                cx.world().hca(self.node).cqe_landed(cq, wc, now);
            }
            _ => {}
        }
    }

    fn timer(&mut self, cx: &mut Cx<W>, token: u64) {
        if token & PACKET != 0 {
            // a packet the other HCA's link delivered
            return self.arrive(cx, token & !PACKET);
        }
        let Some(job) = self.jobs.remove(&token) else { return };
        match job {
            Job::CmdDone(id) => {
                cx.world().hca(self.node).cmds_done.insert(id);
            }
            Job::Doorbell(qpn) => {
                if !self.ready.contains(&qpn) {
                    self.ready.push_back(qpn);
                }
                self.kick(cx);
            }
            Job::Parsed(id) => self.parsed(cx, id),
            Job::TxFree => {
                self.tx_timer = false;
                self.try_tx(cx);
            }
            Job::RxDone(key) => self.rx_done(cx, key),
            _ => {}
        }
    }
}
