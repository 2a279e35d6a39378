//! NTB cluster switches (the Dolphin MXS824 class) and adapters with several peers.
//!
//! A cluster switch joins many hosts: each host has one NTB adapter whose cable port is cabled
//! to a port of the switch (`links: [{a: SWITCH.pN, b: NTB.cable, kind: cable}]`), and every
//! adapter on the switch reaches every other one: the adapters are each other's peers (Linux
//! `ntb_peer_port_count`, peer index `pidx`). A TLP entering an adapter's window crosses the
//! adapter (`timing.ntb_latency_ps`), its cable to the switch, the switch
//! (`timing.cluster_switch_latency_ps`) and the peer's cable; each cable is a link of its own in
//! the engine, so two flows into one host share that host's cable and slot link.
//!
//! How the real product divides its resources between peers, from Dolphin's documentation:
//! - The adapter maps remote memory through its prefetchable window (BAR 2): "when a remote
//!   segment with size 32MB is mapped, 32MB of the adapter's prefetch space is consumed until
//!   the segment is unmapped"; that space "is a shared resource for all concurrent use"
//!   (Dolphin eXpressWare MX guide, ch. 6.2, dolphinics.no/download/MX_5_X_X_WIN_DOC). devlend shares an adapter's windows the same
//!   way: every LUT segment of a window, and a direct window as a whole, leads to one peer at a
//!   time (`NtbState::out_peer`), and the lending layer allocates segments for all peers from
//!   the one adapter (`devlend-host` `lending::windows`).
//! - A PXH830 cabled directly to two hosts uses its cable ports as two links ("three cluster
//!   nodes can be connected using two PCI Express SFF-8644 cables ... x8 links between each
//!   host", Dolphin eXpressWare PX guide §3.4.2, PX_5_X_X_LIN_DOC): `cable_ports` in the NTB profile, ends `NTB.cable0`,
//!   `NTB.cable1`.
//! - Larger clusters go through a switch (PX guide: "up to 8 cluster nodes can be connected to
//!   a IXS600 switch"; the MXS824 has 24 x4 ports, combinable into x8 and x16).
//!
//! What the documents found do not say, and devlend assumes: how the switch routes between its
//! ports. devlend routes by destination: the LUT entry (or direct window) a TLP enters names the
//! peer, as multi-port NTB hardware under Linux's multi-peer API does (a LUT entry carries a
//! destination partition/port, e.g. IDT 89HPESxNTx, Linux `ntb_hw_idt`); the switch holds no
//! translation of its own and adds its forwarding latency. Each receiving adapter keeps one
//! inbound translation per (source adapter, window). Requester IDs from peer `pidx` take far-side
//! aliases `alias_base[pidx] + i + 1` on the receiving adapter's bus; all of an adapter's
//! aliases must fit one bus's 255 functions, which bounds the peers an adapter can have (seven
//! with the PXH830's 32 LUT entries), checked at build. Cascaded cluster switches are not modelled.

use crate::model::{LinkId, NodeId};

#[derive(Clone, Debug)]
pub struct ClusterSwitchInfo {
    pub name: String,
    pub profile: Option<String>,
    /// Port nodes (`NAME.pN`).
    pub ports: Vec<NodeId>,
    pub spec_path: String,
}

/// A link the description asks faster than its ends support, and what it trained to
/// (PCIe Base 3.0 §4.2.6: link training settles on the highest rate and width both ends support).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrainedDown {
    pub link: LinkId,
    /// JSON pointer of the link in the description.
    pub spec_path: String,
    pub asked: (u8, u8),
    pub trained: (u8, u8),
    /// The ends that limit it: component names with what they support.
    pub limited_by: Vec<String>,
}

impl TrainedDown {
    pub fn message(&self) -> String {
        format!(
            "link asked Gen{} x{} trains to Gen{} x{} ({} support no more)",
            self.asked.0,
            self.asked.1,
            self.trained.0,
            self.trained.1,
            self.limited_by.join(", ")
        )
    }
}
