//! What the HCA holds (004 §2.2): queue pairs (a send queue of WQEs, a receive queue), completion
//! queues, UAR pages (one per process or kernel user, each with its doorbell), and the translation
//! and protection table (TPT) indexed by keys: one entry per registered region with its protection
//! domain, access rights and page list (the MTT), giving local (lkey) and remote (rkey) access.
//! QP and CQ buffers may be registered memory themselves (the bypass driver's two-stage creation,
//! 004 §3.3): the HCA then reads WQEs and writes CQEs through the buffer's key.
//!
//! The driver side (devlend-xenib's `ops`) fills these tables as the firmware commands it issues
//! would, flushes a QP it moves to the error state ([`HcaState::flush_qp`]) and consumes landed
//! data ([`HcaState::take_landing`]); the engines' own steps (TPT translation, WQE and CQE slots,
//! the responder's check) are this crate's alone. The device model ([`super::Hca`]) reads and
//! updates the tables as its engines run. Beside the tables sit two logs of the simulation: the
//! packets on the link towards this HCA, and the data it has written into its host's memory that
//! no poller has seen yet.

use super::params::params;
use super::types::*;
use std::collections::{HashMap, HashSet, VecDeque};

#[derive(Debug, Clone)]
pub struct Mpt {
    pub key: u32,
    pub pd: u32,
    pub owner: Owner,
    pub va: u64,
    pub len: u64,
    /// MTT: the machine address of each page.
    pub pages: Vec<u64>,
    pub access: u32,
}

#[derive(Debug, Clone)]
pub struct CqHw {
    pub owner: Owner,
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
    pub owner: Owner,
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

/// Data an HCA wrote into a host's memory, and when it became visible there.
#[derive(Debug, Clone, Copy)]
pub struct Landing {
    pub addr: u64,
    pub len: u64,
    pub at: u64,
}

/// A WQE ready to send: the request, its slot and the QP's remote end (node, QP number).
pub(crate) type Wqe = (SendWr, u64, Option<(usize, u32)>);

/// One HCA's tables and logs.
#[derive(Debug, Default)]
pub struct HcaState {
    pub uars: Vec<Option<Owner>>,
    pub pds: Vec<Option<Owner>>,
    pub tpt: HashMap<u32, Mpt>,
    pub next_key: u32,
    pub cqs: Vec<Option<CqHw>>,
    pub qps: Vec<Option<QpHw>>,
    /// Firmware commands the HCA has completed (by the id the driver gave each), not yet taken.
    pub cmds_done: HashSet<u64>,
    pub next_cmd: u64,
    pub stats: HcaStats,
    /// Data the HCA has written into its host's memory, not yet seen by a poller.
    pub landed: Vec<Landing>,
    /// Packets on the link towards this HCA, by key.
    pub inbox: HashMap<u64, Packet>,
}

impl HcaState {
    /// Translate (key, va, len) through the TPT: the entry must exist, belong to `pd` (when given),
    /// cover the range and allow `access` (0: local read). Returns machine segments.
    pub(crate) fn translate(&mut self, key: u32, pd: Option<u32>, va: u64, len: u64, access: u32) -> Option<Vec<(u64, u64)>> {
        let pb = params().page_bytes;
        let ok = self
            .tpt
            .get(&key)
            .filter(|m| pd.is_none_or(|p| m.pd == p) && va >= m.va && va.saturating_add(len) <= m.va + m.len && (m.access & access) == access);
        let Some(m) = ok else {
            self.stats.tpt_faults += 1;
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

    /// The next WQE of QP `qpn`'s send queue, if it is ready to send: the request, its slot and
    /// the QP's remote end.
    pub(crate) fn take_wqe(&mut self, qpn: u32) -> Option<Wqe> {
        let q = self.qps.get_mut(qpn as usize)?.as_mut().filter(|q| q.state == QpState::Rts)?;
        let wr = q.sq.pop_front()?;
        let slot = q.posted;
        q.posted += 1;
        let remote = q.remote;
        self.stats.wqes += 1;
        Some((wr, slot, remote))
    }

    /// Where the HCA reads send WQE `slot` of QP `qpn` (through its key when the QP buffer is
    /// registered guest memory: bypass); None when it does not translate.
    pub(crate) fn wqe_addr(&mut self, qpn: u32, slot: u64) -> Option<u64> {
        let q = self.qps.get(qpn as usize)?.as_ref()?;
        let wqe = params().wqe_bytes;
        let (buf, ring, depth) = (q.buf, q.ring, q.depth);
        match buf {
            Some((va, key)) => self.translate(key, None, va + (slot % depth) * wqe, wqe, 0).map(|s| s[0].0),
            None => Some(ring + (slot % depth) * wqe),
        }
    }

    /// Where the HCA reads QP `qpn`'s next receive WQE (the receive queue follows the send queue
    /// in the QP buffer).
    pub(crate) fn recv_wqe_addr(&mut self, qpn: u32) -> Option<u64> {
        let q = self.qps.get(qpn as usize)?.as_ref()?;
        let wqe = params().wqe_bytes;
        let (buf, ring, depth) = (q.buf, q.ring, q.depth);
        match buf {
            Some((va, key)) => self.translate(key, None, va, wqe, 0).map(|s| s[0].0),
            None => Some(ring + depth * wqe),
        }
    }

    /// The responder's check of a message's first packet for its QP `qpn`: where the data goes
    /// (the rkey's segments, or a receive WQE's: then its CQ and the WQE), or the NAK's status.
    #[allow(clippy::type_complexity)]
    pub(crate) fn responder_accepts(&mut self, qpn: u32, op: SendOp, len: u64) -> Result<(Vec<(u64, u64)>, Option<(u32, RecvWr)>), WcStatus> {
        let rq = self.qps.get(qpn as usize).and_then(|x| x.as_ref()).filter(|x| x.state >= QpState::Rtr && x.state != QpState::Err);
        let Some((pd, rcq)) = rq.map(|q| (q.pd, q.recv_cq)) else { return Err(WcStatus::RemAccessErr) };
        match op {
            SendOp::RdmaWrite { remote_addr, rkey } => {
                self.translate(rkey, Some(pd), remote_addr, len, ACCESS_REMOTE_WRITE).map(|s| (s, None)).ok_or(WcStatus::RemAccessErr)
            }
            SendOp::Send => {
                let rw = self.qps[qpn as usize].as_mut().unwrap().rq.pop_front().ok_or(WcStatus::RnrRetryExcErr)?;
                let segs = self.translate(rw.sge.lkey, Some(pd), rw.sge.addr, len.min(rw.sge.length), ACCESS_LOCAL_WRITE).filter(|_| rw.sge.length >= len);
                match segs {
                    Some(s) => Ok((s, Some((rcq, rw)))),
                    None => {
                        let now = self.landed.last().map_or(0, |l| l.at);
                        self.cqe_landed(rcq, Wc { wr_id: rw.wr_id, status: WcStatus::LocProtErr, opcode: WcOpcode::Recv, byte_len: 0, qp_num: qpn }, now);
                        Err(WcStatus::RemAccessErr)
                    }
                }
            }
        }
    }

    pub(crate) fn send_cq(&self, qpn: u32) -> Option<u32> {
        self.qps.get(qpn as usize)?.as_ref().map(|q| q.send_cq)
    }

    /// Where the HCA writes the next CQE of `cq` (through the CQ buffer's key for bypass).
    pub(crate) fn cqe_slot(&mut self, cq: u32) -> Option<u64> {
        let c = self.cqs.get_mut(cq as usize)?.as_mut()?;
        let cqe = params().cqe_bytes;
        let slot = c.produced % c.depth;
        c.produced += 1;
        let (buf, ring) = (c.buf, c.ring);
        match buf {
            Some((va, key)) => self.translate(key, None, va + slot * cqe, cqe, ACCESS_LOCAL_WRITE).map(|s| s[0].0),
            None => Some(ring + slot * cqe),
        }
    }

    /// A CQE of `cq` is visible from `at`; the completion event is raised then if the CQ was armed.
    pub(crate) fn cqe_landed(&mut self, cq: u32, wc: Wc, at: u64) {
        let Some(c) = self.cqs.get_mut(cq as usize).and_then(|c| c.as_mut()) else { return };
        c.entries.push((at, wc));
        if c.armed {
            c.armed = false;
            c.events.push_back(at);
        }
    }

    /// QP `qpn` goes to the error state at `at`: the rest of its send queue is flushed, each
    /// request completing with `WrFlushErr`.
    pub fn flush_qp(&mut self, qpn: u32, at: u64) {
        let Some(q) = self.qps.get_mut(qpn as usize).and_then(|q| q.as_mut()) else { return };
        q.state = QpState::Err;
        let (cq, wrs): (u32, Vec<SendWr>) = (q.send_cq, q.sq.drain(..).collect());
        for wr in wrs {
            self.cqe_landed(cq, Wc { wr_id: wr.wr_id, status: WcStatus::WrFlushErr, opcode: opcode(wr.op), byte_len: 0, qp_num: qpn }, at);
        }
    }

    /// A message's data has landed in the host's memory at `at`: a poller of it sees it now.
    pub(crate) fn land(&mut self, addr: u64, len: u64, at: u64) {
        self.landed.push(Landing { addr, len, at });
    }

    /// Whether a landing covering `addr` is logged and not yet consumed.
    pub fn has_landing(&self, addr: u64) -> bool {
        self.landed.iter().any(|x| addr >= x.addr && addr < x.addr + x.len.max(1))
    }

    /// The first landing covering `addr` not yet consumed: its time (the caller's poll of that
    /// memory sees it then), removed from the log.
    pub fn take_landing(&mut self, addr: u64) -> Option<u64> {
        let i = self.landed.iter().position(|x| addr >= x.addr && addr < x.addr + x.len.max(1))?;
        Some(self.landed.remove(i).at)
    }
}

/// The completion opcode of a send work request.
pub(crate) fn opcode(op: SendOp) -> WcOpcode {
    match op {
        SendOp::RdmaWrite { .. } => WcOpcode::RdmaWrite,
        SendOp::Send => WcOpcode::Send,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One region of three 4 KiB pages at va 0x1800 (so it starts mid-page) in PD 1, pages
    /// scattered in machine memory; a QP in RTS with two send requests, its CQ armed.
    fn hca() -> HcaState {
        let mut h = HcaState::default();
        let pages = vec![0x10_0000, 0x20_0000, 0x20_1000];
        h.tpt.insert(7, Mpt { key: 7, pd: 1, owner: 0, va: 0x1800, len: 3 * 4096 - 0x800, pages, access: ACCESS_LOCAL_WRITE });
        let cq = CqHw { owner: 0, depth: 4, buf: None, ring: 0x9000, entries: Vec::new(), armed: true, events: VecDeque::new(), produced: 0 };
        h.cqs.push(Some(cq));
        let wr = |wr_id| SendWr { wr_id, sge: Sge { addr: 0x1800, length: 8, lkey: 7 }, op: SendOp::Send, signaled: true };
        let sq = VecDeque::from([wr(1), wr(2)]);
        let qp = QpHw {
            owner: 0,
            pd: 1,
            state: QpState::Rts,
            send_cq: 0,
            recv_cq: 0,
            uar: 0,
            depth: 4,
            buf: None,
            ring: 0xa000,
            sq,
            rq: VecDeque::new(),
            remote: None,
            posted: 0,
        };
        h.qps.push(Some(qp));
        h
    }

    #[test]
    fn a_key_translates_to_the_pages_of_its_region_and_refuses_what_it_does_not_allow() {
        let mut h = hca();
        // 0x1800..0x2800 lies in the first page (0x10_0800..) and the second (0x20_0000..); the
        // second and third pages are contiguous in machine memory, so they form one segment
        assert_eq!(h.translate(7, Some(1), 0x1800, 0x2000, 0), Some(vec![(0x10_0800, 0x800), (0x20_0000, 0x1800)]));
        assert_eq!(h.translate(7, Some(1), 0x1800, 8, ACCESS_LOCAL_WRITE), Some(vec![(0x10_0800, 8)]));
        assert_eq!(h.stats.tpt_faults, 0);
        assert_eq!(h.translate(7, Some(2), 0x1800, 8, 0), None, "another PD");
        assert_eq!(h.translate(7, None, 0x1800, 8, ACCESS_REMOTE_WRITE), None, "an access the region does not allow");
        assert_eq!(h.translate(7, None, 0x1000, 8, 0), None, "below the region");
        assert_eq!(h.translate(8, None, 0x1800, 8, 0), None, "no such key");
        assert_eq!(h.stats.tpt_faults, 4);
    }

    #[test]
    fn a_flushed_qp_completes_its_send_queue_with_flush_errors_and_raises_one_event() {
        let mut h = hca();
        assert_eq!(h.take_wqe(0).map(|w| (w.0.wr_id, w.1)), Some((1, 0)), "the first request, slot 0");
        assert_eq!(h.wqe_addr(0, 1), Some(0xa000 + 64), "slot 1 of the QP's ring");
        h.flush_qp(0, 500);
        let q = h.qps[0].as_ref().unwrap();
        assert_eq!((q.state, q.sq.len()), (QpState::Err, 0));
        let c = h.cqs[0].as_ref().unwrap();
        assert_eq!(c.entries.iter().map(|(at, wc)| (*at, wc.wr_id, wc.status)).collect::<Vec<_>>(), vec![(500, 2, WcStatus::WrFlushErr)]);
        assert_eq!((c.armed, c.events.iter().copied().collect::<Vec<_>>()), (false, vec![500]), "an armed CQ raises one event, then is disarmed");
        assert_eq!(h.take_wqe(0), None, "a QP in the error state sends nothing");
    }

    #[test]
    fn a_send_without_a_receive_wqe_is_refused_and_a_landing_is_taken_once() {
        let mut h = hca();
        h.qps[0].as_mut().unwrap().state = QpState::Rtr;
        assert_eq!(h.responder_accepts(0, SendOp::Send, 8), Err(WcStatus::RnrRetryExcErr));
        assert_eq!(h.responder_accepts(1, SendOp::Send, 8), Err(WcStatus::RemAccessErr), "no such QP");
        h.land(0x1800, 16, 900);
        assert!(h.has_landing(0x1808) && !h.has_landing(0x1810));
        assert_eq!((h.take_landing(0x1808), h.take_landing(0x1808)), (Some(900), None));
    }
}
