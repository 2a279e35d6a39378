//! Faults on the clock: a cable pulled mid-DMA stops the DMA where it is, a removed device stops
//! at once, and a read of a hung device ends after the completion timeout with an error; a
//! crashed host's threads stop there; follow-up actions; AER messages.

use super::super::tests::{testbed, toy_run, MIB};
use super::super::*;
use devlend_fabric::events::Event;
use devlend_fabric::route::Failure;
use devlend_fabric::spec::Addr;
use std::cell::Cell;

/// Bytes of 0xab (the toy's payload) in borrower RAM from `at`, `len` long.
fn landed(f: &Fabric, borrower: u16, at: u64, len: usize) -> usize {
    let mut data = vec![0u8; len];
    f.ram(borrower).read(at, &mut data);
    data.iter().filter(|&&b| b == 0xab).count()
}

#[test]
fn a_cable_pulled_mid_dma_stops_it_there_and_nothing_lands_after() {
    let len = 16 * MIB;
    let mut r = toy_run(len as u32, 0x10_0000);
    let nl = r.m.world().ntb_id("ntb-l").unwrap();
    let gpu = Requester::Func(r.m.world().func_id("gpu0").unwrap());
    let at_fault = Rc::new(Cell::new(0usize));
    let (seen, b) = (at_fault.clone(), r.borrower);
    r.m.inject(200_000_000, move |f: &mut Fabric| {
        f.ntb_link_disable(nl).unwrap();
        seen.set(landed(f, b, 0x4010_0000, len as usize));
        Vec::new()
    });
    let e = r.m.run().unwrap_err();
    assert!(matches!(&e, MachineError::Stuck { thread, .. } if thread == "waiter"), "the flag cannot cross a down link: {e}");
    let before = at_fault.get();
    assert!(before > 0 && before < len as usize, "the fault struck mid-transfer ({before} of {len} bytes)");
    assert_eq!(r.m.moved(gpu) as usize, before, "the machine counts what landed");
    assert!(r.toy.borrow().faulted.is_some(), "the device learnt of the fault");
    let f = r.m.into_world().ok().unwrap();
    assert_eq!(landed(&f, r.borrower, 0x4010_0000, len as usize), before, "no byte landed after the fault");
}

#[test]
fn a_removed_device_stops_at_once_and_is_not_called_again() {
    let len = 16 * MIB;
    let mut r = toy_run(len as u32, 0x10_0000);
    let func = r.m.world().func_id("gpu0").unwrap();
    r.m.inject(200_000_000, move |f: &mut Fabric| {
        let slot = f.slot_of(func);
        f.port_disable(slot).unwrap();
        vec![(func, Failure::PortDown { node: slot })]
    });
    assert!(r.m.run().is_err(), "the waiter never gets its flag");
    assert!(r.m.halted(func));
    assert_eq!(r.toy.borrow().faulted, None, "a removed device's model is not called back");
    let moved = r.m.moved(Requester::Func(func)) as usize;
    let f = r.m.into_world().ok().unwrap();
    assert!(moved < len as usize);
    assert_eq!(landed(&f, r.borrower, 0x4010_0000, len as usize), moved);
}

#[test]
fn a_read_of_a_hung_device_fails_after_the_completion_timeout() {
    let f = testbed();
    let bar0 = f.resolve_addr(&Addr::Expr("gpu0.bar0".into())).unwrap();
    let (lender, func) = (f.host_id("lender").unwrap(), f.func_id("gpu0").unwrap());
    let cto = f.tuning().timing.completion_timeout_ps;
    let mut m = Machine::new(f);
    m.inject(1_000, move |f: &mut Fabric| {
        f.func_hang(func);
        Vec::new()
    });
    m.spawn("reader", 2_000, move |t| t.cpu_read(lender, bar0, 4).map(|_| ()));
    let e = m.run().unwrap_err();
    let MachineError::Thread { error, .. } = &e else { panic!("{e}") };
    assert!(matches!(&**error, ThreadError::Access { failure, .. } if matches!(failure.failure, Failure::Unresponsive { .. })), "{e}");
    let end = m.thread_end(0).unwrap();
    assert!(end >= 2_000 + cto && end < 2_000 + cto + 10_000_000, "the read failed at {end} ps: the timeout is {cto} ps");
}

/// AER messages the fabric's log holds: (time, error, severity name, more).
fn aer(f: &Fabric) -> Vec<(Ps, devlend_fabric::aer::AerError, &'static str, u32)> {
    f.events()
        .iter()
        .filter_map(|e| if let Event::Aer { at, detect, more } = e { Some((*at, detect.error, detect.error.severity().name(), *more)) } else { None })
        .collect()
}

#[test]
fn a_crashed_host_stops_its_threads_there_and_a_waiter_elsewhere_meets_its_own_timeout() {
    let f = testbed();
    let (lender, borrower) = (f.host_id("lender").unwrap(), f.host_id("borrower").unwrap());
    let flag = 0x4000_0000u64;
    let mut m = Machine::new(f);
    let stores = Rc::new(Cell::new(0u32));
    let n = stores.clone();
    let writer = m.spawn("writer", 0, move |t| {
        t.runs_on(borrower);
        loop {
            t.sleep(1_000_000);
            t.cpu_write(borrower, flag + 8, &[1])?;
            n.set(n.get() + 1);
        }
    });
    let timed_out = Rc::new(Cell::new(false));
    let seen = timed_out.clone();
    let waiter = m.spawn("waiter", 0, move |t| {
        t.runs_on(lender);
        let ok = t.wait_for_until("the writer's last word", Watch::Any, 50_000_000, |_: &mut Fabric| false);
        seen.set(!ok);
        Ok(())
    });
    let (at_crash, n) = (Rc::new(Cell::new(0u32)), stores.clone());
    let c = at_crash.clone();
    m.inject(10_500_000, move |_: &mut Fabric| {
        c.set(n.get());
        Effects { crashed: vec![borrower], ..Effects::default() }
    });
    let e = m.run().unwrap_err();
    assert!(
        matches!(&e, MachineError::Thread { thread, error } if thread == "writer" && matches!(**error, ThreadError::HostCrashed { at: 10_500_000, .. })),
        "{e}"
    );
    assert!(e.to_string().contains("host borrower crashed at 10.500 us"), "{e}");
    assert!(at_crash.get() > 5 && stores.get() == at_crash.get(), "no store issued after the crash ({} then, {} in all)", at_crash.get(), stores.get());
    assert_eq!(m.crashed(writer), Some((borrower, 10_500_000)));
    assert_eq!((m.crashed(waiter), m.thread_end(waiter)), (None, Some(50_000_000)), "the waiter on the lender ran to its own deadline");
    assert!(timed_out.get());
}

#[test]
fn follow_up_actions_run_at_their_delays_and_a_link_down_reports_a_fatal_surprise_down() {
    let f = testbed();
    let func = f.func_id("gpu0").unwrap();
    let aer_ps = f.tuning().timing.aer_irq_ps;
    let mut m = Machine::new(f);
    let when = Rc::new(Cell::new(0));
    let w = when.clone();
    m.inject(1_000, move |f: &mut Fabric| {
        let slot = f.slot_of(func);
        f.port_disable(slot).unwrap();
        let later: Later<Fabric> = Box::new(move |_: &mut Fabric, at| {
            w.set(at);
            Effects::default()
        });
        Effects { halted: vec![(func, Failure::PortDown { node: slot })], links_down: vec![slot], later: vec![(5_000, later)], ..Effects::default() }
    });
    m.run().unwrap();
    assert_eq!(when.get(), 6_000);
    let f = m.into_world().ok().unwrap();
    assert_eq!(aer(&f), vec![(1_000 + aer_ps, devlend_fabric::aer::AerError::SurpriseDown, "fatal", 0)]);
}

#[test]
fn a_completion_timeout_and_a_poisoned_read_are_aer_errors_delivered_to_the_root_port() {
    let f = testbed();
    let bar0 = f.resolve_addr(&Addr::Expr("gpu0.bar0".into())).unwrap();
    let (lender, func) = (f.host_id("lender").unwrap(), f.func_id("gpu0").unwrap());
    let (cto, aer_ps) = (f.tuning().timing.completion_timeout_ps, f.tuning().timing.aer_irq_ps);
    let mut m = Machine::new(f);
    m.spawn("reader", 0, move |t| {
        t.world().func_poison(func);
        assert!(t.cpu_read(lender, bar0, 4).is_err(), "a poisoned completion is an error");
        assert!(t.cpu_read(lender, bar0, 4).is_err());
        t.world().flr(func).unwrap();
        t.world().func_hang(func);
        assert!(t.cpu_read(lender, bar0, 4).is_err());
        Ok(())
    });
    m.run().unwrap();
    let f = m.into_world().ok().unwrap();
    let got = aer(&f);
    use devlend_fabric::aer::AerError::*;
    assert_eq!(got.iter().map(|a| (a.1, a.2)).collect::<Vec<_>>(), vec![(PoisonedTlp, "non-fatal"), (CompletionTimeout, "non-fatal")], "{got:?}");
    assert_eq!(got[0].3, 1, "the second poisoned read came while the first message was under way");
    let Some(Event::Aer { detect, .. }) = f.events().iter().find(|e| matches!(e, Event::Aer { .. })) else { panic!() };
    assert!(matches!(f.node(detect.root_port).kind, devlend_fabric::model::NodeKind::RootPort { .. }));
    assert!(got[1].0 >= cto + aer_ps, "detected when the timeout expired");
}

/// A device that DMA-reads `len` bytes at the bus address written to its BAR 0, keeping the end.
struct Reader {
    len: u64,
    done: Rc<std::cell::RefCell<Option<FlowDone>>>,
}

impl Device<Fabric> for Reader {
    fn mmio_write(&mut self, cx: &mut Cx<Fabric>, _bar: u8, _offset: u64, tlp: &devlend_wire::Tlp) {
        let at = u64::from_le_bytes(tlp.payload[..8].try_into().unwrap());
        cx.dma_read(at, self.len, 7).unwrap();
    }
    fn dma_done(&mut self, _cx: &mut Cx<Fabric>, done: FlowDone) {
        *self.done.borrow_mut() = Some(done);
    }
}

#[test]
fn a_device_dma_read_of_a_poisoned_page_stops_there_with_a_poisoned_completion() {
    let f = testbed();
    let (func, lender, borrower) = (f.func_id("gpu0").unwrap(), f.host_id("lender").unwrap(), f.host_id("borrower").unwrap());
    let bar0 = f.resolve_addr(&Addr::Expr("gpu0.bar0".into())).unwrap();
    let w = super::super::tests::window(&f);
    let mut m = Machine::new(f);
    let done = Rc::new(std::cell::RefCell::new(None));
    m.add_device(func, Rc::new(std::cell::RefCell::new(Reader { len: MIB, done: done.clone() })));
    // An uncorrectable error in the page 64 KiB into the window's memory in the borrower.
    m.world().ram_poison(borrower, 0x4001_0000);
    m.spawn("driver", 0, move |t| t.cpu_write(lender, bar0, &w.to_le_bytes()));
    m.run().unwrap();
    let d = done.borrow_mut().take().expect("the read ended");
    assert_eq!(d.fault, Some((w + 0x1_0000, Failure::Poisoned { func })), "the flow stopped at the poisoned page, the device the receiver");
    assert_eq!(m.moved(Requester::Func(func)), 0x1_0000, "what came before it was served");
    let f = m.into_world().ok().unwrap();
    assert_eq!(aer(&f).iter().map(|a| (a.1, a.2)).collect::<Vec<_>>(), vec![(devlend_fabric::aer::AerError::PoisonedTlp, "non-fatal")]);
}
