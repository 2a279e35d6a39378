//! The HCA's receive engine and its completions: a packet's arrival, the responder's check of a
//! message, the placing of its data by DMA, the acknowledgement, and the CQEs on both sides.

use super::params::params;
use super::state::opcode;
use super::types::*;
use super::{Hca, HcaWorld, Job, Out, RxMsg};
use devlend_engine::machine::Cx;

impl Hca {
    // ----- the receive engine ---------------------------------------------------------------

    pub(super) fn arrive<W: HcaWorld>(&mut self, cx: &mut Cx<W>, key: u64) {
        let now = cx.now();
        self.rx_free = self.rx_free.max(now) + params().hca_rx_packet_ps;
        self.after(cx, self.rx_free - now, Job::RxDone(key));
    }

    pub(super) fn rx_done<W: HcaWorld>(&mut self, cx: &mut Cx<W>, key: u64) {
        let Some(pk) = cx.world().hca(self.node).inbox.remove(&key) else { return };
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

    /// The first packet of a message: the responder checks the rkey (RDMA write) or takes a
    /// receive WQE (send), fetching it by DMA; a refusal is answered with a NAK.
    pub(super) fn accept<W: HcaWorld>(&mut self, cx: &mut Cx<W>, msg: u64, head: &Packet) {
        let Packet::Data { rqpn, op, len, .. } = *head else { return };
        let node = self.node;
        let verdict = cx.world().hca(node).responder_accepts(rqpn, op, len);
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
                let addr = cx.world().hca(node).recv_wqe_addr(rqpn);
                rm.writes += 1;
                if !addr.is_some_and(|a| self.read(cx, a, params().wqe_bytes, Job::RecvWqe(msg))) {
                    rm.writes -= 1;
                }
            }
        }
        self.rx.insert(msg, rm);
    }

    /// Write a data packet where its message goes (after the receive WQE, for a send).
    pub(super) fn place<W: HcaWorld>(&mut self, cx: &mut Cx<W>, pk: Packet) {
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
    pub(super) fn written<W: HcaWorld>(&mut self, cx: &mut Cx<W>, msg: u64, one: bool) {
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
        cx.world().hca(self.node).land(rm.addr, len, now);
        if let Some((rcq, rqpn, rw)) = rm.recv {
            let wc = Wc { wr_id: rw.wr_id, status: WcStatus::Success, opcode: WcOpcode::Recv, byte_len: len, qp_num: rqpn };
            self.cqe(cx, rcq, wc);
        }
        self.tx.push_back(Out::Ack(msg, None));
        self.try_tx(cx);
    }

    // ----- completions ----------------------------------------------------------------------

    /// The requester has the answer to message `msg`.
    pub(super) fn answered<W: HcaWorld>(&mut self, cx: &mut Cx<W>, msg: u64, nak: Option<WcStatus>) {
        if let Some(st) = nak {
            return self.fail(cx, msg, st);
        }
        let Some(m) = self.msgs.remove(&msg) else { return };
        if m.wr.signaled {
            let cq = cx.world().hca(self.node).send_cq(m.qpn);
            let wc = Wc { wr_id: m.wr.wr_id, status: WcStatus::Success, opcode: opcode(m.wr.op), byte_len: m.wr.sge.length, qp_num: m.qpn };
            if let Some(cq) = cq {
                self.cqe(cx, cq, wc);
            }
        }
    }

    /// Message `id` failed: its CQE says why, and its QP goes to the error state (the rest of its
    /// send queue is flushed).
    pub(super) fn fail<W: HcaWorld>(&mut self, cx: &mut Cx<W>, id: u64, st: WcStatus) {
        let Some(m) = self.msgs.remove(&id) else { return };
        let now = cx.now();
        let cq = cx.world().hca(self.node).send_cq(m.qpn);
        if let Some(cq) = cq {
            let wc = Wc { wr_id: m.wr.wr_id, status: st, opcode: opcode(m.wr.op), byte_len: 0, qp_num: m.qpn };
            cx.world().hca(self.node).cqe_landed(cq, wc, now);
        }
        cx.world().hca(self.node).flush_qp(m.qpn, now);
    }

    /// Write a CQE by DMA; it is visible once it has landed.
    pub(super) fn cqe<W: HcaWorld>(&mut self, cx: &mut Cx<W>, cq: u32, wc: Wc) {
        let now = cx.now();
        match cx.world().hca(self.node).cqe_slot(cq) {
            Some(addr) => {
                let mut bytes = vec![0u8; params().cqe_bytes as usize];
                bytes[..8].copy_from_slice(&wc.wr_id.to_le_bytes());
                bytes[8] = wc.status as u8;
                if !self.write(cx, addr, bytes, Job::Cqe { cq, wc }) {
                    cx.world().hca(self.node).cqe_landed(cq, wc, now);
                }
            }
            None => cx.world().hca(self.node).cqe_landed(cq, wc, now),
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
