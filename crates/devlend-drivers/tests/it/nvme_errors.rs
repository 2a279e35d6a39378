//! The NVMe driver's typed errors name the values they concern.

use devlend_devices::nvme::{MAX_QUEUES, MAX_QUEUE_ENTRIES};
use devlend_drivers::nvme_driver::{Driver, NvmeError};
use devlend_host::Cluster;

const JSON: &str = include_str!("../../../devlend-vm/tests/expansion-chassis-vm.json");

#[test]
fn a_queue_shape_the_controller_cannot_take_names_it_and_the_limits() {
    for (queues, depth) in [(0, 32), (MAX_QUEUES as u16, 32), (1, 1), (1, MAX_QUEUE_ENTRIES + 1)] {
        let mut c = Cluster::from_json(JSON).unwrap();
        let mut os = c.os("lender").unwrap();
        let dev = os.find("nvme0").unwrap();
        let e = Driver::probe_queues(&mut os, dev, queues, depth).err().unwrap();
        let shape = match e {
            NvmeError::QueueShape { queues, depth, max_queues, max_entries } => (queues, depth, max_queues, max_entries),
            e => panic!("{e}"),
        };
        assert_eq!(shape, (queues, depth, MAX_QUEUES - 1, MAX_QUEUE_ENTRIES));
    }
}

/// A write whose data the controller reads from a poisoned page of the borrower's RAM: the
/// controller receives a poisoned completion, completes the command with Data Transfer Error
/// (SCT 0, SC 04h), and the driver has the error at once, not after its I/O timeout.
#[test]
fn a_write_whose_data_comes_back_poisoned_completes_with_a_data_transfer_error_at_once() {
    use devlend_engine::machine::ThreadError;
    use devlend_host::{Os, ThreadOs};
    use std::cell::RefCell;
    use std::rc::Rc;
    let (mut m, _ctrl, host, dev) = devlend_drivers::nvme_run::machine(include_str!("../b2b.json"), "borrower", "nvme0", Some(1 << 20)).unwrap();
    let timeout = m.world().fabric.tuning().timing.nvme_io_timeout_ps;
    let got = Rc::new(RefCell::new(None));
    let out = got.clone();
    m.spawn("writer", 0, move |t| {
        let mut os = ThreadOs::new(t, host);
        let mut drv = Driver::probe(&mut os, dev).map_err(ThreadError::other)?;
        let buf = os.kmalloc(4096).map_err(ThreadError::other)?;
        drv.write(&mut os, 0, 8, buf).map_err(ThreadError::other)?;
        os.run_hardware(|f| f.ram_poison(host, buf));
        let start = t.now();
        let r = drv.write(&mut os, 8, 8, buf);
        *out.borrow_mut() = Some((r, t.now() - start));
        Ok(())
    });
    m.run().unwrap();
    let (r, took) = got.borrow_mut().take().unwrap();
    let e = r.unwrap_err();
    assert!(matches!(e, NvmeError::Status { opcode: 0x01, lba: 8, status: 0x4 }), "{e}");
    assert!(took < timeout / 1000, "the driver had the error after {took} ps, its timeout is {timeout} ps");
    let f = &m.world().fabric;
    assert!(f.events().iter().any(|e| matches!(e, devlend_fabric::events::Event::Failed(devlend_fabric::route::Failure::Poisoned { .. }))));
}
