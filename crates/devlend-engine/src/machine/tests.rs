//! The machine's promises: streams that share a link share it; devices act when their BAR is
//! written and are called back when their DMA is done; threads block on reads and conditions;
//! a fault stops only its own flow; a wait that can never end is an error, not a hang.

use super::*;
use devlend_fabric::spec::{Addr, TopologySpec};
use devlend_wire::{Access, Bdf, Tlp};

pub(super) const MIB: u64 = 1 << 20;

/// 000 Fig 9: gpu0 in the lender writes borrower RAM at 1 GiB through NTB window 1.
pub(super) fn testbed() -> Fabric {
    testbed_with(false)
}

fn testbed_with(lender_iommu: bool) -> Fabric {
    let mut spec: TopologySpec = serde_json::from_str(include_str!("../../tests/pxh830.json")).unwrap();
    spec.hosts[1].iommu = lender_iommu;
    let mut f = devlend_fabric::build(&spec).unwrap();
    devlend_fabric::fixtures::lend_gpu0_dma(&mut f);
    f
}

pub(super) fn window(f: &Fabric) -> u64 {
    f.peer_mw_get_addr(f.ntb_id("ntb-l").unwrap(), 1).unwrap().0
}

#[test]
fn two_streams_on_one_link_finish_together_not_back_to_back() {
    let f = testbed();
    let gpu = Requester::Func(f.func_id("gpu0").unwrap());
    let w = window(&f);
    let mut alone = Machine::new(testbed());
    alone.stream("a", gpu, w, 16 * MIB, Access::Write, 0).unwrap();
    alone.run().unwrap();
    let t1 = alone.streams()[0].end.unwrap();

    let mut m = Machine::new(f);
    m.stream("a", gpu, w, 16 * MIB, Access::Write, 0).unwrap();
    m.stream("b", gpu, w + 32 * MIB, 16 * MIB, Access::Write, 0).unwrap();
    m.run().unwrap();
    let (a, b) = (m.streams()[0].end.unwrap(), m.streams()[1].end.unwrap());
    let gap = a.abs_diff(b) as f64 / a.max(b) as f64;
    assert!(gap < 0.02, "the two streams end {a} and {b} ps: one after the other, not together");
    // Together they take about twice as long as one alone, not more (the link is shared, not lost).
    let ratio = a.max(b) as f64 / t1 as f64;
    assert!((1.9..2.1).contains(&ratio), "two streams take {ratio:.2}x one stream");
    // The busiest port carried both streams' payload.
    let busiest = m.port_stats().into_iter().max_by_key(|p| p.payload_bytes).unwrap();
    assert_eq!(busiest.payload_bytes, 32 * MIB);
    assert!(busiest.busy_ps <= a.max(b));
}

#[test]
fn a_stream_to_an_unreachable_address_is_one_clear_error() {
    let f = testbed();
    let gpu = Requester::Func(f.func_id("gpu0").unwrap());
    let mut m = Machine::new(f);
    let e = m.stream("lost", gpu, 0xdead_0000_0000, MIB, Access::Write, 0).unwrap_err();
    assert!(matches!(e, MachineError::Unreachable { .. }), "{e}");
    assert!(e.to_string().starts_with("workload lost: 0xdead00000000 cannot be reached"), "{e}");
}

/// A toy device: a doorbell at BAR 0 offset 0 starts a DMA write of `len` bytes of 0xab at the
/// address in BAR 0 offset 8; when it has landed, a 4-byte flag 1 (or 2 on a fault) goes to
/// the address at offset 16.
pub(super) struct Toy {
    pub(super) faulted: Option<u64>,
}

impl Device<Fabric> for Toy {
    fn mmio_write(&mut self, cx: &mut Cx<Fabric>, bar: u8, offset: u64, _tlp: &Tlp) {
        if bar != 0 || offset != 0 {
            return;
        }
        let func = cx.func();
        let mut regs = [0u8; 24];
        cx.fabric().bar_mem(func, 0).unwrap().read(0, &mut regs);
        let len = u32::from_le_bytes(regs[0..4].try_into().unwrap()) as usize;
        let dst = u64::from_le_bytes(regs[8..16].try_into().unwrap());
        cx.dma_write(dst, vec![0xab; len], 1).unwrap();
    }

    fn dma_done(&mut self, cx: &mut Cx<Fabric>, done: FlowDone) {
        if done.token != 1 {
            return;
        }
        let func = cx.func();
        let mut flag = [0u8; 8];
        cx.fabric().bar_mem(func, 0).unwrap().read(16, &mut flag);
        let flag_at = u64::from_le_bytes(flag);
        self.faulted = done.fault.map(|(a, _)| a);
        let v: u32 = if done.fault.is_some() { 2 } else { 1 };
        // The flag cannot go where the data could not (a link down): the fabric has recorded it.
        let _ = cx.dma_write(flag_at, v.to_le_bytes().to_vec(), 2);
    }
}

pub(super) struct Run {
    pub(super) m: Machine<Fabric>,
    pub(super) toy: Rc<RefCell<Toy>>,
    pub(super) borrower: u16,
    lender: u16,
}

/// A lender thread programs the toy's registers and rings its doorbell; a borrower thread waits
/// for the flag in its RAM.
pub(super) fn toy_run(len: u32, dst_off: u64) -> Run {
    let f = testbed();
    let func = f.func_id("gpu0").unwrap();
    let bar0 = f.resolve_addr(&Addr::Expr("gpu0.bar0".into())).unwrap();
    let (w, lender, borrower) = (window(&f), f.host_id("lender").unwrap(), f.host_id("borrower").unwrap());
    let mut m = Machine::new(f);
    let toy = Rc::new(RefCell::new(Toy { faulted: None }));
    m.add_device(func, toy.clone());
    m.spawn("driver", 1000, move |t| {
        t.cpu_write(lender, bar0 + 8, &(w + dst_off).to_le_bytes())?;
        t.cpu_write(lender, bar0 + 16, &(w + 0x1000).to_le_bytes())?;
        t.cpu_write(lender, bar0 + 4, &[0; 4])?;
        t.cpu_write(lender, bar0, &len.to_le_bytes())?;
        Ok(())
    });
    m.spawn("waiter", 0, move |t| {
        t.wait_until("the toy's flag in borrower RAM", move |f: &mut Fabric| {
            let mut b = [0u8; 4];
            f.ram(borrower).read(0x4000_1000, &mut b);
            u32::from_le_bytes(b) != 0
        });
        Ok(())
    });
    Run { m, toy, borrower, lender }
}

#[test]
fn a_device_acts_when_its_doorbell_lands_and_threads_wake_when_its_flag_lands() {
    let mut r = toy_run(64 << 10, 0x10_0000);
    r.m.run().unwrap();
    let done = r.m.thread_end(1).unwrap();
    let rung = r.m.thread_end(0).unwrap();
    assert!(done > rung, "the waiter woke at {done} ps, before the doorbell was rung at {rung}");
    let f = r.m.into_world().ok().unwrap();
    let mut data = vec![0u8; 64 << 10];
    f.ram(r.borrower).read(0x4010_0000, &mut data);
    assert!(data.iter().all(|&b| b == 0xab), "the DMA's bytes landed");
    assert_eq!(r.toy.borrow().faulted, None);
    let _ = r.lender;
}

#[test]
fn a_dma_that_faults_mid_flow_stops_there_and_other_flows_go_on() {
    // 8 KiB before the end of the 256 MiB mapping, 64 KiB long: the fault is at the boundary.
    let start = 256 * MIB - 0x2000;
    let mut r = toy_run(64 << 10, start);
    let gpu = Requester::Func(r.m.world().func_id("gpu0").unwrap());
    let w = window(&r.m.world());
    r.m.stream("other", gpu, w + 0x20_0000, 4 * MIB, Access::Write, 0).unwrap();
    r.m.run().unwrap();
    assert_eq!(r.toy.borrow().faulted, Some(window(&r.m.world()) + 256 * MIB), "the fault names the first unmapped byte");
    assert!(r.m.streams()[0].end.is_some(), "the other flow finished");
    let f = r.m.into_world().ok().unwrap();
    let mut flag = [0u8; 4];
    f.ram(r.borrower).read(0x4000_1000, &mut flag);
    assert_eq!(u32::from_le_bytes(flag), 2, "the device reported its fault");
    let mut data = vec![0u8; 0x2000];
    f.ram(r.borrower).read(0x4000_0000 + start, &mut data);
    assert!(data.iter().all(|&b| b == 0xab), "bytes before the fault landed");
}

#[test]
fn a_thread_that_waits_for_what_never_comes_is_an_error_not_a_hang() {
    let mut m = Machine::new(testbed());
    m.spawn("poller", 0, |t| {
        t.wait_until("a doorbell nobody rings", |_: &mut Fabric| false);
        Ok(())
    });
    let e = m.run().unwrap_err();
    assert!(matches!(&e, MachineError::Stuck { thread, .. } if thread == "poller"), "{e}");
    assert!(e.to_string().contains("thread poller waits for a doorbell nobody rings"), "{e}");
}

#[test]
fn a_wait_with_a_deadline_ends_at_what_comes_or_at_the_deadline_and_a_stale_deadline_wakes_nothing() {
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;
    let mut m = Machine::new(testbed());
    let flag = Rc::new(Cell::new(false));
    let seen = Rc::new(RefCell::new(Vec::new()));
    let (f, s) = (flag.clone(), seen.clone());
    m.spawn("waiter", 0, move |t| {
        let g = f.clone();
        let came = t.wait_for_until("the flag", Watch::Any, 5000, move |_: &mut Fabric| g.get());
        s.borrow_mut().push((came, t.now()));
        let never = t.wait_for_until("what never comes", Watch::Any, 3000, |_: &mut Fabric| false);
        s.borrow_mut().push((never, t.now()));
        t.sleep(7000);
        s.borrow_mut().push((true, t.now()));
        Ok(())
    });
    m.spawn("setter", 0, move |t| {
        t.sleep(1000);
        flag.set(true);
        Ok(())
    });
    m.run().unwrap();
    assert_eq!(*seen.borrow(), vec![(true, 1000), (false, 3000), (true, 10000)]);
}

#[test]
fn a_service_left_waiting_is_no_error_but_a_thread_waiting_on_it_is() {
    let mut m = Machine::new(testbed());
    m.spawn_service("handler", 0, |t| {
        t.wait_until("the next interrupt", |_: &mut Fabric| false);
        Ok(())
    });
    m.run().unwrap();
    assert_eq!(m.thread_end(0), None, "the service still waits");
    m.spawn("waiter", 0, |t| {
        t.wait_until("the handler's answer", |_: &mut Fabric| false);
        Ok(())
    });
    let e = m.run().unwrap_err();
    assert!(matches!(&e, MachineError::Stuck { thread, .. } if thread == "waiter"), "{e}");
}

#[test]
fn a_register_read_blocks_for_its_round_trip() {
    let f = testbed();
    let bar0 = f.resolve_addr(&Addr::Expr("gpu0.bar0".into())).unwrap();
    let lender = f.host_id("lender").unwrap();
    let func = f.func_id("gpu0").unwrap();
    let mut m = Machine::new(f);
    m.world().bar_store(func, 0, 0x40, &0x1234_5678u32.to_le_bytes());
    m.spawn("reader", 0, move |t| {
        let v = t.cpu_read(lender, bar0 + 0x40, 4)?;
        assert_eq!(v, 0x1234_5678u32.to_le_bytes());
        Ok(())
    });
    m.run().unwrap();
    let rtt = m.thread_end(0).unwrap();
    let idle = crate::latency(&mut m.world(), Requester::Cpu(lender), bar0 + 0x40, Access::Read).unwrap();
    assert_eq!(rtt, idle, "a lone read on an idle machine takes the engine's idle round trip");
}

#[test]
fn runs_are_bit_identical() {
    let go = || {
        let mut r = toy_run(256 << 10, 0x10_0000);
        let gpu = Requester::Func(r.m.world().func_id("gpu0").unwrap());
        let w = window(&r.m.world());
        r.m.stream("other", gpu, w + 0x200_0000, 3 * MIB, Access::Write, 500).unwrap();
        r.m.run().unwrap();
        (r.m.thread_end(1), r.m.streams()[0].end, r.m.port_stats(), r.m.stats().events)
    };
    assert_eq!(go(), go());
}

/// A device that reads `len` bytes at `addr` when its BAR 0 is written, and keeps them (and the
/// TLP that rang it). `streamed`: the read hands its bytes over as they are served, and the
/// pieces (offset, length) are kept too.
struct Reader {
    addr: u64,
    len: u64,
    streamed: bool,
    got: Option<Vec<u8>>,
    pieces: Vec<(u64, usize)>,
    rung_by: Option<Tlp>,
}

impl Device<Fabric> for Reader {
    fn mmio_write(&mut self, cx: &mut Cx<Fabric>, _bar: u8, _offset: u64, tlp: &Tlp) {
        self.rung_by = Some(tlp.clone());
        match self.streamed {
            true => cx.dma_read_streamed_after(0, self.addr, self.len, 7).unwrap(),
            false => cx.dma_read(self.addr, self.len, 7).unwrap(),
        }
    }
    fn dma_data(&mut self, _cx: &mut Cx<Fabric>, token: u64, offset: u64, data: &[u8]) {
        assert_eq!(token, 7);
        self.pieces.push((offset, data.len()));
        let got = self.got.get_or_insert_with(|| vec![0; self.len as usize]);
        got[offset as usize..][..data.len()].copy_from_slice(data);
    }
    fn dma_done(&mut self, _cx: &mut Cx<Fabric>, done: FlowDone) {
        assert_eq!(done.fault, None);
        match self.streamed {
            true => assert!(done.data.is_empty(), "a streamed read holds no buffer of the transfer"),
            false => self.got = Some(done.data),
        }
    }
}

/// gpu0 of the testbed (the lender's IOMMU on) reads 64 KiB of a pattern in borrower RAM through
/// the lender's re-splitting root: the reader after the run, the pattern, the lender CPU's
/// requester ID and the bus address it rang.
fn read_through_a_resplitting_root(streamed: bool) -> (Reader, Vec<u8>, Bdf, u64) {
    // The lender's IOMMU on: gpu0's reads go up to the lender's root (which re-splits reads it
    // forwards, 000 §7.1), through its IOMMU, out through the NTB to borrower RAM.
    let mut f = testbed_with(true);
    let gpu = f.func_id("gpu0").unwrap();
    let (l, nl) = (f.host_id("lender").unwrap(), f.ntb_id("ntb-l").unwrap());
    let d = f.iommu_domain_alloc(l, "lend").unwrap();
    f.iommu_attach(l, d, gpu).unwrap();
    let (w, _) = f.peer_mw_get_addr(nl, 1).unwrap();
    f.iommu_map(l, d, 0x1000_0000, w, 256 * MIB, true).unwrap();
    let b = f.host_id("borrower").unwrap();
    let pattern: Vec<u8> = (0..64u32 << 10).map(|i| (i * 7 + (i >> 9)) as u8).collect();
    f.ram_store(b, 0x4000_0000, &pattern);
    let plan = crate::plan(&mut f, Requester::Func(gpu), 0x1000_0000, Access::Read).unwrap();
    assert!(plan.request.stages.iter().any(|s| s.resplit.is_some()), "the path re-splits at the lender's root");
    let bar0 = f.resolve_addr(&Addr::Expr("gpu0.bar0".into())).unwrap();
    let mut m = Machine::new(f);
    let reader = Reader { addr: 0x1000_0000, len: 64 << 10, streamed, got: None, pieces: Vec::new(), rung_by: None };
    let reader = Rc::new(RefCell::new(reader));
    m.add_device(gpu, reader.clone());
    m.spawn("ring", 0, move |t| t.cpu_write(l, bar0 + 8, &[1, 2]).map(|_| ()));
    m.run().unwrap();
    let cpu_rid = m.world().requester_rid(Requester::Cpu(l));
    drop(m);
    let reader = Rc::try_unwrap(reader).ok().expect("the machine is gone").into_inner();
    (reader, pattern, cpu_rid, bar0)
}

#[test]
fn a_dma_read_through_a_resplitting_root_returns_the_bytes() {
    let (reader, pattern, cpu_rid, bar0) = read_through_a_resplitting_root(false);
    assert!(reader.got.as_deref() == Some(&pattern[..]), "the read returned the borrower's bytes");
    // The device is handed the TLP that reached it: the lender CPU's requester ID, the bus
    // address of the register, the payload.
    assert_eq!(reader.rung_by, Some(Tlp::write(cpu_rid, bar0 + 8, vec![1, 2])));
}

#[test]
fn a_streamed_read_hands_over_each_requests_bytes_as_it_is_served() {
    let (mut reader, pattern, _, _) = read_through_a_resplitting_root(true);
    assert!(reader.got.as_deref() == Some(&pattern[..]), "the pieces, put at their offsets, are the borrower's bytes");
    assert!(reader.pieces.len() > 1 && reader.pieces.iter().all(|&(_, n)| n <= 4096), "one piece per request served");
    // Served as the completer takes them (not necessarily in address order), each byte once.
    reader.pieces.sort();
    let mut next = 0;
    for &(off, n) in &reader.pieces {
        assert_eq!(off, next, "the pieces tile the transfer");
        next += n as u64;
    }
    assert_eq!(next, reader.len);
}

#[test]
fn a_watch_covers_only_the_landings_that_can_matter() {
    let w = Watch::Ram { host: 1, addr: 0x1000, len: 8 };
    assert!(w.covers(&Target::Ram { host: 1, addr: 0x1004 }, 4));
    assert!(w.covers(&Target::Ram { host: 1, addr: 0xf00 }, 0x104), "a write overlapping the start");
    assert!(!w.covers(&Target::Ram { host: 1, addr: 0x1008 }, 4), "just past the end");
    assert!(!w.covers(&Target::Ram { host: 0, addr: 0x1000 }, 4), "another host's RAM");
    assert!(!w.covers(&Target::Msi { host: 1, addr: 0xfee0_0000 }, 4));
    assert!(Watch::Msi { host: 1 }.covers(&Target::Msi { host: 1, addr: 0xfee0_0000 }, 4));
    assert!(!Watch::Msi { host: 1 }.covers(&Target::Ram { host: 1, addr: 0 }, 4));
    assert!(Watch::Any.covers(&Target::Bar { func: 0, bar: 0, offset: 0 }, 4));
}

/// A device that, when its BAR 0 is written, DMA-writes `len` bytes of 0xcd to `dst` and, as soon
/// as they have all left it (not landed), a 4-byte flag to `flag`: PCIe ordering, not the device,
/// keeps the flag behind the data.
struct Poster {
    dst: u64,
    flag: u64,
    len: usize,
    sent: Option<Ps>,
    done: Option<Ps>,
}

impl Device<Fabric> for Poster {
    fn mmio_write(&mut self, cx: &mut Cx<Fabric>, _bar: u8, _offset: u64, _tlp: &Tlp) {
        cx.dma_write(self.dst, vec![0xcd; self.len], 1).unwrap();
    }
    fn dma_sent(&mut self, cx: &mut Cx<Fabric>, token: u64) {
        if token == 1 {
            self.sent = Some(cx.now());
            cx.dma_write(self.flag, 1u32.to_le_bytes().to_vec(), 2).unwrap();
        }
    }
    fn dma_done(&mut self, _cx: &mut Cx<Fabric>, done: FlowDone) {
        if done.token == 1 {
            self.done = Some(done.end);
        }
    }
}

#[test]
fn a_device_learns_when_its_write_has_left_it_and_a_write_issued_then_lands_behind_it() {
    let f = testbed();
    let func = f.func_id("gpu0").unwrap();
    let bar0 = f.resolve_addr(&Addr::Expr("gpu0.bar0".into())).unwrap();
    let (w, lender, borrower) = (window(&f), f.host_id("lender").unwrap(), f.host_id("borrower").unwrap());
    let mut m = Machine::new(f);
    let dev = Rc::new(RefCell::new(Poster { dst: w + 0x10_0000, flag: w + 0x1000, len: 16 << 10, sent: None, done: None }));
    m.add_device(func, dev.clone());
    m.spawn("ring", 0, move |t| t.cpu_write(lender, bar0, &[1]).map(|_| ()));
    m.spawn("waiter", 0, move |t| {
        t.wait_until("the flag", move |f: &mut Fabric| {
            let mut b = [0u8; 4];
            f.ram(borrower).read(0x4000_1000, &mut b);
            u32::from_le_bytes(b) == 1
        });
        let mut data = vec![0u8; 16 << 10];
        t.world().fabric().ram(borrower).read(0x4010_0000, &mut data);
        assert!(data.iter().all(|&b| b == 0xcd), "the flag landed before the data it follows");
        Ok(())
    });
    m.run().unwrap();
    let (sent, done) = (dev.borrow().sent.unwrap(), dev.borrow().done.unwrap());
    assert!(sent < done, "sent at {sent} ps, landed at {done} ps");
}

#[test]
fn a_cpu_access_too_large_for_one_call_is_a_typed_error() {
    let f = testbed();
    let lender = f.host_id("lender").unwrap();
    let mut m = Machine::new(f);
    m.spawn("greedy", 0, move |t| {
        let e = t.cpu_read(lender, 0x1000, 2 << 30).unwrap_err();
        assert!(matches!(e, ThreadError::TooLarge { len, .. } if len == 2 << 30), "{e}");
        let e = t.cpu_write(lender, u64::MAX - 1, &[0; 4]).unwrap_err();
        assert!(matches!(e, ThreadError::TooLarge { .. }), "an access past the end of the address space: {e}");
        Ok(())
    });
    m.run().unwrap();
}

/// A device that, rung, reads 64 bytes at `addr`, then, that read done, reads them again
/// `delay` later (its own issue time), recording when each read ended.
struct Twice {
    addr: u64,
    delay: Ps,
    ends: Vec<Ps>,
}

impl Device<Fabric> for Twice {
    fn mmio_write(&mut self, cx: &mut Cx<Fabric>, _bar: u8, _offset: u64, _tlp: &Tlp) {
        cx.dma_read(self.addr, 64, 0).unwrap();
    }
    fn dma_done(&mut self, cx: &mut Cx<Fabric>, done: FlowDone) {
        self.ends.push(done.end);
        if self.ends.len() == 1 {
            cx.dma_read_after(self.delay, self.addr, 64, 1).unwrap();
        }
    }
}

#[test]
fn a_dma_issued_after_a_delay_starts_no_earlier_even_on_a_reused_flow_id() {
    // The second read gets the first one's flow id, whose returned tag left an issue event at the
    // moment the first ended: the second must still wait for its own start.
    let f = testbed();
    let gpu = f.func_id("gpu0").unwrap();
    let (l, addr) = (f.host_id("lender").unwrap(), window(&f));
    let bar0 = f.resolve_addr(&Addr::Expr("gpu0.bar0".into())).unwrap();
    let mut m = Machine::new(f);
    let dev = Rc::new(RefCell::new(Twice { addr, delay: 10_000_000, ends: Vec::new() }));
    m.add_device(gpu, dev.clone());
    m.spawn("ring", 0, move |t| t.cpu_write(l, bar0 + 8, &[1]).map(|_| ()));
    m.run().unwrap();
    let ends = dev.borrow().ends.clone();
    assert_eq!(ends.len(), 2);
    assert!(ends[1] - ends[0] > 10_000_000, "the second read ended {} ps after the first", ends[1] - ends[0]);
}

/// A device that, rung, signals the model of function `peer` (a wire that is not PCIe) and
/// records when its own timer from the other one comes.
struct Wired {
    peer: FuncId,
    sent: Option<bool>,
    got: Vec<(u64, Ps)>,
}

impl Device<Fabric> for Wired {
    fn mmio_write(&mut self, cx: &mut Cx<Fabric>, _bar: u8, _offset: u64, _tlp: &Tlp) {
        self.sent = Some(cx.signal(self.peer, 5_000, 7));
    }
    fn timer(&mut self, cx: &mut Cx<Fabric>, token: u64) {
        self.got.push((token, cx.now()));
    }
}

#[test]
fn a_device_signals_another_device_on_the_machine_and_not_a_function_without_a_model() {
    let f = testbed();
    let (gpu, ntb) = (f.func_id("gpu0").unwrap(), f.func_id("ntb-l").unwrap());
    let l = f.host_id("lender").unwrap();
    let bar0 = f.resolve_addr(&Addr::Expr("gpu0.bar0".into())).unwrap();
    let mut m = Machine::new(f);
    let (a, b) =
        (Rc::new(RefCell::new(Wired { peer: ntb, sent: None, got: Vec::new() })), Rc::new(RefCell::new(Wired { peer: gpu, sent: None, got: Vec::new() })));
    m.add_device(gpu, a.clone());
    m.spawn("ring", 0, move |t| t.cpu_write(l, bar0, &[1]).map(|_| ()));
    m.run().unwrap();
    assert_eq!(a.borrow().sent, Some(false), "no model is the NTB's function");
    m.add_device(ntb, b.clone());
    m.spawn("ring again", m.now(), move |t| t.cpu_write(l, bar0, &[1]).map(|_| ()));
    let rung = m.now();
    m.run().unwrap();
    assert_eq!(a.borrow().sent, Some(true));
    let got = b.borrow().got.clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 7);
    assert!(got[0].1 > rung + 5_000 && a.borrow().got.is_empty(), "{got:?}");
}

/// Sends a message to its root when its BAR 0 is written: when it sent it and when it arrived.
#[derive(Default)]
struct Messenger {
    sent: Option<Ps>,
    arrived: Option<Ps>,
}

impl Device<Fabric> for Messenger {
    fn mmio_write(&mut self, cx: &mut Cx<Fabric>, _bar: u8, _offset: u64, _tlp: &Tlp) {
        self.sent = Some(cx.now());
        cx.message_to_root(3).unwrap();
    }

    fn dma_done(&mut self, cx: &mut Cx<Fabric>, done: FlowDone) {
        if done.token == 3 && done.fault.is_none() {
            self.arrived = Some(cx.now());
        }
    }
}

/// gpu0's message to the lender's root, told at once, with or without 4 MiB of its own DMA
/// writes to the lender's RAM already on its upstream links: the message's time.
fn message_time(busy: bool) -> Ps {
    let f = testbed();
    let func = f.func_id("gpu0").unwrap();
    let bar0 = f.resolve_addr(&Addr::Expr("gpu0.bar0".into())).unwrap();
    let lender = f.host_id("lender").unwrap();
    let ram = f.resolve_expr("lender.ram+0x10000000").unwrap();
    let mut m = Machine::new(f);
    let dev = Rc::new(RefCell::new(Messenger::default()));
    m.add_device(func, dev.clone());
    if busy {
        m.stream("data", Requester::Func(func), ram, 4 * MIB, Access::Write, 0).unwrap();
    }
    m.spawn("driver", 0, move |t| t.cpu_write(lender, bar0, &[1; 4]));
    m.run().unwrap();
    let d = dev.borrow();
    d.arrived.expect("the message arrived") - d.sent.unwrap()
}

#[test]
fn a_message_to_the_root_is_a_flow_that_waits_behind_the_data_on_its_links() {
    let idle = message_time(false);
    let mut f = testbed();
    let gpu = Requester::Func(f.func_id("gpu0").unwrap());
    let msi = f.host(f.host_id("lender").unwrap()).msi.start;
    assert_eq!(idle, crate::latency(&mut f, gpu, msi, Access::Write).unwrap(), "idle: a 4-byte posted write's one-way time to the root");
    let busy = message_time(true);
    assert!(busy > idle, "behind 4 MiB of the device's own writes: {busy} ps, idle {idle} ps");
}

/// A device that keeps the TLPs written to its BARs.
struct Keeper(Vec<Tlp>);

impl Device<Fabric> for Keeper {
    fn mmio_write(&mut self, _cx: &mut Cx<Fabric>, _bar: u8, _offset: u64, tlp: &Tlp) {
        self.0.push(tlp.clone());
    }
}

#[test]
fn a_write_to_a_bar_is_routed_once_at_issue_and_lands_along_that_route() {
    let f = testbed();
    let gpu = f.func_id("gpu0").unwrap();
    let lender = f.host_id("lender").unwrap();
    let bar0 = f.resolve_addr(&Addr::Expr("gpu0.bar0".into())).unwrap();
    let before = f.route_cache_stats();
    let mut m = Machine::new(f);
    let keeper = Rc::new(RefCell::new(Keeper(Vec::new())));
    m.add_device(gpu, keeper.clone());
    m.spawn("store", 0, move |t| t.cpu_write(lender, bar0 + 0x10, &[7, 8, 9, 10]).map(|_| ()));
    m.run().unwrap();
    let after = m.world().route_cache_stats();
    let cpu_rid = m.world().requester_rid(Requester::Cpu(lender));
    // One route, when the store is issued (its timed path), carried to where it lands (the bytes
    // stored, the device's TLP built from it): not looked up again as it lands.
    assert_eq!((after.0 + after.1) - (before.0 + before.1), 1, "route lookups: {before:?} before the run, {after:?} after");
    assert_eq!(keeper.borrow().0, vec![Tlp::write(cpu_rid, bar0 + 0x10, vec![7, 8, 9, 10])]);
}

#[test]
fn a_run_stopped_early_leaves_no_stop_behind() {
    // A co-simulation's pattern (devlend-uml): run towards a far time, stopping after each
    // event, until the work is done. Each stop's marker is taken out again: the clock ends
    // where the work ends, not at the far time, and the pending list does not grow.
    let f = testbed();
    let gpu = Requester::Func(f.func_id("gpu0").unwrap());
    let w = window(&f);
    let mut m = Machine::new(f);
    m.stream("a", gpu, w, MIB, Access::Write, 0).unwrap();
    for k in 1..=50u64 {
        m.inject(k * 10_000, |_: &mut Fabric| Vec::new());
    }
    let far = 1_000_000_000_000;
    let mut stops = 0;
    while m.next_event_at().is_some() {
        assert!(m.next_event_at().is_some_and(|t| t < far), "a stop's marker left at {far} ps");
        assert!(m.run_until_or(far, |_| true).unwrap());
        stops += 1;
    }
    assert!(stops >= 50, "{stops} early stops");
    m.run().unwrap();
    let end = m.streams()[0].end.unwrap().max(500_000);
    assert_eq!(m.now(), end, "the clock ends where the last thing happened");
    // At most the 50 injected actions and one stop were ever pending at once.
    assert!(m.pending.len() <= 51, "{} pending entries kept for {stops} stops", m.pending.len());
    // A run that reaches its time takes its marker as before.
    m.run_until(end + 1000).unwrap();
    assert_eq!((m.now(), m.next_event_at()), (end + 1000, None));
}
