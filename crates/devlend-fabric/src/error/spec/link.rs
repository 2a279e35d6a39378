//! Links and cables that cannot be built: a bad end ([`EndFault`]), a generation or width PCIe
//! does not have, a port taken twice, a cable between the wrong kinds of port, links that do
//! not form one tree per host, NTB peers that do not fit their adapter.

use super::EndFault;
use crate::model::LinkId;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkFault {
    /// Link end `end`, as the description writes it, and what is wrong with it.
    End { end: String, fault: EndFault },
    /// Generation `gen`: PCIe has 1 to 5.
    Gen { gen: u8 },
    /// Width x`width`: not one of x1, x2, x4, x8, x12, x16.
    Width { width: u8 },
    /// A link from `a` to `b` with an NTB cable port at one end only.
    CableToSlot { a: String, b: String },
    /// Port `port` of `component` is used by link `link` already.
    PortUsed { component: String, port: String, link: LinkId },
    /// Cable port `port` of NTB adapter `ntb` is used by link `link` already.
    CablePortUsed { ntb: String, port: u8, link: LinkId },
    /// Port p`port` of cluster switch `switch` is used by link `link` already.
    ClusterPortUsed { switch: String, port: u8, link: LinkId },
    /// An NTB cable from an adapter to itself.
    Loopback,
    /// A cable between two cluster switches, `a` and `b`.
    Cascaded { a: String, b: String },
    /// Links that put switch `switch` below itself.
    Cycle { switch: String },
    /// No chain of links from a root port to `component`.
    NotConnected { component: String },
    /// An NTB cable joining adapters `a` and `b` of the same host.
    SameHost { a: String, b: String },
    /// Adapter `ntb` has `peers` peers whose requester-ID LUTs have `entries` entries in all.
    Aliases { ntb: String, peers: usize, entries: usize },
}

impl fmt::Display for LinkFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkFault::End { end, fault } => write!(f, "link end '{end}': {fault}"),
            LinkFault::Gen { gen } => write!(f, "generation {gen}: expected 1 to 5"),
            LinkFault::Width { width } => write!(f, "width x{width}: expected one of x1, x2, x4, x8, x12, x16"),
            LinkFault::CableToSlot { a, b } => write!(
                f,
                "'{a}' to '{b}': an NTB cable port ('NAME.cable') connects only to another NTB cable port or a cluster switch port ('SWITCH.pN')"
            ),
            LinkFault::PortUsed { component, port, link } => write!(f, "port {component}.{port} is already used by link {link} (/links/{link})"),
            LinkFault::CablePortUsed { ntb, port, link } => write!(f, "the cable port {port} of '{ntb}' is already used by link {link}"),
            LinkFault::ClusterPortUsed { switch, port, link } => write!(f, "port p{port} of '{switch}' is already used by link {link}"),
            LinkFault::Loopback => write!(f, "an NTB cable cannot loop back to the same adapter"),
            LinkFault::Cascaded { a, b } => {
                write!(f, "'{a}' to '{b}': cascaded cluster switches are not modelled; cable each host's adapter to one switch")
            }
            LinkFault::Cycle { switch } => write!(f, "links form a cycle through switch '{switch}': PCIe is a tree"),
            LinkFault::NotConnected { component } => write!(f, "'{component}' is not connected to any host: no chain of links leads from a root port to it"),
            LinkFault::SameHost { a, b } => write!(f, "NTB cable joins '{a}' and '{b}' in the same host; an NTB joins two hosts"),
            LinkFault::Aliases { ntb, peers, entries } => write!(
                f,
                "'{ntb}' has {peers} peers with {entries} requester-ID LUT entries in all: their far-side aliases must fit the 255 functions of one bus (give the adapters fewer rid_lut_entries)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SpecFault;

    /// The messages are the ones the loader printed when a `SpecError` held a `String`.
    #[test]
    fn each_link_fault_renders_the_loader_s_message() {
        let a = || "na.cable".to_string();
        let cases = [
            (LinkFault::Gen { gen: 6 }, "generation 6: expected 1 to 5".to_string()),
            (LinkFault::Width { width: 3 }, "width x3: expected one of x1, x2, x4, x8, x12, x16".into()),
            (
                LinkFault::CableToSlot { a: a(), b: "gpu0".into() },
                "'na.cable' to 'gpu0': an NTB cable port ('NAME.cable') connects only to another NTB cable port or a cluster switch port ('SWITCH.pN')".into(),
            ),
            (LinkFault::PortUsed { component: "h".into(), port: "rp0".into(), link: 2 }, "port h.rp0 is already used by link 2 (/links/2)".into()),
            (LinkFault::CablePortUsed { ntb: "na".into(), port: 1, link: 3 }, "the cable port 1 of 'na' is already used by link 3".into()),
            (LinkFault::ClusterPortUsed { switch: "mx".into(), port: 4, link: 5 }, "port p4 of 'mx' is already used by link 5".into()),
            (LinkFault::Loopback, "an NTB cable cannot loop back to the same adapter".into()),
            (
                LinkFault::Cascaded { a: "mx.p0".into(), b: "my.p0".into() },
                "'mx.p0' to 'my.p0': cascaded cluster switches are not modelled; cable each host's adapter to one switch".into(),
            ),
            (LinkFault::Cycle { switch: "s".into() }, "links form a cycle through switch 's': PCIe is a tree".into()),
            (LinkFault::NotConnected { component: "gpu0".into() }, "'gpu0' is not connected to any host: no chain of links leads from a root port to it".into()),
            (LinkFault::SameHost { a: "na".into(), b: "nb".into() }, "NTB cable joins 'na' and 'nb' in the same host; an NTB joins two hosts".into()),
            (
                LinkFault::Aliases { ntb: "na".into(), peers: 3, entries: 300 },
                "'na' has 3 peers with 300 requester-ID LUT entries in all: their far-side aliases must fit the 255 functions of one bus (give the adapters fewer rid_lut_entries)".into(),
            ),
        ];
        for (fault, text) in cases {
            assert_eq!(SpecFault::from(fault).to_string(), text);
        }
    }
}
