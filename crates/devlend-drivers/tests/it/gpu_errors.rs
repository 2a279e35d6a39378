//! The GPU driver's typed errors name the range, engine or kernel call they concern.

use devlend_drivers::gpu_driver::{Driver, GpuError};
use devlend_drivers::gpu_run::bind;
use devlend_host::{Cluster, HostError};

const TWO: &str = include_str!("../pxh830-two-host.json");

#[test]
fn a_copy_outside_device_memory_or_the_peers_bar_names_the_range() {
    let mut c = Cluster::from_json(TWO).unwrap();
    let mut g = bind(&mut c, "borrower", "gpu0").unwrap();
    let mem_size = g.drv.mem_size;
    let mut os = c.os("borrower").unwrap();
    let buf = os.kmalloc(4096).unwrap();
    assert!(matches!(g.drv.memcpy_dtoh(&mut os, 0, buf, 0), Err(GpuError::Empty)));
    let e = g.drv.memcpy_dtoh(&mut os, mem_size - 8, buf, 16).unwrap_err();
    assert!(matches!(e, GpuError::PastEnd { off, len: 16, mem_size: m } if off == mem_size - 8 && m == mem_size), "{e}");
    let size = os.pci_resource_len(g.dev, 1).unwrap();
    let e = g.drv.map_peer(&mut os, g.dev, size - 4, 8).unwrap_err();
    assert!(matches!(e, GpuError::OutsidePeerBar { off, len: 8, size: s } if off == size - 4 && s == size), "{e}");
    assert!(matches!(g.drv.memcpy_dtoh_async(&mut os, 9, 0, 0, 4), Err(GpuError::NoEngine { ce: 9, engines: 2.. })));
}

#[test]
fn the_lender_cannot_probe_the_gpu_it_lent_and_the_error_names_the_call() {
    let mut c = Cluster::from_json(TWO).unwrap();
    bind(&mut c, "borrower", "gpu0").unwrap();
    let mut os = c.os("lender").unwrap();
    let dev = os.find("gpu0").unwrap();
    let e = Driver::probe(&mut os, dev).err().unwrap();
    let GpuError::Os { what, error } = &e else { panic!("{e}") };
    assert!(what.starts_with("pci_") && matches!(error, HostError::Busy(_) | HostError::AlreadyLent(_)), "{e}");
    assert!(std::error::Error::source(&e).is_some());
}
