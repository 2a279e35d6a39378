//! What the simulation counts, off the path a TLP takes: per port (link direction) the TLPs and
//! bytes it carried and the time it was busy, queued and stalled on flow-control credits
//! ([`PortStats`], added to as each TLP is sent in `Sim::try_tx`, one cache line per port:
//! `Tally`), the DLLPs' share added when they are read ([`Sim::port_stats`]), and the run's
//! totals ([`Stats`]).

use super::{Port, Ps, Sim};

/// Per link direction: what crossed it and how long it was busy or stalled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    pub tlps: u64,
    /// Bytes on the wire, overheads included.
    pub wire_bytes: u64,
    /// Data bytes carried (write and completion payloads).
    pub payload_bytes: u64,
    /// Time spent serialising TLPs.
    pub busy_ps: u64,
    /// Summed over TLPs: from ready to start of transmission (queueing, credits, the link busy).
    pub queue_ps: u64,
    /// Time with a TLP ready to go and no receiver buffer free for it (flow-control credits).
    pub credit_stall_ps: u64,
    /// Ack and UpdateFC DLLPs sent on this direction for the other one (their bytes are in
    /// `wire_bytes`, their time in `busy_ps`).
    pub dllps: u64,
}

/// What a port's sends add up, one cache line of the port's record (`Port`).
#[repr(C, align(64))]
pub(super) struct Tally {
    pub(super) stats: PortStats,
    /// Since when a ready TLP has been waiting for a receiver buffer, or NONE.
    pub(super) stalled_since: Ps,
}

#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub tlp_hops: u64,
    pub events: u64,
    pub iotlb_hits: u64,
    pub iotlb_misses: u64,
    /// Page-table entries read from DRAM by IOTLB misses.
    pub walk_reads: u64,
    pub resplit_requests: u64,
    /// Most TLP records alive at once (memory use).
    pub peak_tlps: usize,
}

impl Sim {
    /// Statistics of every port (link direction), indexed by `PortId`.
    pub fn port_stats(&self) -> Vec<PortStats> {
        let bytes = self.t.dllp_bytes as u64;
        let with_dllps = |Port { tally: t, dllps: d, .. }: &Port| PortStats {
            dllps: d.sent,
            busy_ps: t.stats.busy_ps + d.sent * d.ser as u64,
            wire_bytes: t.stats.wire_bytes + d.sent * bytes,
            ..t.stats
        };
        self.ports.iter().map(with_dllps).collect()
    }
}
