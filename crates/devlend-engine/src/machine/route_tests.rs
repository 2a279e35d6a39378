//! A flow's route is found once and carried (`core`'s docs): its TLPs land along it with no
//! further lookup while nothing has changed, and an IOMMU unmap between a TLP's issue and its
//! landing still faults the landing.

use super::tests::{testbed, window, MIB};
use super::*;
use devlend_fabric::route::Failure;

/// A device that DMA-writes `len` bytes of 0xcd at `dst` when signalled, and keeps how its flow
/// ended.
struct Writer {
    dst: u64,
    len: usize,
    done: Option<FlowDone>,
}

impl Device<Fabric> for Writer {
    fn timer(&mut self, cx: &mut Cx<Fabric>, _token: u64) {
        cx.dma_write(self.dst, vec![0xcd; self.len], 1).unwrap();
    }

    fn dma_done(&mut self, _cx: &mut Cx<Fabric>, done: FlowDone) {
        self.done = Some(done);
    }
}

/// A run of [`write_through_the_iommu`]: the machine, the device, and the fabric's route cache
/// (hits, misses) after the issue and at the end.
struct Ran {
    m: Machine<Fabric>,
    dev: Rc<RefCell<Writer>>,
    issued: (u64, u64),
    ended: (u64, u64),
}

/// gpu0 writes `len` bytes through NTB window 1 into borrower RAM (through the borrower's
/// IOMMU), issued at 1 µs; `between` runs on the fabric 1 ps later, before the first TLP lands.
fn write_through_the_iommu(len: usize, between: impl FnOnce(&mut Fabric) + 'static) -> Ran {
    let f = testbed();
    let func = f.func_id("gpu0").unwrap();
    let dst = window(&f) + 0x10_0000;
    let mut m = Machine::new(f);
    let dev = Rc::new(RefCell::new(Writer { dst, len, done: None }));
    m.add_device(func, dev.clone());
    m.signal(func, 1_000_000, 0);
    m.inject(1_000_001, move |f: &mut Fabric| {
        between(f);
        Vec::new()
    });
    m.run_until(1_000_001).unwrap();
    let issued = m.world().route_cache_stats();
    m.run().unwrap();
    let ended = m.world().route_cache_stats();
    Ran { m, dev, issued, ended }
}

#[test]
fn a_flow_lands_along_the_route_it_carries_without_looking_it_up_again() {
    // 4 KiB at a page start: several TLPs, all on the page routed at issue.
    let Ran { m, dev, issued, ended } = write_through_the_iommu(4096, |_| {});
    let done = dev.borrow_mut().done.take().expect("the DMA ended");
    assert_eq!(done.fault, None);
    assert!(issued.0 + issued.1 > 0, "the issue routed the flow");
    assert_eq!(ended, issued, "a landing looked its route up again though nothing changed");
    let f = m.into_world().ok().unwrap();
    let mut data = vec![0u8; 4096];
    f.ram(f.host_id("borrower").unwrap()).read(0x4010_0000, &mut data);
    assert!(data.iter().all(|&b| b == 0xcd), "every byte landed");
}

#[test]
fn an_unmap_between_issue_and_landing_faults_the_landing() {
    let unmap = |f: &mut Fabric| {
        let b = f.host_id("borrower").unwrap();
        let d = f.iommu_domain(b, "dl").unwrap();
        f.iommu_unmap(b, d, 0x4000_0000, 256 * MIB).unwrap();
    };
    let Ran { m, dev, issued, ended } = write_through_the_iommu(4096, unmap);
    let done = dev.borrow_mut().done.take().expect("the DMA ended");
    let (at, why) = done.fault.expect("the landing faulted");
    assert_eq!(at, window(&m.world()) + 0x10_0000, "the first TLP faulted");
    assert!(matches!(why, Failure::Iommu { .. }), "{why:?}");
    assert!(ended.1 > issued.1, "the landing routed the TLP again after the unmap");
    let f = m.into_world().ok().unwrap();
    let mut data = vec![0u8; 4096];
    f.ram(f.host_id("borrower").unwrap()).read(0x4010_0000, &mut data);
    assert!(data.iter().all(|&b| b == 0), "no byte landed");
}
