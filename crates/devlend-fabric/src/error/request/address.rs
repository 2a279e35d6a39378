//! Requesters and address expressions (`NUMBER`, `BASE[+|-OFFSET]` over `FUNC.barN`,
//! `HOST.ram`, `HOST.msi`, `NTB.mwN`) that do not resolve; `expr` is the expression as written.

use crate::error::fmt_size;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadAddress {
    /// The requester `cpu` without a host.
    CpuNeedsHost,
    /// Requester `who`, named in host `asked`, sits in host `sits`.
    WrongHost { who: String, sits: String, asked: String },
    /// `name` in `expr` is in host `owner`, not the requester's host `requester`.
    OtherHost { expr: String, name: String, owner: String, requester: String },
    /// `expr` is neither a number nor a base with an optional offset.
    Syntax { expr: String },
    /// `name` in `expr` has no BAR `bar`.
    NoBar { expr: String, name: String, bar: u8 },
    /// Offset `off` in `expr` is past the end of BAR `bar` of `name` (`size` bytes).
    PastBar { expr: String, off: u64, name: String, bar: u8, size: u64 },
    /// Offset `off` in `expr` is past the end of window `window` (`size` bytes).
    PastWindow { expr: String, off: u64, window: usize, size: u64 },
    /// `expr` is past the end of host `host`'s `ram` bytes of RAM.
    PastRam { expr: String, host: String, ram: u64 },
    /// `what` in `expr` is not `barN`, `mwN`, `ram` or `msi`.
    Base { expr: String, what: String },
    /// Offset `offset` in `expr` is not a number.
    Offset { expr: String, offset: String },
}

impl fmt::Display for BadAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadAddress::CpuNeedsHost => f.write_str("'cpu' needs a host: HOST:cpu"),
            BadAddress::WrongHost { who, sits, asked } => write!(f, "{who} sits in host {sits}, not {asked}"),
            BadAddress::OtherHost { expr, name, owner, requester } => write!(
                f,
                "address '{expr}': {name} is in host {owner}, but the requester is in host {requester}: each host has its own address space; reach another host through an NTB window (NTB.mwN)"
            ),
            BadAddress::Syntax { expr } => {
                write!(f, "address '{expr}': expected a number or NAME.barN / HOST.ram / HOST.msi / NTB.mwN with an optional +OFFSET")
            }
            BadAddress::NoBar { expr, name, bar } => write!(f, "address '{expr}': {name} has no BAR {bar}"),
            BadAddress::PastBar { expr, off, name, bar, size } => {
                write!(f, "address '{expr}': offset {off:#x} is past the end of {name} BAR {bar} ({})", fmt_size(*size))
            }
            BadAddress::PastWindow { expr, off, window, size } => {
                write!(f, "address '{expr}': offset {off:#x} is past the end of window {window} ({})", fmt_size(*size))
            }
            BadAddress::PastRam { expr, host, ram } => write!(f, "address '{expr}': host {host} has only {} of RAM", fmt_size(*ram)),
            BadAddress::Base { expr, what } => write!(f, "address '{expr}': '{what}' is not barN, mwN, ram or msi"),
            BadAddress::Offset { expr, offset } => write!(f, "address '{expr}': offset '{offset}' is not a number"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FabricError;

    /// The messages are the ones the fabric printed when `Invalid` held a `String`.
    #[test]
    fn each_address_renders_the_fabric_s_message() {
        let e = |s: &str| s.to_string();
        let cases = [
            (BadAddress::CpuNeedsHost, e("'cpu' needs a host: HOST:cpu")),
            (BadAddress::WrongHost { who: e("gpu0"), sits: e("a"), asked: e("b") }, e("gpu0 sits in host a, not b")),
            (
                BadAddress::OtherHost { expr: e("b.ram"), name: e("b"), owner: e("b"), requester: e("a") },
                e("address 'b.ram': b is in host b, but the requester is in host a: each host has its own address space; reach another host through an NTB window (NTB.mwN)"),
            ),
            (BadAddress::Syntax { expr: e("x") }, e("address 'x': expected a number or NAME.barN / HOST.ram / HOST.msi / NTB.mwN with an optional +OFFSET")),
            (BadAddress::NoBar { expr: e("gpu0.bar5"), name: e("gpu0"), bar: 5 }, e("address 'gpu0.bar5': gpu0 has no BAR 5")),
            (
                BadAddress::PastBar { expr: e("gpu0.bar0+0x2000"), off: 0x2000, name: e("gpu0"), bar: 0, size: 0x1000 },
                e("address 'gpu0.bar0+0x2000': offset 0x2000 is past the end of gpu0 BAR 0 (4 KiB)"),
            ),
            (
                BadAddress::PastWindow { expr: e("n.mw0+0x2000"), off: 0x2000, window: 0, size: 0x1000 },
                e("address 'n.mw0+0x2000': offset 0x2000 is past the end of window 0 (4 KiB)"),
            ),
            (BadAddress::PastRam { expr: e("a.ram+1G"), host: e("a"), ram: 1 << 30 }, e("address 'a.ram+1G': host a has only 1 GiB of RAM")),
            (BadAddress::Base { expr: e("a.rom"), what: e("rom") }, e("address 'a.rom': 'rom' is not barN, mwN, ram or msi")),
            (BadAddress::Offset { expr: e("a.ram+x"), offset: e("x") }, e("address 'a.ram+x': offset 'x' is not a number")),
        ];
        for (address, text) in cases {
            assert_eq!(FabricError::from(address).to_string(), text);
        }
    }
}
