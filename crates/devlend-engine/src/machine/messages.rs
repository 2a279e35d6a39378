//! A device speaking for its chip, off the walk of one access: a message TLP to its host's root
//! complex, routed by its type (an Assert_INTx, PCIe Base 3.0 §2.2.8.1: [`Cx::message_to_root`]),
//! and a write sent as another function of the same chip ([`Cx::dma_write_as`], an NTB's
//! doorbell).

use super::core::{FlowStart, Owner};
use super::{Cx, World};
use crate::sim::build_path;
use crate::Plan;
use devlend_fabric::model::FuncId;
use devlend_fabric::route::{Failure, Outcome, Requester};
use devlend_wire::Access;

impl<W: World> Cx<'_, W> {
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
    /// [`Device::dma_done`](super::Device::dma_done) gets `token` when it reaches the root (or stops at a fault). A message
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
}
