//! The hardware parameter file, `params/hardware.toml`, compiled in. Every constant the model
//! uses is read from here; each table carries a `source` naming the paper section or datasheet.
//! Device profiles and kind tables may be added while the program runs, checked as the file's
//! are (`profiles.rs`: [`register_profiles`], [`validate`]).

use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

mod profiles;
pub use profiles::{register_profiles, validate, ProfileError, ProfileProblem};

pub const HARDWARE_TOML: &str = include_str!("../../../params/hardware.toml");

/// The compiled-in [`HARDWARE_TOML`] parsed once per process: the crates that read tables of their
/// own (`[timing]`, `[vm]`, `[xenib]`, ...) take them from here ([`from_hardware`]) instead of each
/// parsing the whole file again.
pub fn hardware_table() -> &'static toml::Table {
    static T: OnceLock<toml::Table> = OnceLock::new();
    T.get_or_init(|| toml::from_str(HARDWARE_TOML).expect("params/hardware.toml is malformed"))
}

/// `T` (a struct naming the tables it reads) from the compiled-in file's tables
/// ([`hardware_table`]), as `toml::from_str(HARDWARE_TOML)` would give it.
pub fn from_hardware<T: DeserializeOwned>() -> Result<T, toml::de::Error> {
    toml::Value::Table(hardware_table().clone()).try_into()
}

#[derive(Debug, Clone, Deserialize)]
pub struct CpuProfile {
    pub description: String,
    pub p2p_through_root: bool,
    pub read_split_bytes: u32,
    /// Whether the root ports complete 10-bit tags (PCIe Base 4.0 §2.2.6.2, 10-Bit Tag Completer).
    #[serde(default)]
    pub tag10_completer: bool,
    /// Largest completion the root complex returns for a DMA read of RAM (the path's MPS caps it).
    pub ram_completion_bytes: u32,
    /// The root complex's intake of DMA writes to RAM, per 64-byte cache line (its posted-write
    /// path into the cache and memory, one line after another).
    pub ram_write_line_ps: u64,
    /// The same intake's time per posted write TLP, besides its lines (the TLP's header and its
    /// transaction in the root); only while `ram_write_line_ps` is on (non-zero).
    #[serde(default)]
    pub ram_write_tlp_ps: u64,
    pub low_ram_top: u64,
    pub mmio32_end: u64,
    pub mmio64_base: u64,
    pub phys_addr_bits: u32,
    /// This CPU's root-complex crossing, where the profile has its own (fitted to its hosts'
    /// measured paths); otherwise `[timing] root_latency_ps`.
    #[serde(default)]
    pub root_latency_ps: Option<u64>,
    pub source: String,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub struct BarParam {
    pub index: u8,
    pub size: u64,
    pub bits: u8,
    pub pref: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeviceProfile {
    pub kind: String,
    /// Config-space class code (base class, sub-class, programming interface); one per kind.
    pub class_code: u32,
    pub vendor: u16,
    pub device: u16,
    pub max_gen: u8,
    pub max_width: u8,
    pub bars: Vec<BarParam>,
    #[serde(default)]
    pub vf_bars: Vec<BarParam>,
    #[serde(default)]
    pub total_vfs: u16,
    pub msix_vectors: u16,
    /// Device memory behind the BARs (a GPU's frame buffer), when it differs from what a BAR shows.
    #[serde(default)]
    pub memory: Option<u64>,
    /// Bytes per second its device memory takes (a GPU's): how fast its own engine fills it.
    #[serde(default)]
    pub memory_bandwidth: Option<u64>,
    /// Requester capabilities and settings (`tuning::negotiate`); unstated: the `[timing]` values.
    #[serde(default)]
    pub max_payload_supported: Option<u32>,
    #[serde(default)]
    pub max_read_request: Option<u32>,
    /// Tag width the device can request with: 5, 8 (Extended Tag Field) or 10 bits.
    #[serde(default)]
    pub tag_bits: Option<u32>,
    /// Reads the device's DMA engine keeps open at most, below what its tags allow.
    #[serde(default)]
    pub dma_outstanding_reads: Option<u32>,
    /// The DMA engine starts at most one read transfer (descriptor) per this many ps (its issue
    /// rate; unstated: no limit below the link's).
    #[serde(default)]
    pub dma_read_interval_ps: Option<u64>,
    /// The same for write transfers.
    #[serde(default)]
    pub dma_write_interval_ps: Option<u64>,
    /// The DMA engine takes in a read's data at this many ps per 64-byte line after the first
    /// (unstated: at once, beyond `dma_completion_ps`).
    #[serde(default)]
    pub dma_read_line_ps: Option<u64>,
    pub source: String,
    /// Its other keys by name: its kind's own constants, which its device model reads (an NVMe
    /// drive's media, `[device_kind.nvme] settings`), and the lspci import's fields.
    #[serde(flatten)]
    pub constants: BTreeMap<String, toml::Value>,
}

/// A device kind (`[device_kind.KIND]`): its own settings, the keys a topology's `params` may set
/// on a device of that kind beyond every device's (`devices.NAME.KEY`), which its device model
/// reads over its profile's values (the fabric checks and records them without knowing the kind);
/// and the classes the lspci/sysfs import (python/devlend/lspci/assemble.py) takes as this kind;
/// how a device of the kind that has no profile (an import whose IDs no profile has) is driven.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceKindProfile {
    #[serde(default)]
    pub settings: Vec<KindSetting>,
    /// Class codes by their leading hex digits (base class, or base class and sub-class).
    #[serde(default)]
    pub import_classes: Vec<String>,
    /// The same classes by the names lspci prints without `-nn`.
    #[serde(default)]
    pub import_class_names: Vec<String>,
    /// The profile whose model parameters a device of the kind without a profile is driven with
    /// (a drive's media); none: the model needs none.
    #[serde(default)]
    pub default_profile: Option<String>,
    /// How a device of the kind without a profile is driven, for the import's warning (its
    /// placeholders `{device}` and `{default_profile}`); none: the import does not warn.
    #[serde(default)]
    pub unprofiled: Option<String>,
    pub source: String,
}

/// One setting of a device kind: its key, its unit (`ps`, `bytes`, `bytes/s` or `commands`) and,
/// where a profile may leave it out, what it is then (text for `devlend params`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindSetting {
    pub key: String,
    pub unit: String,
    #[serde(default)]
    pub default: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub struct WindowParam {
    pub size: u64,
    pub lut_segments: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NtbProfile {
    pub description: String,
    pub max_gen: u8,
    pub max_width: u8,
    pub control_bar_size: u64,
    pub windows: Vec<WindowParam>,
    pub rid_lut_entries: u16,
    pub doorbells: u8,
    pub scratchpads: u8,
    pub message_registers: u8,
    /// Cable ports that can each go to another peer (or cluster switch).
    #[serde(default = "one")]
    pub cable_ports: u8,
    pub source: String,
}

fn one() -> u8 {
    1
}

/// An NTB cluster switch (see `cluster`).
#[derive(Debug, Clone, Deserialize)]
pub struct ClusterSwitchProfile {
    pub description: String,
    pub max_gen: u8,
    pub max_width: u8,
    pub ports: u8,
    pub source: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SwitchProfile {
    pub description: String,
    pub max_gen: u8,
    pub ports: u8,
    pub source: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct X86 {
    pub msi_base: u64,
    pub msi_size: u64,
    pub four_gib: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Pci {
    pub bridge_mem_align: u64,
    pub min_bar_align: u64,
    pub config_space_size: usize,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Iommu {
    pub address_bits: u32,
    pub page_4k: u64,
    pub page_2m: u64,
    pub fault_log_entries: usize,
}

/// Bounds of devlend's own logs (not hardware).
#[derive(Debug, Clone, Deserialize)]
pub struct Log {
    pub events: usize,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Params {
    pub cpu: BTreeMap<String, CpuProfile>,
    pub x86: X86,
    pub pci: Pci,
    pub iommu: Iommu,
    pub log: Log,
    pub device: BTreeMap<String, DeviceProfile>,
    /// Per device kind, its own settings; a kind without a table has none.
    #[serde(default)]
    pub device_kind: BTreeMap<String, DeviceKindProfile>,
    pub ntb: BTreeMap<String, NtbProfile>,
    pub switch: BTreeMap<String, SwitchProfile>,
    #[serde(default)]
    pub cluster_switch: BTreeMap<String, ClusterSwitchProfile>,
}

/// The parameters in force: the parameter file, checked as [`register_profiles`] checks a
/// profile added while the program runs (by a unit test, so a bad edit fails CI), with every
/// registered profile and kind table merged in.
pub fn params() -> &'static Params {
    profiles::current()
}

#[cfg(test)]
mod tests {
    #[test]
    fn parameter_file_parses_and_every_profile_has_a_source() {
        let p = super::params();
        assert!(p.cpu.values().all(|c| !c.source.is_empty()));
        assert!(p.device.values().all(|d| !d.source.is_empty()));
        assert!(p.ntb.values().all(|n| !n.source.is_empty()));
        assert_eq!(p.cpu["intel-xeon-e5"].read_split_bytes, 64);
    }

    #[test]
    fn every_gpu_profile_has_its_memory_beside_its_bar1() {
        let p = super::params();
        for (name, d) in p.device.iter().filter(|(_, d)| d.kind == "gpu") {
            let bar1 = d.bars.iter().find(|b| b.index == 1).map(|b| b.size);
            assert!(d.memory.is_some() && bar1.is_some(), "{name}: a GPU profile names its memory and a BAR 1");
            assert!(d.memory_bandwidth.is_some(), "{name}: a GPU profile names its memory bandwidth (how long a scrub's fill takes)");
        }
        let k40 = &p.device["tesla-k40c"];
        assert_eq!((k40.memory, k40.bars[1].size), (Some(12 << 30), 256 << 20));
    }

    /// The parameter file passes the checks a registered profile passes; its kinds' class codes.
    #[test]
    fn the_parameter_file_passes_the_profile_checks() {
        let p = super::validate(&[super::HARDWARE_TOML]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!p.device_kind.is_empty());
        let codes: Vec<(&str, u32)> =
            ["gpu", "nvme", "nic", "generic"].iter().map(|k| (*k, p.device.values().find(|d| d.kind == *k).unwrap().class_code)).collect();
        assert_eq!(codes, [("gpu", 0x03_00_00), ("nvme", 0x01_08_02), ("nic", 0x02_00_00), ("generic", 0x06_80_00)]);
    }
}
