//! A data-carrying DMA on the contention cluster (`--one data BYTES`): device `h0-d0` writes
//! `BYTES` of real data through its host's `next` NTB into host 1's RAM, then reads them back,
//! as a device model on the Machine (a CPU store to its BAR rings the doorbell). Unlike the
//! timing-only streams of the other rows, every TLP lands or is served with its bytes: the
//! fabric's write or read, and `Machine::moved`'s count, on each one.

use crate::cluster_spec;
use crate::contention::{fnv, program, NEAR_IOVA};
use devlend_engine::machine::{Cx, Device, FlowDone, Machine};
use devlend_fabric::{build, Fabric};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

pub struct Sample {
    pub seconds: f64,
    pub tlp_hops: u64,
    pub events: u64,
    pub peak_tlps: usize,
    /// Bytes the device moved (`Machine::moved`: written and read).
    pub moved: u64,
    pub digest: u64,
}

/// On its doorbell, writes `len` bytes of a pattern at `NEAR_IOVA`, then reads them back and
/// keeps what came back.
struct Copier {
    len: usize,
    back: Option<Vec<u8>>,
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

impl Device<Fabric> for Copier {
    fn mmio_write(&mut self, cx: &mut Cx<Fabric>, _bar: u8, _offset: u64, _tlp: &devlend_wire::Tlp) {
        cx.dma_write(NEAR_IOVA, pattern(self.len), 1).expect("the device reaches its neighbour's RAM");
    }

    fn dma_done(&mut self, cx: &mut Cx<Fabric>, done: FlowDone) {
        assert!(done.fault.is_none(), "the data DMA faulted: {:?}", done.fault);
        if done.token == 1 {
            cx.dma_read(NEAR_IOVA, self.len as u64, 2).expect("the device reads its neighbour's RAM");
        } else {
            self.back = Some(done.data);
        }
    }
}

/// Build and program the cluster and the device (untimed), then time the Machine's run.
pub fn run(bytes: u64) -> Sample {
    let mut f = build(&cluster_spec()).expect("benchmark topology builds");
    let reqs = program(&mut f);
    let dev = f.func_id("h0-d0").expect("the cluster has h0-d0");
    let bar = f.func(dev).bars.first().expect("a device has a BAR").addr;
    let host = f.host_id("h0").expect("the cluster has h0");
    let mut m = Machine::new(f);
    let copier = Rc::new(RefCell::new(Copier { len: bytes as usize, back: None }));
    m.add_device(dev, copier.clone());
    m.spawn("doorbell", 0, move |t| t.cpu_write(host, bar, &[1, 0, 0, 0]));
    let t = Instant::now();
    m.run().expect("the copy ends");
    let seconds = t.elapsed().as_secs_f64();
    assert!(copier.borrow().back.as_deref() == Some(&pattern(bytes as usize)[..]), "the bytes read back are the bytes written");
    let s = m.stats();
    let moved = m.moved(reqs[0]);
    let ports = m.port_stats().into_iter().flat_map(|p| [p.tlps, p.wire_bytes, p.payload_bytes, p.busy_ps, p.queue_ps, p.credit_stall_ps]);
    let digest = fnv(ports.chain([m.now(), moved, s.iotlb_hits, s.iotlb_misses]));
    Sample { seconds, tlp_hops: s.tlp_hops, events: s.events, peak_tlps: s.peak_tlps, moved, digest }
}
