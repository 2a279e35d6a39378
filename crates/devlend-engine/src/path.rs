//! The timed path's types and the links' rates. A [`Path`] is the stages a TLP passes, one per
//! link crossed ([`Stage`]: the port, the latency of the component at its far end, what happens
//! there: IOMMU translation, re-splitting of reads at the root), with what the path may carry
//! ([`Limits`]); `sim`'s `build_path` makes one from a functional route (devlend-fabric), and
//! [`crate::plan_route`] a flow's request and completion paths. The rest is per link direction
//! ([`PortId`]): serialisation time per byte after encoding and the link layer's share (SKP
//! ordered sets and DLLPs, PCIe Base 3.0 §3.5.3.1, §2.6.1.2, §4.2), a PCI-X bus's rate, the Ack
//! and UpdateFC period, and propagation.

use crate::params::{timing, Timing};
use crate::queue::Ps;
use devlend_fabric::model::LinkId;
use devlend_fabric::spec::LinkKind;
use devlend_wire::Generation;

/// A link direction: `link * 2 + 0` downstream (towards the link's `down` end), `+ 1` upstream.
pub type PortId = u32;

pub fn port_id(link: LinkId, towards_down: bool) -> PortId {
    link * 2 + if towards_down { 0 } else { 1 }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stage {
    pub port: PortId,
    /// Latency of the component reached, charged after arrival.
    pub latency: Ps,
    pub cut_through: bool,
    /// The IOMMU of this host translates here: (host, address the TLP carries at this stage, log2
    /// of the mapping's page size, table entries a cold walk reads), so the engine's IOTLB caches
    /// whole 4 KiB or 2 MiB pages and a walk reads the levels the host's table has.
    pub iommu: Option<(u16, u64, u32, u32)>,
    /// The root complex re-splits reads here into requests of this many bytes (000 §7.1).
    pub resplit: Option<u32>,
    /// The root complex (of this host) reached here, for splitting completion paths.
    pub root: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Path {
    pub stages: Vec<Stage>,
    /// Delay before the first link (a CPU request crossing its own root complex).
    pub origin_latency: Ps,
    /// The target's own latency (DRAM, device memory), for requests.
    pub target_latency: Ps,
    pub target_is_ram: bool,
    pub limits: Limits,
}

/// What one path may carry, from the fabric's effective parameters (`Fabric::tuning`), read once
/// per path so that the engine does no lookup per TLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// The smallest Max_Payload_Size of the links crossed (PCIe Base 3.0 §2.2.2).
    pub max_payload: u32,
    /// The requester's Max_Read_Request_Size and tags.
    pub max_read_request: u32,
    pub read_tags: u32,
    /// Completions of a read are split into pieces of this size: the RAM's host's read completion
    /// size, or for device memory the path's max payload.
    pub completion_bytes: u32,
    /// The tag pool of the root complex that re-splits reads on this path, if one does.
    pub root_tags: u32,
    pub iotlb_hit_ps: Ps,
    /// A write to RAM: the host whose root complex takes it in, and its intake time per 64-byte
    /// line and per TLP (`ram_write_line_ps`, `ram_write_tlp_ps`; one write after another at that root).
    pub ram_write: Option<(u16, Ps, Ps)>,
}

/// Serialisation time of one byte on a port, in 1/65536 ps.
pub fn ps_per_byte_fp(gen: u8, width: u8) -> u64 {
    let bytes_per_s = Generation(gen).lane_bytes_per_s() * width as f64;
    (1e12 / bytes_per_s * 65536.0).round() as u64
}

/// A PCI-X bus's rate in the engine's fixed point (ps per byte << 16): one data phase of
/// `pcix_bytes_per_clock` bytes per clock.
pub fn pcix_ps_per_byte_fp(t: &Timing) -> u64 {
    (t.pcix_clock_ps << 16) / t.pcix_bytes_per_clock.max(1)
}

/// How often the receiver of a link sends an Ack (and an UpdateFC per credit type) while it is
/// busy: the AckNak latency limit of PCIe Base 3.0 §3.5.3.1 for the link's rate, width and
/// Max_Payload_Size, scaled by `dllp_timer_pct`, in ps.
pub fn dllp_period_ps(t: &Timing, gen: u8, width: u8, mps: u32) -> Ps {
    let symbols = devlend_wire::dllp::ack_latency_symbols(Generation(gen), width, mps) as f64;
    let symbol_ps = 1e12 / Generation(gen).lane_bytes_per_s();
    (symbols * symbol_ps * t.dllp_timer_pct as f64 / 100.0).round() as Ps
}

/// The share of one link direction's symbol times that carries no TLP, whichever way the data
/// flows: SKP ordered sets (`devlend_wire::dllp::skp_share`, on every lane) and the data link
/// layer's Ack and UpdateFC DLLPs, one of each per AckNak latency period of the link's
/// generation, width and Max_Payload_Size (§3.5.3.1, §2.6.1.2; `devlend_wire::dllp`). A DLLP is
/// striped over the lanes like a TLP (§4.2.1.1 byte striping, §4.2.2.1 framing tokens), so its
/// `dllp_bytes` take `dllp_bytes / width` symbol times of the period's symbol times. (pcie-model
/// divides the DLLP's bytes by the period's symbol times without the width, which charges a Gen3
/// x8 link 8 % instead of 1 % and makes a Gen2 x16 link slower than a Gen3 x8 one.) The engine's
/// DLLPs on the reverse direction (`dllp_period_ps`) are the ones a receiver sends for the TLPs
/// it took in; this share is what a one-way stream's own direction loses besides.
pub fn link_layer_share(t: &Timing, gen: u8, width: u8, mps: u32) -> f64 {
    let g = Generation(gen);
    let period = devlend_wire::dllp::ack_latency_symbols(g, width, mps) as f64;
    devlend_wire::dllp::skp_share(g) + 2.0 * t.dllp_bytes as f64 / width.max(1) as f64 / period
}

/// A PCIe link direction's rate in the engine's fixed point, less its link-layer share.
pub fn link_ps_per_byte_fp(t: &Timing, gen: u8, width: u8, mps: u32) -> u64 {
    (ps_per_byte_fp(gen, width) as f64 / (1.0 - link_layer_share(t, gen, width, mps))).round() as u64
}

/// Propagation on a link of the default parameters.
pub fn propagation(kind: LinkKind) -> Ps {
    link_propagation(timing(), kind, timing().cable_length_m)
}

pub fn link_propagation(t: &Timing, kind: LinkKind, cable_length_m: u64) -> Ps {
    match kind {
        LinkKind::Slot => t.slot_prop_ps,
        LinkKind::Cable => t.cable_prop_ps_per_m * cable_length_m,
        LinkKind::Pcix => t.slot_prop_ps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes per second a link direction carries for TLPs after its link-layer share.
    fn rate(gen: u8, width: u8, mps: u32) -> f64 {
        65536.0 * 1e12 / link_ps_per_byte_fp(timing(), gen, width, mps) as f64
    }

    #[test]
    fn a_link_with_a_higher_raw_rate_is_never_slower() {
        // Gen2 x16 (64 Gb/s raw) against Gen3 x8 (63.0 Gb/s) and Gen3 x16 (126 Gb/s), and every
        // generation and width against every other, at each Max_Payload_Size.
        let links: Vec<(u8, u8)> = (1..=5).flat_map(|g| [1, 2, 4, 8, 12, 16].map(|w| (g, w))).collect();
        for mps in [128, 256, 512, 1024, 2048, 4096] {
            for &(ga, wa) in &links {
                for &(gb, wb) in &links {
                    let raw = |g: u8, w: u8| Generation(g).lane_bytes_per_s() * w as f64;
                    if raw(ga, wa) > raw(gb, wb) {
                        assert!(rate(ga, wa, mps) > rate(gb, wb, mps), "Gen{ga} x{wa} vs Gen{gb} x{wb} at MPS {mps}");
                    }
                }
            }
        }
        assert!(rate(2, 16, 256) > rate(3, 8, 256) && rate(3, 16, 256) > rate(2, 16, 256));
    }

    #[test]
    fn the_link_layer_share_is_a_few_percent_at_most() {
        // SKP ordered sets and two DLLPs striped over the lanes per AckNak period: at most the
        // x1 link's share at the smallest payload (2 x 8 symbol times per 237, Gen1 MPS 128: 7.0 %).
        for g in 1..=5 {
            for w in [1, 2, 4, 8, 12, 16] {
                for mps in [128, 256, 512, 1024, 2048, 4096] {
                    let s = link_layer_share(timing(), g, w, mps);
                    assert!(s > 0.0 && s < 0.075, "Gen{g} x{w} MPS {mps}: {s}");
                }
            }
        }
    }
}
