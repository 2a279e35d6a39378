//! The topology description as the core receives it: JSON produced by the Python front end
//! after schema validation (pydantic), with sizes as integers and profile names unexpanded.
//! The same structures can be built directly in Rust (tests, benchmarks). Semantic checks
//! (names, links, cycles, resources) happen in `build` and report JSON pointers into this shape.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    pub hosts: Vec<HostSpec>,
    #[serde(default)]
    pub switches: Vec<SwitchSpec>,
    #[serde(default)]
    pub devices: Vec<DeviceSpec>,
    #[serde(default)]
    pub ntbs: Vec<NtbSpec>,
    /// NTB cluster switches (see `cluster`): hosts' adapters cabled to their ports reach each other.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_switches: Vec<ClusterSwitchSpec>,
    #[serde(default)]
    pub links: Vec<LinkSpec>,
    #[serde(default)]
    pub setup: Vec<SetupOp>,
    /// Overrides of hardware constants (see `tuning`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<crate::tuning::ParamsSpec>,
    /// Virtual machines on the hosts (started by the hypervisor layer, devlend-vm; the fabric
    /// only carries their description).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vms: Vec<VmSpec>,
}

/// A VM: its RAM, the host it runs on, and the devices it gets.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    pub name: String,
    pub host: String,
    /// Bytes of guest RAM (a multiple of 2 MiB).
    pub memory: u64,
    #[serde(default)]
    pub devices: Vec<VmDeviceSpec>,
}

/// A device of a VM and how it reaches the VM; the path defaults to the one its place implies.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmDeviceSpec {
    pub device: String,
    #[serde(default)]
    pub path: Option<VmPathSpec>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum VmPathSpec {
    /// VFIO pass-through of a device in the VM's own host.
    Vfio,
    /// Device Lending's mediated device: a device in another host.
    Mediated,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub name: String,
    pub cpu: String,
    /// Bytes of RAM, laid out x86-style: low RAM up to the profile's `low_ram_top`, the rest from 4 GiB.
    pub ram: u64,
    #[serde(default)]
    pub iommu: bool,
    /// VT-d interrupt remapping (`intremap`): default on wherever the IOMMU is, as Linux turns
    /// it on with the IOMMU (`intremap=on`); `false` keeps compatibility-format MSIs (`intremap=off`).
    #[serde(default)]
    pub interrupt_remapping: Option<bool>,
    pub root_ports: u8,
    #[serde(default)]
    pub memory_map: Option<MemoryMapSpec>,
}

/// Overrides of the CPU profile's physical address map.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct MemoryMapSpec {
    pub low_ram_top: Option<u64>,
    pub mmio32_end: Option<u64>,
    pub mmio64_base: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    pub name: String,
    #[serde(default)]
    pub profile: Option<String>,
    pub downstream_ports: u8,
}

/// What kind of device an endpoint is: the `kind` of a device profile in `params/hardware.toml`
/// (`gpu`, `nvme`, ... : one per device model, `devlend-drivers`' registry), or [`DeviceKind::GENERIC`]
/// for BARs with no model behind them. The fabric takes the kinds the profiles name, so a new
/// device type is a profile of a new kind, not a change here.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct DeviceKind(String);

impl DeviceKind {
    /// The kind of a device without a model of its own.
    pub const GENERIC: &'static str = "generic";

    pub fn new(kind: &str) -> DeviceKind {
        DeviceKind(kind.to_string())
    }
    pub fn generic() -> DeviceKind {
        DeviceKind::new(Self::GENERIC)
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BarSpec {
    pub index: u8,
    pub size: u64,
    #[serde(default = "default_bits")]
    pub bits: u8,
    #[serde(default)]
    pub pref: bool,
}

fn default_bits() -> u8 {
    32
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SriovSpec {
    pub num_vfs: u16,
    #[serde(default)]
    pub total_vfs: Option<u16>,
    #[serde(default)]
    pub vf_bars: Option<Vec<BarSpec>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FunctionSpec {
    #[serde(default)]
    pub bars: Vec<BarSpec>,
    #[serde(default)]
    pub msix_vectors: u16,
    #[serde(default)]
    pub sriov: Option<SriovSpec>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    pub name: String,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub kind: Option<DeviceKind>,
    /// Functions 0..n. Without it, the profile's single function (and its SR-IOV capability).
    #[serde(default)]
    pub functions: Option<Vec<FunctionSpec>>,
    /// Number of SR-IOV virtual functions to enable on function 0 of a profile device.
    #[serde(default)]
    pub num_vfs: Option<u16>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    pub size: u64,
    #[serde(default)]
    pub lut_segments: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NtbSpec {
    pub name: String,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub windows: Option<Vec<WindowSpec>>,
    #[serde(default)]
    pub rid_lut_entries: Option<u16>,
    #[serde(default)]
    pub doorbells: Option<u8>,
    #[serde(default)]
    pub scratchpads: Option<u8>,
    #[serde(default)]
    pub message_registers: Option<u8>,
    /// Cable ports (`NAME.cable0`, `NAME.cable1`, ...; `NAME.cable` is port 0), each to its own
    /// peer or cluster switch. Default: the profile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cable_ports: Option<u8>,
}

/// An NTB cluster switch (Dolphin MXS824 class): ports `NAME.p0` ... joined by cables to NTB
/// adapters' cable ports.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSwitchSpec {
    pub name: String,
    #[serde(default)]
    pub profile: Option<String>,
    /// Ports in use; default and maximum: the profile's.
    #[serde(default)]
    pub ports: Option<u8>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    #[default]
    Slot,
    Cable,
    /// A PCI-X bus segment between a host bridge and one card (004's MHXL-CF128-T): half duplex,
    /// timed by the `pcix_*` constants of `[timing]`; `gen` and `width` only serve enumeration.
    Pcix,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Upstream end: `HOST.rpN`, `SWITCH.dN`, or for a cable `NTB.cable[K]` or `CLUSTERSWITCH.pN`.
    pub a: String,
    /// Downstream end: `SWITCH.up` (or `SWITCH`), `DEVICE`, `NTB` (its slot side), or for a cable
    /// `NTB.cable[K]` or `CLUSTERSWITCH.pN`.
    pub b: String,
    pub gen: u8,
    pub width: u8,
    #[serde(default)]
    pub kind: LinkKind,
}

/// Programming applied after enumeration, through the same Linux-named interfaces software uses.
/// Addresses may be integers or symbolic expressions (see `Fabric::resolve_addr`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum SetupOp {
    /// `ntb_mw_set_trans`: where inbound accesses through memory window `window` land in this NTB's host.
    NtbMwSetTrans { ntb: String, window: u8, addr: Addr, size: u64 },
    /// Program one LUT segment of a segmented window.
    NtbLutSetTrans { ntb: String, window: u8, segment: u32, addr: Addr },
    /// Allow a requester of this NTB's host to cross the bridge (requester-ID LUT entry).
    NtbRidLutAdd { ntb: String, requester: String },
    /// Create an IOMMU domain on a host.
    IommuDomain { host: String, domain: String },
    /// Attach a device (and its DMA aliases) to a domain.
    IommuAttach { host: String, domain: String, device: String },
    /// Map `size` bytes at `iova` to `addr` in a domain.
    IommuMap {
        host: String,
        domain: String,
        iova: Addr,
        addr: Addr,
        size: u64,
        #[serde(default = "yes")]
        write: bool,
    },
    /// Set or clear the Bus Master Enable bit in a function's command register.
    BusMaster {
        device: String,
        #[serde(default = "yes")]
        enable: bool,
    },
}

fn yes() -> bool {
    true
}

/// An address: a number, or an expression such as `gpu0.bar1+0x1000`, `borrower.ram+0x100000`,
/// `ntb-a.mw0+0x2000`, resolved after enumeration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Addr {
    Num(u64),
    Expr(String),
}
