//! From a functional route (devlend-fabric) to the timed stages a TLP passes: one stage per link
//! crossed, with the latency of the component at its far end (switch, root complex, NTB) and what
//! happens there (IOMMU translation, re-splitting of reads at the root, delivery).

use crate::params::timing;
use crate::queue::Ps;
use devlend_fabric::model::{LinkId, NodeKind};
use devlend_fabric::route::{HopKind, Route};
use devlend_fabric::spec::LinkKind;
use devlend_fabric::Fabric;
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
    /// of the mapping's page size), so the engine's IOTLB caches whole 4 KiB or 2 MiB pages.
    pub iommu: Option<(u16, u64, u32)>,
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
}

/// Serialisation time of one byte on a port, in 1/65536 ps.
pub fn ps_per_byte_fp(gen: u8, width: u8) -> u64 {
    let bytes_per_s = Generation(gen).lane_bytes_per_s() * width as f64;
    (1e12 / bytes_per_s * 65536.0).round() as u64
}

pub fn propagation(kind: LinkKind) -> Ps {
    let t = timing();
    match kind {
        LinkKind::Slot => t.slot_prop_ps,
        LinkKind::Cable => t.cable_prop_ps_per_m * t.cable_length_m,
    }
}

pub fn build_path(f: &Fabric, r: &Route, is_read: bool) -> Path {
    let t = timing();
    let mut stages: Vec<Stage> = Vec::new();
    let mut origin_latency = 0;
    let hops = &r.hops;
    for (i, h) in hops.iter().enumerate() {
        match h.kind {
            HopKind::Start => {
                if matches!(f.nodes[h.node as usize].kind, NodeKind::RootComplex) && i + 1 < hops.len() {
                    origin_latency = t.root_latency_ps;
                }
            }
            HopKind::Link => {
                let link = h.aux as LinkId;
                let towards_down = f.links[link as usize].down == h.node;
                stages.push(Stage { port: port_id(link, towards_down), latency: 0, cut_through: false, iommu: None, resplit: None, root: None });
            }
            HopKind::Forward => {
                if matches!(f.nodes[h.node as usize].kind, NodeKind::SwitchUp { .. } | NodeKind::SwitchDown { .. }) {
                    if let Some(s) = stages.last_mut() {
                        s.latency += t.switch_latency_ps;
                        s.cut_through = t.switch_cut_through;
                    }
                }
            }
            HopKind::Root => {
                let host = h.host;
                let continues = hops[i + 1..].iter().any(|x| x.kind == HopKind::Link);
                if let Some(s) = stages.last_mut() {
                    s.latency += t.root_latency_ps;
                    s.root = Some(host);
                    let split = f.hosts[host as usize].cpu.read_split_bytes;
                    if is_read && continues && split < t.max_read_request {
                        s.resplit = Some(split);
                    }
                }
            }
            HopKind::Iommu => {
                let iova = hops[i - 1].addr;
                if let Some(s) = stages.last_mut() {
                    s.iommu = Some((h.host, iova, h.aux.trailing_zeros()));
                }
            }
            HopKind::Ntb => {
                if let Some(s) = stages.last_mut() {
                    s.latency += t.ntb_latency_ps;
                }
            }
            HopKind::Deliver => {}
        }
    }
    let target_is_ram = matches!(r.outcome, devlend_fabric::Outcome::Delivered(devlend_fabric::Target::Ram { .. }));
    let target_latency = if target_is_ram { t.dram_latency_ps } else { t.endpoint_latency_ps };
    Path { stages, origin_latency, target_latency, target_is_ram }
}
