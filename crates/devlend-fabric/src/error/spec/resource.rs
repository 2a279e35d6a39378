//! Enumeration running out: a host's bus numbers (256), or the room in one of its MMIO windows
//! for the BARs behind a root port (see `enumerate`).

use crate::error::fmt_size;
use crate::model::{Bar, Range};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResourceFault {
    /// Host `host` needs more than 256 bus numbers, the last one asked for at component `at`.
    BusNumbers { host: String, at: String },
    /// `bar` of function `function` cannot be placed: host `host` has `left` bytes left in its
    /// 64-bit prefetchable (`high`) or 32-bit MMIO window `aperture`, root port `port` needs `need`.
    Placement { bar: Bar, function: String, host: String, port: String, high: bool, aperture: Range, left: u64, need: u64 },
    /// Host `host`'s 64-bit prefetchable (`high`) or 32-bit MMIO window is used up.
    Exhausted { host: String, high: bool },
}

/// The window's name in the messages.
fn window(high: bool) -> &'static str {
    if high {
        "64-bit prefetchable"
    } else {
        "32-bit"
    }
}

impl fmt::Display for ResourceFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceFault::BusNumbers { host, at } => write!(f, "host {host} needs more than 256 bus numbers (at {at})"),
            ResourceFault::Placement { bar, function, host, port, high, aperture, left, need } => write!(
                f,
                "BAR {} of {function} ({}, {}) cannot be placed: host {host} has {} left in its {} MMIO window {aperture} but {host}.{port} needs {} (a smaller BAR, a 64-bit prefetchable BAR, or a different memory_map is needed)",
                bar.index,
                fmt_size(bar.size),
                bar.describe(),
                fmt_size(*left),
                window(*high),
                fmt_size(*need)
            ),
            ResourceFault::Exhausted { host, high } => write!(f, "host {host}: {} MMIO window exhausted", window(*high)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SpecFault;

    /// The messages are the ones the loader printed when a `SpecError` held a `String`.
    #[test]
    fn each_resource_fault_renders_the_loader_s_message() {
        let bar = Bar { index: 2, size: 1 << 30, bits: 64, pref: true, addr: 0 };
        let aperture = Range::new(0x40_0000_0000, 1 << 29);
        let cases = [
            (ResourceFault::BusNumbers { host: "h".into(), at: "s7".into() }, "host h needs more than 256 bus numbers (at s7)".to_string()),
            (
                ResourceFault::Placement { bar, function: "gpu0".into(), host: "h".into(), port: "rp0".into(), high: true, aperture, left: 1 << 29, need: 1 << 30 },
                "BAR 2 of gpu0 (1 GiB, 64-bit prefetchable) cannot be placed: host h has 512 MiB left in its 64-bit prefetchable MMIO window 0x4000000000-0x401fffffff but h.rp0 needs 1 GiB (a smaller BAR, a 64-bit prefetchable BAR, or a different memory_map is needed)".into(),
            ),
            (ResourceFault::Exhausted { host: "h".into(), high: false }, "host h: 32-bit MMIO window exhausted".into()),
        ];
        for (fault, text) in cases {
            assert_eq!(SpecFault::from(fault).to_string(), text);
        }
    }
}
