//! Counts and sizes of a switch, device, NTB adapter or cluster switch out of what the hardware
//! (or its profile) has: ports, functions, VFs, memory windows, LUT entries, doorbells.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceFault {
    /// `downstream` downstream ports of a switch whose profile `profile` has `ports` in all.
    SwitchPorts { downstream: u8, profile: String, ports: u8 },
    /// `n` downstream ports: a switch has 1 to 32.
    DownstreamPorts { n: u8 },
    /// `n` functions: a device has 1 to 8.
    Functions { n: usize },
    /// `num_vfs` given with `functions` (it applies to a profile device).
    NumVfsWithFunctions,
    /// `asked` VFs of a function that supports `total`.
    Vfs { asked: u16, total: u16 },
    /// `n` memory windows: an NTB function has room for 1 or 2.
    Windows { n: usize },
    /// A memory window of `size` bytes: not a power of two of at least 4 KiB.
    WindowSize { size: u64 },
    /// `n` LUT segments: not a power of two that leaves segments of at least 4 KiB.
    LutSegments { n: u32 },
    /// `n` requester-ID LUT entries: an adapter has 1 to 255.
    RidLutEntries { n: u16 },
    /// `n` doorbell bits: at most 64.
    Doorbells { n: u16 },
    /// `n` cable ports: an adapter has 1 to 4.
    CablePorts { n: u8 },
    /// `ports` ports of a cluster switch whose profile `profile` has `max`.
    ClusterPorts { ports: u8, profile: String, max: u8 },
}

impl fmt::Display for DeviceFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceFault::SwitchPorts { downstream, profile, ports } => {
                write!(f, "{downstream} downstream ports: profile '{profile}' has {ports} ports in all (one upstream)")
            }
            DeviceFault::DownstreamPorts { n } => write!(f, "{n}: expected 1 to 32 downstream ports"),
            DeviceFault::Functions { n } => write!(f, "{n} functions: expected 1 to 8"),
            DeviceFault::NumVfsWithFunctions => write!(f, "num_vfs applies to a profile device; with 'functions', give 'sriov' per function"),
            DeviceFault::Vfs { asked, total } => write!(f, "{asked} VFs requested but the device supports {total}"),
            DeviceFault::Windows { n } => write!(f, "{n} memory windows: an NTB function has room for 1 or 2 64-bit window BARs (BAR2, BAR4)"),
            DeviceFault::WindowSize { size } => write!(f, "window size {size:#x}: expected a power of two of at least 4 KiB"),
            DeviceFault::LutSegments { n } => write!(f, "{n} LUT segments: expected a power of two that leaves segments of at least 4 KiB"),
            DeviceFault::RidLutEntries { n } => write!(f, "{n}: expected 1 to 255 requester-ID LUT entries"),
            DeviceFault::Doorbells { n } => write!(f, "{n}: at most 64 doorbell bits"),
            DeviceFault::CablePorts { n } => write!(f, "{n} cable ports: expected 1 to 4"),
            DeviceFault::ClusterPorts { ports, profile, max } => write!(f, "{ports} ports: profile '{profile}' has 1 to {max}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SpecFault;

    /// The messages are the ones the loader printed when a `SpecError` held a `String`.
    #[test]
    fn each_device_fault_renders_the_loader_s_message() {
        let cases = [
            (DeviceFault::SwitchPorts { downstream: 9, profile: "s".into(), ports: 8 }, "9 downstream ports: profile 's' has 8 ports in all (one upstream)"),
            (DeviceFault::DownstreamPorts { n: 0 }, "0: expected 1 to 32 downstream ports"),
            (DeviceFault::Functions { n: 9 }, "9 functions: expected 1 to 8"),
            (DeviceFault::NumVfsWithFunctions, "num_vfs applies to a profile device; with 'functions', give 'sriov' per function"),
            (DeviceFault::Vfs { asked: 8, total: 4 }, "8 VFs requested but the device supports 4"),
            (DeviceFault::Windows { n: 3 }, "3 memory windows: an NTB function has room for 1 or 2 64-bit window BARs (BAR2, BAR4)"),
            (DeviceFault::WindowSize { size: 0x1800 }, "window size 0x1800: expected a power of two of at least 4 KiB"),
            (DeviceFault::LutSegments { n: 3 }, "3 LUT segments: expected a power of two that leaves segments of at least 4 KiB"),
            (DeviceFault::RidLutEntries { n: 0 }, "0: expected 1 to 255 requester-ID LUT entries"),
            (DeviceFault::Doorbells { n: 65 }, "65: at most 64 doorbell bits"),
            (DeviceFault::CablePorts { n: 5 }, "5 cable ports: expected 1 to 4"),
            (DeviceFault::ClusterPorts { ports: 9, profile: "mxs824".into(), max: 8 }, "9 ports: profile 'mxs824' has 1 to 8"),
        ];
        for (fault, text) in cases {
            assert_eq!(SpecFault::from(fault).to_string(), text);
        }
    }
}
