//! Names and ids the fabric does not have ([`super::FabricError::UnknownName`]), with the name
//! (or id) asked for as a value, rendered to the fabric's messages.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unknown {
    /// No host is called `name`; `known`: the hosts there are.
    Host { name: String, known: Box<[String]> },
    /// No device or function is called `name`.
    Function { name: String },
    /// No NTB adapter is called `name`.
    Ntb { name: String },
    /// Host `host` has no IOMMU domain called `name`.
    Domain { host: String, name: String },
    /// No IOMMU domain has id `domain`.
    DomainId { domain: u32 },
    /// No NTB adapter has id `ntb`.
    NtbId { ntb: u32 },
    /// No topology node has id `node`.
    Node { node: u32 },
}

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unknown::Host { name, known } => write!(f, "no host named '{name}' (hosts: {})", known.join(", ")),
            Unknown::Function { name } => {
                write!(f, "no device or function named '{name}' (functions are DEVICE, DEVICE.fN, DEVICE.vfN)")
            }
            Unknown::Ntb { name } => write!(f, "no NTB named '{name}'"),
            Unknown::Domain { host, name } => write!(f, "host {host}: no IOMMU domain '{name}'"),
            Unknown::DomainId { domain } => write!(f, "IOMMU domain #{domain}"),
            Unknown::NtbId { ntb } => write!(f, "NTB #{ntb}"),
            Unknown::Node { node } => write!(f, "node #{node}"),
        }
    }
}

impl From<Unknown> for super::FabricError {
    fn from(e: Unknown) -> Self {
        super::FabricError::UnknownName(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FabricError;

    /// The messages are the ones the fabric printed when `UnknownName` held a `String`.
    #[test]
    fn each_unknown_name_renders_the_fabric_s_message() {
        let cases = [
            (Unknown::Host { name: "x".into(), known: ["a".into(), "b".into()].into() }, "no host named 'x' (hosts: a, b)"),
            (Unknown::Function { name: "gpu9".into() }, "no device or function named 'gpu9' (functions are DEVICE, DEVICE.fN, DEVICE.vfN)"),
            (Unknown::Ntb { name: "x".into() }, "no NTB named 'x'"),
            (Unknown::Domain { host: "a".into(), name: "d".into() }, "host a: no IOMMU domain 'd'"),
            (Unknown::DomainId { domain: 7 }, "IOMMU domain #7"),
            (Unknown::NtbId { ntb: 3 }, "NTB #3"),
            (Unknown::Node { node: 12 }, "node #12"),
        ];
        for (unknown, text) in cases {
            assert_eq!(FabricError::from(unknown).to_string(), text);
        }
    }
}
