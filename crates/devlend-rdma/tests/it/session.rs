//! The session's one machine: a call made after others on it takes what it takes on a fresh
//! session (the 003 testbed has no IOMMU, so no translation cache remembers an earlier call), and
//! a failed call leaves a machine the next call runs on.

use devlend_devices::plx_dma::Desc;
use devlend_rdma::{handshake, Method, Pair, RdmaError, Shmem};

const J: &str = include_str!("../pex8749-rdma.json");

fn testbed() -> (Shmem, Pair) {
    let mut s = Shmem::new(devlend_fabric::build_json(J).unwrap());
    let mut p = handshake(&mut s, "nt-virtual", "nt-link", 0x1000_0000, 1 << 20, None).unwrap();
    p.b.attach_dma_with(&mut s, "plx-dma", 2, 4).unwrap();
    (s, p)
}

type Times = Vec<(u64, Vec<(&'static str, u64)>)>;

/// A put, a get, and two DMA transfers at once: each one's time by part, and the busiest link's
/// busy time during the transfers.
fn calls(s: &mut Shmem, p: &mut Pair, how: Method) -> (Times, u64) {
    let base = p.b.node.peer.unwrap().phys;
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
    let put = p.b.put_bytes(s, base + 64, &data, how).unwrap();
    let (got, get) = p.b.get_bytes(s, base + 64, 4096, how).unwrap();
    assert_eq!(got, data[..4096]);
    let (win, local) = (p.b.node.window.0, p.b.node.buf.phys);
    let job = |k: u64| vec![vec![Desc { src: local + k * 0x8000, dst: win + k * 0x8000, count: 0x8000 }]];
    let both = p.b.dma_concurrent(s, &[job(0), job(1)], false).unwrap();
    (vec![(put.total_ps, put.steps), (get.total_ps, get.steps), (both.total_ps, both.channel_ps.iter().map(|&c| ("channel", c)).collect())], both.link_ps)
}

#[test]
fn a_call_after_others_takes_what_it_takes_on_a_fresh_session() {
    for how in [Method::Pio, Method::BlockDma, Method::SgDma(8)] {
        let (mut s, mut p) = testbed();
        let fresh = calls(&mut s, &mut p, how);
        // Again on the same machine, after every method's calls.
        for other in [Method::SgDma(3), Method::Pio, Method::BlockDma] {
            calls(&mut s, &mut p, other);
        }
        let at = s.now();
        let again = calls(&mut s, &mut p, how);
        assert_eq!(again.0, fresh.0, "{how:?} from {at} ps");
        // The busiest link's busy time also counts the few DLLPs (Ack, UpdateFC) that the calls
        // before owed when they ended: the engine counts a port's DLLPs when it next sends.
        assert!(again.1 >= fresh.1 && (again.1 - fresh.1) * 1000 < fresh.1, "{how:?}: link busy {} ps, fresh {} ps", again.1, fresh.1);
    }
}

#[test]
fn a_failed_call_leaves_a_machine_the_next_call_runs_on() {
    let (mut s, mut p) = testbed();
    let (win, local) = (p.b.node.window.0, p.b.node.buf.phys);
    let past = [Desc { src: local, dst: win, count: 256 }, Desc { src: local, dst: win + (1 << 20), count: 256 }];
    assert!(matches!(p.b.dma_raw(&mut s, &past, true), Err(RdmaError::Dma { descriptor: 1, .. })));
    let base = p.b.node.peer.unwrap().phys;
    let t = p.b.put_bytes(&mut s, base, &[5; 300], Method::BlockDma).unwrap();
    assert!(t.total_ps > 0);
    assert_eq!(s.fabric().read(devlend_fabric::route::Requester::Cpu(p.a.node.host), base, 300).0, vec![5; 300]);
}
