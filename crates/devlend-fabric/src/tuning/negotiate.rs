//! What a device may ask for as a requester, negotiated as Linux configures it
//! (drivers/pci/probe.c, pci_configure_device): its profile's capabilities against the fabric's
//! settings and its host's root complex. Per-run overrides (`params: devices:`) apply after.
//!
//! - Max_Payload_Size: the configured value (`[timing] max_payload`, 000 §7.1's 256 bytes) unless
//!   the device supports less (Device Capabilities, Max_Payload_Size Supported); the path then
//!   takes the smallest of its links (`link_table`).
//! - Max_Read_Request_Size: the profile's (firmware or driver setting; Linux's default
//!   pcie_bus_config leaves it as it finds it), else `[timing] max_read_request`.
//! - Read tags: a 5-bit tag gives 32 outstanding reads; Linux turns on Extended Tags (8 bits, 256)
//!   for every device that supports them (pci_configure_extended_tags, Linux >= 4.11); 10-bit
//!   tags (768 outstanding, PCIe Base 4.0 §2.2.6.2) only where the device is a 10-Bit Tag
//!   Requester and its root port a 10-Bit Tag Completer (pci_configure_10bit_tags, Linux >= 5.14).
//!   The device's DMA engine may keep fewer reads open than its tags allow: its profile says so.

use crate::params::{CpuProfile, DeviceProfile};
use crate::tuning::{DeviceTuning, Timing};

/// Reads a requester may keep open with tags of `bits` bits (PCIe Base 4.0 §2.2.6.2).
pub fn tags_of(bits: u32) -> u32 {
    match bits {
        0..=5 => 32,
        6..=8 => 256,
        _ => 768,
    }
}

/// The device's requester settings from its profile (`None`: a device described by functions,
/// which has the global settings) on a host of CPU `cpu`.
pub fn device(t: &Timing, profile: Option<&DeviceProfile>, cpu: &CpuProfile) -> DeviceTuning {
    let base = DeviceTuning::global(t);
    let Some(p) = profile else { return base };
    let bits = match p.tag_bits {
        Some(10) if !cpu.tag10_completer => 8,
        b => b.unwrap_or(5),
    };
    let tags = if p.tag_bits.is_some() { tags_of(bits) } else { t.read_tags };
    DeviceTuning {
        max_payload: p.max_payload_supported.map_or(t.max_payload, |m| m.min(t.max_payload)),
        max_read_request: p.max_read_request.unwrap_or(t.max_read_request),
        read_tags: p.dma_outstanding_reads.map_or(tags, |n| n.min(tags)),
        dma_read_interval_ps: p.dma_read_interval_ps.unwrap_or(0),
        dma_write_interval_ps: p.dma_write_interval_ps.unwrap_or(0),
        dma_read_line_ps: p.dma_read_line_ps.unwrap_or(0),
        ..base
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::params;
    use crate::tuning::default_timing;

    fn profile(mpss: u32, mrrs: u32, bits: u32, outstanding: Option<u32>) -> DeviceProfile {
        DeviceProfile {
            max_payload_supported: Some(mpss),
            max_read_request: Some(mrrs),
            tag_bits: Some(bits),
            dma_outstanding_reads: outstanding,
            ..params().device["quadro-k420"].clone()
        }
    }

    #[test]
    fn settings_are_negotiated_as_linux_does() {
        let t = default_timing();
        let xeon = params().cpu["intel-xeon-e5"].clone();
        let gen4_root = CpuProfile { tag10_completer: true, ..xeon.clone() };
        // MPS: the configured 256 unless the device supports less.
        assert_eq!(device(t, Some(&profile(128, 512, 5, None)), &xeon).max_payload, 128);
        assert_eq!(device(t, Some(&profile(512, 512, 5, None)), &xeon).max_payload, t.max_payload);
        assert_eq!(device(t, Some(&profile(512, 4096, 5, None)), &xeon).max_read_request, 4096);
        // Tags: 5-bit 32, Extended Tags 256, 10-bit only with a 10-Bit Tag Completer root.
        assert_eq!(device(t, Some(&profile(256, 512, 5, None)), &xeon).read_tags, 32);
        assert_eq!(device(t, Some(&profile(256, 512, 8, None)), &xeon).read_tags, 256);
        assert_eq!(device(t, Some(&profile(256, 512, 10, None)), &xeon).read_tags, 256);
        assert_eq!(device(t, Some(&profile(256, 512, 10, None)), &gen4_root).read_tags, 768);
        // The DMA engine's own limit wins when it is lower.
        assert_eq!(device(t, Some(&profile(256, 512, 10, Some(64))), &gen4_root).read_tags, 64);
        // A profile that states none of these has the global settings.
        let plain = device(t, Some(&params().device["quadro-k420"]), &xeon);
        assert_eq!((plain.max_payload, plain.max_read_request, plain.read_tags), (t.max_payload, t.max_read_request, t.read_tags));
    }
}
