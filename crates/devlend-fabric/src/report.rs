//! A route failure as a value that keeps its context: the fabric's [`Failure`] with the names of
//! the host, NT adapter, function and port it refers to, taken from the fabric that recorded it.
//! It displays as [`Fabric::describe_failure`] writes the failure (that function renders through
//! it), so an error of a layer above can hold one and describe it without the fabric at hand.

use crate::fabric::Fabric;
use crate::model::{FuncId, HostId, NodeId};
use crate::route::Failure;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureReport {
    pub failure: Failure,
    /// The name of the host the failure names, if it names one.
    pub host: Option<String>,
    /// The name of the NT adapter it names, if any.
    pub ntb: Option<String>,
    /// The name of the function it names, if any.
    pub function: Option<String>,
    /// The component and port of the fabric node it names, if any.
    pub port: Option<(String, String)>,
}

impl Fabric {
    /// `f` with the names it refers to, from this fabric.
    pub fn failure_report(&self, f: &Failure) -> FailureReport {
        let host = |h: HostId| Some(self.hosts[h as usize].name.clone());
        let ntb = |n: u32| Some(self.ntbs[n as usize].name.clone());
        let function = |x: FuncId| Some(self.funcs[x as usize].name.clone());
        let port = |n: NodeId| Some((self.nodes[n as usize].component.clone(), self.nodes[n as usize].port.clone()));
        let mut r = FailureReport { failure: *f, host: None, ntb: None, function: None, port: None };
        match *f {
            Failure::Iommu { host: h, .. } | Failure::Interrupt { host: h, .. } => r.host = host(h),
            Failure::Unsupported { node, host: h, .. } => (r.port, r.host) = (port(node), host(h)),
            Failure::BusMasterOff { func } | Failure::Unresponsive { func } | Failure::Poisoned { func } => r.function = function(func),
            Failure::RidLutMiss { ntb: n, .. } | Failure::NtbUnmapped { ntb: n, .. } | Failure::NtbLinkDown { ntb: n } => r.ntb = ntb(n),
            Failure::RoutingLoop { ntb: n, host: h, .. } => (r.ntb, r.host) = (ntb(n), host(h)),
            Failure::BarOverRam { host: h, func, .. } => (r.host, r.function) = (host(h), function(func)),
            Failure::PortDown { node } => r.port = port(node),
        }
        r
    }
}

/// A name the report should hold; "?" where a hand-made report lacks it.
fn name(n: &Option<String>) -> &str {
    n.as_deref().unwrap_or("?")
}

impl fmt::Display for FailureReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (host, ntb, func) = (name(&self.host), name(&self.ntb), name(&self.function));
        let (component, port) = self.port.as_ref().map_or(("?", "?"), |(c, p)| (c.as_str(), p.as_str()));
        match self.failure {
            Failure::Iommu { fault, .. } => write!(f, "IOMMU fault in host {host}: {} at {:#x} by {}", fault.reason.describe(), fault.addr, fault.requester),
            Failure::Unsupported { addr, why, .. } => write!(f, "unsupported request at {component}.{port} in host {host} for {addr:#x}: {why}"),
            Failure::BusMasterOff { .. } => write!(f, "{func} has Bus Master Enable cleared in its command register"),
            Failure::RidLutMiss { rid, .. } => write!(f, "{ntb} rejected a TLP from {rid}: no requester-ID LUT entry"),
            Failure::NtbUnmapped { window, offset, .. } => write!(f, "{ntb} window {window} offset {offset:#x} has no translation on the peer"),
            Failure::NtbLinkDown { .. } => write!(f, "{ntb}: NTB link is down"),
            Failure::RoutingLoop { window, addr, .. } => write!(
                f,
                "routing loop: the TLP for {addr:#x} in host {host} came back to {ntb} window {window}, which it had already crossed (NTB translations lead back into each other)"
            ),
            Failure::BarOverRam { addr, bar, .. } => write!(f, "{addr:#x} in host {host} is claimed by both RAM and {func} BAR {bar}: delivered to neither"),
            Failure::Interrupt { rid, addr, fault, .. } => write!(f, "interrupt remapping fault in host {host}: {} (MSI write to {addr:#x} by {rid})", fault.describe()),
            Failure::PortDown { .. } => {
                write!(f, "the link above {component}.{port} is down: requests through it end as Unsupported Requests, posted writes are dropped")
            }
            Failure::Unresponsive { .. } => write!(f, "{func} does not answer: the completion timeout expired (posted writes to it are lost)"),
            Failure::Poisoned { .. } => write!(f, "poisoned completion (EP) to or from {func}: the data was discarded and reported through AER"),
        }
    }
}

impl std::error::Error for FailureReport {}

#[cfg(test)]
mod tests {
    use crate::route::Failure;

    #[test]
    fn a_report_names_what_its_failure_refers_to_and_reads_as_the_fabric_describes_it() {
        let f = crate::build_json(&crate::fixtures::two_hosts_pxh830("intel-xeon-e5", 1 << 32, false, false)).unwrap();
        let (na, host) = (f.ntb_id("na").unwrap(), f.host_id("b").unwrap());
        let unmapped = Failure::NtbUnmapped { ntb: na, window: 1, offset: 0x2100 };
        let r = f.failure_report(&unmapped);
        assert_eq!((r.failure, r.ntb.as_deref(), r.host.as_deref(), r.function.as_deref()), (unmapped, Some("na"), None, None));
        assert_eq!(r.to_string(), "na window 1 offset 0x2100 has no translation on the peer");
        let looped = Failure::RoutingLoop { ntb: na, window: 0, host, addr: 0x1000 };
        let r = f.failure_report(&looped);
        assert_eq!((r.ntb.as_deref(), r.host.as_deref()), (Some("na"), Some("b")));
        assert_eq!(r.to_string(), f.describe_failure(&looped));
        assert_eq!(f.failure_json(&looped)["message"], r.to_string());
    }
}
