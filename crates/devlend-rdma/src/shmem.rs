//! An OpenSHMEM-style put/get library over the NTB (003 §3, Fig 5-6: `shmem_int_put`,
//! `shmem_double_put`, `shmem_int_get`, `shmem_double_get` on top of a physically contiguous,
//! page-locked buffer and `blockDMATransfer`).
//!
//! Addresses of remote data are physical addresses in the peer, inside the buffer it published
//! (003 §3 exchanges physical addresses). The heap is symmetric: a put stages its data at the same
//! offset of the local buffer, so DMA moves it buffer-to-buffer. Each call picks a [`Method`]: CPU
//! stores through the BAR (PIO), block DMA or scatter-gather DMA with N descriptors (the buffer
//! divided evenly, as in 003 §3's Fig 9). Every input is checked before any byte moves, so a
//! refused call leaves the peer's memory untouched, and a call over a link that is down is refused
//! as [`RdmaError::LinkDown`] before anything moves. Blocking calls return their [`Timing`];
//! `*_nbi` calls are checked and staged, and `quiet` runs all of them at the same
//! time ([`crate::ops`]: PIO on the calling CPU in order, DMA on the channels round-robin, sharing
//! the links) and waits for the last.
//! A non-blocking get lands at the same offset of the local buffer (symmetric heap), read with
//! [`Pe::local_read`] after `quiet`, as OpenSHMEM's `shmem_getmem_nbi` fills its destination.
//! The driver's call is a thread, the engine and the NT registers devices, and their accesses
//! flows on the links; a put ends when the peer's doorbell handler runs. With several DMA channels
//! ([`Pe::attach_dma_with`]), [`Pe::dma_concurrent`] runs transfers on them at the same time, so
//! they share the links as the engine's flows do. Every call runs on the session's one machine
//! ([`Shmem`]), from the time the call before it ended.

use crate::driver::{self, Regs};
use crate::error::{DmaStop, RResult, RdmaError};
use crate::node::{Node, Pinned};
use crate::ops::{self, Op};
use crate::pio::Mapping;
use crate::session::Shmem;
use devlend_devices::plx_dma::{Desc, DmaEngine};
use devlend_engine::machine::{Machine, World};
use devlend_engine::path::{port_id, propagation, ps_per_byte_fp};
use devlend_engine::queue::Ps;
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_wire::Access;
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Pio,
    BlockDma,
    SgDma(usize),
}

/// Simulated time of one operation, with its parts (ps).
#[derive(Clone, Debug, Default)]
pub struct Timing {
    pub total_ps: u64,
    pub steps: Vec<(&'static str, u64)>,
}

impl Timing {
    pub(crate) fn add(&mut self, what: &'static str, ps: u64) {
        self.steps.push((what, ps));
        self.total_ps += ps;
    }
}

/// The DMA engine this host drives: its channels, register BAR and MSI message (channel `c`
/// sends data `msi.1 + c`).
pub struct Channel {
    pub engine: Rc<RefCell<DmaEngine>>,
    pub bar0: u64,
    pub msi: (u64, u32),
}

/// Transfers run on several channels at once ([`Pe::dma_concurrent`]).
#[derive(Clone, Debug)]
pub struct Concurrent {
    /// Time until the last transfer is done, in ps.
    pub total_ps: u64,
    /// Each channel's time for its transfers one after another, sharing the links, in ps.
    pub channel_ps: Vec<u64>,
    /// Each transfer's time by part, per channel.
    pub timings: Vec<Vec<Timing>>,
    /// The busiest link direction's time spent serialising TLPs during the run, in ps.
    pub link_ps: u64,
}

/// One channel's driver thread started by [`Pe::spawn_queues`], and each call's outcome.
pub struct DmaRun {
    pub thread: usize,
    pub results: Rc<RefCell<Vec<RResult<Timing>>>>,
}

impl DmaRun {
    /// The first call that ended with the channel's error status, if any.
    pub fn check(&self) -> RResult<()> {
        self.results.borrow().iter().find_map(|r| r.as_ref().err().cloned()).map_or(Ok(()), Err)
    }
}

/// One processing element: a host with its node and, if it has one, a DMA channel.
pub struct Pe {
    pub node: Node,
    pub dma: Option<Channel>,
    pub mapping: Mapping,
    pending: Vec<Op>,
}

impl Pe {
    pub fn new(node: Node) -> Pe {
        Pe { node, dma: None, mapping: Mapping::from_params(), pending: Vec::new() }
    }

    /// Attach the DMA function `name` (in this host) with `[ntb_dma]`'s channels.
    pub fn attach_dma(&mut self, s: &mut Shmem, name: &str) -> RResult<()> {
        let p = devlend_devices::plx_dma::params::ntb_dma();
        self.attach_dma_with(s, name, p.channels, p.outstanding_reads)
    }

    /// Attach the DMA function `name` (in this host) with `channels` channels, each keeping
    /// `outstanding_reads` reads in flight: bus master, requester-ID LUT entry in this host's NT
    /// port, one MSI-X vector per channel aimed at this host; the engine a device on the session's
    /// machine from now on.
    pub fn attach_dma_with(&mut self, s: &mut Shmem, name: &str, channels: u32, outstanding_reads: u64) -> RResult<()> {
        self.attach_dma_on(&mut s.fabric(), name, channels, outstanding_reads)?;
        let engine = self.channel()?.engine.clone();
        s.add_engine(&engine);
        Ok(())
    }

    /// As [`Pe::attach_dma_with`], for a machine the caller builds and runs (a cluster's shared
    /// with other workloads): the engine is then the caller's to add ([`Pe::dma_device`]).
    pub fn attach_dma_on(&mut self, f: &mut Fabric, name: &str, channels: u32, outstanding_reads: u64) -> RResult<()> {
        let func = f.func_id(name)?;
        if f.func_host(func) != self.node.host {
            return Err(RdmaError::NotInHost { function: name.to_string(), host: self.node.host });
        }
        let engine = DmaEngine::with(func, channels, outstanding_reads)?;
        f.set_bus_master(func, true);
        let bdf = f.func(func).bdf;
        f.rid_lut_add(self.node.ntb, bdf)?;
        let bar0 = f.func(func).bars.iter().find(|b| b.index == 0).map(|b| b.addr).ok_or_else(|| RdmaError::NoBar { function: name.to_string(), bar: 0 })?;
        let msi = (f.host(self.node.host).msi.start, 0x41u32);
        for c in 0..channels {
            let mut entry = [0u8; 16];
            entry[0..8].copy_from_slice(&msi.0.to_le_bytes());
            entry[8..12].copy_from_slice(&(msi.1 + c).to_le_bytes());
            f.write(Requester::Cpu(self.node.host), bar0 + devlend_fabric::config::MSIX_TABLE_OFFSET + 16 * c as u64, &entry);
        }
        self.dma = Some(Channel { engine: Rc::new(RefCell::new(engine)), bar0, msi });
        Ok(())
    }

    fn cpu(&self) -> Requester {
        Requester::Cpu(self.node.host)
    }

    // ----- typed front end ---------------------------------------------------------------------

    pub fn put_bytes(&mut self, s: &mut Shmem, dst: u64, data: &[u8], how: Method) -> RResult<Timing> {
        self.put(s, dst, data, how)
    }
    pub fn put_int(&mut self, s: &mut Shmem, dst: u64, v: &[i32], how: Method) -> RResult<Timing> {
        self.put(s, dst, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(), how)
    }
    pub fn put_double(&mut self, s: &mut Shmem, dst: u64, v: &[f64], how: Method) -> RResult<Timing> {
        self.put(s, dst, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(), how)
    }
    pub fn get_bytes(&mut self, s: &mut Shmem, src: u64, len: u64, how: Method) -> RResult<(Vec<u8>, Timing)> {
        self.get(s, src, len, how)
    }
    pub fn get_int(&mut self, s: &mut Shmem, src: u64, n: usize, how: Method) -> RResult<(Vec<i32>, Timing)> {
        let (b, t) = self.get(s, src, n as u64 * 4, how)?;
        Ok((b.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect(), t))
    }
    pub fn get_double(&mut self, s: &mut Shmem, src: u64, n: usize, how: Method) -> RResult<(Vec<f64>, Timing)> {
        let (b, t) = self.get(s, src, n as u64 * 8, how)?;
        Ok((b.chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect(), t))
    }

    /// Non-blocking put: checked and staged now, moved by `quiet` (with every other queued
    /// operation, at the same time).
    pub fn put_nbi(&mut self, s: &mut Shmem, dst: u64, data: &[u8], how: Method) -> RResult<()> {
        let op = self.prepare_put(&mut s.fabric(), dst, data, how)?;
        self.pending.push(op);
        Ok(())
    }

    /// Non-blocking get: the data lands at the same offset of this host's buffer (symmetric heap);
    /// read it with [`Pe::local_read`] after `quiet`.
    pub fn get_nbi(&mut self, s: &mut Shmem, src: u64, len: u64, how: Method) -> RResult<()> {
        let op = self.prepare_get(&mut s.fabric(), src, len, how, true)?;
        self.pending.push(op);
        Ok(())
    }

    /// `len` bytes at `offset` of this host's own buffer.
    pub fn local_read(&self, s: &Shmem, offset: u64, len: u64) -> RResult<Vec<u8>> {
        if !self.node.buf.contains(self.node.buf.phys + offset, len) {
            return Err(RdmaError::ExceedsBuffer { offset, len, size: self.node.buf.size });
        }
        Ok(s.fabric().read(self.cpu(), self.node.buf.phys + offset, len as usize).0)
    }

    /// Run every queued non-blocking operation, all on the session's machine at the same time (PIO on this
    /// CPU in issue order, DMA on the channels round-robin), and wait for the last: the time
    /// until then, and when each was done.
    pub fn quiet(&mut self, s: &mut Shmem) -> RResult<Timing> {
        let ops = std::mem::take(&mut self.pending);
        let mut t = Timing::default();
        if ops.is_empty() {
            return Ok(t);
        }
        let done = self.run_ops(s, ops)?;
        let last = done.iter().map(|d| d.end).max().unwrap_or(0);
        t.add("all non-blocking operations done", last);
        t.steps.extend(done.iter().map(|d| ("one operation done", d.end)));
        Ok(t)
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    // ----- put and get -------------------------------------------------------------------------

    /// Put `data` at `dst` (a physical address in the peer's published buffer), then ring the
    /// peer's data doorbell. Time ends when the peer's doorbell handler runs (003 §3).
    pub fn put(&mut self, s: &mut Shmem, dst: u64, data: &[u8], how: Method) -> RResult<Timing> {
        let op = self.prepare_put(&mut s.fabric(), dst, data, how)?;
        Ok(self.run_ops(s, vec![op])?.swap_remove(0).timing)
    }

    /// Get `len` bytes from `src` in the peer's published buffer into this host.
    pub fn get(&mut self, s: &mut Shmem, src: u64, len: u64, how: Method) -> RResult<(Vec<u8>, Timing)> {
        let op = self.prepare_get(&mut s.fabric(), src, len, how, false)?;
        let d = self.run_ops(s, vec![op])?.swap_remove(0);
        if how == Method::Pio {
            return Ok((d.data, d.timing));
        }
        let local = self.node.buf.phys + self.node.peer_to_window(src, len)? - self.node.window.0;
        Ok((s.fabric().read(self.cpu(), local, len as usize).0, d.timing))
    }

    /// Check a put and stage its data (DMA sends it from the same offset of this host's buffer).
    fn prepare_put(&mut self, f: &mut Fabric, dst: u64, data: &[u8], how: Method) -> RResult<Op> {
        let len = data.len() as u64;
        let win = self.node.peer_to_window(dst, len)?;
        self.node.check_link(f)?;
        if how == Method::Pio {
            return Ok(Op::PioPut { win, data: data.to_vec() });
        }
        let local = self.node.buf.phys + win - self.node.window.0;
        if !self.node.buf.contains(local, len) {
            return Err(RdmaError::OutsideRegistered { descriptor: 0, addr: local, len });
        }
        let (descs, sg) = (split(local, win, len, how), matches!(how, Method::SgDma(_)));
        self.check_dma(&descs, sg)?;
        f.write(self.cpu(), local, data);
        Ok(Op::Dma { descs, sg, ring: true })
    }

    /// Check a get; with `land`, PIO's data lands at the same offset of this host's buffer.
    fn prepare_get(&mut self, f: &mut Fabric, src: u64, len: u64, how: Method, land: bool) -> RResult<Op> {
        let win = self.node.peer_to_window(src, len)?;
        self.node.check_link(f)?;
        let local = self.node.buf.phys + win - self.node.window.0;
        if how == Method::Pio {
            return Ok(Op::PioGet { win, len, land: land.then_some(local) });
        }
        let (descs, sg) = (split(win, local, len, how), matches!(how, Method::SgDma(_)));
        self.check_dma(&descs, sg)?;
        Ok(Op::Dma { descs, sg, ring: false })
    }

    /// Descriptors must be in registered memory and fit the channel.
    fn check_dma(&self, descs: &[Desc], sg: bool) -> RResult<()> {
        self.check_registered(descs)?;
        check_shape(&[descs.to_vec()], sg, self.regs(0)?.ring_bytes)
    }

    /// Run operations on the session's machine ([`crate::ops`]).
    fn run_ops(&mut self, s: &mut Shmem, ops: Vec<Op>) -> RResult<Vec<ops::Done>> {
        let channels = match &self.dma {
            Some(d) => (0..d.engine.borrow().channel_count()).map(|c| self.regs(c)).collect::<RResult<Vec<_>>>()?,
            None => Vec::new(),
        };
        let caller = ops::Caller { host: self.node.host, ntb: self.node.ntb, mapping: self.mapping, channels };
        ops::run(s, &caller, ops).map_err(|e| self.describe_fault(&s.fabric(), e))
    }

    /// Check descriptors against registered memory (this host's buffer on one side, the peer's
    /// window on the other), then run them on the channel. Nothing moves if any is outside.
    pub fn dma_checked(&mut self, s: &mut Shmem, descs: &[Desc], sg: bool) -> RResult<Timing> {
        self.run_dma(s, descs, if sg { Method::SgDma(descs.len()) } else { Method::BlockDma })
    }

    fn run_dma(&mut self, s: &mut Shmem, descs: &[Desc], how: Method) -> RResult<Timing> {
        self.check_registered(descs)?;
        self.dma_raw(s, descs, matches!(how, Method::SgDma(_)))
    }

    /// Every descriptor must copy between this host's buffer and the peer's window (either way).
    fn check_registered(&self, descs: &[Desc]) -> RResult<()> {
        for (i, d) in descs.iter().enumerate() {
            let n = d.count as u64;
            let local = |a: u64| self.node.buf.contains(a, n);
            let remote = |a: u64| a >= self.node.window.0 && a.checked_add(n).is_some_and(|e| e <= self.node.window.0 + self.node.window_size());
            if !(local(d.src) && remote(d.dst) || remote(d.src) && local(d.dst)) {
                return Err(RdmaError::OutsideRegistered { descriptor: i, addr: if local(d.src) || remote(d.src) { d.dst } else { d.src }, len: n });
            }
        }
        Ok(())
    }

    /// Hand descriptors to channel 0 as they are (no checks: what the hardware would do with a
    /// buggy driver). Errors come back from the channel's status, with the fault recorded.
    pub fn dma_raw(&mut self, s: &mut Shmem, descs: &[Desc], sg: bool) -> RResult<Timing> {
        let mut r = self.run_queues(s, &[vec![descs.to_vec()]], sg)?;
        Ok(r.timings.swap_remove(0).swap_remove(0))
    }

    /// Run transfers on the channels at the same time: `queues[c]` holds channel `c`'s transfers
    /// (each a descriptor list, SG or block), which it runs one after another. Every transfer is
    /// checked against registered memory before any channel starts.
    pub fn dma_concurrent(&mut self, s: &mut Shmem, queues: &[Vec<Vec<Desc>>], sg: bool) -> RResult<Concurrent> {
        self.node.check_link(&s.fabric())?;
        let n = self.channel()?.engine.borrow().channel_count();
        if queues.len() > n {
            return Err(RdmaError::TooManyQueues { queues: queues.len(), channels: n });
        }
        for j in queues.iter().flatten() {
            self.check_registered(j)?;
        }
        self.run_queues(s, queues, sg)
    }

    fn channel(&self) -> RResult<&Channel> {
        let host = self.node.host;
        self.dma.as_ref().ok_or(RdmaError::NoDmaEngine { host })
    }

    /// Where the driver finds channel `c`.
    fn regs(&self, c: usize) -> RResult<Regs> {
        let ch = self.channel()?;
        let e = ch.engine.borrow();
        let slice = ring_slice(self.node.ring, e.channel_count());
        Ok(Regs {
            host: self.node.host,
            func: e.func,
            base: ch.bar0 + c as u64 * devlend_devices::plx_dma::CH_STRIDE,
            offset: c as u64 * devlend_devices::plx_dma::CH_STRIDE,
            ring: self.node.ring.phys + c as u64 * slice,
            ring_bytes: slice,
            msi_data: ch.msi.1 + c as u32,
        })
    }

    /// On the session's machine: a driver thread per channel runs its queue's calls one after
    /// another.
    pub(crate) fn run_queues(&mut self, s: &mut Shmem, queues: &[Vec<Vec<Desc>>], sg: bool) -> RResult<Concurrent> {
        let start = s.start();
        let runs = self.spawn_queues(s.machine(), "dma driver", queues, sg, start.at)?;
        s.run()?;
        let ids: Vec<usize> = runs.iter().map(|r| r.thread).collect();
        let (channel_ps, link_ps) = (driver::thread_ps(s.machine(), &ids), s.busiest_since(&start));
        let mut done = Vec::new();
        for r in runs {
            done.push(r.results.take().into_iter().collect::<RResult<Vec<Timing>>>().map_err(|e| self.describe_fault(&s.fabric(), e))?);
        }
        let timings = done;
        Ok(Concurrent { total_ps: channel_ps.iter().copied().max().unwrap_or(0), channel_ps, timings, link_ps })
    }

    /// Start queue `c` of `queues` on channel `c` as a driver thread ("NAME, channel c") on `m`
    /// from `at`, each job one DMA call after the last, a failing call ending the queue. The
    /// engine must be a device of `m` already, or be added by the caller.
    pub fn spawn_queues<W: World>(&self, m: &mut Machine<W>, name: &str, queues: &[Vec<Vec<Desc>>], sg: bool, at: Ps) -> RResult<Vec<DmaRun>> {
        let regs: Vec<Regs> = (0..queues.len()).map(|c| self.regs(c)).collect::<RResult<_>>()?;
        for (r, q) in regs.iter().zip(queues) {
            check_shape(q, sg, r.ring_bytes)?;
        }
        let runs = queues
            .iter()
            .zip(&regs)
            .enumerate()
            .map(|(c, (q, r))| {
                let (q, r, out) = (q.clone(), *r, Rc::new(RefCell::new(Vec::new())));
                let results = out.clone();
                let thread = m.spawn(&format!("{name}, channel {c}"), at, move |t| {
                    for descs in &q {
                        let timing = driver::dma_call(t, r, descs, sg)?;
                        let failed = timing.is_err();
                        out.borrow_mut().push(timing);
                        if failed {
                            break;
                        }
                    }
                    Ok(())
                });
                DmaRun { thread, results }
            })
            .collect();
        Ok(runs)
    }

    /// The DMA engine as a device for a machine the caller runs (see [`Pe::spawn_queues`]).
    pub fn dma_device(&self) -> RResult<(devlend_fabric::model::FuncId, Rc<RefCell<DmaEngine>>)> {
        let e = self.channel()?.engine.clone();
        let func = e.borrow().func;
        Ok((func, e))
    }

    /// The analytic limit (devlend_engine::analytic) of posted writes along the DMA engine's path
    /// into the peer's window: what the links allow, in bytes/s.
    pub fn dma_write_limit(&self, s: &Shmem) -> RResult<f64> {
        let f = &mut *s.fabric();
        let func = self.channel()?.engine.borrow().func;
        let addr = self.node.window.0;
        let plan = devlend_engine::plan(f, Requester::Func(func), addr, Access::Write)
            .map_err(|e| RdmaError::Route { addr, failure: Box::new(f.failure_report(&e)) })?;
        let mut ports = vec![(0u64, 0u64); f.links().len() * 2];
        for (i, l) in f.links().iter().enumerate() {
            for down in [true, false] {
                ports[port_id(i as u32, down) as usize] = (ps_per_byte_fp(l.gen, l.width), propagation(l.kind));
            }
        }
        Ok(devlend_engine::analytic::write_bandwidth(&plan, &ports))
    }

    fn describe_fault(&self, f: &Fabric, e: RdmaError) -> RdmaError {
        let RdmaError::Dma { descriptor, bytes_done, stop: DmaStop::Status } = e else { return e };
        let Ok(ch) = self.channel() else { return e };
        let engine = ch.engine.borrow();
        let last =
            (0..engine.channel_count()).filter_map(|c| engine.log(c).faults.last().copied()).find(|x| x.descriptor == descriptor && x.bytes_done == bytes_done);
        let stop = last.and_then(|x| x.failure).map_or(DmaStop::InvalidDescriptor, |x| DmaStop::Route(Box::new(f.failure_report(&x))));
        RdmaError::Dma { descriptor, bytes_done, stop }
    }
}

/// A channel's transfers must fit what its registers and ring slice take.
fn check_shape(queue: &[Vec<Desc>], sg: bool, ring_bytes: u64) -> RResult<()> {
    let dbytes = devlend_devices::plx_dma::params::ntb_dma().descriptor_bytes;
    for descs in queue {
        if sg && descs.len() as u64 * dbytes > ring_bytes {
            return Err(RdmaError::RingFull { descriptors: descs.len(), fit: ring_bytes / dbytes });
        }
        if !sg && descs.len() != 1 {
            return Err(RdmaError::BlockDescriptors { descriptors: descs.len() });
        }
    }
    Ok(())
}

/// Each channel has its own slice of the page-locked descriptor ring, in bytes.
pub fn ring_slice(ring: Pinned, channels: usize) -> u64 {
    ring.size / channels as u64
}

/// Split [src, src+len) -> [dst, ...) into the descriptors of a method: one for block mode, N
/// even pieces for SG (003 §3: "dividing evenly the same size to the buffer size").
pub fn split(src: u64, dst: u64, len: u64, how: Method) -> Vec<Desc> {
    let n = match how {
        Method::SgDma(n) => (n as u64).clamp(1, len.max(1)),
        _ => 1,
    };
    let (piece, rest) = (len / n, len % n);
    let mut out = Vec::new();
    let mut at = 0u64;
    for i in 0..n {
        let c = piece + u64::from(i < rest);
        out.push(Desc { src: src + at, dst: dst + at, count: c as u32 });
        at += c;
    }
    out
}

/// Both ends of a two-host testbed after the handshake.
pub struct Pair {
    pub a: Pe,
    pub b: Pe,
}

/// Open both nodes, publish, learn each other (003 §3's scratchpad handshake), and attach the
/// DMA function to whichever host it sits in.
pub fn handshake(s: &mut Shmem, ntb_a: &str, ntb_b: &str, ram_offset: u64, size: u64, dma: Option<&str>) -> RResult<Pair> {
    let (a, b) = {
        let f = &mut *s.fabric();
        let mut a = Node::open(f, ntb_a, ram_offset, size)?;
        let mut b = Node::open(f, ntb_b, ram_offset, size)?;
        a.publish(f)?;
        b.publish(f)?;
        for n in [&mut a, &mut b] {
            if n.learn_peer(f)?.is_none() {
                return Err(RdmaError::NotPublished { addr: 0, len: 0, published: None });
            }
        }
        (a, b)
    };
    let (mut a, mut b) = (Pe::new(a), Pe::new(b));
    if let Some(name) = dma {
        let func = s.fabric().func_id(name)?;
        let in_a = s.fabric().func_host(func) == a.node.host;
        let pe = if in_a { &mut a } else { &mut b };
        pe.attach_dma(s, name)?;
    }
    Ok(Pair { a, b })
}

pub fn pinned_of(pe: &Pe) -> Pinned {
    pe.node.buf
}
