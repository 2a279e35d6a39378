//! Names of the description's components that are malformed, taken twice or not known (with
//! the ones that are), and components that name neither a profile nor their own parts.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameFault {
    /// `name` is not a letter followed by letters, digits, '-' or '_'.
    Invalid { name: String },
    /// A component named `cpu`, the name of every host's CPU requester.
    ReservedCpu,
    /// A description without hosts.
    NoHosts,
    /// `name` is taken already, by the component at pointer `first`.
    Duplicate { name: String, first: String },
    /// No `of` (CPU profile, switch profile, device profile, NTB profile, cluster switch
    /// profile) is called `name`; `known`: those there are.
    UnknownProfile { of: &'static str, name: String, known: Vec<String> },
    /// No device profile is of kind `kind`; `known`: the kinds there are.
    UnknownKind { kind: String, known: Vec<String> },
    /// A device with neither a `profile` nor `functions`.
    DeviceNeedsFunctions,
    /// An NTB with neither a `profile` nor `windows`.
    NtbNeedsWindows,
    /// An NTB without a profile that does not give `field`.
    Required { field: &'static str },
}

impl fmt::Display for NameFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameFault::Invalid { name } => write!(f, "'{name}' is not a valid name: expected a letter followed by letters, digits, '-' or '_'"),
            NameFault::ReservedCpu => write!(f, "'cpu' is reserved for the CPU requester of a host"),
            NameFault::NoHosts => write!(f, "a topology needs at least one host"),
            NameFault::Duplicate { name, first } => {
                write!(f, "name '{name}' is already used at {first}; names must be unique across hosts, switches, devices and NTBs")
            }
            NameFault::UnknownProfile { of, name, known } => write!(f, "unknown {of} '{name}': expected one of {}", known.join(", ")),
            NameFault::UnknownKind { kind, known } => write!(f, "unknown device kind '{kind}': expected one of {}", known.join(", ")),
            NameFault::DeviceNeedsFunctions => write!(f, "a device needs a 'profile' or a list of 'functions'"),
            NameFault::NtbNeedsWindows => write!(f, "an NTB needs a 'profile' or a list of 'windows'"),
            NameFault::Required { field } => write!(f, "'{field}' is required without a profile"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SpecFault;

    /// The messages are the ones the loader printed when a `SpecError` held a `String`.
    #[test]
    fn each_name_fault_renders_the_loader_s_message() {
        let known = || vec!["a".to_string(), "b".to_string()];
        let cases = [
            (NameFault::Invalid { name: "9x".into() }, "'9x' is not a valid name: expected a letter followed by letters, digits, '-' or '_'"),
            (NameFault::ReservedCpu, "'cpu' is reserved for the CPU requester of a host"),
            (NameFault::NoHosts, "a topology needs at least one host"),
            (
                NameFault::Duplicate { name: "x".into(), first: "/hosts/0".into() },
                "name 'x' is already used at /hosts/0; names must be unique across hosts, switches, devices and NTBs",
            ),
            (NameFault::UnknownProfile { of: "CPU profile", name: "z80".into(), known: known() }, "unknown CPU profile 'z80': expected one of a, b"),
            (NameFault::UnknownKind { kind: "fpga".into(), known: known() }, "unknown device kind 'fpga': expected one of a, b"),
            (NameFault::DeviceNeedsFunctions, "a device needs a 'profile' or a list of 'functions'"),
            (NameFault::NtbNeedsWindows, "an NTB needs a 'profile' or a list of 'windows'"),
            (NameFault::Required { field: "doorbells" }, "'doorbells' is required without a profile"),
        ];
        for (fault, text) in cases {
            assert_eq!(SpecFault::from(fault).to_string(), text);
        }
    }
}
