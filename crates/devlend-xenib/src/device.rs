//! The HCA as a device model on the engine's machine ([`crate::machine`] puts both cards on).
//!
//! What lands in its BARs drives it: a command in the HCR (BAR 0) makes it read the command's
//! mailbox by DMA, execute it and raise its completion; a doorbell in a UAR page (BAR 2)
//! schedules the QP's send queue. The send engine fetches each WQE by DMA, parses it and
//! translates its keys, and reads the payload in MTU packets by DMA; the packets go onto the 4X
//! link in order. The link is not PCIe (a cable between the two HCAs): it is this device's own
//! resource, timed with the machine's clock, and it signals the other HCA when a packet has
//! arrived. The responder's receive engine checks each packet and writes its data by DMA where
//! the rkey (or the receive WQE it fetched) says; once a message's last write has left it, it
//! acknowledges on its own link direction, and the requester writes the CQE by DMA. A CQE is
//! visible when its write has landed; a completion event is raised then if the CQ was armed.
//! Every DMA is a flow on the machine's one simulation: on 004's card through the PCI-X bus (a
//! half-duplex link of the engine), elsewhere along whatever route the fabric gives the HCA.

use crate::hca::World;
use crate::params::params;
use crate::types::*;
use devlend_engine::machine::{Cx, Device, FlowDone};
use devlend_fabric::model::FuncId;
use devlend_wire::Tlp;
use std::collections::{HashMap, VecDeque};

/// BAR 0 offset of the HCR (Linux mthca_cmd.c `MTHCA_HCR_BASE`).
pub const HCR_OFFSET: u64 = 0x80680;
/// Doorbell offsets in a UAR page (Linux mthca_doorbell.h: send, receive, CQ).
pub const SEND_DOORBELL: u64 = 0x10;
pub const RECV_DOORBELL: u64 = 0x18;
pub const CQ_DOORBELL: u64 = 0x20;

/// A packet on the wire between the two HCAs, in the receiving node's inbox until it arrives.
#[derive(Debug, Clone)]
pub enum Packet {
    Data {
        msg: u64,
        first: bool,
        last: bool,
        rqpn: u32,
        op: SendOp,
        len: u64,
        offset: u64,
        data: Vec<u8>,
    },
    /// The responder's answer to message `msg`: None for an ACK, else the NAK's status.
    Ack {
        msg: u64,
        nak: Option<WcStatus>,
    },
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

    fn read(&mut self, cx: &mut Cx<World>, addr: u64, len: u64, j: Job) -> bool {
        let t = self.token(j);
        let ok = cx.dma_read(addr, len, t).is_ok();
        if !ok {
            self.jobs.remove(&t);
        }
        ok
    }

    fn write(&mut self, cx: &mut Cx<World>, addr: u64, data: Vec<u8>, j: Job) -> bool {
        let t = self.token(j);
        let ok = cx.dma_write(addr, data, t).is_ok();
        if !ok {
            self.jobs.remove(&t);
        }
        ok
    }

    fn after(&mut self, cx: &mut Cx<World>, delay: u64, j: Job) {
        let t = self.token(j);
        cx.set_timer(delay, t);
    }

    // ----- commands and doorbells ---------------------------------------------------------

    fn hcr(&mut self, cx: &mut Cx<World>, tlp: &Tlp) {
        let word = |i: usize| u64::from_le_bytes(tlp.payload.get(i * 8..i * 8 + 8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]));
        let (mailbox, bytes, id) = (word(0), word(1), word(2));
        cx.world().nodes[self.node].hca.stats.commands += 1;
        if !self.read(cx, mailbox, bytes.max(8), Job::CmdRead(id)) {
            cx.world().nodes[self.node].hca.cmds_done.insert(id);
        }
    }

    fn uar(&mut self, cx: &mut Cx<World>, offset: u64, tlp: &Tlp) {
        let (page, reg) = ((offset / 4096) as usize, offset % 4096);
        let n = u32::from_le_bytes(tlp.payload.get(..4).and_then(|b| b.try_into().ok()).unwrap_or([0xff; 4]));
        let hca = &mut cx.world().nodes[self.node].hca;
        hca.stats.doorbells += 1;
        let ok = reg == SEND_DOORBELL && hca.qps.get(n as usize).and_then(|q| q.as_ref()).is_some_and(|q| q.uar == page && q.state == QpState::Rts);
        if ok {
            self.after(cx, params().hca_doorbell_ps, Job::Doorbell(n));
        } else if reg == SEND_DOORBELL {
            hca.stats.ignored_doorbells += 1;
        }
    }

    // ----- the send engine ----------------------------------------------------------------

    /// The engine takes the next WQE of a rung QP, if it is free: it fetches it by DMA.
    fn kick(&mut self, cx: &mut Cx<World>) {
        while !self.engine_busy {
            let Some(&qpn) = self.ready.front() else { return };
            let Some((wr, slot, remote)) = cx.world().take_wqe(self.node, qpn) else {
                self.ready.pop_front();
                continue;
            };
            let id = self.next;
            self.next += 1;
            let rqpn = remote.map_or(u32::MAX, |r| r.1);
            self.msgs.insert(id, Msg { qpn, wr, rqpn, data: Vec::new(), reads: Vec::new() });
            match cx.world().wqe_addr(self.node, qpn, slot) {
                Some(addr) if self.read(cx, addr, params().wqe_bytes, Job::Wqe(id)) => self.engine_busy = true,
                _ => self.fail(cx, id, WcStatus::LocQpOpErr),
            }
        }
    }

    /// The WQE is parsed and its local key translated: read its payload, packet by packet.
    fn parsed(&mut self, cx: &mut Cx<World>, id: u64) {
        self.engine_busy = false;
        let mtu = params().ib_mtu;
        let Some(m) = self.msgs.get(&id) else { return self.kick(cx) };
        let (wr, qpn, rqpn) = (m.wr, m.qpn, m.rqpn);
        let pd = cx.world().nodes[self.node].hca.qps.get(qpn as usize).and_then(|q| q.as_ref()).map(|q| q.pd);
        let src = pd.and_then(|pd| cx.world().translate(self.node, wr.sge.lkey, Some(pd), wr.sge.addr, wr.sge.length, 0));
        let Some(src) = src else {
            self.fail(cx, id, WcStatus::LocProtErr);
            return self.kick(cx);
        };
        if rqpn == u32::MAX {
            self.fail(cx, id, WcStatus::RemAccessErr);
            return self.kick(cx);
        }
        let len = wr.sge.length;
        let npk = len.max(1).div_ceil(mtu) as usize;
        let mut pieces = Vec::new();
        let mut off = 0u64;
        for (a, l) in src {
            let mut done = 0;
            while done < l {
                let at = off + done;
                let n = (l - done).min((at / mtu + 1) * mtu - at);
                pieces.push(((at / mtu) as usize, (at % mtu) as usize, a + done, n));
                done += n;
            }
            off += l;
        }
        let m = self.msgs.get_mut(&id).unwrap();
        m.data = (0..npk).map(|k| vec![0u8; (len - (k as u64 * mtu).min(len)).min(mtu) as usize]).collect();
        m.reads = vec![0; npk];
        for &(k, ..) in &pieces {
            m.reads[k] += 1;
        }
        for k in 0..npk {
            self.tx.push_back(Out::Data(id, k));
        }
        for (k, o, a, n) in pieces {
            if !self.read(cx, a, n, Job::Payload { msg: id, index: k, offset: o }) {
                self.tx.retain(|x| !matches!(x, Out::Data(mm, _) if *mm == id));
                self.fail(cx, id, WcStatus::LocProtErr);
                break;
            }
        }
        self.try_tx(cx);
        self.kick(cx);
    }

    fn payload(&mut self, cx: &mut Cx<World>, id: u64, k: usize, o: usize, done: FlowDone) {
        let Some(m) = self.msgs.get_mut(&id) else { return };
        if done.fault.is_some() {
            self.tx.retain(|x| !matches!(x, Out::Data(mm, _) if *mm == id));
            return self.fail(cx, id, WcStatus::LocProtErr);
        }
        m.data[k][o..o + done.data.len()].copy_from_slice(&done.data);
        m.reads[k] -= 1;
        self.try_tx(cx);
    }

    // ----- the link -------------------------------------------------------------------------

    /// Send what is at the head of the link's queue, if it is ready and the link is free.
    fn try_tx(&mut self, cx: &mut Cx<World>) {
        let p = params();
        while let Some(head) = self.tx.front() {
            let now = cx.now();
            if self.tx_free > now {
                if !self.tx_timer {
                    self.tx_timer = true;
                    self.after(cx, self.tx_free - now, Job::TxFree);
                }
                return;
            }
            let (packet, bytes) = match *head {
                Out::Data(id, k) => {
                    let Some(m) = self.msgs.get(&id) else {
                        self.tx.pop_front();
                        continue;
                    };
                    if m.reads[k] > 0 {
                        return;
                    }
                    let first = k == 0;
                    let hdr = p.ib_header_bytes + if first && matches!(m.wr.op, SendOp::RdmaWrite { .. }) { p.ib_reth_bytes } else { 0 };
                    let data = m.data[k].clone();
                    let n = data.len() as u64;
                    let pk = Packet::Data {
                        msg: id,
                        first,
                        last: k + 1 == m.data.len(),
                        rqpn: m.rqpn,
                        op: m.wr.op,
                        len: m.wr.sge.length,
                        offset: k as u64 * p.ib_mtu,
                        data,
                    };
                    (pk, n + hdr)
                }
                Out::Ack(id, nak) => (Packet::Ack { msg: id, nak }, p.ib_ack_bytes),
            };
            self.tx.pop_front();
            cx.world().nodes[self.node].hca.stats.packets += 1;
            let ser = (bytes as f64 * p.ib_ps_per_byte()).round() as u64;
            self.tx_free = now + ser;
            let key = cx.world().send_packet(self.node, packet);
            cx.signal(self.peer, ser + p.ib_wire_latency_ps, key | PACKET);
        }
    }

    // ----- the receive engine ---------------------------------------------------------------

    fn arrive(&mut self, cx: &mut Cx<World>, key: u64) {
        let now = cx.now();
        self.rx_free = self.rx_free.max(now) + params().hca_rx_packet_ps;
        self.after(cx, self.rx_free - now, Job::RxDone(key));
    }

    fn rx_done(&mut self, cx: &mut Cx<World>, key: u64) {
        let Some(pk) = cx.world().nodes[self.node].inbox.remove(&key) else { return };
        match pk {
            Packet::Ack { msg, nak } => self.answered(cx, msg, nak),
            Packet::Data { msg, first, .. } => {
                if first {
                    self.accept(cx, msg, &pk_clone_header(&pk));
                }
                self.place(cx, pk);
            }
        }
    }
}

/// A data packet's header fields without its payload.
fn pk_clone_header(p: &Packet) -> Packet {
    match p {
        Packet::Data { msg, first, last, rqpn, op, len, offset, .. } => {
            Packet::Data { msg: *msg, first: *first, last: *last, rqpn: *rqpn, op: *op, len: *len, offset: *offset, data: Vec::new() }
        }
        Packet::Ack { msg, nak } => Packet::Ack { msg: *msg, nak: *nak },
    }
}

impl Hca {
    /// The first packet of a message: the responder checks the rkey (RDMA write) or takes a
    /// receive WQE (send), fetching it by DMA; a refusal is answered with a NAK.
    fn accept(&mut self, cx: &mut Cx<World>, msg: u64, head: &Packet) {
        let Packet::Data { rqpn, op, len, .. } = *head else { return };
        let node = self.node;
        let verdict = cx.world().responder_accepts(node, rqpn, op, len);
        let mut rm = RxMsg::default();
        if let SendOp::RdmaWrite { remote_addr, .. } = op {
            rm.addr = remote_addr;
        }
        match verdict {
            Err(nak) => {
                rm.refused = true;
                self.tx.push_back(Out::Ack(msg, Some(nak)));
                self.try_tx(cx);
            }
            Ok((dst, None)) => rm.dst = dst,
            Ok((dst, Some((rcq, rw)))) => {
                rm.dst = dst;
                rm.addr = rw.sge.addr;
                rm.recv = Some((rcq, rqpn, rw));
                // the receive WQE is fetched before the data is placed
                let addr = cx.world().recv_wqe_addr(node, rqpn);
                rm.writes += 1;
                if !addr.is_some_and(|a| self.read(cx, a, params().wqe_bytes, Job::RecvWqe(msg))) {
                    rm.writes -= 1;
                }
            }
        }
        self.rx.insert(msg, rm);
    }

    /// Write a data packet where its message goes (after the receive WQE, for a send).
    fn place(&mut self, cx: &mut Cx<World>, pk: Packet) {
        let Packet::Data { msg, last, offset, data, .. } = pk else { return };
        let Some(rm) = self.rx.get_mut(&msg) else { return };
        if rm.refused {
            return;
        }
        rm.last_seen |= last;
        let mut pieces = Vec::new();
        let (mut seg_off, end) = (0u64, offset + data.len() as u64);
        for &(a, l) in &rm.dst {
            let (s, e) = (seg_off.max(offset), (seg_off + l).min(end));
            if s < e {
                pieces.push((a + (s - seg_off), data[(s - offset) as usize..(e - offset) as usize].to_vec()));
            }
            seg_off += l;
        }
        for (a, d) in pieces {
            self.rx.get_mut(&msg).unwrap().writes += 1;
            if !self.write(cx, a, d, Job::Written(msg)) {
                self.rx.get_mut(&msg).unwrap().writes -= 1;
            }
        }
        self.written(cx, msg, false);
    }

    /// A write (or the receive WQE fetch) of message `msg` is done: once nothing is left to land
    /// and the last packet has come, the data is visible, the receive CQE is written and the
    /// requester is acknowledged.
    fn written(&mut self, cx: &mut Cx<World>, msg: u64, one: bool) {
        let Some(rm) = self.rx.get_mut(&msg) else { return };
        if one {
            rm.writes -= 1;
        }
        if rm.writes > 0 || !rm.last_seen {
            return;
        }
        let rm = self.rx.remove(&msg).unwrap();
        let len = rm.dst.iter().map(|d| d.1).sum::<u64>();
        let now = cx.now();
        cx.world().landed(self.node, rm.addr, len, now);
        if let Some((rcq, rqpn, rw)) = rm.recv {
            let wc = Wc { wr_id: rw.wr_id, status: WcStatus::Success, opcode: WcOpcode::Recv, byte_len: len, qp_num: rqpn };
            self.cqe(cx, rcq, wc);
        }
        self.tx.push_back(Out::Ack(msg, None));
        self.try_tx(cx);
    }

    // ----- completions ----------------------------------------------------------------------

    /// The requester has the answer to message `msg`.
    fn answered(&mut self, cx: &mut Cx<World>, msg: u64, nak: Option<WcStatus>) {
        if let Some(st) = nak {
            return self.fail(cx, msg, st);
        }
        let Some(m) = self.msgs.remove(&msg) else { return };
        if m.wr.signaled {
            let cq = cx.world().send_cq(self.node, m.qpn);
            let wc = Wc { wr_id: m.wr.wr_id, status: WcStatus::Success, opcode: opcode(m.wr.op), byte_len: m.wr.sge.length, qp_num: m.qpn };
            if let Some(cq) = cq {
                self.cqe(cx, cq, wc);
            }
        }
    }

    /// Message `id` failed: its CQE says why, and its QP goes to the error state (the rest of its
    /// send queue is flushed).
    fn fail(&mut self, cx: &mut Cx<World>, id: u64, st: WcStatus) {
        let Some(m) = self.msgs.remove(&id) else { return };
        let now = cx.now();
        let cq = cx.world().send_cq(self.node, m.qpn);
        if let Some(cq) = cq {
            let wc = Wc { wr_id: m.wr.wr_id, status: st, opcode: opcode(m.wr.op), byte_len: 0, qp_num: m.qpn };
            cx.world().cqe_landed(self.node, cq, wc, now);
        }
        cx.world().flush_qp_pub(self.node, m.qpn, now);
    }

    /// Write a CQE by DMA; it is visible once it has landed.
    fn cqe(&mut self, cx: &mut Cx<World>, cq: u32, wc: Wc) {
        let now = cx.now();
        match cx.world().cqe_slot(self.node, cq) {
            Some(addr) => {
                let mut bytes = vec![0u8; params().cqe_bytes as usize];
                bytes[..8].copy_from_slice(&wc.wr_id.to_le_bytes());
                bytes[8] = wc.status as u8;
                if !self.write(cx, addr, bytes, Job::Cqe { cq, wc }) {
                    cx.world().cqe_landed(self.node, cq, wc, now);
                }
            }
            None => cx.world().cqe_landed(self.node, cq, wc, now),
        }
    }
}

fn opcode(op: SendOp) -> WcOpcode {
    match op {
        SendOp::RdmaWrite { .. } => WcOpcode::RdmaWrite,
        SendOp::Send => WcOpcode::Send,
    }
}

impl Device<World> for Hca {
    fn mmio_write(&mut self, cx: &mut Cx<World>, bar: u8, offset: u64, tlp: &Tlp) {
        match (bar, offset) {
            (0, HCR_OFFSET) => self.hcr(cx, tlp),
            (2, _) => self.uar(cx, offset, tlp),
            _ => {}
        }
    }

    fn dma_done(&mut self, cx: &mut Cx<World>, done: FlowDone) {
        let Some(job) = self.jobs.remove(&done.token) else { return };
        match job {
            Job::CmdRead(id) => self.after(cx, params().hca_cmd_ps, Job::CmdDone(id)),
            Job::Wqe(id) => self.after(cx, params().hca_send_wqe_ps, Job::Parsed(id)),
            Job::Payload { msg, index, offset } => self.payload(cx, msg, index, offset, done),
            Job::RecvWqe(msg) | Job::Written(msg) => self.written(cx, msg, true),
            Job::Cqe { cq, wc } => {
                let now = cx.now();
                cx.world().cqe_landed(self.node, cq, wc, now);
            }
            _ => {}
        }
    }

    fn timer(&mut self, cx: &mut Cx<World>, token: u64) {
        if token & PACKET != 0 {
            // a packet the other HCA's link delivered
            return self.arrive(cx, token & !PACKET);
        }
        let Some(job) = self.jobs.remove(&token) else { return };
        match job {
            Job::CmdDone(id) => {
                cx.world().nodes[self.node].hca.cmds_done.insert(id);
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
