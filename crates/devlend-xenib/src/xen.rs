//! Xen on server A (004 §2.1, §3.1): grant-style shared pages, event channels, the inter-domain
//! device channel (a request ring on one page the guest grants to the device domain, plus an event
//! channel), and the back-end daemon in the device domain that serves every guest's channel.
//!
//! - A grant lets one domain map a page of another (`grant_access`, `map_grant`, one hypercall).
//! - An event channel joins a port in two domains; a send costs `evtchn_notify_ps` and is counted.
//! - A device channel (`connect`) is the ring page (granted by the guest, mapped by domain 0),
//!   a request event channel and a second one for CQ/QP events (004 §3.1: "it establishes two
//!   event channels with the back-end daemon"). A message crosses it in `channel_one_way_ps`
//!   (004 Fig 9, at least 10 us) plus its body copied through the page. The ring has `ring_slots`
//!   slots: a slot is held from a request until its response is consumed; a full ring is EAGAIN.
//! - The back-end is a service thread of domain 0 on the machine ([`serve`]); it serves the rings round-robin, one request per ring in turn, so one guest flooding
//!   its ring delays another by at most one request per round. It validates every request: handles
//!   must belong to the requesting guest (the HCA objects record their owner) and every page a guest
//!   registers must be its own (004 §3.2); a refused registration is recorded in `refusals`.

use crate::hca::{DomKind, World, SERVER_A};
use crate::ops;
use crate::params::{hca_params, params};
use crate::types::*;
use crate::verbs::Cpu;
use devlend_engine::machine::ThreadError;
use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub struct Grant {
    pub from: DomId,
    pub to: DomId,
    pub page: u64,
    pub mapped: bool,
}

#[derive(Debug, Clone)]
pub struct EvtChn {
    pub a: DomId,
    pub b: DomId,
    pub notifications: u64,
}

/// What a front-end asks the back-end (the command plus its parameters, 004 §3.1).
#[derive(Debug, Clone)]
pub enum Request {
    AllocUar,
    AllocPd,
    RegMr {
        pd: u32,
        addr: u64,
        len: u64,
        access: u32,
        pages: Vec<u64>,
    },
    DeregMr {
        lkey: u32,
    },
    CreateCq {
        depth: u64,
        buf: Option<(u64, u32)>,
    },
    DestroyCq {
        cq: u32,
    },
    CreateQp {
        pd: u32,
        scq: u32,
        rcq: u32,
        depth: u64,
        buf: Option<(u64, u32)>,
        uar: Option<usize>,
    },
    ModifyQp {
        qp: u32,
        attr: QpAttr,
    },
    DestroyQp {
        qp: u32,
    },
    PostSend {
        qp: u32,
        wr: SendWr,
    },
    PostRecv {
        qp: u32,
        wr: RecvWr,
    },
    /// CQE buffering (004 §3.2): the back-end returns every CQE in the CQ, not just `max`.
    PollCq {
        cq: u32,
    },
    ReqNotify {
        cq: u32,
    },
}

impl Request {
    /// Bytes that cross the ring page: the fixed request, plus a registration's page list.
    pub fn bytes(&self) -> u64 {
        let p = params();
        p.request_bytes
            + match self {
                Request::RegMr { pages, .. } => pages.len() as u64 * 8,
                _ => 0,
            }
    }
}

#[derive(Debug, Clone)]
pub enum Response {
    Ok,
    Uar(usize, u64),
    Pd(u32),
    Mr(Mr),
    Cq(u32),
    Qp(u32),
    Wcs(Vec<Wc>),
    Err(Status),
}

impl Response {
    pub fn bytes(&self) -> u64 {
        let p = params();
        p.request_bytes
            + match self {
                Response::Wcs(w) => w.len() as u64 * hca_params().cqe_bytes,
                _ => 0,
            }
    }
}

#[derive(Debug, Clone)]
pub struct Pending {
    pub id: u64,
    pub arrival: u64,
    pub req: Request,
}

#[derive(Debug, Clone)]
pub struct DeviceChannel {
    pub guest: DomId,
    pub ring_page: u64,
    pub ring_gref: usize,
    pub req_port: usize,
    pub event_port: usize,
    /// Slots held: requests queued or served whose responses are not yet consumed.
    pub slots_used: u64,
    pub queue: VecDeque<Pending>,
    /// Responses not yet consumed: (request id, time it reaches the guest, response).
    pub responses: Vec<(u64, u64, Response)>,
    pub next_id: u64,
    pub served: u64,
    pub refused_full: u64,
}

/// A registration (or other request) the back-end refused, recorded for the administrator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub dom: DomId,
    pub what: String,
    pub addr: u64,
    pub owner: Option<DomId>,
}

#[derive(Debug, Default)]
pub struct Xen {
    pub grants: Vec<Grant>,
    pub evtchns: Vec<EvtChn>,
    pub channels: Vec<DeviceChannel>,
    rr: usize,
    pub refusals: Vec<Refusal>,
    pub hypercalls: u64,
}

impl World {
    /// From an HCA interrupt to the handler of the kernel that drives the HCA on `node`: native
    /// Linux takes it directly; under Xen the hypervisor takes it and passes it to domain 0 as a
    /// pirq event, and dom0's `end_pirq` unmasks the level-triggered line with a hypercall
    /// ([`XenIbParams::dom0_pirq_ps`](crate::params::XenIbParams::dom0_pirq_ps)).
    pub fn kernel_irq_ps(&self, node: usize) -> u64 {
        let p = params();
        let xen = if node == SERVER_A && self.xen_on_a { p.dom0_pirq_ps() } else { 0 };
        p.irq_to_handler_ps + xen
    }

    fn dom0(&self) -> DomId {
        self.domains.iter().find(|d| d.kind == DomKind::Device).map(|d| d.id).expect("Xen runs on server A")
    }

    /// `from` grants `to` access to one of its pages; refused for a page `from` does not own.
    pub fn grant_access(&mut self, from: DomId, to: DomId, page: u64) -> VResult<usize> {
        let (Some(d), true) = (self.domains.get(from as usize), (to as usize) < self.domains.len()) else { return Err(Status::Inval) };
        let node = d.node;
        if self.owner_of(node, page) != Some(from) {
            return Err(Status::Access);
        }
        self.xen.grants.push(Grant { from, to, page, mapped: false });
        Ok(self.xen.grants.len() - 1)
    }

    /// `to` maps a page granted to it (one hypercall).
    pub fn map_grant(&mut self, to: DomId, gref: usize, t: u64) -> Timed<u64> {
        self.xen.hypercalls += 1;
        let t = t + params().grant_map_ps;
        match self.xen.grants.get_mut(gref) {
            Some(g) if g.to == to => {
                g.mapped = true;
                (Ok(g.page), t)
            }
            _ => (Err(Status::Access), t),
        }
    }

    pub fn evtchn_bind(&mut self, a: DomId, b: DomId) -> usize {
        self.xen.evtchns.push(EvtChn { a, b, notifications: 0 });
        self.xen.evtchns.len() - 1
    }

    /// Send on an event channel at `t`: when the other end's handler runs.
    pub fn evtchn_notify(&mut self, port: usize, t: u64) -> u64 {
        self.xen.hypercalls += 1;
        self.xen.evtchns[port].notifications += 1;
        t + params().evtchn_notify_ps
    }

    /// The front-end of `guest` connects: it allocates and grants the ring page, domain 0 maps it,
    /// the two event channels are bound. Returns the channel index.
    pub fn connect(&mut self, guest: DomId, t: u64) -> Timed<usize> {
        if self.domains.get(guest as usize).map(|d| d.kind) != Some(DomKind::Guest) {
            return (Err(Status::Inval), t);
        }
        let dom0 = self.dom0();
        let page = match self.alloc(guest, params().ring_page_bytes) {
            Ok(p) => p,
            Err(e) => return (Err(e), t),
        };
        let gref = match self.grant_access(guest, dom0, page) {
            Ok(g) => g,
            Err(e) => return (Err(e), t),
        };
        let (r, t) = self.map_grant(dom0, gref, t);
        if let Err(e) = r {
            return (Err(e), t);
        }
        let req_port = self.evtchn_bind(guest, dom0);
        let event_port = self.evtchn_bind(dom0, guest);
        self.xen.channels.push(DeviceChannel {
            guest,
            ring_page: page,
            ring_gref: gref,
            req_port,
            event_port,
            slots_used: 0,
            queue: VecDeque::new(),
            responses: Vec::new(),
            next_id: 0,
            served: 0,
            refused_full: 0,
        });
        (Ok(self.xen.channels.len() - 1), t)
    }

    fn enqueue(&mut self, ch: usize, req: Request, t: u64) -> VResult<u64> {
        let slots = params().ring_slots;
        let c = &mut self.xen.channels[ch];
        if c.slots_used >= slots {
            c.refused_full += 1;
            return Err(Status::Again);
        }
        c.slots_used += 1;
        let id = c.next_id;
        c.next_id += 1;
        let arrival = t + params().channel_ps(req.bytes());
        // the request is written into the ring page, then the event channel is kicked
        let page = c.ring_page;
        let port = c.req_port;
        let body = [req.bytes() as u8; 8];
        self.cpu_write(SERVER_A, page + (id % slots) * params().request_bytes, &body);
        self.xen.evtchns[port].notifications += 1;
        self.xen.channels[ch].queue.push_back(Pending { id, arrival, req });
        Ok(id)
    }

    /// Put a request on the ring without waiting for its response (what a flooding guest does).
    pub fn channel_submit(&mut self, ch: usize, req: Request, t: u64) -> VResult<()> {
        self.enqueue(ch, req, t).map(|_| ())
    }

    /// Consume the responses that have reached the guest by `t`, freeing their slots.
    pub fn channel_reap(&mut self, ch: usize, t: u64) -> Vec<Response> {
        let c = &mut self.xen.channels[ch];
        let (done, keep): (Vec<_>, Vec<_>) = c.responses.drain(..).partition(|(_, at, _)| *at <= t);
        c.responses = keep;
        c.slots_used -= done.len() as u64;
        done.into_iter().map(|(_, _, r)| r).collect()
    }

    /// The response to request `id` of channel `ch`, once the back-end has sent it: when it
    /// reaches the guest, and the response (its slot freed).
    fn take_response(&mut self, ch: usize, id: u64) -> Option<(u64, Response)> {
        let chan = &mut self.xen.channels[ch];
        let i = chan.responses.iter().position(|(rid, _, _)| *rid == id)?;
        let (_, at, r) = chan.responses.remove(i);
        chan.slots_used -= 1;
        Some((at, r))
    }

    /// The request the back-end serves next, at `now`: the ring whose turn it is among those
    /// with a request that has arrived; else when the earliest will have arrived.
    fn next_request(&mut self, now: u64) -> Result<(usize, Pending), Option<u64>> {
        let n = self.xen.channels.len();
        let heads: Vec<Option<u64>> = self.xen.channels.iter().map(|c| c.queue.front().map(|p| p.arrival)).collect();
        let earliest = heads.iter().flatten().min().copied();
        let Some(ch) = (0..n).map(|i| (self.xen.rr + i) % n).find(|&i| heads[i].is_some_and(|a| a <= now)) else { return Err(earliest) };
        self.xen.rr = (ch + 1) % n;
        Ok((ch, self.xen.channels[ch].queue.pop_front().unwrap()))
    }
}

/// A synchronous call through the device channel on the guest's thread: the request crosses,
/// the back-end serves it (round-robin with other guests' requests), the response crosses back.
pub fn channel_call(t: &Cpu, ch: usize, req: Request) -> Response {
    let now = t.now();
    let id = match t.world().enqueue(ch, req, now) {
        Ok(id) => id,
        Err(e) => return Response::Err(e),
    };
    t.wait_until(format!("the response to request {id} on device channel {ch}"), move |w: &mut World| w.xen.channels[ch].responses.iter().any(|r| r.0 == id));
    let (at, r) = t.world().take_response(ch, id).expect("the response is there");
    let now = t.now();
    if at > now {
        t.sleep(at - now);
    }
    r
}

/// The back-end daemon in domain 0: a service thread that serves the device channels'
/// requests one at a time, round-robin, each with the native driver on behalf of its guest.
pub fn serve(t: &Cpu) -> Result<(), ThreadError> {
    loop {
        t.wait_until("a request on a device channel", |w: &mut World| w.xen.channels.iter().any(|c| !c.queue.is_empty()));
        let next = t.world().next_request(t.now());
        let (ch, pend) = match next {
            Ok(x) => x,
            Err(Some(at)) => {
                t.sleep(at.saturating_sub(t.now()).max(1));
                continue;
            }
            Err(None) => continue,
        };
        let guest = t.world().xen.channels[ch].guest;
        t.sleep(params().backend_verb_ps);
        let resp = backend_exec(t, guest, pend.req);
        let at = t.now() + params().channel_ps(resp.bytes());
        let mut w = t.world();
        let c = &mut w.xen.channels[ch];
        c.served += 1;
        c.responses.push((pend.id, at, resp));
    }
}

/// Execute one request with the native driver on behalf of `guest`, validating it first.
fn backend_exec(t: &Cpu, guest: DomId, req: Request) -> Response {
    let n = SERVER_A;
    fn map<T>(r: VResult<T>, f: impl FnOnce(T) -> Response) -> Response {
        match r {
            Ok(v) => f(v),
            Err(e) => Response::Err(e),
        }
    }
    match req {
        Request::AllocUar => map(ops::alloc_uar(t, n, guest), |(i, a)| Response::Uar(i, a)),
        Request::AllocPd => map(ops::alloc_pd(t, n, guest), Response::Pd),
        Request::RegMr { pd, addr, len, access, pages } => {
            // 004 §3.2: every DMA address a guest registers must belong to it.
            t.sleep(pages.len() as u64 * params().backend_page_check_ps);
            let bad = {
                let w = t.world();
                pages.iter().find(|pg| w.owner_of(n, **pg) != Some(guest)).map(|b| (*b, w.owner_of(n, *b)))
            };
            if let Some((addr, owner)) = bad {
                t.world().xen.refusals.push(Refusal { dom: guest, what: "register memory of another domain".into(), addr, owner });
                return Response::Err(Status::Access);
            }
            map(ops::reg_mr(t, n, guest, pd, addr, len, access, pages, false), Response::Mr)
        }
        Request::DeregMr { lkey } => map(ops::dereg_mr(t, n, guest, lkey), |_| Response::Ok),
        Request::CreateCq { depth, buf } => map(ops::create_cq(t, n, guest, depth, buf), Response::Cq),
        Request::DestroyCq { cq } => map(ops::destroy_cq(t, n, guest, cq), |_| Response::Ok),
        Request::CreateQp { pd, scq, rcq, depth, buf, uar } => {
            // basic driver: a UAR page the back-end rings on the guest's behalf, never mapped into the guest
            let uar = match uar {
                Some(u) => u,
                None => match ops::alloc_uar(t, n, guest) {
                    Ok((u, _)) => u,
                    Err(e) => return Response::Err(e),
                },
            };
            map(ops::create_qp(t, n, guest, pd, scq, rcq, depth, uar, buf), Response::Qp)
        }
        Request::ModifyQp { qp, attr } => map(ops::modify_qp(t, n, guest, qp, attr), |_| Response::Ok),
        Request::DestroyQp { qp } => map(ops::destroy_qp(t, n, guest, qp), |_| Response::Ok),
        Request::PostSend { qp, wr } => {
            let uar = t.world().nodes[n].hca.qps.get(qp as usize).and_then(|q| q.as_ref()).map(|q| q.uar).unwrap_or(usize::MAX);
            map(ops::post_send(t, n, guest, qp, uar, wr), |_| Response::Ok)
        }
        Request::PostRecv { qp, wr } => map(ops::post_recv(t, n, guest, qp, wr), |_| Response::Ok),
        Request::PollCq { cq } => map(ops::poll_cq(t, n, guest, cq, usize::MAX), Response::Wcs),
        Request::ReqNotify { cq } => map(ops::req_notify(t, n, guest, cq, None), |_| Response::Ok),
    }
}

/// A result with the time its operation ends.
pub type Timed<T> = (VResult<T>, u64);
