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
//!
//! This file is what one access reads on its way through the machine, in order (the sections are
//! marked `// ##` below; `thread`, `core` and `device` are inline modules):
//! 1. [`World`] and [`Machine`]: its state and set-up (`new`, `add_device`).
//! 2. `mod thread`: a CPU load or store of a software thread ([`Thread::cpu_write`],
//!    [`Thread::cpu_read`]) as a flow, the thread suspended until its store has left the CPU or
//!    its data has returned; a wait for a condition ([`Thread::wait_until`], [`Watch`]).
//! 3. `mod core`: the flow issued (`Core::start`): its request TLP routed once by the fabric
//!    (`Fabric::route_to_carry`), planned into the simulation's paths (`crate::plan_route`),
//!    loaded once per plan, and carried in its flow record (`FlowInfo::route`) to where its TLPs
//!    land (a memory request routed by its address, PCIe Base 3.0 §2.2.4.1).
//! 4. The run loop: each event of the simulation (`step`, `handle`); a posted write's TLP lands
//!    along the carried route (`landed`: the bytes stored, a BAR write handed to its device as a
//!    `devlend_wire::Tlp`, waiting threads woken), a read request is served (`served`: memory
//!    sampled when the request reaches the completer, PCIe Base 3.0 §2.3.1), a flow's end
//!    resumes its thread or calls its device.
//! 5. `mod device`: a device model ([`Device`]) and its DMA ([`Cx::dma_write_after`],
//!    [`Cx::dma_read_streamed_after`]), flows like a CPU's.
//!
//! Off the walk, in sibling files: starting threads and looking at them (`spawn`), timers and
//! signals (`timers`), timing-only streams (`streams`), link statistics (`stats`, and from a
//! marked time `window`), running to a time or in slices (`run`), a device's message to its root
//! and writes as another function (`messages`), faults at a simulated time and a flow stopped at
//! its failing TLP (`fault`), AER (`aer`), the errors (`error`); tests in `tests`,
//! `route_tests` and `fault_tests`.

mod aer;
mod error;
mod fault;
mod messages;
mod run;
mod spawn;
mod stats;
mod streams;
mod timers;
mod window;

pub use self::core::{FlowDone, Owner};
pub use device::{Cx, Device};
pub use error::{MachineError, RunFailure, ThreadError, Unrunnable, WorldHeld};
pub use fault::{Effects, Halted, Later};
pub use spawn::Body;
pub use stats::LinkStat;
pub use streams::StreamResult;
pub use thread::{Thread, Watch};

use self::core::Core;
use crate::queue::Ps;
use crate::sim::Notice;
use corosensei::{Coroutine, CoroutineResult};
use devlend_fabric::model::FuncId;
use devlend_fabric::route::{Requester, Target};
use devlend_fabric::Fabric;
use devlend_wire::{Tlp, TlpHeader};
use std::cell::{RefCell, RefMut};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use thread::{Block, Wake};

// ## 1. The machine and what it runs on

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
}

// ## 2. A CPU access: the thread that makes it

mod thread {
    //! Software as threads on the one clock.
    //!
    //! A thread is a stackful coroutine (corosensei): its body is ordinary, synchronous code (a
    //! driver, a benchmark loop), and every call that takes simulated time suspends it until the
    //! machine reaches the moment it ends. A register read blocks the thread until its completion
    //! returns; a posted store costs its issue time (until its TLP has left the CPU's root port);
    //! waiting for an interrupt or a memory value suspends it until a landing makes the condition
    //! true. Only one thread runs at a time, resumed in the order of the simulation's events, so
    //! several threads interleave deterministically.

    use super::core::{Core, FlowDone, FlowStart, Owner};
    use super::error::ThreadError;
    use super::World;
    use crate::queue::Ps;
    use corosensei::Yielder;
    use devlend_fabric::model::HostId;
    use devlend_fabric::route::{Failure, Requester, Target};
    use devlend_wire::Access;
    use std::cell::{RefCell, RefMut};
    use std::rc::Rc;

    /// Why a thread is suspended.
    pub(crate) enum Block<W> {
        /// Until flow `.0` has left its source (a posted store) or ended.
        Flow {
            flow: u32,
            sent: bool,
            what: String,
        },
        Until(Ps),
        /// Until the predicate holds; evaluated after the landings it watches and every flow's end.
        /// With a deadline, also until then (a driver's timeout).
        Cond {
            what: String,
            watch: Watch,
            pred: Box<dyn FnMut(&mut W) -> bool>,
            deadline: Option<Ps>,
        },
    }

    /// The token of a thread's timer that is a wait's deadline (its other timers use 0).
    pub(crate) const DEADLINE: u64 = 1;

    /// Which landings may make a waiting thread's condition true.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Watch {
        Any,
        /// Writes into `len` bytes of host `host`'s RAM at `addr`.
        Ram {
            host: HostId,
            addr: u64,
            len: u64,
        },
        /// Interrupts (MSI writes) to host `host`.
        Msi {
            host: HostId,
        },
    }

    impl Watch {
        /// Whether a write of `len` bytes reaching `t` may matter.
        pub(crate) fn covers(&self, t: &Target, len: u64) -> bool {
            match (*self, *t) {
                (Watch::Any, _) => true,
                (Watch::Ram { host, addr, len: n }, Target::Ram { host: h, addr: a }) => h == host && a < addr + n && addr < a + len,
                (Watch::Msi { host }, Target::Msi { host: h, .. }) => h == host,
                _ => false,
            }
        }
    }

    /// What a suspended thread is resumed with.
    pub(crate) enum Wake {
        Go,
        Flow(Box<FlowDone>),
    }

    /// The handle a thread's body acts through.
    pub struct Thread<'y, W: World> {
        pub(crate) y: &'y Yielder<Wake, Block<W>>,
        pub(crate) world: Rc<RefCell<W>>,
        pub(crate) core: Rc<RefCell<Core>>,
        pub(crate) id: usize,
        pub(crate) name: Rc<str>,
        /// The host each thread runs on, where it said (`runs_on`): a crash of that host stops it.
        pub(crate) hosts: super::fault::ThreadHosts,
    }

    /// Reads and writes of more than this go as one flow each; the machine splits them into TLPs.
    const MAX_ACCESS: u64 = 1 << 30;

    impl<W: World> Thread<'_, W> {
        /// The time now, for this thread.
        pub fn now(&self) -> Ps {
            self.core.borrow().now()
        }

        /// Timeless access to the world: program tables, look at memory, allocate. Do not hold it
        /// across a call that takes time.
        pub fn world(&self) -> RefMut<'_, W> {
            self.world.borrow_mut()
        }

        /// Spend `ps` of CPU time (software cost).
        pub fn sleep(&self, ps: Ps) {
            if ps > 0 {
                let at = self.now() + ps;
                self.y.suspend(Block::Until(at));
            }
        }

        /// Suspend until `pred` holds (checked now, then after every landing, timer and flow end).
        /// `what` names the wait in the error if it never comes.
        pub fn wait_until(&self, what: impl Into<String>, pred: impl FnMut(&mut W) -> bool + 'static) {
            self.wait_for(what, Watch::Any, pred)
        }

        /// As [`Thread::wait_until`], but the predicate is looked at again only after landings that
        /// `watch` covers (and after timers and flow ends): a driver spinning on a word in RAM is
        /// not re-checked for every TLP of a copy into a BAR.
        pub fn wait_for(&self, what: impl Into<String>, watch: Watch, mut pred: impl FnMut(&mut W) -> bool + 'static) {
            if pred(&mut self.world.borrow_mut()) {
                return;
            }
            self.y.suspend(Block::Cond { what: what.into(), watch, pred: Box::new(pred), deadline: None });
        }

        /// A CPU store of `data` at `addr` by a CPU of `host`: posted, so the thread goes on once
        /// the store has left the CPU (the bytes land later, in order behind earlier stores).
        pub fn cpu_write(&self, host: HostId, addr: u64, data: &[u8]) -> Result<(), ThreadError> {
            self.fits(addr, data.len() as u64)?;
            self.access(host, addr, Access::Write, data.len() as u64, data.to_vec()).map(|_| ())
        }

        /// A CPU load of `len` bytes at `addr`: the thread waits for the data.
        pub fn cpu_read(&self, host: HostId, addr: u64, len: usize) -> Result<Vec<u8>, ThreadError> {
            self.fits(addr, len as u64)?;
            self.access(host, addr, Access::Read, len as u64, vec![0; len])
        }

        /// One call moves at most `MAX_ACCESS` bytes, inside the address space (checked before any
        /// buffer is made).
        fn fits(&self, addr: u64, len: u64) -> Result<(), ThreadError> {
            if len > MAX_ACCESS || addr.checked_add(len).is_none() {
                return Err(ThreadError::TooLarge { thread: self.name.to_string(), addr, len });
            }
            Ok(())
        }

        fn access(&self, host: HostId, addr: u64, access: Access, len: u64, data: Vec<u8>) -> Result<Vec<u8>, ThreadError> {
            if len == 0 {
                return Ok(Vec::new());
            }
            let who = Requester::Cpu(host);
            let started = {
                let mut w = self.world.borrow_mut();
                let mut core = self.core.borrow_mut();
                core.start(
                    w.fabric(),
                    FlowStart { owner: Owner::Thread(self.id), who, addr, access, len, data: data.clone(), carries_data: true, token: 0, at: 0 },
                )
            };
            let fail = |addr: u64, f: Failure| {
                let failure = Box::new(self.world.borrow_mut().fabric().failure_report(&f));
                ThreadError::Access { thread: self.name.to_string(), addr, failure }
            };
            match started {
                Err(f) => {
                    let cto = self.world.borrow_mut().fabric().tuning().timing.completion_timeout_ps;
                    self.world.borrow_mut().fabric().record(f);
                    if access == Access::Read && matches!(f, Failure::Unresponsive { .. }) {
                        // A completer that never answers: the load fails when the timeout expires (PCIe §2.8).
                        self.sleep(cto);
                    }
                    Err(fail(addr, f))
                }
                Ok(Err(local)) => {
                    // The CPU's own RAM: no link to cross; the bytes move now.
                    let out = {
                        let mut w = self.world.borrow_mut();
                        match access {
                            Access::Write => {
                                let (_, e) = w.fabric().write(who, addr, &data);
                                e.map(|e| (Vec::new(), Some(e))).unwrap_or((Vec::new(), None))
                            }
                            Access::Read => {
                                let (d, e) = w.fabric().read(who, addr, len as usize);
                                (d, e)
                            }
                        }
                    };
                    self.sleep(local.latency);
                    match out {
                        (_, Some(e)) => Err(fail(addr, e)),
                        (d, None) => Ok(d),
                    }
                }
                Ok(Ok(flow)) => {
                    let what = format!("the {} of {len} bytes at {addr:#x}", if access == Access::Read { "read" } else { "store" });
                    let wake = self.y.suspend(Block::Flow { flow, sent: access == Access::Write, what });
                    match wake {
                        Wake::Flow(done) => match done.fault {
                            Some((a, f)) => Err(fail(a, f)),
                            None => Ok(done.data),
                        },
                        Wake::Go => Ok(Vec::new()),
                    }
                }
            }
        }
    }
}

// ## 3. The flow: issued once, its route carried

mod core {
    //! The state the machine shares with its threads and devices: the one simulation, the plans it
    //! has loaded, and who owns each flow and timer. Borrowed briefly by whoever acts; never across
    //! a thread's suspension.
    //!
    //! A flow's route is found once, when it is issued ([`Core::start`]: the fabric's route of the
    //! flow's request TLP, `Fabric::route_to_carry`), planned into the simulation's paths, and
    //! carried in its [`FlowInfo`] to where its TLPs land or are served (`Fabric::write_tlp`,
    //! `Fabric::read_tlp`). A TLP arrives along the carried route while it stands: the same 4 KiB
    //! page, and no change to the fabric's routes since (`Fabric::route_generation`, moved by every
    //! IOMMU map or unmap, NTB window change, link or port down, ...). A TLP on another page of the
    //! flow, or one landing after a change, is routed as it lands, and the flow carries that route
    //! on: translation happens when the TLP gets there, so an unmap between a TLP's issue and its
    //! landing faults the landing, as on hardware.

    use crate::queue::Ps;
    use crate::sim::{FlowKind, FlowOpts, Sim};
    use crate::{plan_route, Plan};
    use devlend_fabric::route::{Failure, Requester};
    use devlend_fabric::{CarriedRoute, Fabric};
    use devlend_wire::{Access, TlpHeader};
    use std::collections::HashMap;

    /// Who is told when a flow ends or a timer fires.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Owner {
        Thread(usize),
        Device(usize),
        Stream(usize),
        /// The machine itself: a fault action or a timed-out read (`fault`).
        Machine(usize),
    }

    /// One DMA or CPU access in flight: whose, where, and its bytes (written from `data` as each
    /// TLP lands; read into it as each request is served, or handed to the owning device as each
    /// request is served when `streamed`).
    pub(crate) struct FlowInfo {
        pub owner: Owner,
        pub who: Requester,
        pub addr: u64,
        pub access: Access,
        pub data: Vec<u8>,
        /// Move bytes functionally (per TLP) or only time the stream.
        pub carries_data: bool,
        /// A device's read whose bytes go to [`super::Device::dma_data`] as they are served: `data`
        /// stays empty, so no buffer of the whole transfer is held.
        pub streamed: bool,
        pub token: u64,
        /// The first failing address and why; nothing of the flow lands after it.
        pub fault: Option<(u64, Failure)>,
        /// The route its TLPs land along while it stands (a flow that `carries_data`; see the
        /// module docs): the route of its first page from its issue, then of the page landed last.
        pub route: Option<CarriedRoute>,
    }

    /// A flow asked for: whose, where, how many bytes (or which, for a write), when.
    pub(crate) struct FlowStart {
        pub owner: Owner,
        pub who: Requester,
        pub addr: u64,
        pub access: Access,
        pub len: u64,
        /// A write's bytes, landed TLP by TLP where `carries_data`.
        pub data: Vec<u8>,
        /// Move bytes functionally (per TLP) or only time the stream.
        pub carries_data: bool,
        /// The owner's own name for the flow, handed back when it ends.
        pub token: u64,
        /// When it starts (not before now).
        pub at: Ps,
    }

    /// What an owner learns when its flow ends.
    #[derive(Clone, Debug)]
    pub struct FlowDone {
        pub token: u64,
        pub addr: u64,
        pub access: Access,
        /// The bytes read (reads; empty for a streamed read, whose bytes went to
        /// [`super::Device::dma_data`]), or the bytes that were to be written.
        pub data: Vec<u8>,
        pub fault: Option<(u64, Failure)>,
        pub end: Ps,
    }

    pub(crate) struct Core {
        pub sim: Sim,
        plans: HashMap<Plan, (u32, Option<u32>)>,
        pub flows: Vec<Option<FlowInfo>>,
        pub timers: Vec<Option<(Owner, u64)>>,
        pub(super) free_timers: Vec<u32>,
    }

    /// A flow that needs no link (a CPU touching its own RAM): done at once, after `latency`.
    pub(crate) struct Local {
        pub latency: Ps,
    }

    impl Core {
        pub fn new(f: &Fabric) -> Core {
            Core { sim: crate::sim_for(f), plans: HashMap::new(), flows: Vec::new(), timers: Vec::new(), free_timers: Vec::new() }
        }

        pub fn now(&self) -> Ps {
            self.sim.now()
        }

        /// The simulation's paths for a plan, loaded once per distinct plan.
        fn load(&mut self, p: Plan) -> (u32, Option<u32>) {
            if let Some(ids) = self.plans.get(&p) {
                return *ids;
            }
            let ids = crate::sim::load(&mut self.sim, &p);
            self.plans.insert(p, ids);
            ids
        }

        /// Start flow `s` (its `len` bytes, or its `data` for writes, from `s.at`, not before now).
        /// `Ok(Err(local))` when it crosses no link: the caller moves the bytes itself and waits
        /// `local.latency`.
        pub fn start(&mut self, f: &mut Fabric, s: FlowStart) -> Result<Result<u32, Local>, Failure> {
            let header = TlpHeader::request(f.requester_rid(s.who), s.addr, s.access, s.len.min(u32::MAX as u64) as u32);
            // A timing-only flow lands nothing: it needs its route only for its paths.
            let (route, carried) = if s.carries_data { f.route_to_carry(s.who, &header) } else { (f.route_tlp(s.who, &header), None) };
            let p = plan_route(f, &route)?;
            let started = self.start_plan(p, s);
            if let (Ok(id), Some(carried)) = (&started, carried) {
                if let Some(info) = self.flows[*id as usize].as_mut() {
                    info.route = Some(carried);
                }
            }
            Ok(started)
        }

        /// As [`Core::start`], along a plan the caller made (a message routed by its type, not by
        /// an address).
        pub fn start_plan(&mut self, p: Plan, s: FlowStart) -> Result<u32, Local> {
            let FlowStart { owner, who, addr, access, len, data, carries_data, token, at } = s;
            if p.request.stages.is_empty() {
                let mem = if access == Access::Read { p.request.target_latency } else { 0 };
                return Err(Local { latency: p.request.origin_latency + mem });
            }
            let (path, cpl) = self.load(p);
            let kind = if access == Access::Read { FlowKind::Read } else { FlowKind::Write };
            let opts = FlowOpts { notify: true, data: carries_data, ..FlowOpts::default() };
            let id = self.sim.add_flow_with(kind, path, cpl, len, at.max(self.sim.now()), opts);
            let info = FlowInfo { owner, who, addr, access, data, carries_data, streamed: false, token, fault: None, route: None };
            let slot = id as usize;
            if self.flows.len() <= slot {
                self.flows.resize_with(slot + 1, || None);
            }
            self.flows[slot] = Some(info);
            Ok(id)
        }

        /// The flow has ended: forget it, and give its owner what it learns.
        pub fn finish(&mut self, flow: u32) -> (Owner, FlowDone) {
            let info = self.flows[flow as usize].take().expect("a flow ends once");
            let end = self.sim.flow_end(flow).unwrap_or(self.sim.now());
            self.sim.release_flow(flow);
            (info.owner, FlowDone { token: info.token, addr: info.addr, access: info.access, data: info.data, fault: info.fault, end })
        }
    }
}

// ## 4. The run loop: each event, a write landing, a read served, a thread resumed

impl<W: World> Machine<W> {
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
                    self.error.get_or_insert(spawn::failed(&name, e));
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

// ## 5. A device: its DMA

mod device {
    //! Devices as actors on the one clock.
    //!
    //! The interface follows what SimBricks gives a device model (issue DMA, schedule an event, read
    //! the clock) and gem5's DMA device (a DMA completes with an event), with rust-vmm's view of MMIO
    //! (the device is told which BAR and offset were written): a device is told when a write TLP
    //! reaches one of its BARs, at that moment, after the bytes are in the BAR's memory; it issues
    //! DMA reads and writes that travel as flows on the shared simulation and is called back when
    //! the last write has landed or all the read data has returned (and, if it wants, when the
    //! last TLP has left it: posted writes ordered behind it may go); it sets timers for its internal
    //! latencies. Register state lives in the BAR memory of the fabric, so CPU reads of registers
    //! need no call into the device.

    use super::core::{Core, FlowDone, FlowStart, Owner};
    use super::World;
    use crate::queue::Ps;
    use devlend_fabric::model::FuncId;
    use devlend_fabric::route::{Failure, Requester};
    use devlend_fabric::Fabric;
    use devlend_wire::{Access, Tlp};
    use std::collections::HashMap;

    /// A device model on the machine. Every method has a do-nothing default.
    pub trait Device<W: World> {
        /// A write TLP reached `offset` of BAR `bar`: `tlp` carries its requester ID, the bus
        /// address it arrived with, its length and payload (already in the BAR's memory).
        fn mmio_write(&mut self, cx: &mut Cx<W>, bar: u8, offset: u64, tlp: &Tlp) {
            let _ = (cx, bar, offset, tlp);
        }
        /// A DMA this device started has ended (or stopped at a fault).
        fn dma_done(&mut self, cx: &mut Cx<W>, done: FlowDone) {
            let _ = (cx, done);
        }
        /// `data`, the bytes at `offset` of a streamed read ([`Cx::dma_read_streamed_after`]) this
        /// device started with `token`, as its completer serves each request (the order the requests
        /// reach it, not necessarily address order). Nothing comes once the read has failed.
        fn dma_data(&mut self, cx: &mut Cx<W>, token: u64, offset: u64, data: &[u8]) {
            let _ = (cx, token, offset, data);
        }
        /// A DMA this device started has sent its last TLP out of the device (`token` as given to
        /// the DMA): for a posted write, the moment hardware may issue a write ordered behind it.
        /// Not called for a DMA stopped by a fault before it had sent everything.
        fn dma_sent(&mut self, cx: &mut Cx<W>, token: u64) {
            let _ = (cx, token);
        }
        /// A timer this device set has fired.
        fn timer(&mut self, cx: &mut Cx<W>, token: u64) {
            let _ = (cx, token);
        }
    }

    /// What a device sees while it acts: the clock, the world, and DMA and timers.
    pub struct Cx<'a, W: World> {
        pub(crate) world: &'a mut W,
        pub(crate) core: &'a mut Core,
        pub(crate) dev: usize,
        pub(crate) func: FuncId,
        /// The machine's device models by function, for [`Cx::signal`].
        pub(crate) peers: &'a HashMap<FuncId, usize>,
    }

    impl<W: World> Cx<'_, W> {
        pub fn now(&self) -> Ps {
            self.core.now()
        }

        pub fn world(&mut self) -> &mut W {
            self.world
        }

        pub fn fabric(&mut self) -> &mut Fabric {
            self.world.fabric()
        }

        /// The function this device is.
        pub fn func(&self) -> FuncId {
            self.func
        }

        /// DMA-write `data` to bus address `addr` as this function; [`Device::dma_done`] gets `token`.
        /// An address that cannot be reached at all is refused at once (and recorded by the fabric).
        pub fn dma_write(&mut self, addr: u64, data: Vec<u8>, token: u64) -> Result<(), Failure> {
            self.dma_write_after(0, addr, data, token)
        }

        /// DMA-read `len` bytes at bus address `addr`; the data comes with [`Device::dma_done`].
        pub fn dma_read(&mut self, addr: u64, len: u64, token: u64) -> Result<(), Failure> {
            self.dma_read_after(0, addr, len, token)
        }

        /// As [`Cx::dma_write`], the first TLP leaving the device `delay` from now (the device's own
        /// time to issue it); the route is decided now.
        pub fn dma_write_after(&mut self, delay: Ps, addr: u64, data: Vec<u8>, token: u64) -> Result<(), Failure> {
            let len = data.len() as u64;
            self.dma(delay, addr, Access::Write, len, data, true, token).map(drop)
        }

        /// As [`Cx::dma_read`], the first request leaving the device `delay` from now.
        pub fn dma_read_after(&mut self, delay: Ps, addr: u64, len: u64, token: u64) -> Result<(), Failure> {
            self.dma(delay, addr, Access::Read, len, vec![0; len as usize], true, token).map(drop)
        }

        /// As [`Cx::dma_read_after`], but each request's bytes go to [`Device::dma_data`] as the
        /// completer serves them, and [`Device::dma_done`] gets no data: a device that writes read
        /// data into its own memory (a GPU's copy engine) holds no copy of the whole transfer.
        pub fn dma_read_streamed_after(&mut self, delay: Ps, addr: u64, len: u64, token: u64) -> Result<(), Failure> {
            let flow = self.dma(delay, addr, Access::Read, len, Vec::new(), true, token)?;
            if let Some(f) = self.core.flows[flow as usize].as_mut() {
                f.streamed = true;
            }
            Ok(())
        }

        /// Start the flow (moving `data` TLP by TLP where it `carries_data`); its id.
        #[allow(clippy::too_many_arguments)] // the fields of the `FlowStart` it makes, but the owner and requester (its own)
        pub(super) fn dma(&mut self, delay: Ps, addr: u64, access: Access, len: u64, data: Vec<u8>, carries_data: bool, token: u64) -> Result<u32, Failure> {
            let who = Requester::Func(self.func);
            let owner = Owner::Device(self.dev);
            let at = self.core.now() + delay;
            let f = self.world.fabric();
            match self.core.start(f, FlowStart { owner, who, addr, access, len, data, carries_data, token, at }) {
                Ok(Ok(flow)) => Ok(flow),
                Ok(Err(_)) => {
                    // A device addressing itself crosses no link: peer-to-peer inside one function is not modelled.
                    let fail = Failure::Unsupported {
                        node: f.func(self.func).node,
                        host: f.func_host(self.func),
                        addr,
                        why: "a device's DMA to itself crosses no link",
                    };
                    f.record(fail);
                    Err(fail)
                }
                Err(e) => {
                    f.record(e);
                    Err(e)
                }
            }
        }
    }
}

#[cfg(test)]
mod route_tests;
#[cfg(test)]
mod tests;
