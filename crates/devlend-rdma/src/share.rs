//! Links shared by DMA channels that run at the same time.
//!
//! Each channel's own time comes from its accesses timed in program order on an idle fabric
//! ([`devlend_devices::time_ops`]): a channel with one read in flight is bound by the read round
//! trip, not by the link. Channels running together also share the links: together they cannot
//! finish before the busiest link direction has serialised every TLP they put on it. This module
//! counts that load from the channels' logged accesses (payload, TLP header and framing, DLLP
//! share, as the engine charges them: `[timing]`), so a batch of concurrent channels takes
//! `max(slowest channel, busiest link direction)`.

use devlend_devices::Op;
use devlend_engine::params::timing;
use devlend_engine::path::{ps_per_byte_fp, Path};
use devlend_fabric::Fabric;
use devlend_wire::{Access, TlpKind};
use std::collections::HashMap;

/// Serialisation time each link direction (port id) spends on the given accesses, in ps.
#[derive(Default, Debug, Clone)]
pub struct LinkLoad {
    fp: HashMap<u32, u128>,
}

impl LinkLoad {
    fn charge(&mut self, f: &Fabric, path: &Path, tlps: u64, wire: u64) {
        for s in &path.stages {
            let l = &f.links[(s.port / 2) as usize];
            *self.fp.entry(s.port).or_default() += (tlps * wire) as u128 * ps_per_byte_fp(l.gen, l.width) as u128;
        }
    }

    /// Add `bytes` of posted writes in TLPs of `tlp_bytes` payload along `path` (CPU stores).
    pub fn add_writes(&mut self, f: &Fabric, path: &Path, bytes: u64, tlp_bytes: u64) {
        let n = bytes.div_ceil(tlp_bytes).max(1);
        self.charge(f, path, 1, timing().overheads().stream_bytes(TlpKind::MemWrite, bytes, n));
    }

    /// Add the TLPs of `ops`: writes in max-payload pieces; reads as max-read-request requests on
    /// the request path and completions of the completer's size on the completion path.
    pub fn add(&mut self, f: &Fabric, ops: &[Op]) {
        let t = timing();
        let o = t.overheads();
        for op in ops {
            let Some(plan) = &op.plan else { continue };
            match op.access {
                Access::Write => {
                    let n = op.len.div_ceil(t.max_payload as u64).max(1);
                    self.charge(f, &plan.request, 1, o.stream_bytes(TlpKind::MemWrite, op.len, n));
                }
                Access::Read => {
                    let reqs = op.len.div_ceil(t.max_read_request as u64).max(1);
                    self.charge(f, &plan.request, reqs, o.wire_bytes(TlpKind::MemRead, 0));
                    if let Some(c) = &plan.completion {
                        let piece = if plan.request.target_is_ram { t.ram_completion_bytes } else { t.max_payload } as u64;
                        let n = op.len.div_ceil(piece).max(1);
                        self.charge(f, c, 1, o.stream_bytes(TlpKind::Completion, op.len, n));
                    }
                }
            }
        }
    }

    /// The busiest link direction's serialisation time, in ps.
    pub fn busiest_ps(&self) -> u64 {
        (self.fp.values().copied().max().unwrap_or(0) >> 16) as u64
    }
}
