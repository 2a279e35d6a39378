//! Building a simulation, before any path or flow: its ports (link directions) with their rates,
//! propagation and receive buffers per traffic class, every record empty ([`Sim::new`],
//! [`Sim::tuned`]); a PCI-X bus's two directions made one half-duplex serialiser
//! ([`Sim::set_half_duplex`]). The data link layer's periods are set in `dllp`
//! (`Sim::set_dllp_periods`). Off the path a TLP takes: called once per simulation (`sim_for`).

use super::dllp::{Dllps, NEVER};
use super::stats::{PortStats, Stats, Tally};
use super::{Port, PortId, Ps, Sim, Timing, NONE};
use crate::params::timing;
use crate::queue::{EventQueue, Waiting};
use std::collections::HashMap;
use std::sync::Arc;

impl Sim {
    /// `ports`: (fixed-point ps per byte, propagation) for every PortId the paths use; the
    /// default parameters.
    pub fn new(ports: Vec<(u64, Ps)>) -> Sim {
        let credits = vec![timing().rx_buffer_tlps; ports.len()];
        Sim::tuned(ports, credits, devlend_fabric::tuning::default_timing().clone())
    }

    /// As [`Sim::new`], with each port's receive buffers per traffic class (`credits`, by PortId)
    /// and the fabric's parameters `t`.
    pub fn tuned(ports: Vec<(u64, Ps)>, credits: Vec<u32>, t: Arc<Timing>) -> Sim {
        let n = ports.len();
        let ports = ports
            .into_iter()
            .zip(credits)
            .map(|((fp, prop), credits)| Port {
                busy_until: 0,
                wake: NONE,
                fp_ps_per_byte: fp,
                prop,
                header_ps: ((t.overheads().header_bytes() * fp) >> 16) + prop,
                bus_txn_ps: NONE,
                heads: [NONE; 3],
                credits: [credits; 3],
                queues: Default::default(),
                tails: [0; 3],
                returns: Default::default(),
                held: [false; 3],
                dllps: Dllps { period: 0, ser: 0, due: [NONE; 4], gate: 0, sent: 0, peer_ack: NEVER },
                tally: Tally { stats: PortStats::default(), stalled_since: NONE },
            })
            .collect();
        Sim {
            overheads: t.overheads(),
            t,
            q: EventQueue::default(),
            now: 0,
            ports,
            last_posted: vec![0; n],
            ram_intake: Vec::new(),
            fifo: Waiting::default(),
            slots: Vec::new(),
            paths: Vec::new(),
            hops: Vec::new(),
            hop_iommu: Vec::new(),
            first_hop: Vec::new(),
            tlps: Vec::new(),
            free_tlps: Vec::new(),
            flows: Vec::new(),
            free_flows: Vec::new(),
            reqs: Vec::new(),
            free_reqs: Vec::new(),
            root_tags: HashMap::new(),
            iotlb: Vec::new(),
            stats: Stats::default(),
            sub_cpl: HashMap::new(),
            sub_key: HashMap::new(),
            timers: Vec::new(),
            free_timers: Vec::new(),
            #[cfg(test)]
            check_wakes: false,
        }
    }

    /// Make the link of port `p` (ports `p` and `p ^ 1`) a half-duplex bus such as PCI-X: one
    /// transaction at a time in either direction, each taking `txn_ps` for its address,
    /// attribute and response phases and turnaround, then its payload at the port's rate (no
    /// PCIe framing, no DLLPs).
    pub fn set_half_duplex(&mut self, p: PortId, txn_ps: Ps) {
        for q in [p, p ^ 1] {
            self.ports[q as usize].bus_txn_ps = txn_ps;
        }
    }
}
