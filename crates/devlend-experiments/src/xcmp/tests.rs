use super::*;
use devlend_xenib::XenIbError;

const LOCAL: &str = devlend_xenib::hca::TESTBED_JSON;
const VFIO: &str = include_str!("../../tests/xenib-vfio.json");
const LENDING: &str = include_str!("../../tests/xenib-lending.json");
const T: Topologies = Topologies { local: LOCAL, vfio: VFIO, lending: LENDING };

#[test]
fn every_access_path_builds_and_moves_data() {
    for acc in ACCESSES {
        let (w, mut a, mut b) = testbed(&T, acc).unwrap();
        bench::on_machine(acc, w, move |t| {
            let ea = bench::setup_end(t, a.as_mut(), 8192, 16).unwrap();
            let eb = bench::setup_end(t, &mut b, 8192, 16).unwrap();
            bench::connect(t, a.as_mut(), &ea, &mut b, &eb).unwrap();
            let msg: Vec<u8> = (0..200u8).collect();
            let da = a.ctx().dom;
            t.world().dom_write(da, ea.buf, &msg);
            let wr = devlend_xenib::types::SendWr {
                wr_id: 1,
                sge: devlend_xenib::types::Sge { addr: ea.buf, length: 200, lkey: ea.mr.lkey },
                op: devlend_xenib::types::SendOp::RdmaWrite { remote_addr: eb.buf + eb.half, rkey: eb.mr.rkey },
                signaled: true,
            };
            a.post_send(t, ea.qp, wr).unwrap();
            b.wait_for_data(t, eb.buf + eb.half).unwrap();
            assert_eq!(t.world().cpu_read(SERVER_B, eb.buf + eb.half, 200), msg, "{acc}");
            // and back into server A's memory, through its IOMMU / the NTB where there is one
            let back: Vec<u8> = (0..200u8).rev().collect();
            t.world().cpu_write(SERVER_B, eb.buf, &back);
            let wr = devlend_xenib::types::SendWr {
                wr_id: 2,
                sge: devlend_xenib::types::Sge { addr: eb.buf, length: 200, lkey: eb.mr.lkey },
                op: devlend_xenib::types::SendOp::RdmaWrite { remote_addr: ea.buf + ea.half, rkey: ea.mr.rkey },
                signaled: true,
            };
            b.post_send(t, eb.qp, wr).unwrap();
            a.wait_for_data(t, ea.buf + ea.half).unwrap();
            assert_eq!(t.world().dom_read(da, ea.buf + ea.half, 200), back, "{acc}");
            let events = t.world().fab.events().clone();
            assert!(events.is_empty(), "{acc}: {events:?}");
            Ok(())
        })
        .unwrap();
    }
}

fn rtt(acc: &str, sizes: &[u64]) -> Vec<u64> {
    latency(&T, acc, sizes, 5).unwrap().into_iter().map(|x| x.1).collect()
}

fn bw(acc: &str, sizes: &[u64], depth: u64) -> Vec<f64> {
    bandwidth(&T, acc, sizes, 20, depth).unwrap().into_iter().map(|x| x.1).collect()
}

#[test]
fn bypass_and_vfio_equal_native_for_large_messages() {
    let (n, by, vf) = (bw("native", &[262144], 100)[0], bw("bypass", &[262144], 100)[0], bw("vfio", &[262144], 100)[0]);
    assert!((by / n - 1.0).abs() < 0.01 && (vf / n - 1.0).abs() < 0.01, "native {n} bypass {by} vfio {vf}");
    let (n, by, vf) = (rtt("native", &[65536])[0], rtt("bypass", &[65536])[0], rtt("vfio", &[65536])[0]);
    assert!(by == n && vf >= n && (vf - n) * 100 < n, "native {n} bypass {by} vfio {vf}");
}

#[test]
fn lending_adds_the_ntb_crossings_to_small_message_latency() {
    let (n, l) = (costs(&T, "native").unwrap(), costs(&T, "lending").unwrap());
    assert!(l.doorbell_ps > n.doorbell_ps && l.read_rtt_ps > n.read_rtt_ps && l.write_ps > n.write_ps);
    // server A's side of one round: its doorbell, the WQE and payload reads, server B's data written back
    let extra = (l.doorbell_ps - n.doorbell_ps) + 2 * (l.read_rtt_ps - n.read_rtt_ps) + (l.write_ps - n.write_ps);
    let (rn, rl) = (rtt("native", &[1])[0], rtt("lending", &[1])[0]);
    let got = rl - rn;
    assert!(got >= extra && got < extra + extra / 20, "lending adds {got} ps, the routes {extra} ps");
    // at 1 MiB the link, not the NTB, limits: within 2% of native
    let (bn, bl) = (bw("native", &[1 << 20], 100)[0], bw("lending", &[1 << 20], 100)[0]);
    assert!(bl <= bn && bl > 0.98 * bn, "native {bn} lending {bl}");
}

#[test]
fn basic_split_is_worst() {
    let r: Vec<u64> = ACCESSES.iter().map(|a| rtt(a, &[1])[0]).collect();
    let basic = r[1];
    assert!(r.iter().enumerate().all(|(i, &x)| i == 1 || x * 3 < basic), "{r:?}");
    let b: Vec<f64> = ACCESSES.iter().map(|a| bw(a, &[4096], 1)[0]).collect();
    assert!(b.iter().enumerate().all(|(i, &x)| i == 1 || b[1] * 2.0 < x), "{b:?}");
}

#[test]
fn bad_access_path_is_a_clear_error() {
    let e = testbed(&T, "sr-iov").err().unwrap();
    assert!(matches!(&e, XenIbError::UnknownName { kind: "access path", name, expected } if name == "sr-iov" && expected.ends_with("lending")), "{e}");
    assert_eq!(latency(&T, "vfio", &[0], 1).err(), Some(XenIbError::BadSize { size: 0 }));
    let broken = Topologies { vfio: LOCAL, ..T };
    let e = testbed(&broken, "vfio").err().unwrap();
    assert!(matches!(&e, XenIbError::Host { what: "assign hca-a by VFIO", .. }), "{e}");
    assert!(e.to_string().to_lowercase().contains("iommu"), "{e}");
}

#[test]
fn vfio_guest_and_borrower_cannot_register_memory_outside_their_own() {
    use devlend_xenib::types::*;
    for acc in ["vfio", "lending"] {
        let (w, mut a, _b) = testbed(&T, acc).unwrap();
        bench::on_machine(acc, w, move |t| {
            a.open_device(t).unwrap();
            let pd = a.alloc_pd(t).unwrap();
            let outside = {
                let w = t.world();
                let d = &w.domains[a.ctx().dom as usize];
                d.base + d.size
            };
            assert_eq!(a.reg_mr(t, pd, outside, 4096, ACCESS_LOCAL_WRITE), Err(Status::Access), "{acc}");
            assert_eq!(a.reg_mr(t, pd, outside - 4096, 8192, ACCESS_LOCAL_WRITE), Err(Status::Access), "{acc}: straddling");
            Ok(())
        })
        .unwrap();
    }
}
