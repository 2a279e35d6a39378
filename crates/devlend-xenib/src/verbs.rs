//! The verbs API applications are written against (OpenIB Gen2 style: open device, alloc PD,
//! reg MR, create CQ/QP, modify QP, post send/recv, poll CQ, req notify + wait for the event),
//! and the three drivers behind it (004 §3):
//!
//! - [`Native`]: the native driver (Gen2 mthca) in native Linux or in the device domain; the QP's
//!   UAR page and buffers are the caller's own, post and poll touch only memory and the doorbell.
//! - [`Basic`]: the basic split driver (004 §3.1-3.2, Fig 4): every verb, post and poll included,
//!   is packed into a request on the device channel and executed by the back-end with the native
//!   driver; polls use CQE buffering (the back-end returns every CQE; the front-end keeps the rest).
//! - [`Bypass`]: device-domain bypass (004 §3.3, Fig 5): the back-end allocates a UAR page that the
//!   guest maps; QP and CQ buffers are allocated in the guest, registered through the back-end
//!   (which checks the pages) and the QP/CQ are then created with the returned keys (two-stage
//!   creation); post, poll and arming then go straight to the HCA from the guest.
//!
//! The same application code (devlend-experiments' `xenib`) runs on any of them through `&mut dyn Verbs`.
//! Completion events: native Linux takes the HCA interrupt; under Xen the hypervisor takes it and
//! passes it to domain 0 as an event; for a guest the back-end's handler forwards it through the
//! channel's second event channel to the front-end's dispatcher (004 §3.2 "Event Handling").

use crate::hca::{DomKind, World};
use crate::ops;
use crate::params::{hca_params, params};
use crate::types::*;
use crate::xen::{Request, Response};
use devlend_engine::machine::Thread;
use std::collections::{HashMap, VecDeque};

/// Software on the one clock: every caller of the verbs is a thread of the engine's machine,
/// and what its software costs it spends on that thread.
pub type Cpu<'y> = Thread<'y, World>;

/// Who is calling: the server whose CPU runs the caller, and its domain.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    pub node: usize,
    pub dom: DomId,
}

pub trait Verbs {
    fn ctx(&self) -> &Ctx;
    fn ctx_mut(&mut self) -> &mut Ctx;
    fn driver(&self) -> &'static str;
    fn open_device(&mut self, t: &Cpu) -> VResult<()>;
    fn alloc_pd(&mut self, t: &Cpu) -> VResult<Pd>;
    fn reg_mr(&mut self, t: &Cpu, pd: Pd, addr: u64, len: u64, access: u32) -> VResult<Mr>;
    fn dereg_mr(&mut self, t: &Cpu, mr: Mr) -> VResult<()>;
    fn create_cq(&mut self, t: &Cpu, depth: u64) -> VResult<Cq>;
    fn destroy_cq(&mut self, t: &Cpu, cq: Cq) -> VResult<()>;
    fn create_qp(&mut self, t: &Cpu, pd: Pd, send_cq: Cq, recv_cq: Cq, depth: u64) -> VResult<Qp>;
    fn modify_qp(&mut self, t: &Cpu, qp: Qp, attr: QpAttr) -> VResult<()>;
    fn post_send(&mut self, t: &Cpu, qp: Qp, wr: SendWr) -> VResult<()>;
    // The receive queue, CQ polling and event arming are user-level accesses to the HCA (the
    // native driver's and the bypass driver's fast path); the basic split driver overrides them
    // with calls through the device channel.
    fn post_recv(&mut self, t: &Cpu, qp: Qp, wr: RecvWr) -> VResult<()> {
        direct::post_recv(self.ctx_mut(), t, qp, wr)
    }
    fn poll_cq(&mut self, t: &Cpu, cq: Cq, max: usize) -> VResult<Vec<Wc>> {
        direct::poll_cq(self.ctx_mut(), t, cq, max)
    }
    fn req_notify_cq(&mut self, t: &Cpu, cq: Cq) -> VResult<()> {
        direct::req_notify_cq(self.ctx_mut(), t, cq)
    }
    /// Block until the CQ's completion event is delivered to this caller.
    fn wait_cq_event(&mut self, t: &Cpu, cq: Cq) -> VResult<()> {
        direct::wait_cq_event(self.ctx_mut(), t, cq)
    }

    /// Memory of the caller's domain.
    fn alloc_buf(&mut self, t: &Cpu, len: u64) -> VResult<u64> {
        t.world().alloc(self.ctx().dom, len)
    }
    /// Spin on a word of local memory until the HCA has written it (RDMA-write ping-pong).
    fn wait_for_data(&mut self, t: &Cpu, addr: u64) -> VResult<()> {
        let node = self.ctx().node;
        t.wait_until(format!("data at {addr:#x}"), move |w: &mut World| w.nodes[node].hca.has_landing(addr));
        let at = t.world().nodes[node].hca.take_landing(addr).ok_or(Status::TimedOut)?;
        sleep_until(t, at);
        t.sleep(params().cpu_poll_ps);
        Ok(())
    }
}

/// The delay from the HCA raising an event to the waiting thread running, by where it runs.
fn event_path_ps(w: &World, dom: DomId) -> u64 {
    let p = params();
    let d = &w.domains[dom as usize];
    match d.kind {
        DomKind::Native => p.irq_to_handler_ps,
        DomKind::Device => p.dom0_pirq_ps() + p.irq_to_handler_ps,
        // dom0 gets the pirq, the back-end's handler forwards the event over the channel's event
        // channel, the front-end dispatcher calls the CQ's handler which wakes the waiter
        DomKind::Guest => p.dom0_pirq_ps() + p.backend_verb_ps + p.evtchn_notify_ps + p.irq_to_handler_ps,
        // VFIO: the host's handler signals the eventfd, KVM injects the interrupt into the guest
        DomKind::Vm => p.vfio_irq_inject_ps + p.irq_to_handler_ps,
    }
}

/// Spend the thread's time until `at` (an operation's end), if it is still to come.
fn sleep_until(t: &Cpu, at: u64) {
    let now = t.now();
    if at > now {
        t.sleep(at - now);
    }
}

/// An operation's result, once its end has come on the caller's thread.
fn timed<T>(t: &Cpu, r: (VResult<T>, u64)) -> VResult<T> {
    sleep_until(t, r.1);
    r.0
}

/// Wait for the CQ's next completion event and take it (ETIMEDOUT when none is raised and the CQ
/// is not armed: nothing will ever arrive), then spend the path from the HCA's event to the
/// waiter as the domain's kernel and hypervisor take it.
fn wait_event(t: &Cpu, c: Ctx, cq: Cq) -> VResult<()> {
    let pending = t.world().op_event_pending(c.node, c.dom, cq.0)?;
    if !pending {
        let (node, cqn) = (c.node, cq.0);
        t.wait_until(format!("a completion event of CQ {cqn}"), move |w: &mut World| w.op_event_pending(node, c.dom, cqn) != Ok(false));
    }
    let e = t.world().op_take_event(c.node, c.dom, cq.0)?;
    let path = event_path_ps(&t.world(), c.dom);
    sleep_until(t, e + path);
    Ok(())
}

// ---------------------------------------------------------------------------------------------

/// The native driver: native Linux (server B, or server A without Xen) or the device domain.
/// The time-critical verbs on the direct path (the HCA's UAR doorbell, QP and CQ buffers in the
/// caller's own memory): what native Linux, the device domain and a bypass guest share (004 §3.3).
mod direct {
    use super::*;

    pub fn post_send(c: &mut Ctx, t: &Cpu, qp: Qp, uar: usize, wr: SendWr) -> VResult<()> {
        let (n, d) = (c.node, c.dom);
        ops::post_send(t, n, d, qp.0, uar, wr)
    }
    pub fn post_recv(c: &mut Ctx, t: &Cpu, qp: Qp, wr: RecvWr) -> VResult<()> {
        let (n, d) = (c.node, c.dom);
        ops::post_recv(t, n, d, qp.0, wr)
    }
    pub fn poll_cq(c: &mut Ctx, t: &Cpu, cq: Cq, max: usize) -> VResult<Vec<Wc>> {
        let (n, d) = (c.node, c.dom);
        ops::poll_cq(t, n, d, cq.0, max)
    }
    pub fn req_notify_cq(c: &mut Ctx, t: &Cpu, cq: Cq) -> VResult<()> {
        let (n, d) = (c.node, c.dom);
        ops::req_notify(t, n, d, cq.0, None)
    }
    pub fn wait_cq_event(c: &mut Ctx, t: &Cpu, cq: Cq) -> VResult<()> {
        wait_event(t, *c, cq)
    }
}

pub struct Native {
    pub c: Ctx,
    pub uar: Option<usize>,
}

impl Native {
    pub fn new(w: &World, dom: DomId) -> Native {
        Native { c: Ctx { node: w.domains[dom as usize].node, dom }, uar: None }
    }
}

impl Verbs for Native {
    fn ctx(&self) -> &Ctx {
        &self.c
    }
    fn ctx_mut(&mut self) -> &mut Ctx {
        &mut self.c
    }
    fn driver(&self) -> &'static str {
        "native"
    }
    fn open_device(&mut self, t: &Cpu) -> VResult<()> {
        let (n, d) = (self.c.node, self.c.dom);
        let (u, _) = ops::alloc_uar(t, n, d)?;
        self.uar = Some(u);
        Ok(())
    }
    fn alloc_pd(&mut self, t: &Cpu) -> VResult<Pd> {
        let (n, d) = (self.c.node, self.c.dom);
        ops::alloc_pd(t, n, d).map(Pd)
    }
    fn reg_mr(&mut self, t: &Cpu, pd: Pd, addr: u64, len: u64, access: u32) -> VResult<Mr> {
        let (n, d) = (self.c.node, self.c.dom);
        if !t.world().domains[d as usize].owns(addr, len) {
            return Err(Status::Access); // get_user_pages fails outside the caller's memory
        }
        // the MTT holds the addresses the HCA uses (through an IOMMU or an NTB for a VM or a borrower)
        let pages = World::pages_of(addr, len).into_iter().map(|pg| t.world().dma_addr(d, pg)).collect();
        ops::reg_mr(t, n, d, pd.0, addr, len, access, pages, true)
    }
    fn dereg_mr(&mut self, t: &Cpu, mr: Mr) -> VResult<()> {
        let (n, d) = (self.c.node, self.c.dom);
        ops::dereg_mr(t, n, d, mr.lkey)
    }
    fn create_cq(&mut self, t: &Cpu, depth: u64) -> VResult<Cq> {
        let (n, d) = (self.c.node, self.c.dom);
        ops::create_cq(t, n, d, depth, None).map(Cq)
    }
    fn destroy_cq(&mut self, t: &Cpu, cq: Cq) -> VResult<()> {
        let (n, d) = (self.c.node, self.c.dom);
        ops::destroy_cq(t, n, d, cq.0)
    }
    fn create_qp(&mut self, t: &Cpu, pd: Pd, scq: Cq, rcq: Cq, depth: u64) -> VResult<Qp> {
        let (n, d) = (self.c.node, self.c.dom);
        let uar = self.uar.ok_or(Status::Inval)?;
        ops::create_qp(t, n, d, pd.0, scq.0, rcq.0, depth, uar, None).map(Qp)
    }
    fn modify_qp(&mut self, t: &Cpu, qp: Qp, attr: QpAttr) -> VResult<()> {
        let (n, d) = (self.c.node, self.c.dom);
        ops::modify_qp(t, n, d, qp.0, attr)
    }
    fn post_send(&mut self, t: &Cpu, qp: Qp, wr: SendWr) -> VResult<()> {
        let uar = self.uar.ok_or(Status::Inval)?;
        direct::post_send(&mut self.c, t, qp, uar, wr)
    }
}

// ---------------------------------------------------------------------------------------------

/// Shared by the two front-ends: a call through the device channel.
fn call(t: &Cpu, ch: Option<usize>, req: Request) -> VResult<Response> {
    let ch = ch.ok_or(Status::Inval)?;
    match crate::xen::channel_call(t, ch, req) {
        Response::Err(e) => Err(e),
        r => Ok(r),
    }
}

/// The front-end pins the pages in the guest and sends their list (004 §3.2 Memory Registration).
fn reg_through_backend(t: &Cpu, c: &mut Ctx, ch: Option<usize>, pd: Pd, addr: u64, len: u64, access: u32) -> VResult<Mr> {
    if len == 0 {
        return Err(Status::Inval);
    }
    let pages = World::pages_of(addr, len);
    let pin = t.world().pin_cost_ps(c.dom);
    t.sleep(params().syscall_ps + pages.len() as u64 * pin);
    match call(t, ch, Request::RegMr { pd: pd.0, addr, len, access, pages })? {
        Response::Mr(m) => Ok(m),
        _ => Err(Status::Inval),
    }
}

/// The protection domain the back-end allocated (split and bypass front-ends alike).
fn pd_of(r: VResult<Response>) -> VResult<Pd> {
    match r? {
        Response::Pd(p) => Ok(Pd(p)),
        _ => Err(Status::Inval),
    }
}

fn unit(r: VResult<Response>) -> VResult<()> {
    r.map(|_| ())
}

/// The basic split driver (004 §3.1-3.2).
pub struct Basic {
    pub c: Ctx,
    pub ch: Option<usize>,
    /// CQE buffering: CQEs the back-end returned beyond what the application asked for.
    pub cqe_buf: HashMap<u32, VecDeque<Wc>>,
    pub channel_calls: u64,
}

impl Basic {
    pub fn new(w: &World, dom: DomId) -> Basic {
        Basic { c: Ctx { node: w.domains[dom as usize].node, dom }, ch: None, cqe_buf: HashMap::new(), channel_calls: 0 }
    }
    fn call(&mut self, t: &Cpu, req: Request) -> VResult<Response> {
        self.channel_calls += 1;
        call(t, self.ch, req)
    }
}

impl Verbs for Basic {
    fn ctx(&self) -> &Ctx {
        &self.c
    }
    fn ctx_mut(&mut self) -> &mut Ctx {
        &mut self.c
    }
    fn driver(&self) -> &'static str {
        "xenib-basic"
    }
    fn open_device(&mut self, t: &Cpu) -> VResult<()> {
        let (d, now) = (self.c.dom, t.now());
        self.ch = Some({
            let r = t.world().connect(d, now);
            timed(t, r)
        }?);
        Ok(())
    }
    fn alloc_pd(&mut self, t: &Cpu) -> VResult<Pd> {
        pd_of(self.call(t, Request::AllocPd))
    }
    fn reg_mr(&mut self, t: &Cpu, pd: Pd, addr: u64, len: u64, access: u32) -> VResult<Mr> {
        self.channel_calls += 1;
        reg_through_backend(t, &mut self.c, self.ch, pd, addr, len, access)
    }
    fn dereg_mr(&mut self, t: &Cpu, mr: Mr) -> VResult<()> {
        unit(self.call(t, Request::DeregMr { lkey: mr.lkey }))
    }
    fn create_cq(&mut self, t: &Cpu, depth: u64) -> VResult<Cq> {
        match self.call(t, Request::CreateCq { depth, buf: None })? {
            Response::Cq(c) => Ok(Cq(c)),
            _ => Err(Status::Inval),
        }
    }
    fn destroy_cq(&mut self, t: &Cpu, cq: Cq) -> VResult<()> {
        self.cqe_buf.remove(&cq.0);
        unit(self.call(t, Request::DestroyCq { cq: cq.0 }))
    }
    fn create_qp(&mut self, t: &Cpu, pd: Pd, scq: Cq, rcq: Cq, depth: u64) -> VResult<Qp> {
        match self.call(t, Request::CreateQp { pd: pd.0, scq: scq.0, rcq: rcq.0, depth, buf: None, uar: None })? {
            Response::Qp(q) => Ok(Qp(q)),
            _ => Err(Status::Inval),
        }
    }
    fn modify_qp(&mut self, t: &Cpu, qp: Qp, attr: QpAttr) -> VResult<()> {
        unit(self.call(t, Request::ModifyQp { qp: qp.0, attr }))
    }
    fn post_send(&mut self, t: &Cpu, qp: Qp, wr: SendWr) -> VResult<()> {
        unit(self.call(t, Request::PostSend { qp: qp.0, wr }))
    }
    fn post_recv(&mut self, t: &Cpu, qp: Qp, wr: RecvWr) -> VResult<()> {
        unit(self.call(t, Request::PostRecv { qp: qp.0, wr }))
    }
    fn poll_cq(&mut self, t: &Cpu, cq: Cq, max: usize) -> VResult<Vec<Wc>> {
        let buffered = self.cqe_buf.get(&cq.0).map_or(0, |b| b.len());
        if buffered == 0 {
            match self.call(t, Request::PollCq { cq: cq.0 })? {
                Response::Wcs(all) => self.cqe_buf.entry(cq.0).or_default().extend(all),
                _ => return Err(Status::Inval),
            }
        } else {
            t.sleep(params().cpu_poll_ps);
        }
        let b = self.cqe_buf.entry(cq.0).or_default();
        let n = b.len().min(max);
        Ok(b.drain(..n).collect())
    }
    fn req_notify_cq(&mut self, t: &Cpu, cq: Cq) -> VResult<()> {
        unit(self.call(t, Request::ReqNotify { cq: cq.0 }))
    }
    fn wait_cq_event(&mut self, t: &Cpu, cq: Cq) -> VResult<()> {
        wait_event(t, self.c, cq)
    }
}

// ---------------------------------------------------------------------------------------------

/// The device-domain-bypass driver (004 §3.3).
pub struct Bypass {
    pub c: Ctx,
    pub ch: Option<usize>,
    /// The UAR page the back-end allocated and the guest mapped: (index, machine address).
    pub uar: Option<(usize, u64)>,
    pub channel_calls: u64,
    /// The registrations of QP and CQ buffers made in the first creation stage, by object.
    pub qp_bufs: HashMap<u32, Mr>,
    pub cq_bufs: HashMap<u32, Mr>,
    pd_for_bufs: Option<Pd>,
}

impl Bypass {
    pub fn new(w: &World, dom: DomId) -> Bypass {
        Bypass {
            c: Ctx { node: w.domains[dom as usize].node, dom },
            ch: None,
            uar: None,
            channel_calls: 0,
            qp_bufs: HashMap::new(),
            cq_bufs: HashMap::new(),
            pd_for_bufs: None,
        }
    }
    fn call(&mut self, t: &Cpu, req: Request) -> VResult<Response> {
        self.channel_calls += 1;
        call(t, self.ch, req)
    }
    /// Stage one: a buffer in the guest, registered through the back-end.
    fn guest_buffer(&mut self, t: &Cpu, len: u64) -> VResult<Mr> {
        let pd = match self.pd_for_bufs {
            Some(p) => p,
            None => {
                let p = self.alloc_pd(t)?;
                self.pd_for_bufs = Some(p);
                p
            }
        };
        let addr = self.alloc_buf(t, len)?;
        self.channel_calls += 1;
        reg_through_backend(t, &mut self.c, self.ch, pd, addr, len, ACCESS_LOCAL_WRITE)
    }
}

impl Verbs for Bypass {
    fn ctx(&self) -> &Ctx {
        &self.c
    }
    fn ctx_mut(&mut self) -> &mut Ctx {
        &mut self.c
    }
    fn driver(&self) -> &'static str {
        "xenib-bypass"
    }
    fn open_device(&mut self, t: &Cpu) -> VResult<()> {
        let (d, now) = (self.c.dom, t.now());
        self.ch = Some({
            let r = t.world().connect(d, now);
            timed(t, r)
        }?);
        match self.call(t, Request::AllocUar)? {
            Response::Uar(i, a) => {
                // remap the UAR's machine page into the guest (one hypercall)
                t.sleep(params().grant_map_ps);
                t.world().xen.hypercalls += 1;
                self.uar = Some((i, a));
                Ok(())
            }
            _ => Err(Status::Inval),
        }
    }
    fn alloc_pd(&mut self, t: &Cpu) -> VResult<Pd> {
        pd_of(self.call(t, Request::AllocPd))
    }
    fn reg_mr(&mut self, t: &Cpu, pd: Pd, addr: u64, len: u64, access: u32) -> VResult<Mr> {
        self.channel_calls += 1;
        reg_through_backend(t, &mut self.c, self.ch, pd, addr, len, access)
    }
    fn dereg_mr(&mut self, t: &Cpu, mr: Mr) -> VResult<()> {
        unit(self.call(t, Request::DeregMr { lkey: mr.lkey }))
    }
    fn create_cq(&mut self, t: &Cpu, depth: u64) -> VResult<Cq> {
        let mr = self.guest_buffer(t, depth * hca_params().cqe_bytes)?;
        match self.call(t, Request::CreateCq { depth, buf: Some((mr.addr, mr.lkey)) })? {
            Response::Cq(c) => {
                self.cq_bufs.insert(c, mr);
                Ok(Cq(c))
            }
            _ => Err(Status::Inval),
        }
    }
    fn destroy_cq(&mut self, t: &Cpu, cq: Cq) -> VResult<()> {
        self.call(t, Request::DestroyCq { cq: cq.0 })?;
        if let Some(mr) = self.cq_bufs.remove(&cq.0) {
            self.dereg_mr(t, mr)?;
        }
        Ok(())
    }
    fn create_qp(&mut self, t: &Cpu, pd: Pd, scq: Cq, rcq: Cq, depth: u64) -> VResult<Qp> {
        let (uar, _) = self.uar.ok_or(Status::Inval)?;
        let mr = self.guest_buffer(t, depth * hca_params().wqe_bytes)?;
        match self.call(t, Request::CreateQp { pd: pd.0, scq: scq.0, rcq: rcq.0, depth, buf: Some((mr.addr, mr.lkey)), uar: Some(uar) })? {
            Response::Qp(q) => {
                self.qp_bufs.insert(q, mr);
                Ok(Qp(q))
            }
            _ => Err(Status::Inval),
        }
    }
    fn modify_qp(&mut self, t: &Cpu, qp: Qp, attr: QpAttr) -> VResult<()> {
        unit(self.call(t, Request::ModifyQp { qp: qp.0, attr }))
    }
    fn post_send(&mut self, t: &Cpu, qp: Qp, wr: SendWr) -> VResult<()> {
        let (uar, _) = self.uar.ok_or(Status::Inval)?;
        direct::post_send(&mut self.c, t, qp, uar, wr)
    }
}
