use super::*;
use devlend_xenib::hca::SERVER_B;
use devlend_xenib::hca::TESTBED_JSON as J;
use devlend_xenib::verbs::{Basic, Bypass};
use devlend_xenib::xen::{Request, Response};

/// Run `body` as one thread of a machine on `w`; the world comes back with its result.
fn on<R: 'static>(w: World, body: impl FnOnce(&Cpu) -> R + 'static) -> (World, R) {
    on_machine("test", w, move |t| Ok(body(t))).unwrap()
}

/// The testbed of `config` with both ends set up and connected, `body` run on one thread.
fn pair<R: 'static>(config: &str, body: impl FnOnce(&Cpu, &mut dyn Verbs, &mut Native, End, End) -> R + 'static) -> R {
    let (w, mut a, mut b) = testbed(J, config).unwrap();
    on(w, move |t| {
        let ea = setup_end(t, a.as_mut(), 8192, 64).unwrap();
        let eb = setup_end(t, &mut b, 8192, 64).unwrap();
        connect(t, a.as_mut(), &ea, &mut b, &eb).unwrap();
        body(t, a.as_mut(), &mut b, ea, eb)
    })
    .1
}

#[test]
fn same_application_code_moves_data_with_every_driver() {
    for c in CONFIGS {
        pair(c, move |t, a, b, ea, eb| {
            let msg: Vec<u8> = (0..100u8).collect();
            t.world().cpu_write(a.ctx().node, ea.buf, &msg);
            a.post_send(t, ea.qp, wr(7, &ea, 100, Mode::Rdma, &eb)).unwrap();
            b.wait_for_data(t, eb.buf + eb.half).unwrap();
            assert_eq!(t.world().cpu_read(SERVER_B, eb.buf + eb.half, 100), msg, "{c}");
            let wc = poll_until(t, a, ea.scq, 1).unwrap();
            assert_eq!((wc[0].wr_id, wc[0].status, wc[0].byte_len), (7, WcStatus::Success, 100), "{c}");
            // send/receive lands in the posted receive buffer
            b.post_recv(t, eb.qp, recv_wr(9, &eb, 4096)).unwrap();
            t.world().cpu_write(a.ctx().node, ea.buf, b"ping");
            a.post_send(t, ea.qp, wr(8, &ea, 4, Mode::SendRecv, &eb)).unwrap();
            let r = poll_until(t, b, eb.rcq, 1).unwrap();
            assert_eq!((r[0].wr_id, r[0].opcode, r[0].byte_len), (9, WcOpcode::Recv, 4), "{c}");
            assert_eq!(t.world().cpu_read(SERVER_B, eb.buf + eb.half, 4), b"ping".to_vec(), "{c}");
        });
    }
}

#[test]
fn x1_shape_basic_slower_bypass_equals_native() {
    let rtt = |c| latency(J, c, Mode::Rdma, &[1], 10, false).unwrap()[0].1;
    let (n, i, by, ba) = (rtt("gen2-native"), rtt("gen2-idd"), rtt("xenib-bypass"), rtt("xenib-basic"));
    assert_eq!(n, i);
    assert_eq!(n, by);
    assert!(ba > n + 2 * params().channel_one_way_ps, "basic {ba} native {n}");
    let bw = |c, d| bandwidth(J, c, Mode::Rdma, &[4096, 131072], 10, d).unwrap();
    let (nb, bb) = (bw("gen2-native", 1), bw("xenib-basic", 1));
    assert!(bb[0].1 < 0.5 * nb[0].1 && bb[1].1 < 0.95 * nb[1].1);
}

#[test]
fn x2_one_byte_round_trip_and_peak() {
    let l = latency(J, "xenib-bypass", Mode::Rdma, &[1], 20, false).unwrap()[0].1 as f64 / 1e6;
    assert!((7.0..8.6).contains(&l), "{l} us (004: 7.8)");
    let b = bandwidth(J, "xenib-bypass", Mode::Rdma, &[262144], 20, 100).unwrap()[0].1 / 1e6;
    assert!((790.0..870.0).contains(&b), "{b} MB/s (004: 830)");
}

#[test]
fn x3_blocking_adds_2_to_10_us_under_xen() {
    let rtt = |c| latency(J, c, Mode::SendRecv, &[1], 10, true).unwrap()[0].1 as i64;
    let n = rtt("gen2-native");
    for c in ["gen2-idd", "xenib-bypass"] {
        let d = rtt(c) - n;
        assert!((2_000_000..=10_000_000).contains(&d), "{c} adds {d} ps");
    }
}

#[test]
fn x4_guest_registration_cost_grows_with_pages() {
    let n = registration(J, "gen2-native", &[1, 256], 2).unwrap();
    let g = registration(J, "xenib-bypass", &[1, 256], 2).unwrap();
    assert!(g[0].1 > n[0].1 && g[1].1 - n[1].1 > g[0].1 - n[0].1);
}

#[test]
fn channel_one_way_is_the_stated_parameter() {
    let t = channel_one_way(J).unwrap();
    assert!(t >= params().channel_one_way_ps && t < params().channel_one_way_ps + 1_000_000);
}

// ----- bad input ---------------------------------------------------------------------------

#[test]
fn post_to_qp_in_wrong_state_is_einval() {
    for c in CONFIGS {
        let (w, mut a, mut b) = testbed(J, c).unwrap();
        on(w, move |t| {
            let a = a.as_mut();
            let ea = setup_end(t, a, 4096, 16).unwrap();
            let eb = setup_end(t, &mut b, 4096, 16).unwrap();
            // INIT: not ready to send
            assert_eq!(a.post_send(t, ea.qp, wr(1, &ea, 8, Mode::Rdma, &eb)), Err(Status::Inval), "{c}");
            // RTR without a remote is refused
            assert_eq!(a.modify_qp(t, ea.qp, QpAttr { state: QpState::Rtr, remote: None }), Err(Status::Inval), "{c}");
            // RESET -> RTS skipping states is refused
            a.modify_qp(t, ea.qp, QpAttr { state: QpState::Reset, remote: None }).unwrap();
            assert_eq!(a.modify_qp(t, ea.qp, QpAttr { state: QpState::Rts, remote: None }), Err(Status::Inval), "{c}");
            assert_eq!(a.post_recv(t, ea.qp, recv_wr(1, &ea, 8)), Err(Status::Inval), "{c}");
            // a remote on a node that does not exist
            assert_eq!(a.modify_qp(t, ea.qp, QpAttr { state: QpState::Init, remote: None }), Ok(()), "{c}");
            assert_eq!(a.modify_qp(t, ea.qp, QpAttr { state: QpState::Rtr, remote: Some((9, 0)) }), Err(Status::Inval), "{c}");
            // a QP number that does not exist
            assert_eq!(a.post_send(t, Qp(999), wr(1, &ea, 8, Mode::Rdma, &eb)), Err(Status::Inval), "{c}");
        });
    }
}

#[test]
fn invalid_keys_complete_in_error_and_flush() {
    for c in CONFIGS {
        pair(c, move |t, a, _b, ea, eb| {
            let mut bad = wr(1, &ea, 64, Mode::Rdma, &eb);
            bad.sge.lkey = 0xdead;
            a.post_send(t, ea.qp, bad).unwrap();
            t.sleep(1_000_000_000);
            let wcs = a.poll_cq(t, ea.scq, 4).unwrap();
            assert_eq!(wcs[0].status, WcStatus::LocProtErr, "{c}");
            // the CQE says LocProtErr and the QP is in the error state: the next post is refused
            assert_eq!(a.post_send(t, ea.qp, wr(2, &ea, 64, Mode::Rdma, &eb)), Err(Status::Inval), "{c}");
            assert!(t.world().nodes[a.ctx().node].hca.stats.tpt_faults >= 1);
        });
    }
    // the completion statuses, read raw
    pair("xenib-bypass", |t, a, _b, ea, eb| {
        let mut bad = wr(1, &ea, 64, Mode::Rdma, &eb);
        if let SendOp::RdmaWrite { ref mut rkey, .. } = bad.op {
            *rkey = 0xbeef;
        }
        a.post_send(t, ea.qp, bad).unwrap();
        t.sleep(1_000_000_000);
        assert_eq!(a.poll_cq(t, ea.scq, 4).unwrap()[0].status, WcStatus::RemAccessErr);
    });
    pair("gen2-native", |t, a, _b, ea, eb| {
        let mut bad = wr(1, &ea, 64, Mode::Rdma, &eb);
        bad.sge.length = 1 << 20; // beyond the region
        a.post_send(t, ea.qp, bad).unwrap();
        t.sleep(1_000_000_000);
        assert_eq!(a.poll_cq(t, ea.scq, 4).unwrap()[0].status, WcStatus::LocProtErr);
    });
}

#[test]
fn polling_a_destroyed_cq_is_einval() {
    for c in CONFIGS {
        let (w, mut a, _b) = testbed(J, c).unwrap();
        on(w, move |t| {
            a.open_device(t).unwrap();
            let cq = a.create_cq(t, 16).unwrap();
            a.destroy_cq(t, cq).unwrap();
            assert_eq!(a.poll_cq(t, cq, 1), Err(Status::Inval), "{c}");
            assert_eq!(a.req_notify_cq(t, cq), Err(Status::Inval), "{c}");
            assert_eq!(a.destroy_cq(t, cq), Err(Status::Inval), "{c}");
        });
    }
}

#[test]
fn two_guests_one_misbehaving_the_other_is_served() {
    let w = World::new(J, true, 2).unwrap();
    let (g1, g2) = (w.dom("guest1").unwrap(), w.dom("guest2").unwrap());
    let mut bad = Bypass::new(&w, g1);
    let mut good = Bypass::new(&w, g2);
    let mut b = Native::new(&w, w.dom("linux-b").unwrap());
    on(w, move |t| {
        bad.open_device(t).unwrap();
        let pd = bad.alloc_pd(t).unwrap();
        // 1. registering another domain's memory is refused and recorded
        let victim = t.world().domains[g2 as usize].base + 0x10_0000;
        assert_eq!(bad.reg_mr(t, pd, victim, 8192, ACCESS_LOCAL_WRITE), Err(Status::Access));
        let dom0_page = {
            let w = t.world();
            w.domains[w.dom("dom0").unwrap() as usize].base
        };
        assert_eq!(bad.reg_mr(t, pd, dom0_page, 4096, ACCESS_REMOTE_WRITE), Err(Status::Access));
        {
            let w = t.world();
            assert_eq!(w.xen.refusals.len(), 2);
            assert_eq!(w.xen.refusals[0].dom, g1);
            assert_eq!(w.xen.refusals[0].owner, Some(g2));
        }
        // 2. it floods its device channel: the ring fills, further requests are EAGAIN
        let ch = bad.ch.unwrap();
        let now = t.now();
        let mut again = 0;
        for _ in 0..200 {
            if t.world().channel_submit(ch, Request::PollCq { cq: 12345 }, now) == Err(Status::Again) {
                again += 1;
            }
        }
        assert_eq!(again, 200 - params().ring_slots as usize);
        // 3. the other guest sets up, registers, connects and ping-pongs meanwhile
        let eg = setup_end(t, &mut good, 4096, 16).unwrap();
        let eb = setup_end(t, &mut b, 4096, 16).unwrap();
        connect(t, &mut good, &eg, &mut b, &eb).unwrap();
        // 4. handles of another guest are refused (EACCES), not served
        assert_eq!(bad.post_send(t, eg.qp, wr(1, &eg, 8, Mode::Rdma, &eb)), Err(Status::Access));
        assert_eq!(bad.poll_cq(t, eg.scq, 1), Err(Status::Access));
        let t0 = t.now();
        for i in 0..5 {
            good.post_send(t, eg.qp, wr(i, &eg, 64, Mode::Rdma, &eb)).unwrap();
            b.wait_for_data(t, eb.buf + eb.half).unwrap();
            b.post_send(t, eb.qp, wr(i, &eb, 64, Mode::Rdma, &eg)).unwrap();
            good.wait_for_data(t, eg.buf + eg.half).unwrap();
            poll_until(t, &mut good, eg.scq, 1).unwrap();
            poll_until(t, &mut b, eb.scq, 1).unwrap();
        }
        assert!((t.now() - t0) / 5 < 10_000_000, "bypass ping-pong unaffected by the flood");
        // the flood's requests were served with errors, round-robin with the good guest's setup
        t.wait_until("the flood served", move |w: &mut World| w.xen.channels[ch].queue.is_empty());
        let served = t.world().xen.channels[ch].served;
        assert!(served >= params().ring_slots);
        let resp = t.world().channel_reap(ch, u64::MAX);
        assert!(resp.iter().all(|r| matches!(r, Response::Err(Status::Inval))));
        // and once reaped, the flooding guest may use its channel again
        assert!(bad.alloc_pd(t).is_ok());
    });
}

#[test]
fn flooding_guest_delays_a_basic_guest_by_at_most_a_round() {
    let w = World::new(J, true, 2).unwrap();
    let (g1, g2) = (w.dom("guest1").unwrap(), w.dom("guest2").unwrap());
    let mut bad = Basic::new(&w, g1);
    let mut good = Basic::new(&w, g2);
    on(w, move |t| {
        bad.open_device(t).unwrap();
        good.open_device(t).unwrap();
        let alone = {
            let t0 = t.now();
            good.alloc_pd(t).unwrap();
            t.now() - t0
        };
        let now = t.now();
        for _ in 0..params().ring_slots {
            t.world().channel_submit(bad.ch.unwrap(), Request::AllocPd, now).unwrap();
        }
        let t0 = t.now();
        good.alloc_pd(t).unwrap();
        let flooded = t.now() - t0;
        // round-robin: one of the flooder's requests ahead of ours, not all 32
        assert!(flooded <= alone + 2 * (params().backend_verb_ps + params().syscall_ps), "alone {alone} flooded {flooded}");
        // first-come-first-served would have put all 32 ahead of it
        assert!(flooded < alone + params().ring_slots * params().backend_verb_ps / 2);
    });
}

#[test]
fn bypass_creates_qp_and_cq_in_guest_memory_through_keys() {
    pair("xenib-bypass", |t, a, _b, ea, _eb| {
        let w = t.world();
        let q = w.nodes[0].hca.qps[ea.qp.0 as usize].as_ref().unwrap();
        let c = w.nodes[0].hca.cqs[ea.scq.0 as usize].as_ref().unwrap();
        let g = &w.domains[a.ctx().dom as usize];
        let (qb, _) = q.buf.unwrap();
        let (cb, _) = c.buf.unwrap();
        assert!(g.owns(qb, 64) && g.owns(cb, 32));
        assert_eq!(w.nodes[0].hca.uars[q.uar], Some(a.ctx().dom));
    });
}

#[test]
fn grants_and_event_channels() {
    let mut w = World::new(J, true, 2).unwrap();
    let (d0, g1, g2) = (w.dom("dom0").unwrap(), w.dom("guest1").unwrap(), w.dom("guest2").unwrap());
    let page = w.alloc(g1, 4096).unwrap();
    assert_eq!(w.grant_access(g2, d0, page), Err(Status::Access), "only the owner grants");
    assert_eq!(w.grant_access(99, d0, page), Err(Status::Inval), "no such domain");
    assert_eq!(w.grant_access(g1, 99, page), Err(Status::Inval), "no such domain");
    let gref = w.grant_access(g1, d0, page).unwrap();
    assert_eq!(w.map_grant(g2, gref, 0).0, Err(Status::Access), "only the grantee maps");
    let (r, t) = w.map_grant(d0, gref, 0);
    assert_eq!((r, t), (Ok(page), params().grant_map_ps));
    let port = w.evtchn_bind(g1, d0);
    assert_eq!(w.evtchn_notify(port, 5), 5 + params().evtchn_notify_ps);
    assert_eq!(w.xen.evtchns[port].notifications, 1);
}

#[test]
fn a_forged_page_list_from_a_front_end_is_refused_and_recorded() {
    // the front-end runs in the guest: a malicious one may send any page list
    let w = World::new(J, true, 2).unwrap();
    let (g1, g2) = (w.dom("guest1").unwrap(), w.dom("guest2").unwrap());
    let mut bad = Basic::new(&w, g1);
    on(w, move |t| {
        bad.open_device(t).unwrap();
        let pd = bad.alloc_pd(t).unwrap();
        let ch = bad.ch.unwrap();
        let own = t.world().alloc(g1, 8192).unwrap();
        let other = t.world().domains[g2 as usize].base;
        // its own address, but the second page is guest2's
        let req = Request::RegMr { pd: pd.0, addr: own, len: 8192, access: ACCESS_REMOTE_WRITE, pages: vec![own, other] };
        assert!(matches!(devlend_xenib::xen::channel_call(t, ch, req), Response::Err(Status::Access)));
        assert_eq!(t.world().xen.refusals.last().map(|r| (r.dom, r.addr, r.owner)), Some((g1, other, Some(g2))));
        // a page list that does not cover the region is EINVAL, and nothing is registered
        let keys = t.world().nodes[0].hca.tpt.len();
        let req = Request::RegMr { pd: pd.0, addr: own, len: 8192, access: ACCESS_REMOTE_WRITE, pages: vec![own] };
        assert!(matches!(devlend_xenib::xen::channel_call(t, ch, req), Response::Err(Status::Inval)));
        assert_eq!(t.world().nodes[0].hca.tpt.len(), keys);
        // the basic driver's own registration of guest2's memory is refused and recorded too
        assert_eq!(bad.reg_mr(t, pd, other + 4096, 4096, ACCESS_LOCAL_WRITE), Err(Status::Access));
        assert_eq!(t.world().xen.refusals.len(), 2);
        // and the guest may still register its own memory
        assert!(bad.reg_mr(t, pd, own, 8192, ACCESS_LOCAL_WRITE).is_ok());
    });
}

#[test]
fn out_of_range_resources_and_stale_handles_are_einval() {
    for c in CONFIGS {
        let (w, mut a, _b) = testbed(J, c).unwrap();
        on(w, move |t| {
            a.open_device(t).unwrap();
            let pd = a.alloc_pd(t).unwrap();
            assert_eq!(a.create_cq(t, 0), Err(Status::Inval), "{c}");
            assert_eq!(a.create_cq(t, 1 << 20), Err(Status::Inval), "{c}");
            let cq = a.create_cq(t, 16).unwrap();
            assert_eq!(a.create_qp(t, pd, cq, cq, 0), Err(Status::Inval), "{c}");
            assert_eq!(a.create_qp(t, Pd(77), cq, cq, 16), Err(Status::Inval), "{c}");
            let qp = a.create_qp(t, pd, cq, cq, 16).unwrap();
            // a CQ a QP still uses cannot be destroyed; both stay usable
            assert_eq!(a.destroy_cq(t, cq), Err(Status::Inval), "{c}");
            assert!(a.poll_cq(t, cq, 1).unwrap().is_empty(), "{c}");
            assert!(a.modify_qp(t, qp, QpAttr { state: QpState::Init, remote: None }).is_ok(), "{c}");
            let buf = a.alloc_buf(t, 4096).unwrap();
            assert_eq!(a.reg_mr(t, pd, buf, 0, ACCESS_LOCAL_WRITE), Err(Status::Inval), "{c}");
            let mr = a.reg_mr(t, pd, buf, 4096, ACCESS_LOCAL_WRITE).unwrap();
            a.dereg_mr(t, mr).unwrap();
            assert_eq!(a.dereg_mr(t, mr), Err(Status::Inval), "{c}: deregistered twice");
            // waiting for an event nobody armed: ETIMEDOUT, not a hang
            assert_eq!(a.wait_cq_event(t, cq), Err(Status::TimedOut), "{c}");
        });
    }
}

#[test]
fn benchmark_errors_are_typed_with_their_context() {
    use devlend_xenib::XenIbError;
    assert!(matches!(testbed(J, "xen-nope").err(), Some(XenIbError::UnknownName { kind: "configuration", .. })));
    assert_eq!(Mode::parse("x").err().map(|e| e.kind()), Some("unknown_name"));
    assert_eq!(registration(J, "gen2-native", &[1], 0).err(), Some(XenIbError::ZeroCount { what: "repetitions" }));
    assert_eq!(World::new(J, false, 1).err(), Some(XenIbError::GuestsNeedXen { guests: 1 }));
    assert!(matches!(World::new("{}", true, 0).err(), Some(XenIbError::Topology(_))));
    // a write whose lkey does not translate completes in error: the benchmark names the request
    pair("xenib-bypass", |t, a, _b, ea, eb| {
        let mut bad = wr(5, &ea, 64, Mode::Rdma, &eb);
        bad.sge.lkey = 0xdead;
        a.post_send(t, ea.qp, bad).unwrap();
        let e = poll_until(t, a, ea.scq, 1).unwrap_err();
        assert!(matches!(&e, XenIbError::Completion { config, wc } if config == "xenib-bypass" && wc.wr_id == 5 && wc.status == WcStatus::LocProtErr), "{e}");
        // the QP is in the error state now: the next post is refused, and the step and errno are named
        let e = a.post_send(t, ea.qp, wr(6, &ea, 64, Mode::Rdma, &eb)).map_err(XenIbError::verb("xenib-bypass", "post send")).unwrap_err();
        assert_eq!((e.kind(), e.status(), e.to_string().as_str()), ("verb", Some(Status::Inval), "xenib-bypass: post send failed: EINVAL (22)"));
    });
}
