//! The queues' doorbells and completion posting (NVMe 1.3 §4.1, §4.6, §7.4): the controller
//! learns from each CQ head doorbell which entries the host has consumed, never posts into a full
//! completion queue (head == tail + 1) and posts the entries that waited as soon as a head
//! doorbell frees room. A doorbell write the controller cannot take (a queue that does not
//! exist, a value past the queue's end, a head beyond the entries posted) is ignored, recorded in
//! [`Controller::doorbell_errors`], and reported to the host as an asynchronous event of type
//! Error (§5.2, Figure 89: 00h Write to Invalid Doorbell Register, 01h Invalid Doorbell Write
//! Value; log page 01h) when an Asynchronous Event Request is outstanding, or once one arrives.

use super::*;

/// A completion entry's contents before it has a place in its queue.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub sqid: u16,
    pub cid: u16,
    pub status: u16,
    pub result: u32,
}

/// Why a doorbell write was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DoorbellProblem {
    /// The doorbell of a queue that has not been created (Write to Invalid Doorbell Register).
    NoSuchQueue,
    /// A value not below the queue's size (Invalid Doorbell Write Value).
    PastTheEnd { entries: u32 },
    /// A CQ head that passes entries the controller has not posted (Invalid Doorbell Write Value).
    HeadBeyondTail { head: u32, tail: u32 },
}

/// A doorbell write the controller ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidDoorbell {
    pub at: Ps,
    pub qid: u16,
    /// The completion queue's head doorbell (else the submission queue's tail doorbell).
    pub cq_head: bool,
    pub value: u32,
    pub problem: DoorbellProblem,
}

/// Asynchronous Event Request Limit Exceeded (SCT 1h command specific, SC 05h, §5.2.1): the
/// status field's SCT in bits 10:8 above the SC.
pub const SC_AER_LIMIT_EXCEEDED: u16 = 1 << 8 | 0x05;
/// Identify Controller AERL is 0: one Asynchronous Event Request outstanding at a time.
const AER_LIMIT: usize = 1;

impl InvalidDoorbell {
    /// Dword 0 of the Asynchronous Event Request's completion (Figure 88): type 0h (Error
    /// status), the information code, log page 01h (Error Information).
    fn event(&self) -> u32 {
        let info = if self.problem == DoorbellProblem::NoSuchQueue { 0x00 } else { 0x01 };
        info << 8 | 0x01 << 16
    }
}

fn full(q: &Queue) -> bool {
    (q.tail + 1) % q.entries == q.head
}

impl Controller {
    /// A CQ head doorbell: the host has consumed the entries up to (not including) the value.
    pub(super) fn cq_doorbell<W: World>(&mut self, cx: &mut Cx<W>, qid: usize) {
        if !self.ready {
            return;
        }
        let value = reg_read(cx.fabric(), self.func, DOORBELL + 8 * qid as u64 + 4, 4) as u32;
        let Some(mut cq) = self.cqs[qid] else { return self.invalid_doorbell(cx, qid, true, value, DoorbellProblem::NoSuchQueue) };
        let n = cq.entries;
        if value >= n {
            return self.invalid_doorbell(cx, qid, true, value, DoorbellProblem::PastTheEnd { entries: n });
        }
        if (value + n - cq.head) % n > (cq.tail + n - cq.head) % n {
            return self.invalid_doorbell(cx, qid, true, value, DoorbellProblem::HeadBeyondTail { head: cq.head, tail: cq.tail });
        }
        cq.head = value;
        self.cqs[qid] = Some(cq);
        while self.cqs[qid].is_some_and(|q| !full(&q)) {
            let Some(e) = self.cq_waiting[qid].pop_front() else { break };
            self.write_entry(cx, qid, e);
        }
    }

    /// The SQ tail the host wrote to queue `qid`'s doorbell, if the controller can take it.
    pub(super) fn sq_tail<W: World>(&mut self, cx: &mut Cx<W>, qid: usize) -> Option<Queue> {
        let value = reg_read(cx.fabric(), self.func, DOORBELL + 8 * qid as u64, 4) as u32;
        let Some(mut sq) = self.sqs[qid] else {
            self.invalid_doorbell(cx, qid, false, value, DoorbellProblem::NoSuchQueue);
            return None;
        };
        if value >= sq.entries {
            self.invalid_doorbell(cx, qid, false, value, DoorbellProblem::PastTheEnd { entries: sq.entries });
            return None;
        }
        sq.tail = value;
        Some(sq)
    }

    fn invalid_doorbell<W: World>(&mut self, cx: &mut Cx<W>, qid: usize, cq_head: bool, value: u32, problem: DoorbellProblem) {
        let d = InvalidDoorbell { at: cx.now(), qid: qid as u16, cq_head, value, problem };
        self.doorbell_errors.push(d);
        // An event of type Error is masked once reported, until the host reads its log page
        // (§5.2); the model serves no Get Log Page, so until the controller is reset.
        if !self.error_event_masked && self.error_event.is_none() {
            self.error_event = Some(d.event());
        }
        self.report_events(cx);
    }

    /// An Asynchronous Event Request (§5.2): outstanding until an event completes it.
    pub(super) fn async_event_request<W: World>(&mut self, cx: &mut Cx<W>, slot: usize) {
        if self.aers.len() >= AER_LIMIT {
            self.cmd(slot).status = SC_AER_LIMIT_EXCEEDED;
            return self.complete(cx, slot);
        }
        self.aers.push_back(slot);
        self.report_events(cx);
    }

    fn report_events<W: World>(&mut self, cx: &mut Cx<W>) {
        if self.error_event.is_none() {
            return;
        }
        let Some(slot) = self.aers.pop_front() else { return };
        self.cmd(slot).result = self.error_event.take().unwrap_or(0);
        self.error_event_masked = true;
        self.complete(cx, slot);
    }

    /// Post command `slot`'s completion entry (now, or once its queue has room).
    pub(super) fn post<W: World>(&mut self, cx: &mut Cx<W>, slot: usize) {
        let c = self.cmd(slot);
        c.posted = true;
        let e = Entry { sqid: c.sqid, cid: c.cid, status: c.status, result: c.result };
        let Some(cqid) = self.sqs.get(e.sqid as usize).copied().flatten().map(|sq| sq.cq as usize) else { return };
        let Some(cq) = self.cqs.get(cqid).copied().flatten() else { return };
        if full(&cq) || !self.cq_waiting[cqid].is_empty() {
            self.cq_waiting[cqid].push_back(e);
        } else {
            self.write_entry(cx, cqid, e);
        }
    }

    /// Write the completion entry with the phase tag at the queue's tail, then the MSI-X message.
    fn write_entry<W: World>(&mut self, cx: &mut Cx<W>, cqid: usize, e: Entry) {
        let (Some(mut cq), Some(sq)) = (self.cqs[cqid], self.sqs.get(e.sqid as usize).copied().flatten()) else { return };
        let mut cqe = [0u8; 16];
        cqe[0..4].copy_from_slice(&e.result.to_le_bytes());
        cqe[8..10].copy_from_slice(&(sq.head as u16).to_le_bytes());
        cqe[10..12].copy_from_slice(&e.sqid.to_le_bytes());
        cqe[12..14].copy_from_slice(&e.cid.to_le_bytes());
        let sf: u16 = (e.status << 1) | cq.phase as u16;
        cqe[14..16].copy_from_slice(&sf.to_le_bytes());
        let addr = cq.base + cq.tail as u64 * 16;
        self.dma(cx, (0, 0), Stage::Cqe, addr, Some(cqe.to_vec()), 16);
        cq.tail = (cq.tail + 1) % cq.entries;
        if cq.tail == 0 {
            cq.phase = !cq.phase;
        }
        self.cqs[cqid] = Some(cq);
        if let Some(v) = cq.vector {
            self.interrupt(cx, v);
        }
    }
}
