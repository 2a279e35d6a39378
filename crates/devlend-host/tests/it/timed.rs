//! The kernel interface on the one clock: a driver-style thread on a borrower stores into a
//! borrowed device's BAR and reads it back over the NTB, blocking for the round trip; waiting for
//! an interrupt nobody raises is an error naming the thread and the vector.

use crate::common;
use common::*;
use devlend_engine::machine::{Machine, MachineError, ThreadError};
use devlend_host::{Os, ThreadOs};

#[test]
fn a_thread_reads_a_borrowed_bar_over_the_ntb_and_blocks_for_the_round_trip() {
    let mut c = two_host(false);
    let gpu = c.borrow("borrower", "gpu0").unwrap();
    let host = c.fabric.host_id("borrower").unwrap();
    let lender = c.fabric.host_id("lender").unwrap();
    let mut m = Machine::new(c);
    let remote = m.spawn("borrower-driver", 0, move |t| {
        let mut os = ThreadOs::new(t, host);
        let bar1 = os.pci_iomap(gpu, 1).map_err(ThreadError::other)?;
        os.write(bar1 + 0x40, b"lend").map_err(ThreadError::other)?;
        let back = os.read(bar1 + 0x40, 4).map_err(ThreadError::other)?;
        assert_eq!(back, b"lend", "the read sees the store that went before it");
        Ok(())
    });
    let local = m.spawn("lender-ram", 0, move |t| {
        let mut os = ThreadOs::new(t, lender);
        let buf = os.kmalloc(4096).map_err(ThreadError::other)?;
        os.write(buf, b"here").map_err(ThreadError::other)?;
        assert_eq!(os.read(buf, 4).map_err(ThreadError::other)?, b"here");
        Ok(())
    });
    m.run().unwrap();
    let (far, near) = (m.thread_end(remote).unwrap(), m.thread_end(local).unwrap());
    assert!(far > 1_000_000, "a store and a read over the NTB take more than a microsecond ({far} ps)");
    // The far round trip crosses the NTB pair both ways; the local one only its root and DRAM.
    let ntb = devlend_fabric::tuning::default_timing().ntb_latency_ps;
    assert!(far - near > 2 * ntb, "the NTB pair is on the far path both ways ({near} vs {far} ps)");
    assert!(near < far / 3, "RAM next to the CPU is much closer ({near} vs {far} ps)");
}

#[test]
fn waiting_for_an_interrupt_that_never_comes_names_the_thread_and_vector() {
    let c = two_host(false);
    let host = c.fabric.host_id("borrower").unwrap();
    let mut m = Machine::new(c);
    m.spawn("irq-waiter", 0, move |t| {
        let mut os = ThreadOs::new(t, host);
        os.wait_irq(40, 0).map_err(ThreadError::other)?;
        Ok(())
    });
    let e = m.run().unwrap_err();
    assert!(matches!(e, MachineError::Stuck { .. }), "{e}");
    assert!(e.to_string().contains("thread irq-waiter waits for interrupt vector 40 of borrower"), "{e}");
}
