//! A `params` override (a topology's `params`, or `--set`) the loader refuses: its scope names
//! no host, device, CPU profile or link, its key is no constant of the scope (or another device
//! kind's own), or its value is not one the constant takes ([`ValueError`]: unit, bounds).

use crate::tuning::ValueError;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamFault {
    /// No `what` (host, device, CPU profile) is called `name`; `known`: those there are.
    Unknown { what: &'static str, name: String, known: Vec<String> },
    /// No link has an end written `end`.
    NoLink { end: String },
    /// `key` is no constant that `scope` (`timing`, `hosts.NAME`, ...) may set; `allowed`: those it may.
    Constant { key: String, scope: String, allowed: Vec<String> },
    /// `key` is the own setting of device kinds `kinds`, given to `device` of kind `kind`.
    OtherKind { key: String, device: String, kind: String, kinds: Vec<String> },
    /// The value given to constant `key` is refused.
    Value { key: String, error: ValueError },
}

impl fmt::Display for ParamFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamFault::Unknown { what, name, known } => write!(f, "no {what} named '{name}' (known: {})", known.join(", ")),
            ParamFault::NoLink { end } => write!(
                f,
                "no link has an end '{end}': name a link by either end exactly as `links` writes it (HOST.rpN, SWITCH.dN, SWITCH, DEVICE, NTB, NTB.cable), or '*' for every link"
            ),
            ParamFault::Constant { key, scope, allowed } => {
                let why = match key.as_str() {
                    "request_overhead_bytes" | "completion_overhead_bytes" | "dllp_bytes" => " (TLP and DLLP framing is fixed by the PCIe specification, not a setting)",
                    _ => "",
                };
                write!(f, "unknown constant '{key}'{why}: {scope} may set {}", allowed.join(", "))
            }
            ParamFault::OtherKind { key, device, kind, kinds } => {
                let which = format!("{} {}", if kinds.len() > 1 { "kinds" } else { "kind" }, kinds.join(", "));
                write!(f, "{key}: {device} is of kind {kind}, not {which}: only a device of {which} has this setting ([device_kind] in params/hardware.toml)")
            }
            ParamFault::Value { key, error } => write!(f, "{key}: {error}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SpecFault;
    use crate::tuning::Kind;

    /// The messages are the ones the loader printed when a `SpecError` held a `String`.
    #[test]
    fn each_param_fault_renders_the_loader_s_message() {
        let strings = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases = [
            (ParamFault::Unknown { what: "CPU profile", name: "z80".into(), known: strings(&["a", "b"]) }, "no CPU profile named 'z80' (known: a, b)"),
            (
                ParamFault::NoLink { end: "gpu9".into() },
                "no link has an end 'gpu9': name a link by either end exactly as `links` writes it (HOST.rpN, SWITCH.dN, SWITCH, DEVICE, NTB, NTB.cable), or '*' for every link",
            ),
            (ParamFault::Constant { key: "x".into(), scope: "timing".into(), allowed: strings(&["a", "b"]) }, "unknown constant 'x': timing may set a, b"),
            (
                ParamFault::Constant { key: "dllp_bytes".into(), scope: "links.*".into(), allowed: strings(&["gen"]) },
                "unknown constant 'dllp_bytes' (TLP and DLLP framing is fixed by the PCIe specification, not a setting): links.* may set gen",
            ),
            (
                ParamFault::OtherKind { key: "k".into(), device: "gpu0".into(), kind: "gpu".into(), kinds: strings(&["nvme"]) },
                "k: gpu0 is of kind gpu, not kind nvme: only a device of kind nvme has this setting ([device_kind] in params/hardware.toml)",
            ),
            (
                ParamFault::OtherKind { key: "k".into(), device: "d".into(), kind: "generic".into(), kinds: strings(&["nic", "nvme"]) },
                "k: d is of kind generic, not kinds nic, nvme: only a device of kinds nic, nvme has this setting ([device_kind] in params/hardware.toml)",
            ),
            (
                ParamFault::Value { key: "read_tags".into(), error: ValueError::OutOfRange { kind: Kind::Tags, value: 0 } },
                "read_tags: 0 outstanding requests: a requester has 1 to 768 tags (10-bit tags, PCIe Base 4.0 §2.2.6.2)",
            ),
        ];
        for (fault, text) in cases {
            assert_eq!(SpecFault::from(fault).to_string(), text);
        }
    }
}
