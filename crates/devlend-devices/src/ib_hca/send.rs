//! The HCA's command register, its doorbells, its send engine and its link direction: from a
//! doorbell to the packets of each WQE on the 4X link.

use super::params::params;
use super::types::*;
use super::{Hca, HcaWorld, Job, Msg, Out, PACKET, SEND_DOORBELL};
use devlend_engine::machine::{Cx, FlowDone};
use devlend_wire::Tlp;

impl Hca {
    // ----- commands and doorbells ---------------------------------------------------------

    pub(super) fn hcr<W: HcaWorld>(&mut self, cx: &mut Cx<W>, tlp: &Tlp) {
        let word = |i: usize| u64::from_le_bytes(tlp.payload.get(i * 8..i * 8 + 8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]));
        let (mailbox, bytes, id) = (word(0), word(1), word(2));
        cx.world().hca(self.node).stats.commands += 1;
        if !self.read(cx, mailbox, bytes.max(8), Job::CmdRead(id)) {
            cx.world().hca(self.node).cmds_done.insert(id);
        }
    }

    pub(super) fn uar<W: HcaWorld>(&mut self, cx: &mut Cx<W>, offset: u64, tlp: &Tlp) {
        let (page, reg) = ((offset / 4096) as usize, offset % 4096);
        let n = u32::from_le_bytes(tlp.payload.get(..4).and_then(|b| b.try_into().ok()).unwrap_or([0xff; 4]));
        let hca = cx.world().hca(self.node);
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
    pub(super) fn kick<W: HcaWorld>(&mut self, cx: &mut Cx<W>) {
        while !self.engine_busy {
            let Some(&qpn) = self.ready.front() else { return };
            let Some((wr, slot, remote)) = cx.world().hca(self.node).take_wqe(qpn) else {
                self.ready.pop_front();
                continue;
            };
            let id = self.next;
            self.next += 1;
            let rqpn = remote.map_or(u32::MAX, |r| r.1);
            self.msgs.insert(id, Msg { qpn, wr, rqpn, data: Vec::new(), reads: Vec::new() });
            match cx.world().hca(self.node).wqe_addr(qpn, slot) {
                Some(addr) if self.read(cx, addr, params().wqe_bytes, Job::Wqe(id)) => self.engine_busy = true,
                _ => self.fail(cx, id, WcStatus::LocQpOpErr),
            }
        }
    }

    /// The WQE is parsed and its local key translated: read its payload, packet by packet.
    pub(super) fn parsed<W: HcaWorld>(&mut self, cx: &mut Cx<W>, id: u64) {
        self.engine_busy = false;
        let mtu = params().ib_mtu;
        let Some(m) = self.msgs.get(&id) else { return self.kick(cx) };
        let (wr, qpn, rqpn) = (m.wr, m.qpn, m.rqpn);
        let pd = cx.world().hca(self.node).qps.get(qpn as usize).and_then(|q| q.as_ref()).map(|q| q.pd);
        let src = pd.and_then(|pd| cx.world().hca(self.node).translate(wr.sge.lkey, Some(pd), wr.sge.addr, wr.sge.length, 0));
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

    pub(super) fn payload<W: HcaWorld>(&mut self, cx: &mut Cx<W>, id: u64, k: usize, o: usize, done: FlowDone) {
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
    pub(super) fn try_tx<W: HcaWorld>(&mut self, cx: &mut Cx<W>) {
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
            cx.world().hca(self.node).stats.packets += 1;
            let ser = (bytes as f64 * p.ib_ps_per_byte()).round() as u64;
            self.tx_free = now + ser;
            let key = cx.world().send_packet(self.node, packet);
            cx.signal(self.peer, ser + p.ib_wire_latency_ps, key | PACKET);
        }
    }
}
