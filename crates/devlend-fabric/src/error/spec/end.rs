//! A link end (`HOST.rpN`, `SWITCH.dN`, `SWITCH`, `DEVICE`, `NTB`, `NTB.cableK`, `CSWITCH.pN`)
//! that names no component, or a port the component does not have or that cannot be this end
//! of a link ('a' upstream, 'b' downstream). Rendered after `link end 'END': `
//! ([`super::LinkFault::End`]).

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndFault {
    /// No component is called `name`.
    NoSuchName { name: String },
    /// Host `name` has no such root port; it has `ports`.
    RootPort { name: String, ports: usize },
    /// Host `name` other than by a root port, or as the downstream end.
    Host { name: String },
    /// Switch `name` has no such downstream port; it has `ports`.
    DownstreamPort { name: String, ports: usize },
    /// Switch `name` itself as the upstream end.
    SwitchAsUpstream { name: String },
    /// A port of switch `name` other than `up` as the downstream end.
    SwitchPortAsDownstream { name: String },
    /// Device `name` as the upstream end.
    DeviceAsUpstream { name: String },
    /// A port of device `name` other than `up`.
    DevicePort { name: String },
    /// NTB adapter `name` other than by its slot side ('b') or a cable port.
    Ntb { name: String },
    /// Cluster switch `name` other than by a port `pN` in a cable link.
    ClusterSwitch { name: String },
    /// NTB adapter `name` has no such cable port; it has `ports`.
    CablePort { name: String, ports: u8 },
    /// Cluster switch `name` has no such port; it has `ports`.
    ClusterPort { name: String, ports: usize },
}

impl fmt::Display for EndFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndFault::NoSuchName { name } => write!(f, "no host, switch, device or NTB named '{name}'"),
            EndFault::RootPort { name, ports } => write!(f, "expected a root port of {name}: rp0 to rp{}", ports - 1),
            EndFault::Host { name } => write!(f, "expected '{name}.rpN' as the upstream end ('a') of a link"),
            EndFault::DownstreamPort { name, ports } => write!(f, "expected a downstream port of {name}: d0 to d{}", ports - 1),
            EndFault::SwitchAsUpstream { name } => write!(f, "expected a downstream port '{name}.dN' as the upstream end ('a') of a link"),
            EndFault::SwitchPortAsDownstream { name } => write!(f, "expected '{name}' or '{name}.up' as the downstream end ('b') of a link"),
            EndFault::DeviceAsUpstream { name } => write!(f, "expected device '{name}' only as the downstream end ('b') of a link"),
            EndFault::DevicePort { name } => write!(f, "expected '{name}' (a device has one upstream port)"),
            EndFault::Ntb { name } => write!(f, "expected '{name}' (its slot side, as 'b') or '{name}.cable' (both ends of an NTB cable)"),
            EndFault::ClusterSwitch { name } => write!(f, "expected '{name}.pN' in a cable link to an NTB's cable port"),
            EndFault::CablePort { name, ports: 1 } => write!(f, "'{name}' has 1 cable port: {name}.cable"),
            EndFault::CablePort { name, ports } => write!(f, "'{name}' has {ports} cable ports: {name}.cable0 to {name}.cable{}", ports - 1),
            EndFault::ClusterPort { name, ports } => write!(f, "expected a port of cluster switch {name}: p0 to p{}", ports - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{LinkFault, SpecFault};

    /// The messages are the ones the loader printed when a `SpecError` held a `String`.
    #[test]
    fn each_end_fault_renders_the_loader_s_message() {
        let n = || "x".to_string();
        let cases = [
            (EndFault::NoSuchName { name: n() }, "link end 'x.e': no host, switch, device or NTB named 'x'"),
            (EndFault::RootPort { name: n(), ports: 2 }, "link end 'x.e': expected a root port of x: rp0 to rp1"),
            (EndFault::Host { name: n() }, "link end 'x.e': expected 'x.rpN' as the upstream end ('a') of a link"),
            (EndFault::DownstreamPort { name: n(), ports: 4 }, "link end 'x.e': expected a downstream port of x: d0 to d3"),
            (EndFault::SwitchAsUpstream { name: n() }, "link end 'x.e': expected a downstream port 'x.dN' as the upstream end ('a') of a link"),
            (EndFault::SwitchPortAsDownstream { name: n() }, "link end 'x.e': expected 'x' or 'x.up' as the downstream end ('b') of a link"),
            (EndFault::DeviceAsUpstream { name: n() }, "link end 'x.e': expected device 'x' only as the downstream end ('b') of a link"),
            (EndFault::DevicePort { name: n() }, "link end 'x.e': expected 'x' (a device has one upstream port)"),
            (EndFault::Ntb { name: n() }, "link end 'x.e': expected 'x' (its slot side, as 'b') or 'x.cable' (both ends of an NTB cable)"),
            (EndFault::ClusterSwitch { name: n() }, "link end 'x.e': expected 'x.pN' in a cable link to an NTB's cable port"),
            (EndFault::CablePort { name: n(), ports: 1 }, "link end 'x.e': 'x' has 1 cable port: x.cable"),
            (EndFault::CablePort { name: n(), ports: 3 }, "link end 'x.e': 'x' has 3 cable ports: x.cable0 to x.cable2"),
            (EndFault::ClusterPort { name: n(), ports: 8 }, "link end 'x.e': expected a port of cluster switch x: p0 to p7"),
        ];
        for (fault, text) in cases {
            assert_eq!(SpecFault::from(LinkFault::End { end: "x.e".into(), fault }).to_string(), text);
        }
    }
}
