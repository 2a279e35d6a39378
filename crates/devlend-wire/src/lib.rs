//! # devlend-wire: the PCIe vocabulary
//!
//! Pure data and arithmetic, no simulation: requester IDs (bus/device/function),
//! the kinds of transaction-layer packets, and link generations with their line
//! encodings. Every layer above speaks in these types.
//!
//! Sources: PCI Express Base Specification 3.0 §2.2 (TLP header formats),
//! §4.2 (8b/10b for 2.5 and 5 GT/s, 128b/130b from 8 GT/s). Seed 000 §2 gives the
//! same picture at a higher level (links of 1-16 lanes, TLPs, posted and non-posted).

use serde::{Deserialize, Serialize};
use std::fmt;

pub mod dllp;
pub mod tlp;
pub use tlp::{FcClass, Overheads, Tlp, TlpHeader, TlpKind};

/// A requester or completer ID: bus (8 bits), device (5 bits), function (3 bits).
/// Printed as Linux does: `bb:dd.f`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct Bdf(pub u16);

impl Bdf {
    pub const fn new(bus: u8, dev: u8, func: u8) -> Bdf {
        Bdf(((bus as u16) << 8) | (((dev & 0x1f) as u16) << 3) | (func & 7) as u16)
    }
    /// Build from a bus number and an 8-bit devfn (ARI and phantom-function views use the whole byte).
    pub const fn from_bus_devfn(bus: u8, devfn: u8) -> Bdf {
        Bdf(((bus as u16) << 8) | devfn as u16)
    }
    pub const fn bus(self) -> u8 {
        (self.0 >> 8) as u8
    }
    pub const fn devfn(self) -> u8 {
        self.0 as u8
    }
    pub const fn dev(self) -> u8 {
        (self.0 >> 3) as u8 & 0x1f
    }
    pub const fn func(self) -> u8 {
        self.0 as u8 & 7
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus(), self.dev(), self.func())
    }
}

impl fmt::Debug for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Whether a request is a posted memory write or a non-posted memory read.
/// Completions are ID-routed answers to reads.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Access {
    Read,
    Write,
}

impl Access {
    pub fn is_write(self) -> bool {
        matches!(self, Access::Write)
    }
}

/// PCIe generation 1-5 and the rate and encoding it implies (PCIe Base 5.0 §4.2, Table 4-1).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Generation(pub u8);

impl Generation {
    /// Giga-transfers per second per lane.
    pub fn gt_per_s(self) -> f64 {
        match self.0 {
            1 => 2.5,
            2 => 5.0,
            3 => 8.0,
            4 => 16.0,
            _ => 32.0,
        }
    }
    /// Fraction of line bits that carry data: 8b/10b for Gen1-2, 128b/130b for Gen3-5.
    pub fn encoding_efficiency(self) -> f64 {
        if self.0 <= 2 {
            8.0 / 10.0
        } else {
            128.0 / 130.0
        }
    }
    /// Raw data rate of one lane after encoding, in bytes per second.
    pub fn lane_bytes_per_s(self) -> f64 {
        self.gt_per_s() * 1e9 * self.encoding_efficiency() / 8.0
    }
}

/// Link widths PCIe allows.
pub const VALID_WIDTHS: [u8; 6] = [1, 2, 4, 8, 12, 16];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_fields_round_trip() {
        let b = Bdf::new(0x3a, 0x1f, 7);
        assert_eq!((b.bus(), b.dev(), b.func()), (0x3a, 0x1f, 7));
        assert_eq!(b.to_string(), "3a:1f.7");
        assert_eq!(Bdf::from_bus_devfn(2, 0x09), Bdf::new(2, 1, 1));
    }

    #[test]
    fn gen3_x16_is_about_16_gbytes_per_s() {
        // 8 GT/s * 128/130 / 8 bits = 0.985 GB/s per lane (PCIe 3.0 §4.2).
        let bw = Generation(3).lane_bytes_per_s() * 16.0;
        assert!((bw - 15.75e9).abs() < 0.01e9, "{bw}");
        assert!((Generation(2).lane_bytes_per_s() - 0.5e9).abs() < 1.0);
    }
}
