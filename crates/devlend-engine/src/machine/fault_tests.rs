//! Faults on the clock: a cable pulled mid-DMA stops the DMA where it is, a removed device stops
//! at once, and a read of a hung device ends after the completion timeout with an error.

use super::super::tests::{testbed, toy_run, MIB};
use super::super::*;
use devlend_fabric::route::Failure;
use devlend_fabric::spec::Addr;
use std::cell::Cell;

/// Bytes of 0xab (the toy's payload) in borrower RAM from `at`, `len` long.
fn landed(f: &Fabric, borrower: u16, at: u64, len: usize) -> usize {
    let mut data = vec![0u8; len];
    f.ram[borrower as usize].read(at, &mut data);
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
    assert!(matches!(r.toy.borrow().faulted, Some(_)), "the device learnt of the fault");
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
    let cto = f.tuning.timing.completion_timeout_ps;
    let mut m = Machine::new(f);
    m.inject(1_000, move |f: &mut Fabric| {
        f.func_hang(func);
        Vec::new()
    });
    m.spawn("reader", 2_000, move |t| t.cpu_read(lender, bar0, 4).map(|_| ()));
    let e = m.run().unwrap_err();
    let MachineError::Thread { error, .. } = &e else { panic!("{e}") };
    assert!(matches!(**error, ThreadError::Access { failure: Failure::Unresponsive { .. }, .. }), "{e}");
    let end = m.thread_end(0).unwrap();
    assert!(end >= 2_000 + cto && end < 2_000 + cto + 10_000_000, "the read failed at {end} ps: the timeout is {cto} ps");
}
