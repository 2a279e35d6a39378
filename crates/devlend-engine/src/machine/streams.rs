//! Timing-only flows, which carry no bytes: a machine's streams ([`Machine::stream`], the load a
//! benchmark or another tenant puts on the links, and what became of each, [`StreamResult`]) and
//! a device's timing-only DMA ([`Cx::dma_timed_after`], started where [`Cx::transfer_routes`]
//! says the whole transfer routes).

use super::core::{FlowStart, Owner};
use super::error::{MachineError, Unrunnable};
use super::{Cx, Machine, World};
use crate::queue::Ps;
use devlend_fabric::route::{Failure, Requester};
use devlend_wire::Access;

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

impl<W: World> Machine<W> {
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
}

impl<W: World> Cx<'_, W> {
    /// Whether every part of `len` bytes at `addr` routes for this function now
    /// (`Fabric::check_transfer`: per IOMMU page, NTB window or segment, and target); nothing
    /// is recorded. What [`Cx::dma_timed_after`] needs.
    pub fn transfer_routes(&mut self, addr: u64, len: u64, access: Access) -> bool {
        self.world.fabric().check_transfer(Requester::Func(self.func), addr, len, access).is_ok()
    }

    /// A DMA of `len` bytes at `addr`, timed as [`Cx::dma_write_after`] or [`Cx::dma_read_after`]
    /// would time it, carrying no bytes: nothing is read from or written to the fabric's memory, no
    /// BAR write reaches a device model, [`Device::dma_data`](super::Device::dma_data) is not called, [`FlowDone::data`](super::FlowDone::data)
    /// is empty and `Machine::moved` does not count it. For a device whose workload asks only for
    /// timing. Such a flow sees no fault after it has started (no TLP is checked where it lands):
    /// start one only where [`Cx::transfer_routes`] says the whole transfer routes.
    pub fn dma_timed_after(&mut self, delay: Ps, addr: u64, access: Access, len: u64, token: u64) -> Result<(), Failure> {
        self.dma(delay, addr, access, len, Vec::new(), false, token).map(drop)
    }
}
