//! # The machine: one clock for fabric, devices and software
//!
//! A run is one machine: the world (the fabric's functional state, and whatever the host layer
//! keeps beside it), one simulation of every link's ports, credits and tags, the device models
//! ([`Device`]) and software threads ([`Thread`]). Everything that takes time is an event on the
//! simulation's one queue, ordered by (time, sequence), so a run is bit-identical every time.
//!
//! Bytes move when their TLP does: a write's bytes land in memory (or a BAR, or an MSI) when
//! that TLP reaches its target, and a read samples memory when its request reaches the
//! completer, so an access racing another sees what hardware would. A TLP that fails on the
//! fabric (IOMMU fault, no NTB translation, link down) stops its flow there: later TLPs of the
//! flow never land, the owner learns the first failing address, and other flows go on.
//!
//! Besides devices and threads, a machine runs timing-only streams ([`Machine::stream`]): N bytes
//! read or written by one requester, the load a benchmark or another tenant puts on the links.

mod aer;
mod core;
mod device;
mod error;
mod fault;
mod thread;
mod window;

pub use self::core::{FlowDone, Owner};
pub use device::{Cx, Device};
pub use error::{MachineError, RunFailure, ThreadError, Unrunnable, WorldHeld};
pub use fault::{Effects, Halted, Later};
pub use thread::{Body, Thread, Watch};

use self::core::{Core, FlowStart};
use crate::queue::Ps;
use crate::sim::{Notice, PortStats, Stats};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use devlend_fabric::model::FuncId;
use devlend_fabric::route::{Requester, Target};
use devlend_fabric::Fabric;
use devlend_wire::{Access, Tlp, TlpHeader};
use std::cell::{RefCell, RefMut};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use thread::{Block, Wake};

/// What a machine runs on: the fabric, and whatever state the layers above keep beside it.
pub trait World: 'static {
    fn fabric(&mut self) -> &mut Fabric;
}

impl World for Fabric {
    fn fabric(&mut self) -> &mut Fabric {
        self
    }
}

type Co<W> = Coroutine<Wake, Block<W>, Result<(), ThreadError>>;

enum Waiting<W> {
    Start,
    Running,
    Flow { flow: u32, sent: bool, what: String },
    Until(Ps),
    Cond { what: String, watch: Watch, pred: Box<dyn FnMut(&mut W) -> bool>, deadline: Option<Ps> },
    Done(Ps),
}

struct Slot<W: World> {
    name: Rc<str>,
    co: Option<Co<W>>,
    waiting: Waiting<W>,
    start: Ps,
    /// A service (a kernel's handler thread) may still wait when nothing is left to happen.
    service: bool,
}

/// A timing-only stream and what became of it.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamResult {
    pub name: String,
    pub who: Requester,
    pub addr: u64,
    pub access: Access,
    pub bytes: u64,
    pub start: Ps,
    pub end: Option<Ps>,
}

impl StreamResult {
    /// Bytes per second from its start to its end.
    pub fn bandwidth(&self) -> Option<f64> {
        self.end.map(|e| self.bytes as f64 / ((e - self.start) as f64 * 1e-12))
    }
}

/// One link direction's statistics, with the "component.port" names of its two ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkStat {
    pub link: u32,
    pub towards_down: bool,
    pub from: String,
    pub to: String,
    pub stats: PortStats,
}

impl LinkStat {
    /// Busy time over `elapsed_ps`.
    pub fn utilisation(&self, elapsed_ps: u64) -> f64 {
        if elapsed_ps == 0 {
            0.0
        } else {
            self.stats.busy_ps as f64 / elapsed_ps as f64
        }
    }

    /// Mean queueing delay per TLP, ps.
    pub fn mean_queue_ps(&self) -> f64 {
        self.stats.queue_ps as f64 / self.stats.tlps.max(1) as f64
    }
}

/// A device model on the machine, shared with whoever built it.
type Model<W> = Rc<RefCell<dyn Device<W>>>;

pub struct Machine<W: World> {
    world: Rc<RefCell<W>>,
    core: Rc<RefCell<Core>>,
    devices: Vec<(FuncId, Model<W>)>,
    by_func: HashMap<FuncId, usize>,
    threads: Vec<Slot<W>>,
    streams: Vec<StreamResult>,
    error: Option<MachineError>,
    /// Some thread waits on a condition: check conditions after memory changes.
    conds: usize,
    /// Fault actions and timed-out reads waiting for their time (`fault`).
    pending: Vec<Option<fault::Pending<W>>>,
    /// Numbers of `pending` that are free to use again.
    free_pending: Vec<usize>,
    /// Functions a fault stopped.
    halted: HashSet<FuncId>,
    /// Reads whose completer never answers: when their completion timeout expires.
    timeouts: HashMap<u32, Ps>,
    /// Bytes landed or served per requester.
    moved: HashMap<Requester, u64>,
    /// Per fault action that has run: its time, and `moved` then.
    struck: Vec<(Ps, HashMap<Requester, u64>)>,
    /// Threads' hosts, crashed threads and AER messages under way (`fault`, `aer`).
    faults: fault::Faults,
    /// Where link statistics are counted from (`window`).
    mark: window::Mark,
}

impl<W: World> Machine<W> {
    pub fn new(mut world: W) -> Machine<W> {
        let core = Core::new(world.fabric());
        Machine {
            world: Rc::new(RefCell::new(world)),
            core: Rc::new(RefCell::new(core)),
            devices: Vec::new(),
            by_func: HashMap::new(),
            threads: Vec::new(),
            streams: Vec::new(),
            error: None,
            conds: 0,
            pending: Vec::new(),
            free_pending: Vec::new(),
            halted: HashSet::new(),
            timeouts: HashMap::new(),
            moved: HashMap::new(),
            struck: Vec::new(),
            faults: fault::Faults::default(),
            mark: window::Mark::default(),
        }
    }

    pub fn now(&self) -> Ps {
        self.core.borrow().now()
    }

    /// Timeless access to the world between runs.
    pub fn world(&self) -> RefMut<'_, W> {
        self.world.borrow_mut()
    }

    /// Give the world back (after the run). Fails only while a device model still holds it.
    pub fn into_world(self) -> Result<W, WorldHeld> {
        let Machine { world, threads, devices, .. } = self;
        drop((devices, threads));
        Rc::try_unwrap(world).map(RefCell::into_inner).map_err(|_| WorldHeld)
    }

    /// Put a device model on the machine as function `func`: TLPs written to its BARs are handed to it.
    pub fn add_device(&mut self, func: FuncId, dev: Rc<RefCell<dyn Device<W>>>) {
        self.by_func.insert(func, self.devices.len());
        self.devices.push((func, dev));
    }

    /// Call the [`Device::timer`] of the device model that is function `func` with `token` at
    /// `at`: something the device sees that is no TLP (a cable pulled from its port). False when
    /// no model is function `func`.
    pub fn signal(&mut self, func: FuncId, at: Ps, token: u64) -> bool {
        let Some(&d) = self.by_func.get(&func) else { return false };
        self.core.borrow_mut().set_timer(at, Owner::Device(d), token);
        true
    }

    /// Start a software thread at time `at`. Returns its index.
    pub fn spawn(&mut self, name: &str, at: Ps, body: impl FnOnce(&mut Thread<'_, W>) -> Result<(), ThreadError> + 'static) -> usize {
        self.spawn_thread(name, at, false, body)
    }

    /// Start a service thread at `at`: one that serves others (an interrupt handler waiting for
    /// the next interrupt) and may still be waiting when the run ends, which is then no error.
    pub fn spawn_service(&mut self, name: &str, at: Ps, body: impl FnOnce(&mut Thread<'_, W>) -> Result<(), ThreadError> + 'static) -> usize {
        self.spawn_thread(name, at, true, body)
    }

    fn spawn_thread(&mut self, name: &str, at: Ps, service: bool, body: impl FnOnce(&mut Thread<'_, W>) -> Result<(), ThreadError> + 'static) -> usize {
        let id = self.threads.len();
        let name: Rc<str> = Rc::from(name);
        let (world, core, n, hosts) = (self.world.clone(), self.core.clone(), name.clone(), self.faults.hosts.clone());
        let co = Coroutine::new(move |y: &Yielder<Wake, Block<W>>, _: Wake| {
            let mut t = Thread { y, world, core, id, name: n, hosts };
            body(&mut t)
        });
        self.threads.push(Slot { name, co: Some(co), waiting: Waiting::Start, start: at, service });
        self.core.borrow_mut().set_timer(at, Owner::Thread(id), 0);
        id
    }

    /// When thread `id` finished, if it has.
    pub fn thread_end(&self, id: usize) -> Option<Ps> {
        match self.threads[id].waiting {
            Waiting::Done(t) => Some(t),
            _ => None,
        }
    }

    /// When thread `id` started.
    pub fn thread_start(&self, id: usize) -> Ps {
        self.threads[id].start
    }

    /// A timing-only stream: `bytes` read or written at `addr` by `who`, starting at `at`, in
    /// max-payload writes or max-read-request reads. Its route is the one at the time of this call.
    pub fn stream(&mut self, name: &str, who: Requester, addr: u64, bytes: u64, access: Access, at: Ps) -> Result<usize, MachineError> {
        if bytes == 0 {
            return Err(MachineError::Invalid { workload: name.into(), why: Unrunnable::ZeroBytes });
        }
        let id = self.streams.len();
        let mut w = self.world.borrow_mut();
        let s = FlowStart { owner: Owner::Stream(id), who, addr, access, len: bytes, data: Vec::new(), carries_data: false, token: 0, at };
        let started = self.core.borrow_mut().start(w.fabric(), s);
        match started {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err(MachineError::Invalid { workload: name.into(), why: Unrunnable::OwnMemory { addr } }),
            Err(failure) => {
                return Err(MachineError::Unreachable { workload: name.into(), addr, failure: Box::new(w.fabric().failure_report(&failure)) });
            }
        }
        self.streams.push(StreamResult { name: name.into(), who, addr, access, bytes, start: at.max(self.now()), end: None });
        Ok(id)
    }

    pub fn streams(&self) -> &[StreamResult] {
        &self.streams
    }

    /// Per link direction (indexed by `path::port_id`): bytes, TLPs, busy and stalled time.
    pub fn port_stats(&self) -> Vec<PortStats> {
        self.core.borrow().sim.port_stats()
    }

    /// Every link direction that carried at least one TLP, named by the ports it leaves and enters.
    pub fn link_stats(&self) -> Vec<LinkStat> {
        self.link_rows(&self.port_stats())
    }

    /// `stats` (indexed by `path::port_id`) of every link direction that carried a TLP, named.
    fn link_rows(&self, stats: &[PortStats]) -> Vec<LinkStat> {
        let mut w = self.world.borrow_mut();
        let f = w.fabric();
        let name = |n: u32| format!("{}.{}", f.node(n).component, f.node(n).port);
        let mut rows = Vec::new();
        for (i, l) in f.links().iter().enumerate() {
            for down in [true, false] {
                let s = stats[crate::path::port_id(i as u32, down) as usize];
                if s.tlps > 0 {
                    let (from, to) = if down { (l.up, l.down) } else { (l.down, l.up) };
                    rows.push(LinkStat { link: i as u32, towards_down: down, from: name(from), to: name(to), stats: s });
                }
            }
        }
        rows
    }

    pub fn stats(&self) -> Stats {
        self.core.borrow().sim.stats.clone()
    }

    /// Run until nothing is left to happen. A thread still waiting then is an error naming it and
    /// what it waits for; so is a thread whose body failed.
    pub fn run(&mut self) -> Result<(), MachineError> {
        while self.step()? {}
        if let Some(e) = self.crashed_error() {
            return Err(e);
        }
        let now = self.now();
        for t in self.threads.iter().filter(|t| !t.service) {
            let waiting_for = match &t.waiting {
                Waiting::Done(_) => continue,
                Waiting::Flow { what, .. } => what.clone(),
                Waiting::Cond { what, .. } => what.clone(),
                Waiting::Until(at) => format!("its timer at {at} ps"),
                Waiting::Start | Waiting::Running => "its start".into(),
            };
            return Err(MachineError::Stuck { thread: t.name.to_string(), waiting_for, at: now });
        }
        Ok(())
    }

    /// Run up to time `at` (not before now): everything due before it, and what was due at it
    /// when this was called; then the clock reads `at` and the world can be changed timelessly
    /// (a borrow or a return at a simulated time) before the run goes on. Threads still waiting
    /// are no error here.
    pub fn run_until(&mut self, at: Ps) -> Result<(), MachineError> {
        self.run_until_or(at, |_| false).map(|_| ())
    }

    /// Run at most `events` more events (a caller that shows progress runs in slices, then
    /// [`Machine::run`] for the end's checks); false once nothing is left to happen. A thread
    /// still waiting is no error here.
    pub fn run_events(&mut self, events: u64) -> Result<bool, MachineError> {
        for _ in 0..events {
            if !self.step()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// When the next event is due (None: nothing is left to happen). Nothing can change before
    /// it unless someone outside starts something: a guest synchronised to this clock may run
    /// freely up to it.
    pub fn next_event_at(&self) -> Option<Ps> {
        self.core.borrow().sim.next_time()
    }

    /// As [`Machine::run_until`], but stop early, at the time of the event after which `stop`
    /// holds (true then). The clock never passes `at`, so what is started at `at` or later
    /// afterwards is in order.
    /// A run that stops early takes its stop marker out of the queue, so what is pending next
    /// ([`Machine::next_event_at`]) and where a later [`Machine::run`] leaves the clock are as if
    /// it had never been set.
    pub fn run_until_or(&mut self, at: Ps, mut stop: impl FnMut(&mut W) -> bool) -> Result<bool, MachineError> {
        let i = self.push_pending(fault::Pending::Stop);
        let at = at.max(self.now());
        let timer = self.core.borrow_mut().set_timer(at, Owner::Machine(i), 0);
        let ran = loop {
            if self.pending[i].is_none() {
                break Ok(false);
            }
            match self.step() {
                Ok(true) if stop(&mut self.world.borrow_mut()) => break Ok(true),
                Ok(true) => {}
                Ok(false) => break Ok(false),
                Err(e) => break Err(e),
            }
        };
        if self.pending[i].is_some() {
            self.core.borrow_mut().cancel_timer(timer);
            self.drop_pending(i);
        }
        ran
    }

    /// One event: a failure recorded so far ends the run; false once nothing is left to happen.
    fn step(&mut self) -> Result<bool, MachineError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let notice = self.core.borrow_mut().sim.step();
        match notice {
            Some(n) => self.handle(n),
            None => return Ok(false),
        }
        Ok(true)
    }

    fn handle(&mut self, n: Notice) {
        match n {
            Notice::Landed { flow, offset, len } => self.landed(flow, offset, len),
            Notice::Served { flow, offset, len } => self.served(flow, offset, len),
            Notice::FlowSent(flow) => {
                let owner = self.core.borrow().flows[flow as usize].as_ref().map(|f| (f.owner, f.token));
                match owner {
                    Some((Owner::Thread(t), _)) => {
                        if matches!(self.threads[t].waiting, Waiting::Flow { flow: f, sent: true, .. } if f == flow) {
                            self.resume(t, Wake::Go);
                        }
                    }
                    Some((Owner::Device(d), token)) => self.call_device(d, |dev, cx| dev.dma_sent(cx, token)),
                    _ => {}
                }
            }
            Notice::FlowEnd(flow) => {
                if !self.timeouts.is_empty() && self.defer_end(flow) {
                    return;
                }
                self.flow_end(flow);
            }
            Notice::Timer(id) => {
                let (owner, token) = self.core.borrow_mut().take_timer(id);
                match owner {
                    // A wait's deadline wakes it only if it still waits for that deadline.
                    Owner::Thread(t) if token == thread::DEADLINE => {
                        let now = self.now();
                        if matches!(self.threads[t].waiting, Waiting::Cond { deadline: Some(d), .. } if d == now) {
                            self.resume(t, Wake::Go);
                        }
                    }
                    Owner::Thread(t) => self.resume(t, Wake::Go),
                    Owner::Device(d) => self.call_device(d, |dev, cx| dev.timer(cx, token)),
                    Owner::Machine(i) => return self.run_pending(i),
                    Owner::Stream(_) => {}
                }
                self.check_conds();
            }
        }
    }

    fn flow_end(&mut self, flow: u32) {
        let (owner, done) = self.core.borrow_mut().finish(flow);
        match owner {
            Owner::Thread(t) => {
                if matches!(self.threads[t].waiting, Waiting::Flow { flow: f, .. } if f == flow) {
                    self.resume(t, Wake::Flow(Box::new(done)));
                }
            }
            Owner::Device(d) => self.call_device(d, |dev, cx| dev.dma_done(cx, done)),
            Owner::Stream(s) => self.streams[s].end = Some(done.end),
            Owner::Machine(_) => {}
        }
        self.check_conds();
    }

    /// A data flow's TLP lands: write its bytes, hand a BAR write to its device, wake waiters.
    fn landed(&mut self, flow: u32, offset: u64, len: u32) {
        let mut core = self.core.borrow_mut();
        let Some(f) = core.flows[flow as usize].as_mut() else { return };
        if f.fault.is_some() || !f.carries_data {
            return;
        }
        let (who, addr) = (f.who, f.addr + offset);
        let bytes = &f.data[offset as usize..][..len as usize];
        // The TLP lands along the route its flow carries (`core`'s docs): the route stores the
        // bytes, and the header as the path rewrote it is what the device sees.
        let arrival = {
            let mut w = self.world.borrow_mut();
            let fabric = w.fabric();
            let header = TlpHeader::write(fabric.requester_rid(who), addr, len);
            fabric.write_tlp(who, &header, bytes, &mut f.route)
        };
        let arrival = match arrival {
            Ok(a) => a,
            Err(e) => {
                drop(core);
                self.fault(flow, addr, e);
                return;
            }
        };
        let device = match arrival.target {
            Target::Bar { func, bar, offset } => self.by_func.get(&func).map(|&d| (d, bar, offset, bytes.to_vec())),
            _ => None,
        };
        drop(core);
        *self.moved.entry(who).or_default() += len as u64;
        if let Some((d, bar, offset, payload)) = device {
            let tlp = Tlp { header: arrival.header, payload };
            self.call_device(d, |dev, cx| dev.mmio_write(cx, bar, offset, &tlp));
            // The device may have changed memory without a landing.
            self.check_conds();
            return;
        }
        self.check_conds_after(Some((arrival.target, len as u64)));
    }

    /// A data flow's read request reaches its completer: sample the bytes now, along the route
    /// the flow carries.
    fn served(&mut self, flow: u32, offset: u64, len: u32) {
        let (who, addr, data, fail) = {
            let mut core = self.core.borrow_mut();
            let Some(f) = core.flows[flow as usize].as_mut() else { return };
            if f.fault.is_some() || !f.carries_data {
                return;
            }
            let (who, addr) = (f.who, f.addr + offset);
            let mut w = self.world.borrow_mut();
            let fabric = w.fabric();
            let header = TlpHeader::read(fabric.requester_rid(who), addr, len, 0);
            let (data, fail) = fabric.read_tlp(who, &header, &mut f.route);
            (who, addr, data, fail)
        };
        if let Some(e) = fail {
            self.arm_timeout(flow, &e);
            self.fault(flow, addr, e);
            return;
        }
        *self.moved.entry(who).or_default() += len as u64;
        let mut core = self.core.borrow_mut();
        let Some(f) = core.flows[flow as usize].as_mut() else { return };
        match (f.streamed, f.owner) {
            (true, Owner::Device(d)) => {
                let token = f.token;
                drop(core);
                self.call_device(d, |dev, cx| dev.dma_data(cx, token, offset, &data));
            }
            _ => f.data[offset as usize..][..len as usize].copy_from_slice(&data),
        }
    }

    fn fault(&mut self, flow: u32, addr: u64, e: devlend_fabric::route::Failure) {
        let mut core = self.core.borrow_mut();
        if let Some(f) = core.flows[flow as usize].as_mut() {
            f.fault.get_or_insert((addr, e));
        }
        core.sim.stop_flow(flow);
        drop(core);
        self.aer_scan();
    }

    fn call_device(&mut self, d: usize, act: impl FnOnce(&mut dyn Device<W>, &mut Cx<'_, W>)) {
        let (func, dev) = (self.devices[d].0, self.devices[d].1.clone());
        if !self.halted.is_empty() && self.halted.contains(&func) {
            return;
        }
        {
            let mut w = self.world.borrow_mut();
            let mut core = self.core.borrow_mut();
            let mut cx = Cx { world: &mut *w, core: &mut core, dev: d, func, peers: &self.by_func };
            act(&mut *dev.borrow_mut(), &mut cx);
        }
        self.aer_scan();
    }

    fn resume(&mut self, t: usize, wake: Wake) {
        if self.threads[t].co.is_none() {
            return; // stopped by its host's crash
        }
        if matches!(self.threads[t].waiting, Waiting::Cond { .. }) {
            self.conds -= 1;
        }
        self.threads[t].waiting = Waiting::Running;
        let co = self.threads[t].co.as_mut().expect("a running thread has its coroutine");
        match co.resume(wake) {
            CoroutineResult::Yield(block) => {
                self.threads[t].waiting = match block {
                    Block::Until(at) => {
                        self.core.borrow_mut().set_timer(at, Owner::Thread(t), 0);
                        Waiting::Until(at)
                    }
                    Block::Flow { flow, sent, what } => Waiting::Flow { flow, sent, what },
                    Block::Cond { what, watch, pred, deadline } => {
                        self.conds += 1;
                        if let Some(d) = deadline {
                            self.core.borrow_mut().set_timer(d, Owner::Thread(t), thread::DEADLINE);
                        }
                        Waiting::Cond { what, watch, pred, deadline }
                    }
                };
            }
            CoroutineResult::Return(r) => {
                self.threads[t].waiting = Waiting::Done(self.now());
                self.threads[t].co = None;
                if let Err(e) = r {
                    let name = self.threads[t].name.to_string();
                    self.error.get_or_insert(thread::failed(&name, e));
                }
            }
        }
        self.aer_scan();
    }

    /// Wake, in thread order, every thread whose condition now holds.
    fn check_conds(&mut self) {
        self.check_conds_after(None);
    }

    /// As `check_conds`, after a write of `len` bytes reached `landed` (only the conditions
    /// watching it are looked at).
    fn check_conds_after(&mut self, landed: Option<(Target, u64)>) {
        if self.conds == 0 {
            return;
        }
        for t in 0..self.threads.len() {
            let ready = match &mut self.threads[t].waiting {
                Waiting::Cond { watch, .. } if landed.is_some_and(|(tg, n)| !watch.covers(&tg, n)) => false,
                Waiting::Cond { pred, .. } => pred(&mut self.world.borrow_mut()),
                _ => false,
            };
            if ready {
                self.resume(t, Wake::Go);
            }
        }
    }
}

#[cfg(test)]
mod route_tests;
#[cfg(test)]
mod tests;
