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
    free_timers: Vec<u32>,
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

    /// A timer for `owner` at `at`; the number it returns cancels it ([`Core::cancel_timer`]).
    pub fn set_timer(&mut self, at: Ps, owner: Owner, token: u64) -> u32 {
        let id = match self.free_timers.pop() {
            Some(i) => {
                self.timers[i as usize] = Some((owner, token));
                i
            }
            None => {
                self.timers.push(Some((owner, token)));
                self.timers.len() as u32 - 1
            }
        };
        self.sim.set_timer(at, id as u64)
    }

    /// Take a timer [`Core::set_timer`] set out before it fires (nothing if it has fired).
    pub fn cancel_timer(&mut self, timer: u32) {
        if let Some(id) = self.sim.cancel_timer(timer) {
            self.take_timer(id);
        }
    }

    pub fn take_timer(&mut self, id: u64) -> (Owner, u64) {
        self.free_timers.push(id as u32);
        self.timers[id as usize].take().expect("a timer fires once")
    }

    /// The flow has ended: forget it, and give its owner what it learns.
    pub fn finish(&mut self, flow: u32) -> (Owner, FlowDone) {
        let info = self.flows[flow as usize].take().expect("a flow ends once");
        let end = self.sim.flow_end(flow).unwrap_or(self.sim.now());
        self.sim.release_flow(flow);
        (info.owner, FlowDone { token: info.token, addr: info.addr, access: info.access, data: info.data, fault: info.fault, end })
    }
}
