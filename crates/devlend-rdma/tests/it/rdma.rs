//! Functional bytes and the bad inputs of issue 6 on the 003 testbed (pex8749-rdma.json is the
//! shipped YAML with its setup dropped).

use devlend_devices::error::ModelError;
use devlend_devices::plx_dma::Desc;
use devlend_fabric::route::Failure;
use devlend_fabric::route::Requester;
use devlend_rdma::error::DmaStop;
use devlend_rdma::node::link_down;
use devlend_rdma::{handshake, Method, Pair, RResult, RdmaError, Shmem};

const J: &str = include_str!("../pex8749-rdma.json");
const BUF_SIZE: u64 = 1 << 20;

/// The 003 testbed after the scratchpad handshake (1 MiB buffers at 256 MiB into each host's RAM).
fn testbed(json: &str) -> RResult<(Shmem, Pair)> {
    testbed_with(json, None, None)
}

/// The testbed with host B's DMA engine of `channels` channels of `reads` reads each (None: params').
fn testbed_with(json: &str, channels: Option<u32>, reads: Option<u64>) -> RResult<(Shmem, Pair)> {
    let p = devlend_devices::plx_dma::params::ntb_dma();
    let mut s = Shmem::new(devlend_fabric::build_json(json)?);
    let mut pair = handshake(&mut s, "nt-virtual", "nt-link", 0x1000_0000, BUF_SIZE, None)?;
    pair.b.attach_dma_with(&mut s, "plx-dma", channels.unwrap_or(p.channels), reads.unwrap_or(p.outstanding_reads))?;
    Ok((s, pair))
}
const ALL: [Method; 4] = [Method::Pio, Method::BlockDma, Method::SgDma(8), Method::SgDma(256)];

fn peer_a(p: &Pair) -> u64 {
    p.b.node.peer.unwrap().phys
}

fn ram(s: &Shmem, host: u16, addr: u64, n: usize) -> Vec<u8> {
    s.fabric().read(Requester::Cpu(host), addr, n).0
}

#[test]
fn handshake_publishes_buffers_and_programs_windows() {
    let (_s, p) = testbed(J).unwrap();
    assert_eq!(p.b.node.peer.unwrap(), p.a.node.buf);
    assert_eq!(p.a.node.peer.unwrap(), p.b.node.buf);
    assert_eq!(p.b.node.window_size(), BUF_SIZE);
    assert!(p.b.dma.is_some() && p.a.dma.is_none());
}

#[test]
fn every_method_puts_real_bytes_into_the_peer() {
    let (mut s, mut p) = testbed(J).unwrap();
    let base = peer_a(&p);
    for (k, how) in ALL.iter().enumerate() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 13 + k as u32) as u8).collect();
        let dst = base + 0x1000 * k as u64 + 3;
        let t = p.b.put_bytes(&mut s, dst, &data, *how).unwrap();
        assert!(t.total_ps > 0);
        assert_eq!(ram(&s, p.a.node.host, dst, data.len()), data, "{how:?}");
        assert_ne!(p.a.node.take_doorbell(&mut s.fabric()) & devlend_rdma::node::DB_DATA, 0);
    }
}

#[test]
fn typed_put_get_and_nonblocking_quiet() {
    let (mut s, mut p) = testbed(J).unwrap();
    let base = peer_a(&p);
    p.b.put_int(&mut s, base, &[1, -2, 3], Method::BlockDma).unwrap();
    p.b.put_double(&mut s, base + 64, &[1.5, -2.25], Method::Pio).unwrap();
    for how in ALL {
        assert_eq!(p.b.get_int(&mut s, base, 3, how).unwrap().0, vec![1, -2, 3]);
        assert_eq!(p.b.get_double(&mut s, base + 64, 2, how).unwrap().0, vec![1.5, -2.25]);
    }
    // Host A has no DMA channel: PIO works, DMA is a clear error.
    let base_b = p.a.node.peer.unwrap().phys;
    p.a.put_bytes(&mut s, base_b + 8, b"from A", Method::Pio).unwrap();
    assert_eq!(ram(&s, p.b.node.host, base_b + 8, 6), b"from A");
    let host_a = p.a.node.host;
    assert_eq!(p.a.put_bytes(&mut s, base_b, b"x", Method::BlockDma).unwrap_err(), RdmaError::NoDmaEngine { host: host_a });
    p.b.put_nbi(&mut s, base + 0x100, &[7; 300], Method::SgDma(8)).unwrap();
    p.b.put_nbi(&mut s, base + 0x400, &[9; 300], Method::BlockDma).unwrap();
    assert_eq!(p.b.pending(), 2);
    assert!(p.b.quiet(&mut s).unwrap().total_ps > 0);
    assert_eq!(p.b.pending(), 0);
    assert_eq!(ram(&s, p.a.node.host, base + 0x400, 300), vec![9; 300]);
}

#[test]
fn put_larger_than_the_window_is_refused_and_writes_nothing() {
    let (mut s, mut p) = testbed(J).unwrap();
    let base = peer_a(&p);
    let before = ram(&s, p.a.node.host, base, 1 << 20);
    for how in ALL {
        let e = p.b.put_bytes(&mut s, base + 16, &vec![0xab; 1 << 20], how).unwrap_err();
        assert!(matches!(e, RdmaError::ExceedsWindow { .. }), "{e}");
        assert!(e.to_string().contains("window"));
    }
    assert_eq!(ram(&s, p.a.node.host, base, 1 << 20), before);
}

#[test]
fn get_from_an_unpublished_address_is_refused() {
    let (mut s, mut p) = testbed(J).unwrap();
    let base = peer_a(&p);
    for how in ALL {
        let e = p.b.get_bytes(&mut s, base + (2 << 20), 16, how).unwrap_err();
        assert!(matches!(e, RdmaError::NotPublished { published: Some(_), .. }), "{e}");
        let e = p.b.get_bytes(&mut s, base - 4096, 16, how).unwrap_err();
        assert!(matches!(e, RdmaError::NotPublished { .. }));
    }
    p.b.node.peer = None;
    assert!(matches!(p.b.get_bytes(&mut s, base, 4, Method::Pio), Err(RdmaError::NotPublished { published: None, .. })));
}

#[test]
fn doorbell_to_a_host_whose_link_is_down_fails_cleanly() {
    let (mut s, mut p) = testbed(J).unwrap();
    let base = peer_a(&p);
    let before = ram(&s, p.a.node.host, base, 64);
    link_down(&mut s.fabric(), "nt-link").unwrap();
    // The fabric refuses the doorbell store, the library refuses before anything moves: both
    // name the adapter whose link is disabled.
    let down = |ntb: &str| RdmaError::LinkDown { ntb: ntb.into(), cabled: true, ping: None };
    assert_eq!(p.b.node.ring_peer(&mut s.fabric(), 2).unwrap_err(), down("nt-link"));
    for how in ALL {
        let e = p.b.put_bytes(&mut s, base, &[1; 64], how).unwrap_err();
        assert_eq!(e, down("nt-link"), "{e}");
        assert_eq!(e.to_string(), "NTB link is down: nt-link: the link is disabled (ntb_link_disable): nothing reaches the other host");
        assert_eq!(p.b.get_bytes(&mut s, base, 64, how).unwrap_err(), down("nt-link"));
        assert_eq!(p.b.put_nbi(&mut s, base, &[1; 64], how).unwrap_err(), down("nt-link"));
    }
    assert_eq!(p.b.pending(), 0, "a refused non-blocking put leaves nothing to wait for");
    assert_eq!(p.a.node.publish(&mut s.fabric()).unwrap_err(), down("nt-virtual"));
    let job = vec![vec![vec![Desc { src: p.b.node.buf.phys, dst: p.b.node.window.0, count: 64 }]]];
    assert_eq!(p.b.dma_concurrent(&mut s, &job, false).unwrap_err(), down("nt-link"));
    assert_eq!(ram(&s, p.a.node.host, base, 64), before);
}

#[test]
fn typed_put_get_blocking_and_nonblocking_with_every_method() {
    let (mut s, mut p) = testbed(J).unwrap();
    let base = peer_a(&p);
    for (k, how) in ALL.iter().enumerate() {
        let at = base + 0x4000 * k as u64;
        let ints = [k as i32, -7, i32::MAX, i32::MIN];
        let dbls = [k as f64 + 0.5, -1e300, f64::MIN_POSITIVE];
        p.b.put_int(&mut s, at, &ints, *how).unwrap();
        p.b.put_double(&mut s, at + 64, &dbls, *how).unwrap();
        assert_eq!(ram(&s, p.a.node.host, at, 16), ints.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
        assert_eq!(p.b.get_int(&mut s, at, 4, *how).unwrap().0, ints);
        assert_eq!(p.b.get_double(&mut s, at + 64, 3, *how).unwrap().0, dbls);
        // Non-blocking: a put and a get queued, both done at quiet; the get lands at the same
        // offset of host B's buffer (symmetric heap).
        let bytes: Vec<u8> = (0..777u32).map(|i| (i * 3 + k as u32) as u8).collect();
        p.b.put_nbi(&mut s, at + 0x1000, &bytes, *how).unwrap();
        p.b.get_nbi(&mut s, at, 16, *how).unwrap();
        assert_eq!(p.b.pending(), 2);
        assert!(p.b.quiet(&mut s).unwrap().total_ps > 0);
        assert_eq!(ram(&s, p.a.node.host, at + 0x1000, bytes.len()), bytes);
        assert_eq!(p.b.local_read(&s, at - base, 16).unwrap(), ram(&s, p.a.node.host, at, 16));
    }
    assert_eq!(p.b.local_read(&s, (1 << 20) - 8, 16).unwrap_err(), RdmaError::ExceedsBuffer { offset: (1 << 20) - 8, len: 16, size: 1 << 20 });
    // A non-blocking get from an address the peer never published queues nothing.
    assert!(matches!(p.b.get_nbi(&mut s, base + (2 << 20), 8, Method::Pio), Err(RdmaError::NotPublished { .. })));
    assert_eq!(p.b.pending(), 0);
}

#[test]
fn concurrent_descriptors_outside_registered_memory_move_nothing() {
    let (mut s, mut p) = testbed_with(J, Some(2), None).unwrap();
    let base = peer_a(&p);
    let (win, local) = (p.b.node.window.0, p.b.node.buf.phys);
    let before = ram(&s, p.a.node.host, base, 1 << 20);
    let good = vec![Desc { src: local, dst: win, count: 4096 }];
    let bad = vec![Desc { src: local, dst: win + (1 << 20) - 64, count: 128 }];
    let e = p.b.dma_concurrent(&mut s, &[vec![good.clone()], vec![bad]], true).unwrap_err();
    assert!(matches!(e, RdmaError::OutsideRegistered { .. }), "{e}");
    let e = p.b.dma_concurrent(&mut s, &[vec![good.clone()], vec![good.clone()], vec![good]], true).unwrap_err();
    assert_eq!(e, RdmaError::TooManyQueues { queues: 3, channels: 2 }, "three queues on two channels: {e}");
    assert_eq!(ram(&s, p.a.node.host, base, 1 << 20), before);
}

#[test]
fn descriptors_outside_registered_memory() {
    let (mut s, mut p) = testbed(J).unwrap();
    let base = peer_a(&p);
    let (win, local) = (p.b.node.window.0, p.b.node.buf.phys);
    let before = ram(&s, p.a.node.host, base, 1 << 20);
    // Raw descriptors (a buggy driver): the second one's destination is past the 1 MiB BAR. The
    // channel stops there with an error status and a recorded fault; nothing is reported as done.
    let descs = [Desc { src: local, dst: win, count: 256 }, Desc { src: local, dst: win + (1 << 20), count: 256 }];
    let events = s.fabric().events().len();
    let e = p.b.dma_raw(&mut s, &descs, true).unwrap_err();
    // The fault's route failure comes back as the fabric's value, with the names it refers to.
    let RdmaError::Dma { descriptor: 1, bytes_done: 256, stop: DmaStop::Route(r) } = &e else { panic!("{e:?}") };
    assert!(matches!(r.failure, Failure::Unsupported { addr, .. } if addr == win + (1 << 20)), "{r:?}");
    assert_eq!((r.host.as_deref(), r.port.clone()), (Some("host-b"), Some(("host-b".into(), "rc".into()))));
    assert!(e.to_string().ends_with(&s.fabric().describe_failure(&r.failure)), "{e}");
    assert!(s.fabric().events().len() > events, "the fault is recorded on the fabric");
    let rest = ram(&s, p.a.node.host, base + 256, (1 << 20) - 256);
    assert_eq!(rest, before[256..]);
    // The library checks the same descriptors first and moves nothing.
    let now = ram(&s, p.a.node.host, base, 1 << 20);
    let good = Desc { src: local + 512, dst: win + 512, count: 512 };
    for bad in [descs[1], Desc { src: local + (1 << 20), dst: win, count: 64 }, Desc { src: 0x1000, dst: win, count: 64 }] {
        let e = p.b.dma_checked(&mut s, &[good, bad], true).unwrap_err();
        assert!(matches!(e, RdmaError::OutsideRegistered { descriptor: 1, .. }), "{e}");
    }
    assert_eq!(ram(&s, p.a.node.host, base, 1 << 20), now);
    let bad_src = Desc { src: local + (2 << 20), dst: win, count: 64 };
    assert_eq!(p.b.dma_raw(&mut s, &[bad_src, bad_src], false).unwrap_err(), RdmaError::BlockDescriptors { descriptors: 2 });
}

/// The testbed with the NT link (host B to host A, only the writes cross it) re-rated.
fn slow_nt_link(gen: u8, width: u8) -> String {
    let mut v: serde_json::Value = serde_json::from_str(J).unwrap();
    for l in v["links"].as_array_mut().unwrap() {
        if l["a"] == "nt-virtual.cable" {
            l["gen"] = gen.into();
            l["width"] = width.into();
        }
    }
    v.to_string()
}

/// Two 512 KiB block transfers into host A's window, on `channels` channels at once.
fn two_transfers(json: &str, channels: u32, reads: u64) -> (u64, u64) {
    let (mut s, mut p) = testbed_with(json, Some(channels), Some(reads)).unwrap();
    let (win, local, half) = (p.b.node.window.0, p.b.node.buf.phys, 512 << 10);
    let data: Vec<u8> = (0..2 * half).map(|i| (i % 251) as u8).collect();
    s.fabric().write(Requester::Cpu(p.b.node.host), local, &data);
    let jobs = [vec![Desc { src: local, dst: win, count: half as u32 }], vec![Desc { src: local + half, dst: win + half, count: half as u32 }]];
    let queues = if channels == 1 { vec![jobs.to_vec()] } else { jobs.iter().map(|j| vec![j.clone()]).collect() };
    let r = p.b.dma_concurrent(&mut s, &queues, false).unwrap();
    assert_eq!(ram(&s, p.a.node.host, peer_a(&p), data.len()), data);
    (r.total_ps, r.link_ps)
}

#[test]
fn two_channels_beat_one_unless_the_link_is_the_limit() {
    // Gen2 x8, one 512 B read in flight per channel: each channel is bound by its read round trip.
    let (one, link) = two_transfers(J, 1, 1);
    let (two, _) = two_transfers(J, 2, 1);
    assert!(two * 10 < one * 6, "two channels {two} ps, one {one} ps");
    assert!(link < two);
    // A Gen1 x1 NT link and deep read pipelines: one channel nearly fills the link on its own
    // (it only pauses for its reads, which do not cross it); two channels wait for the link.
    let slow = slow_nt_link(1, 1);
    let (one, link) = two_transfers(&slow, 1, 16);
    let (two, _) = two_transfers(&slow, 2, 16);
    // The link is busy serialising their TLPs nearly all the time (the rest: the driver calls).
    assert!(link <= two && (two - link) * 50 < two, "two channels wait for the link: link busy {link} of {two} ps");
    assert!(two * 100 >= one * 90, "two channels {two} ps, one {one} ps");
}

#[test]
fn channel_count_is_checked() {
    for c in [0, 5] {
        assert!(matches!(testbed_with(J, Some(c), Some(1)), Err(RdmaError::Model(ModelError::DmaChannels { channels, max: 4 })) if channels == c));
    }
    assert!(matches!(testbed_with(J, Some(1), Some(0)), Err(RdmaError::Model(ModelError::NoOutstandingReads))));
}
