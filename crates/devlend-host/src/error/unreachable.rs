//! Why a host cannot reach another host, a device or an address ([`super::HostError::Unreachable`]),
//! with the hosts, adapters and step as values, rendered to the host layer's messages.

use super::HostError;
use std::fmt;

/// Why the other side cannot be reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unreachability {
    /// `step` maps through one NTB pair between hosts `from` and `to`, and no NTB joins them.
    NoNtb { step: LinkStep, from: String, to: String },
    /// `step` needs the link of adapter `ntb` to host `to`, and it is down.
    LinkDown { step: LinkStep, ntb: String, to: String },
    /// Adapter `ntb` has no peer in host `host`: its link is down or not cabled there.
    NoPeer { ntb: String, host: String },
    /// A CPU store at `addr` (an interrupt's notification) has no route.
    NoRoute { addr: u64 },
    /// A VM's migration stopped when one of its devices could not be attached on the target.
    Migration(Migration),
}

/// The step of the lending agents that needed a link between two hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkStep {
    /// Lending `device` to host `borrower`.
    Lend { device: String, borrower: String },
    /// Mapping device `target` for device `source`, borrowed from another lender (peer-to-peer).
    MapPeer { target: String, source: String },
}

/// VM `vm` could not move from host `from` to host `target`: attaching its device `device`
/// there failed with `error`. The VM stays on `from` with its devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migration {
    pub vm: String,
    pub target: String,
    pub from: String,
    pub device: String,
    pub error: HostError,
}

impl fmt::Display for LinkStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkStep::Lend { device, borrower } => write!(f, "cannot lend {device} to {borrower}"),
            LinkStep::MapPeer { target, source } => write!(f, "cannot map {target} for {source}"),
        }
    }
}

impl fmt::Display for Unreachability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreachability::NoNtb { step, from, to } => {
                write!(f, "{step}: no NTB joins {from} and {to} (Device Lending maps through one NTB between the two hosts)")
            }
            Unreachability::LinkDown { step, ntb, to } => write!(f, "{step}: the link of {ntb} to {to} is down"),
            Unreachability::NoPeer { ntb, host } => write!(f, "{ntb}: no peer in {host} (NTB link is down or not cabled there)"),
            Unreachability::NoRoute { addr } => write!(f, "the notification store at {addr:#x} has no route"),
            Unreachability::Migration(Migration { vm, target, from, device, error }) => {
                write!(f, "cannot migrate VM {vm} to {target}: {device}: {error}; the VM stays on {from} with its devices")
            }
        }
    }
}

impl From<Unreachability> for HostError {
    fn from(u: Unreachability) -> HostError {
        HostError::Unreachable(Box::new(u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::NoSuch;

    fn s(x: &str) -> String {
        x.to_string()
    }

    #[test]
    fn each_unreachability_renders_the_host_layer_s_message() {
        let lend = LinkStep::Lend { device: s("gpu0"), borrower: s("b") };
        let map = LinkStep::MapPeer { target: s("gpu1"), source: s("gpu0") };
        let cases = [
            (
                Unreachability::NoNtb { step: lend.clone(), from: s("a"), to: s("b") },
                "cannot lend gpu0 to b: no NTB joins a and b (Device Lending maps through one NTB between the two hosts)",
            ),
            (Unreachability::LinkDown { step: map, ntb: s("ntb-l"), to: s("b") }, "cannot map gpu1 for gpu0: the link of ntb-l to b is down"),
            (Unreachability::NoPeer { ntb: s("ntb-l"), host: s("b") }, "ntb-l: no peer in b (NTB link is down or not cabled there)"),
            (Unreachability::NoRoute { addr: 0xfee0_0000 }, "the notification store at 0xfee00000 has no route"),
            (
                Unreachability::Migration(Migration {
                    vm: s("g"),
                    target: s("island"),
                    from: s("a"),
                    device: s("gpu1"),
                    error: HostError::NoDevice(NoSuch::NotInTree(s("gpu1"))),
                }),
                "cannot migrate VM g to island: gpu1: gpu1 is not in its host's tree; the VM stays on a with its devices",
            ),
        ];
        for (u, text) in cases {
            assert_eq!(HostError::from(u).to_string(), text);
        }
    }
}
