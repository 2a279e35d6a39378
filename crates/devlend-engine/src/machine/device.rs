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
use crate::sim::build_path;
use crate::Plan;
use devlend_fabric::model::FuncId;
use devlend_fabric::route::{Failure, Outcome, Requester};
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

    /// Whether every part of `len` bytes at `addr` routes for this function now
    /// (`Fabric::check_transfer`: per IOMMU page, NTB window or segment, and target); nothing
    /// is recorded. What [`Cx::dma_timed_after`] needs.
    pub fn transfer_routes(&mut self, addr: u64, len: u64, access: Access) -> bool {
        self.world.fabric().check_transfer(Requester::Func(self.func), addr, len, access).is_ok()
    }

    /// A DMA of `len` bytes at `addr`, timed as [`Cx::dma_write_after`] or [`Cx::dma_read_after`]
    /// would time it, carrying no bytes: nothing is read from or written to the fabric's memory, no
    /// BAR write reaches a device model, [`Device::dma_data`] is not called, [`FlowDone::data`]
    /// is empty and `Machine::moved` does not count it. For a device whose workload asks only for
    /// timing. Such a flow sees no fault after it has started (no TLP is checked where it lands):
    /// start one only where [`Cx::transfer_routes`] says the whole transfer routes.
    pub fn dma_timed_after(&mut self, delay: Ps, addr: u64, access: Access, len: u64, token: u64) -> Result<(), Failure> {
        self.dma(delay, addr, access, len, Vec::new(), false, token).map(drop)
    }

    /// As [`Cx::dma_write`], sent by `func`, another function of the same chip that this model
    /// also serves (added to the machine for it too): an NTB's doorbell store lands in one NT
    /// endpoint and the interrupt leaves from the other.
    pub fn dma_write_as(&mut self, func: FuncId, addr: u64, data: Vec<u8>, token: u64) -> Result<(), Failure> {
        let mine = std::mem::replace(&mut self.func, func);
        let len = data.len() as u64;
        let out = self.dma(0, addr, Access::Write, len, data, true, token);
        self.func = mine;
        out.map(drop)
    }

    /// Send a 4-byte message TLP from this function to its host's root complex (an
    /// Assert_INTx): a flow on the machine's links, so it queues behind the data on them;
    /// [`Device::dma_done`] gets `token` when it reaches the root (or stops at a fault). A message
    /// is routed to the root by its type (PCIe Base 3.0 §2.2.8.1), not by an address: it takes
    /// the upstream ports a write to the host's MSI page takes, whatever the root then does with
    /// such a write (interrupt remapping refusing a compatibility-format one). Nothing lands.
    pub fn message_to_root(&mut self, token: u64) -> Result<(), Failure> {
        let f = self.world.fabric();
        let who = Requester::Func(self.func);
        let addr = f.host(f.func_host(self.func)).msi.start;
        let route = f.route_uncached(who, addr, Access::Write);
        if let Outcome::Failed(e) = route.outcome {
            if !matches!(e, Failure::Interrupt { .. }) {
                return Err(e);
            }
        }
        let plan = Plan { request: build_path(f, &route, false), completion: None };
        let (owner, at) = (Owner::Device(self.dev), self.core.now());
        let started =
            self.core.start_plan(plan, FlowStart { owner, who, addr, access: Access::Write, len: 4, data: Vec::new(), carries_data: false, token, at });
        started.map(drop).map_err(|_| Failure::Unsupported {
            node: f.func(self.func).node,
            host: f.func_host(self.func),
            addr,
            why: "a message from a root complex to itself crosses no link",
        })
    }

    /// Start the flow (moving `data` TLP by TLP where it `carries_data`); its id.
    #[allow(clippy::too_many_arguments)] // the fields of the `FlowStart` it makes, but the owner and requester (its own)
    fn dma(&mut self, delay: Ps, addr: u64, access: Access, len: u64, data: Vec<u8>, carries_data: bool, token: u64) -> Result<u32, Failure> {
        let who = Requester::Func(self.func);
        let owner = Owner::Device(self.dev);
        let at = self.core.now() + delay;
        let f = self.world.fabric();
        match self.core.start(f, FlowStart { owner, who, addr, access, len, data, carries_data, token, at }) {
            Ok(Ok(flow)) => Ok(flow),
            Ok(Err(_)) => {
                // A device addressing itself crosses no link: peer-to-peer inside one function is not modelled.
                let fail =
                    Failure::Unsupported { node: f.func(self.func).node, host: f.func_host(self.func), addr, why: "a device's DMA to itself crosses no link" };
                f.record(fail);
                Err(fail)
            }
            Err(e) => {
                f.record(e);
                Err(e)
            }
        }
    }

    /// Call the [`Device::timer`] of the device model that is function `func` with `token` after
    /// `delay`: a signal on a wire between two devices that is not PCIe (an InfiniBand cable
    /// between two HCAs). False when no model is function `func`.
    pub fn signal(&mut self, func: FuncId, delay: Ps, token: u64) -> bool {
        let Some(&d) = self.peers.get(&func) else { return false };
        let at = self.core.now() + delay;
        self.core.set_timer(at, Owner::Device(d), token);
        true
    }

    /// Call [`Device::timer`] with `token` after `delay`.
    pub fn set_timer(&mut self, delay: Ps, token: u64) {
        let at = self.core.now() + delay;
        self.core.set_timer(at, Owner::Device(self.dev), token);
    }
}
