//! The engine's promises on the machine: channels (and non-blocking puts on them) that share a link share it (they finish
//! together, and together move no more than the link carries); a fault in one channel leaves
//! another's transfer complete and correct; the bytes DMA moves are the source's.

use crate::error::{RResult, RdmaError};
use crate::session::Shmem;
use crate::shmem::{handshake, Pair};
use devlend_devices::plx_dma::{Desc, DESC_DONE, DESC_ERROR};
use devlend_fabric::route::Requester;

const J: &str = include_str!("../tests/pex8749-rdma.json");
const HALF: u64 = 512 << 10;

/// The 003 testbed after the handshake, host B's DMA engine with `channels` channels of `reads`.
fn testbed_with(json: &str, channels: Option<u32>, reads: Option<u64>) -> RResult<(Shmem, Pair)> {
    let mut s = Shmem::new(devlend_fabric::build_json(json)?);
    let mut pair = handshake(&mut s, "nt-virtual", "nt-link", 0x1000_0000, 1 << 20, None)?;
    pair.b.attach_dma_with(&mut s, "plx-dma", channels.unwrap_or(1), reads.unwrap_or(1))?;
    Ok((s, pair))
}

/// The testbed with the NT cable (host B to host A; only the writes cross it) at Gen1 x1: with
/// deep read pipelines, the link is what limits the channels.
fn slow_link() -> String {
    let mut v: serde_json::Value = serde_json::from_str(J).unwrap();
    for l in v["links"].as_array_mut().unwrap() {
        if l["a"] == "nt-virtual.cable" {
            l["gen"] = 1.into();
            l["width"] = 1.into();
        }
    }
    v.to_string()
}

fn pattern(n: u64, seed: u64) -> Vec<u8> {
    (0..n).map(|i| ((i * 2654435761 + seed * 97) >> 7) as u8).collect()
}

/// Host B's buffer filled with a pattern; the two halves' block descriptors into host A.
fn halves(s: &Shmem, p: &Pair) -> (Vec<u8>, [Desc; 2]) {
    let (win, local) = (p.b.node.window.0, p.b.node.buf.phys);
    let data = pattern(2 * HALF, 1);
    s.fabric().write(Requester::Cpu(p.b.node.host), local, &data);
    let d = |k: u64| Desc { src: local + k * HALF, dst: win + k * HALF, count: HALF as u32 };
    (data, [d(0), d(1)])
}

fn host_a(s: &Shmem, p: &Pair, off: u64, n: u64) -> Vec<u8> {
    let at = p.b.node.peer.unwrap().phys + off;
    s.fabric().read(Requester::Cpu(p.a.node.host), at, n as usize).0
}

#[test]
fn two_channels_on_one_link_finish_together_within_its_capacity() {
    let json = slow_link();
    let (mut s, mut p) = testbed_with(&json, Some(2), Some(16)).unwrap();
    let (data, d) = halves(&s, &p);
    let one = p.b.run_queues(&mut s, &[vec![vec![d[0]]]], false).unwrap().total_ps;
    let both = p.b.run_queues(&mut s, &[vec![vec![d[0]]], vec![vec![d[1]]]], false).unwrap();
    let (a, b) = (both.channel_ps[0], both.channel_ps[1]);
    assert!(a.abs_diff(b) * 50 < a.max(b), "the channels end at {a} and {b} ps: one after the other, not together");
    let ratio = a.max(b) as f64 / one as f64;
    assert!((1.8..2.1).contains(&ratio), "two channels take {ratio:.2}x one alone: the link is shared, not doubled or lost");
    let rate = (2 * HALF) as f64 / (a.max(b) as f64 * 1e-12);
    let cap = p.b.dma_write_limit(&s).unwrap();
    assert!(rate <= cap, "{rate:.3e} B/s moved by both channels is more than the link's {cap:.3e}");
    assert!(both.link_ps <= a.max(b));
    assert_eq!(host_a(&s, &p, 0, 2 * HALF), data);
}

#[test]
fn a_fault_in_one_channel_leaves_the_other_complete_and_correct() {
    let (mut s, mut p) = testbed_with(J, Some(2), Some(4)).unwrap();
    let (data, d) = halves(&s, &p);
    // Channel 1's second descriptor runs past the 1 MiB BAR: the NTB has no translation there.
    let win = p.b.node.window.0;
    let bad = vec![Desc { src: d[1].src, dst: win + HALF, count: 4096 }, Desc { src: d[1].src, dst: win + (1 << 20) - 256, count: 4096 }];
    let e = p.b.run_queues(&mut s, &[vec![vec![d[0]]], vec![bad]], true).unwrap_err();
    assert!(matches!(e, RdmaError::Dma { descriptor: 1, .. }), "{e}");
    let RdmaError::Dma { bytes_done, .. } = e else { unreachable!() };
    assert!((4096..4096 + 4096).contains(&bytes_done), "descriptor 0 landed, and at most the part of 1 before the fault: {bytes_done}");
    assert_eq!(host_a(&s, &p, 0, HALF), data[..HALF as usize], "channel 0's transfer is complete and correct");
    assert_eq!(host_a(&s, &p, HALF, 4096), data[HALF as usize..HALF as usize + 4096]);
    // Channel 1's ring slice: descriptor 0 retired done, descriptor 1 marked done with an error.
    let slice = crate::shmem::ring_slice(p.b.node.ring, 2);
    let ctl = |s: &Shmem, i: u64| {
        let at = p.b.node.ring.phys + slice + i * devlend_devices::plx_dma::params::ntb_dma().descriptor_bytes + 20;
        u32::from_le_bytes(s.fabric().read(Requester::Cpu(p.b.node.host), at, 4).0.try_into().unwrap())
    };
    assert_eq!(ctl(&s, 0), DESC_DONE);
    assert_eq!(ctl(&s, 1), DESC_DONE | DESC_ERROR);
    let log = p.b.dma.as_ref().unwrap().engine.borrow().log(1).clone();
    assert_eq!(log.faults.len(), 1);
    assert!(log.faults[0].failure.is_some(), "the fault names what the fabric refused");
}

#[test]
fn bytes_moved_by_dma_equal_the_source_for_every_pipeline_depth_and_mode() {
    for reads in [1, 3, 16] {
        let (mut s, mut p) = testbed_with(J, Some(1), Some(reads)).unwrap();
        let (win, local) = (p.b.node.window.0, p.b.node.buf.phys);
        let data = pattern(300_001, reads);
        s.fabric().write(Requester::Cpu(p.b.node.host), local, &data);
        let n = data.len() as u64;
        // SG: seven uneven pieces (not multiples of the read size); then block for the whole.
        let cuts = [0, 1, 513, 4096, 70_000, 70_001, 200_000, n];
        let sg: Vec<Desc> = cuts.windows(2).map(|w| Desc { src: local + w[0], dst: win + w[0], count: (w[1] - w[0]) as u32 }).collect();
        p.b.run_queues(&mut s, &[vec![sg]], true).unwrap();
        assert_eq!(host_a(&s, &p, 0, n), data, "SG, {reads} reads in flight");
        let other = pattern(n, reads + 100);
        s.fabric().write(Requester::Cpu(p.b.node.host), local, &other);
        p.b.run_queues(&mut s, &[vec![vec![Desc { src: local, dst: win, count: n as u32 }]]], false).unwrap();
        assert_eq!(host_a(&s, &p, 0, n), other, "block, {reads} reads in flight");
    }
}

#[test]
fn deeper_read_pipelines_are_faster_until_the_link_limits() {
    let time = |reads| {
        let (mut s, mut p) = testbed_with(J, Some(1), Some(reads)).unwrap();
        let (_, d) = halves(&s, &p);
        p.b.run_queues(&mut s, &[vec![vec![d[0]]]], false).unwrap().total_ps
    };
    let (one, four) = (time(1), time(4));
    assert!(four * 10 < one * 7, "4 reads in flight {four} ps, 1 read {one} ps");
}

#[test]
fn two_non_blocking_puts_on_two_channels_share_the_link() {
    let json = slow_link();
    let (mut s, mut p) = testbed_with(&json, Some(2), Some(16)).unwrap();
    let peer = p.b.node.peer.unwrap().phys;
    let data = pattern(2 * HALF, 3);
    let (lo, hi) = data.split_at(HALF as usize);
    let alone = p.b.put(&mut s, peer, lo, crate::Method::BlockDma).unwrap().total_ps;
    p.b.put_nbi(&mut s, peer, lo, crate::Method::BlockDma).unwrap();
    p.b.put_nbi(&mut s, peer + HALF, hi, crate::Method::BlockDma).unwrap();
    let both = p.b.quiet(&mut s).unwrap();
    let ends: Vec<u64> = both.steps.iter().filter(|s| s.0 == "one operation done").map(|s| s.1).collect();
    assert_eq!(ends.len(), 2);
    let ratio = both.total_ps as f64 / alone as f64;
    assert!((1.8..2.1).contains(&ratio), "two puts at once take {ratio:.2}x one alone: they share the link");
    assert!(ends[0].abs_diff(ends[1]) * 20 < both.total_ps, "both end near the same time: {ends:?}");
    let rate = (2 * HALF) as f64 / (both.total_ps as f64 * 1e-12);
    let cap = p.b.dma_write_limit(&s).unwrap();
    assert!(rate <= cap, "{rate:.3e} B/s moved by both puts is more than the link's {cap:.3e}");
    assert_eq!(host_a(&s, &p, 0, 2 * HALF), data);
}
