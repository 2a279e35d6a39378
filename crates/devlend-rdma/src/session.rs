//! The library's one machine: a [`Shmem`] session owns the fabric inside one `Machine` for as long
//! as the library is used, so every blocking call, every `quiet` and every tool run goes on the
//! same clock, one after another (OpenSHMEM's `shmem_init` to `shmem_finalize`).
//!
//! The DMA engine and the NT registers are devices on it, added once; the fabric is reached
//! timelessly between calls through [`Shmem::fabric`]. A call spawns its threads at the machine's
//! present time and runs until nothing is left to happen, so the next call starts on a drained
//! machine; a call that fails leaves a fresh machine behind (what was in flight is dropped, the
//! fabric and the devices are kept), as a call on a machine of its own did.

use crate::driver;
use crate::error::RResult;
use devlend_devices::plx_dma::DmaEngine;
use devlend_devices::plx_ntregs::NtRegs;
use devlend_engine::machine::{Device, Machine};
use devlend_engine::queue::Ps;
use devlend_engine::sim::PortStats;
use devlend_fabric::model::FuncId;
use devlend_fabric::Fabric;
use std::cell::{RefCell, RefMut};
use std::rc::Rc;

/// A device model the session keeps on its machine.
type Model = Rc<RefCell<dyn Device<Fabric>>>;

/// The fabric on the machine every call of the library runs on.
pub struct Shmem {
    m: Option<Machine<Fabric>>,
    devices: Vec<(FuncId, Model)>,
    ntregs: Vec<Rc<RefCell<NtRegs>>>,
}

/// Where a call's run started: its time and the link statistics then.
pub struct Start {
    pub at: Ps,
    ports: Vec<PortStats>,
}

impl Shmem {
    pub fn new(f: Fabric) -> Shmem {
        Shmem { m: Some(Machine::new(f)), devices: Vec::new(), ntregs: Vec::new() }
    }

    /// Timeless access to the fabric between calls.
    pub fn fabric(&self) -> RefMut<'_, Fabric> {
        self.machine_ref().world()
    }

    /// The machine, to spawn a call's threads on (then [`Shmem::run`]).
    pub fn machine(&mut self) -> &mut Machine<Fabric> {
        self.m.as_mut().expect("the session always holds a machine")
    }

    fn machine_ref(&self) -> &Machine<Fabric> {
        self.m.as_ref().expect("the session always holds a machine")
    }

    pub fn now(&self) -> Ps {
        self.machine_ref().now()
    }

    /// The fabric back, the session over.
    pub fn into_fabric(mut self) -> Fabric {
        let m = self.m.take().expect("the session always holds a machine");
        m.into_world().unwrap_or_else(|_| panic!("no device model keeps the fabric after a run"))
    }

    /// Put a device model on the machine as function `func`, for the rest of the session.
    pub fn add_device(&mut self, func: FuncId, dev: Model) {
        self.machine().add_device(func, dev.clone());
        self.devices.push((func, dev));
    }

    /// The DMA engine as a device, once (a second attach of the same function replaces it).
    pub(crate) fn add_engine(&mut self, engine: &Rc<RefCell<DmaEngine>>) {
        let func = engine.borrow().func;
        self.devices.retain(|(f, _)| *f != func);
        self.add_device(func, engine.clone());
    }

    /// The NT registers of adapter `ntb`'s NTB on the machine, in step with the NTB's state now
    /// (its doorbells and scratchpads may have changed timelessly since the last call). Added once
    /// per NTB; later calls bring the held model up to date.
    pub fn nt_regs(&mut self, ntb: u32) -> RResult<()> {
        let fresh = NtRegs::new(&mut self.fabric(), ntb)?;
        let funcs = fresh.funcs();
        if let Some(held) = self.ntregs.iter().find(|r| r.borrow().funcs().contains(&funcs[0])) {
            *held.borrow_mut() = fresh;
            return Ok(());
        }
        let dev = Rc::new(RefCell::new(fresh));
        for func in funcs {
            self.add_device(func, dev.clone());
        }
        self.ntregs.push(dev);
        Ok(())
    }

    /// Mark the start of a call: threads spawn at `start.at`.
    pub fn start(&self) -> Start {
        Start { at: self.now(), ports: self.machine_ref().port_stats() }
    }

    /// Run until nothing is left to happen. On failure the machine is replaced by a fresh one.
    pub fn run(&mut self) -> RResult<()> {
        let r = driver::run(self.machine());
        if r.is_err() {
            self.reset();
        }
        r
    }

    /// The busiest link direction's time spent serialising TLPs since `start`, in ps.
    pub fn busiest_since(&self, start: &Start) -> u64 {
        let now = self.machine_ref().port_stats();
        now.iter().zip(&start.ports).map(|(n, s)| n.busy_ps - s.busy_ps).max().unwrap_or(0)
    }

    fn reset(&mut self) {
        let m = self.m.take().expect("the session always holds a machine");
        let f = m.into_world().unwrap_or_else(|_| panic!("no device model keeps the fabric after a run"));
        let mut m = Machine::new(f);
        for (func, dev) in &self.devices {
            m.add_device(*func, dev.clone());
        }
        self.m = Some(m);
    }
}
