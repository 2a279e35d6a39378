//! The controller's completion queues follow the host's CQ head doorbells (NVMe 1.3 §4.6): a
//! full queue stalls posting, a head doorbell releases it, and a doorbell write the controller
//! cannot take is ignored, recorded and reported as an asynchronous event. The admin queue is
//! programmed by hand (a driver that sizes its queues as Linux does never fills one).

use devlend_devices::nvme::{DoorbellProblem, ACQ, AQA, ASQ, CC, CSTS, DOORBELL};
use devlend_engine::machine::ThreadError;
use devlend_host::{Os, ThreadOs};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

const SQ_ENTRIES: u32 = 8;
const CQ_ENTRIES: u32 = 4;
/// Long enough for any doorbell, fetch and completion on the borrowed path to have landed.
const SETTLE_PS: u64 = 100_000_000;

/// The completion queue as the host sees it after each step: (cid, phase) per entry, None where
/// nothing was written yet.
type Seen = Vec<Vec<Option<(u16, bool)>>>;

fn cq_now(os: &mut ThreadOs, cq: u64) -> Vec<Option<(u16, bool)>> {
    (0..CQ_ENTRIES as u64)
        .map(|i| {
            let e = os.read(cq + i * 16, 16).unwrap();
            (e != [0; 16]).then(|| (u16::from_le_bytes([e[12], e[13]]), e[14] & 1 == 1))
        })
        .collect()
}

fn sqe(opcode: u8, cid: u16) -> [u8; 64] {
    let mut s = [0u8; 64];
    s[0] = opcode;
    s[2..4].copy_from_slice(&cid.to_le_bytes());
    s[40] = 0x07; // Set Features: Number of Queues (no data)
    s
}

#[test]
fn a_full_completion_queue_stalls_until_the_host_frees_room_and_bad_heads_are_reported() {
    let (mut m, ctrl, host, dev) = devlend_drivers::nvme_run::machine(include_str!("../b2b.json"), "borrower", "nvme0", Some(1 << 20)).unwrap();
    let seen: Rc<RefCell<Seen>> = Rc::default();
    let out = seen.clone();
    let aen = Rc::new(Cell::new(0));
    let result = aen.clone();
    m.spawn("hand-driver", 0, move |t| {
        let mut os = ThreadOs::new(t, host);
        let bar0 = os.pci_iomap(dev, 0).map_err(ThreadError::other)?;
        os.pci_set_master(dev).map_err(ThreadError::other)?;
        let sq = os.dma_alloc_coherent(dev, SQ_ENTRIES as u64 * 64).map_err(ThreadError::other)?;
        let cq = os.dma_alloc_coherent(dev, CQ_ENTRIES as u64 * 16).map_err(ThreadError::other)?;
        os.write(cq.0, &[0u8; CQ_ENTRIES as usize * 16]).map_err(ThreadError::other)?;
        let reg = |os: &mut ThreadOs, off: u64, v: &[u8]| os.write(bar0 + off, v).unwrap();
        reg(&mut os, AQA, &((SQ_ENTRIES - 1) | (CQ_ENTRIES - 1) << 16).to_le_bytes());
        reg(&mut os, ASQ, &sq.1.to_le_bytes());
        reg(&mut os, ACQ, &cq.1.to_le_bytes());
        reg(&mut os, CC, &1u32.to_le_bytes());
        t.sleep(SETTLE_PS);
        assert_eq!(os.read(bar0 + CSTS, 4).unwrap()[0] & 1, 1, "CSTS.RDY");
        let (sq_tail, cq_head) = (DOORBELL, DOORBELL + 4);
        let step = |os: &mut ThreadOs, off: u64, value: u32| {
            reg(os, off, &value.to_le_bytes());
            t.sleep(SETTLE_PS);
            out.borrow_mut().push(cq_now(os, cq.0));
        };
        // Five commands: three entries fill the four-entry queue, two wait.
        for cid in 1..=5u16 {
            os.write(sq.0 + (cid as u64 - 1) * 64, &sqe(0x09, cid)).unwrap();
        }
        step(&mut os, sq_tail, 5);
        // The host consumed entries 0 and 1: the two waiting go to 3 and (phase flipped) 0.
        step(&mut os, cq_head, 2);
        // Invalid: past the queue's end; then consume all (head 1 == tail 1); then beyond the tail.
        step(&mut os, cq_head, 9);
        step(&mut os, cq_head, 1);
        step(&mut os, cq_head, 2);
        // An Asynchronous Event Request takes the first error at once; a second one stays
        // outstanding (Error events are masked once reported).
        os.write(sq.0 + 5 * 64, &sqe(0x0c, 6)).unwrap();
        os.write(sq.0 + 6 * 64, &sqe(0x0c, 7)).unwrap();
        step(&mut os, sq_tail, 7);
        let aen = os.read(cq.0 + 16, 4).unwrap();
        result.set(u32::from_le_bytes(aen.try_into().unwrap()));
        Ok(())
    });
    m.run().unwrap();
    let s = seen.borrow();
    let p = |cid, phase| Some((cid, phase));
    assert_eq!(s[0], vec![p(1, true), p(2, true), p(3, true), None], "a full queue takes no fourth entry");
    assert_eq!(s[1], vec![p(5, false), p(2, true), p(3, true), p(4, true)], "the head doorbell released both");
    assert_eq!(s[2], s[1]);
    assert_eq!(s[3], s[1]);
    assert_eq!(s[4], s[1], "nothing is posted for refused doorbells");
    assert_eq!(s[5][1], p(6, false), "the AER completes in the next entry");
    // Dword 0 (Figure 88): type 0h Error, information 01h Invalid Doorbell Write Value, log page 01h.
    assert_eq!(aen.get(), 0x01_01_00);
    let c = ctrl.borrow();
    let problems: Vec<_> = c.doorbell_errors.iter().map(|d| (d.qid, d.cq_head, d.value, d.problem)).collect();
    assert_eq!(problems, vec![(0, true, 9, DoorbellProblem::PastTheEnd { entries: 4 }), (0, true, 2, DoorbellProblem::HeadBeyondTail { head: 1, tail: 1 })]);
    assert_eq!(c.in_flight(), 1, "the second AER stays outstanding");
}
