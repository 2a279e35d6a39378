//! Parameters as data: the `[timing]` constants of `params/hardware.toml` (compiled in, the
//! defaults) and a topology's `params` section overriding them globally, per host, per device or
//! per link, without a rebuild. `build` resolves the section into the fabric's [`Tuning`], the
//! effective parameters the engine reads (`Fabric::tuning`); no global is consulted on the way.
//!
//! A device has the settings every device has (`DEVICE`, into [`DeviceTuning`]) and those its
//! kind declares as its own in params/hardware.toml (`[device_kind.KIND] settings`: each key with
//! its unit), which the fabric checks and keeps by key ([`Tuning::own_settings`]) for the kind's
//! device model to read over its profile's values (an NVMe drive's media, `devlend-devices`
//! nvme.rs). The fabric names no kind: a new type with settings of its own adds its table there.
//!
//! Linux's rule where it applies: the payload size a path can use is the smallest Max_Payload_Size
//! of every link on it (a receiver treats a TLP larger than its MPS as malformed, PCIe Base 3.0
//! §2.2.2; Linux's `pcie_bus_config` modes only choose which common value each hierarchy gets).

use crate::error::{ParamFault, SpecError};
use crate::fabric::Fabric;
use crate::model::{FuncId, LinkId, NodeKind};
use crate::params::KindSetting;
use crate::spec::LinkSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

pub mod negotiate;
mod value;
use value::parse;
pub use value::{Kind, ValueError};

/// What the discrete-event engine charges (the `[timing]` table). Integer picoseconds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Timing {
    pub request_overhead_bytes: u32,
    pub completion_overhead_bytes: u32,
    pub dllp_bytes: u32,
    pub dllp_timer_pct: u32,
    pub max_payload: u32,
    pub max_read_request: u32,
    pub read_tags: u32,
    pub rx_buffer_tlps: u32,
    pub updatefc_ps: u64,
    pub switch_latency_ps: u64,
    pub switch_cut_through: bool,
    pub root_latency_ps: u64,
    pub dram_latency_ps: u64,
    pub iotlb_hit_ps: u64,
    pub iotlb_entries: u32,
    pub iotlb_lru: bool,
    pub pwc_entries: u32,
    pub ntb_latency_ps: u64,
    pub cable_prop_ps_per_m: u64,
    pub cable_length_m: u64,
    pub slot_prop_ps: u64,
    pub endpoint_latency_ps: u64,
    pub dma_issue_ps: u64,
    pub dma_completion_ps: u64,
    pub sm_to_pcie_ps: u64,
    pub sm_poll_ps: u64,
    pub irq_entry_ps: u64,
    pub cuda_call_ps: u64,
    pub cluster_switch_latency_ps: u64,
    /// How long a requester waits for a completion that never comes (a hung completer).
    pub completion_timeout_ps: u64,
    /// How long the NVMe driver waits for a command before its timeout handler runs (Linux `nvme_core.io_timeout`).
    pub nvme_io_timeout_ps: u64,
    /// How long the GPU driver waits on a copy's semaphore before it checks whether the GPU still answers.
    pub gpu_watchdog_ps: u64,
    /// A PCI-X bus (a link of kind `pcix`): its clock, the bytes of one data phase, and the
    /// clocks of one transaction's address, attribute and response phases and turnaround.
    pub pcix_clock_ps: u64,
    pub pcix_bytes_per_clock: u64,
    pub pcix_overhead_clocks: u64,
    /// From a link going down to its port's hot-plug interrupt (or an NTB adapter's link-down one).
    pub hotplug_detect_ps: u64,
    /// From a hot-plug interrupt to the device removed and its driver's `remove` run (pciehp).
    pub hotplug_remove_ps: u64,
    /// Device Lending's notice of a lend's end from the lender's agent to the borrower's.
    pub dl_notice_ps: u64,
    /// From an error's detection to its message handled by the host's AER driver.
    pub aer_irq_ps: u64,
    /// How long software waits after a Function Level Reset before using the function.
    pub flr_wait_ps: u64,
    /// One page-table read of an IOMMU walk; `None`: a DRAM access (`dram_latency_ps`).
    #[serde(default)]
    pub iommu_walk_read_ps: Option<u64>,
}

impl Timing {
    /// What one page-table read of an IOMMU walk costs.
    pub fn walk_read_ps(&self) -> u64 {
        self.iommu_walk_read_ps.unwrap_or(self.dram_latency_ps)
    }

    /// The per-TLP wire overheads, for `devlend_wire::Overheads::wire_bytes` (the one place TLP
    /// sizes are computed).
    pub fn overheads(&self) -> devlend_wire::Overheads {
        devlend_wire::Overheads { request: self.request_overhead_bytes, completion: self.completion_overhead_bytes, dllp: self.dllp_bytes }
    }
}

/// The compiled-in `[timing]` table: the defaults every fabric starts from.
pub fn default_timing() -> &'static Arc<Timing> {
    #[derive(Deserialize)]
    struct File {
        timing: Timing,
    }
    static T: OnceLock<Arc<Timing>> = OnceLock::new();
    T.get_or_init(|| Arc::new(crate::params::from_hardware::<File>().expect("[timing] in params/hardware.toml is malformed").timing))
}

/// The `params` section of a topology description. Keys are constants; values are integers in
/// the constant's unit (ps, bytes, metres, TLPs) or strings with a unit ("350 ns", "4 KiB").
/// `cpus` is keyed by CPU profile (every host of that profile), `links` by either end of a link
/// as `links` writes it (`HOST.rp0`, `gpu0`, `ntb-a.cable`). A host's own setting wins over its
/// CPU profile's, which wins over `timing`.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ParamsSpec {
    #[serde(default)]
    pub timing: BTreeMap<String, Value>,
    #[serde(default)]
    pub cpus: BTreeMap<String, BTreeMap<String, Value>>,
    #[serde(default)]
    pub hosts: BTreeMap<String, BTreeMap<String, Value>>,
    #[serde(default)]
    pub devices: BTreeMap<String, BTreeMap<String, Value>>,
    #[serde(default)]
    pub links: BTreeMap<String, BTreeMap<String, Value>>,
    /// devlend's own bounds (`[limits]`): the simulated-memory budget.
    #[serde(default)]
    pub limits: BTreeMap<String, Value>,
}

/// devlend's own bounds on a run (`[limits]` of params/hardware.toml; a topology's `limits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// The most bytes of simulated memory a run's workloads may hold (a GPU copy holds its size
    /// twice: in the GPU's memory and in the runner's buffer).
    pub memory_bytes: u64,
}

/// The compiled-in `[limits]` table.
pub fn default_limits() -> Limits {
    #[derive(Deserialize)]
    struct File {
        limits: Limits,
    }
    static L: OnceLock<Limits> = OnceLock::new();
    *L.get_or_init(|| crate::params::from_hardware::<File>().expect("[limits] in params/hardware.toml is malformed").limits)
}

/// A host's root complex and CPU as requester.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostTuning {
    pub root_latency_ps: u64,
    pub ram_completion_bytes: u32,
    /// The root complex's intake of posted writes to RAM: time per 64-byte cache line, one
    /// write after another (0: as fast as the link delivers).
    pub ram_write_line_ps: u64,
    /// The same intake's time per posted write TLP besides its lines (only while
    /// `ram_write_line_ps` is non-zero: 0 there turns the whole intake off).
    pub ram_write_tlp_ps: u64,
    pub read_tags: u32,
    pub max_read_request: u32,
    /// An interrupt's entry on this host's CPU until the waiting driver runs (every path: bare
    /// metal, a lender forwarding to a VM, a borrower relaying to one).
    pub irq_entry_ps: u64,
    /// The CUDA-like runtime's CPU time per copy call on this host.
    pub cuda_call_ps: u64,
}

/// A device as completer (its BAR memory's latency) and as requester.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceTuning {
    pub endpoint_latency_ps: u64,
    pub max_payload: u32,
    pub max_read_request: u32,
    pub read_tags: u32,
    /// Its DMA engine: from deciding to move data to its first request on the link.
    pub dma_issue_ps: u64,
    /// Its DMA engine: from a read's last completion arriving to the engine acting on the data.
    pub dma_completion_ps: u64,
    /// A GPU's SM access through its memory system to or from the PCIe interface, one way.
    pub sm_to_pcie_ps: u64,
    /// A GPU kernel's load from its own memory: the period of a polling loop.
    pub sm_poll_ps: u64,
    /// Its DMA engine's issue rate: at most one read (write) transfer started per this many ps;
    /// 0: no limit below the link's.
    pub dma_read_interval_ps: u64,
    pub dma_write_interval_ps: u64,
    /// Its DMA engine takes in a read's data at this many ps per 64-byte line after the first.
    pub dma_read_line_ps: u64,
}

impl DeviceTuning {
    /// The global `[timing]` settings: a device without a profile of its own.
    pub fn global(t: &Timing) -> DeviceTuning {
        DeviceTuning {
            endpoint_latency_ps: t.endpoint_latency_ps,
            max_payload: t.max_payload,
            max_read_request: t.max_read_request,
            read_tags: t.read_tags,
            dma_issue_ps: t.dma_issue_ps,
            dma_completion_ps: t.dma_completion_ps,
            sm_to_pcie_ps: t.sm_to_pcie_ps,
            sm_poll_ps: t.sm_poll_ps,
            dma_read_interval_ps: 0,
            dma_write_interval_ps: 0,
            dma_read_line_ps: 0,
        }
    }

    /// From a read of `bytes` bytes having all arrived to the engine acting on it: the engine's
    /// completion time and its intake of every 64-byte line after the first.
    pub fn read_done_ps(&self, bytes: u64) -> u64 {
        self.dma_completion_ps + bytes.div_ceil(64).saturating_sub(1) * self.dma_read_line_ps
    }
}

/// A link: its MPS (already the smaller of the link's and its devices'), buffers and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkTuning {
    pub max_payload: u32,
    pub rx_buffer_tlps: u32,
    pub cable_length_m: u64,
}

/// The effective parameters of one fabric. Lookups fall back to the global values, so a fabric
/// without overrides carries empty tables.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    pub timing: Arc<Timing>,
    hosts: Vec<HostTuning>,
    devices: Vec<DeviceTuning>,
    /// Per device, the settings of its kind's own (`[device_kind.KIND]`) that `params` gives.
    own: Vec<BTreeMap<String, u64>>,
    links: Vec<LinkTuning>,
    /// Every override as given, `scope.name.key` = value in the constant's unit, for reports.
    pub overrides: Vec<(String, String)>,
    pub limits: Limits,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            timing: default_timing().clone(),
            hosts: Vec::new(),
            devices: Vec::new(),
            own: Vec::new(),
            links: Vec::new(),
            overrides: Vec::new(),
            limits: default_limits(),
        }
    }
}

const GLOBAL: &[&str] = &[
    "dllp_timer_pct",
    "max_payload",
    "max_read_request",
    "read_tags",
    "rx_buffer_tlps",
    "updatefc_ps",
    "switch_latency_ps",
    "switch_cut_through",
    "root_latency_ps",
    "dram_latency_ps",
    "iotlb_hit_ps",
    "iotlb_entries",
    "iotlb_lru",
    "pwc_entries",
    "ntb_latency_ps",
    "cable_prop_ps_per_m",
    "cable_length_m",
    "slot_prop_ps",
    "endpoint_latency_ps",
    "dma_issue_ps",
    "dma_completion_ps",
    "sm_to_pcie_ps",
    "sm_poll_ps",
    "irq_entry_ps",
    "cuda_call_ps",
    "cluster_switch_latency_ps",
    "completion_timeout_ps",
    "nvme_io_timeout_ps",
    "gpu_watchdog_ps",
    "pcix_clock_ps",
    "hotplug_detect_ps",
    "hotplug_remove_ps",
    "dl_notice_ps",
    "aer_irq_ps",
    "iommu_walk_read_ps",
];
const CPU: &[&str] = &["root_latency_ps", "ram_write_line_ps", "ram_write_tlp_ps"];
const HOST: &[&str] = &[
    "root_latency_ps",
    "ram_completion_bytes",
    "ram_write_line_ps",
    "ram_write_tlp_ps",
    "read_split_bytes",
    "read_tags",
    "max_read_request",
    "irq_entry_ps",
    "cuda_call_ps",
    "interrupt_remapping",
];
const DEVICE: &[&str] = &[
    "endpoint_latency_ps",
    "max_payload",
    "max_read_request",
    "read_tags",
    "dma_issue_ps",
    "dma_completion_ps",
    "sm_to_pcie_ps",
    "sm_poll_ps",
    "dma_read_interval_ps",
    "dma_write_interval_ps",
    "dma_read_line_ps",
];
const LINK: &[&str] = &["max_payload", "rx_buffer_tlps", "cable_length_m", "gen", "width"];
const LIMITS: &[&str] = &["memory_bytes"];
/// A link key that names every link (applied before any link's own).
pub const ALL_LINKS: &str = "*";

impl Tuning {
    pub fn host(&self, h: u16) -> HostTuning {
        self.hosts.get(h as usize).copied().unwrap_or_else(|| {
            let t = &self.timing;
            // Without a fabric's hosts: completions as large as the payload allows.
            HostTuning {
                root_latency_ps: t.root_latency_ps,
                ram_completion_bytes: t.max_payload,
                ram_write_line_ps: 0,
                ram_write_tlp_ps: 0,
                read_tags: t.read_tags,
                max_read_request: t.max_read_request,
                irq_entry_ps: t.irq_entry_ps,
                cuda_call_ps: t.cuda_call_ps,
            }
        })
    }

    pub fn device(&self, d: u32) -> DeviceTuning {
        self.devices.get(d as usize).copied().unwrap_or_else(|| DeviceTuning::global(&self.timing))
    }

    /// The settings of device `d`'s kind's own that `params` gives it (`devices.NAME.KEY` for a
    /// key of `[device_kind.KIND] settings`), by key: its device model reads them over its
    /// profile's values. Empty where `params` gives none.
    pub fn own_settings(&self, d: u32) -> &BTreeMap<String, u64> {
        static NONE: BTreeMap<String, u64> = BTreeMap::new();
        self.own.get(d as usize).unwrap_or(&NONE)
    }

    pub fn link(&self, l: LinkId) -> LinkTuning {
        self.links.get(l as usize).copied().unwrap_or(LinkTuning {
            max_payload: self.timing.max_payload,
            rx_buffer_tlps: self.timing.rx_buffer_tlps,
            cable_length_m: self.timing.cable_length_m,
        })
    }
}

/// How long function `func`'s BAR memory takes to answer: its device's latency.
pub fn endpoint_latency_ps(f: &Fabric, func: FuncId) -> u64 {
    of_func(f, func).endpoint_latency_ps
}

/// The effective parameters of the device function `func` belongs to (the global ones for a
/// function that is not an endpoint device).
pub fn of_func(f: &Fabric, func: FuncId) -> DeviceTuning {
    match f.nodes[f.funcs[func as usize].node as usize].kind {
        NodeKind::Endpoint { device } => f.tuning.device(device),
        _ => f.tuning.device(u32::MAX),
    }
}

type SResult<T> = Result<T, SpecError>;

/// The fabric's effective parameters from the compiled defaults and `spec`; per-host
/// `read_split_bytes` goes into that host's CPU profile.
pub fn resolve(spec: &ParamsSpec, links: &[LinkSpec], f: &mut Fabric) -> SResult<Tuning> {
    let mut overrides = Vec::new();
    let mut json = serde_json::to_value(&**default_timing()).expect("Timing serialises");
    for (k, v) in &spec.timing {
        let n = setting(GLOBAL, "timing", k, v, "/params/timing", &mut overrides)?;
        json[k.as_str()] = n;
    }
    let timing: Timing = serde_json::from_value(json).expect("parsed values fit their fields");
    let mut t = Tuning { timing: Arc::new(timing), ..Tuning::default() };
    t.hosts = (0..f.hosts.len())
        .map(|h| {
            let cpu = &f.hosts[h].cpu;
            HostTuning {
                root_latency_ps: cpu.root_latency_ps.unwrap_or(t.timing.root_latency_ps),
                ram_completion_bytes: cpu.ram_completion_bytes,
                ram_write_line_ps: cpu.ram_write_line_ps,
                ram_write_tlp_ps: cpu.ram_write_tlp_ps,
                ..t.host(h as u16)
            }
        })
        .collect();
    t.devices = f
        .devices
        .iter()
        .map(|d| {
            let profile = d.profile.as_ref().and_then(|p| crate::params::params().device.get(p));
            negotiate::device(&t.timing, profile, &f.hosts[f.nodes[d.node as usize].host as usize].cpu)
        })
        .collect();
    cpu_settings(spec, f, &mut t, &mut overrides)?;
    for (name, kv) in &spec.hosts {
        let path = format!("/params/hosts/{name}");
        let h = f.hosts.iter().position(|h| &h.name == name).ok_or_else(|| unknown("host", name, &path, f.hosts.iter().map(|h| h.name.clone())))?;
        for (k, v) in kv {
            let n = setting(HOST, &format!("hosts.{name}"), k, v, &path, &mut overrides)?;
            if k == "interrupt_remapping" {
                continue; // applied while the fabric is built (build.rs), before any device is probed
            }
            let n = num(n);
            let ht = &mut t.hosts[h];
            match k.as_str() {
                "root_latency_ps" => ht.root_latency_ps = n,
                "ram_completion_bytes" => ht.ram_completion_bytes = n as u32,
                "ram_write_line_ps" => ht.ram_write_line_ps = n,
                "ram_write_tlp_ps" => ht.ram_write_tlp_ps = n,
                "read_tags" => ht.read_tags = n as u32,
                "max_read_request" => ht.max_read_request = n as u32,
                "irq_entry_ps" => ht.irq_entry_ps = n,
                "cuda_call_ps" => ht.cuda_call_ps = n,
                _ => f.hosts[h].cpu.read_split_bytes = n as u32,
            }
        }
    }
    device_settings(spec, f, &mut t, &mut overrides)?;
    t.links = link_table(spec, links, f, &t, &mut overrides)?;
    for (k, v) in &spec.limits {
        let n = num(setting(LIMITS, "limits", k, v, "/params/limits", &mut overrides)?);
        t.limits.memory_bytes = n;
    }
    t.overrides = overrides;
    Ok(t)
}

/// `devices.NAME.KEY`: a setting every device has, or one of the device's kind's own
/// (`[device_kind.KIND] settings` of params/hardware.toml), kept by key for its device model.
fn device_settings(spec: &ParamsSpec, f: &Fabric, t: &mut Tuning, overrides: &mut Vec<(String, String)>) -> SResult<()> {
    for (name, kv) in &spec.devices {
        let path = format!("/params/devices/{name}");
        let d = f.devices.iter().position(|d| &d.name == name).ok_or_else(|| unknown("device", name, &path, f.devices.iter().map(|d| d.name.clone())))?;
        let kind = f.devices[d].kind.as_str();
        let own = kind_settings(kind);
        let allowed: Vec<&str> = DEVICE.iter().copied().chain(own.iter().map(|s| s.key.as_str())).collect();
        for (k, v) in kv {
            if !allowed.contains(&k.as_str()) {
                if let Some(e) = another_kinds(&path, name, kind, k) {
                    return Err(e);
                }
            }
            let unit = own.iter().find(|s| &s.key == k).map(|s| unit_of(kind, s));
            let n = num(setting_as(unit.unwrap_or_else(|| Kind::of(k)), &allowed, &format!("devices.{name}"), k, v, &path, overrides)?);
            if unit.is_some() {
                if t.own.len() < f.devices.len() {
                    t.own.resize(f.devices.len(), BTreeMap::new());
                }
                t.own[d].insert(k.clone(), n);
                continue;
            }
            let dt = &mut t.devices[d];
            match k.as_str() {
                "endpoint_latency_ps" => dt.endpoint_latency_ps = n,
                "max_payload" => dt.max_payload = n as u32,
                "max_read_request" => dt.max_read_request = n as u32,
                "dma_issue_ps" => dt.dma_issue_ps = n,
                "dma_completion_ps" => dt.dma_completion_ps = n,
                "dma_read_interval_ps" => dt.dma_read_interval_ps = n,
                "dma_write_interval_ps" => dt.dma_write_interval_ps = n,
                "dma_read_line_ps" => dt.dma_read_line_ps = n,
                "sm_to_pcie_ps" => dt.sm_to_pcie_ps = n,
                "sm_poll_ps" => dt.sm_poll_ps = n,
                _ => dt.read_tags = n as u32,
            }
        }
    }
    Ok(())
}

/// Key `k` given to device `name` of kind `kind` is another kind's own setting: which, as an error.
fn another_kinds(path: &str, name: &str, kind: &str, k: &str) -> Option<SpecError> {
    let kinds: Vec<&str> = crate::params::params().device_kind.iter().filter(|(_, p)| p.settings.iter().any(|s| s.key == k)).map(|(n, _)| n.as_str()).collect();
    if kinds.is_empty() {
        return None;
    }
    let kinds = kinds.into_iter().map(str::to_string).collect();
    Some(SpecError::at(format!("{path}/{k}"), ParamFault::OtherKind { key: k.to_string(), device: name.to_string(), kind: kind.to_string(), kinds }))
}

/// The settings of device kind `kind`'s own (none without a `[device_kind.KIND]` table).
fn kind_settings(kind: &str) -> &'static [KindSetting] {
    crate::params::params().device_kind.get(kind).map_or(&[], |k| k.settings.as_slice())
}

/// A kind's own setting's value kind, by the unit its table gives (every table's units are
/// checked as it is taken, `params::validate`).
fn unit_of(kind: &str, s: &KindSetting) -> Kind {
    Kind::of_unit(&s.unit).unwrap_or_else(|| panic!("[device_kind.{kind}] {}: unit '{}' is not ps, bytes, bytes/s or commands", s.key, s.unit))
}

/// Whether `unit` is one a kind's own setting may have (ps, bytes, bytes/s or commands).
pub(crate) fn unit_is_known(unit: &str) -> bool {
    Kind::of_unit(unit).is_some()
}

/// `cpus.PROFILE.root_latency_ps`: every host of that CPU profile (the profile's own value, varied per run).
fn cpu_settings(spec: &ParamsSpec, f: &mut Fabric, t: &mut Tuning, overrides: &mut Vec<(String, String)>) -> SResult<()> {
    for (name, kv) in &spec.cpus {
        let path = format!("/params/cpus/{name}");
        if !crate::params::params().cpu.contains_key(name) {
            return Err(unknown("CPU profile", name, &path, crate::params::params().cpu.keys().cloned()));
        }
        for (k, v) in kv {
            let n = num(setting(CPU, &format!("cpus.{name}"), k, v, &path, overrides)?);
            for (h, host) in f.hosts.iter_mut().enumerate().filter(|(_, host)| &host.cpu_name == name) {
                if k == "ram_write_line_ps" {
                    host.cpu.ram_write_line_ps = n;
                    t.hosts[h].ram_write_line_ps = n;
                } else if k == "ram_write_tlp_ps" {
                    host.cpu.ram_write_tlp_ps = n;
                    t.hosts[h].ram_write_tlp_ps = n;
                } else {
                    host.cpu.root_latency_ps = Some(n);
                    t.hosts[h].root_latency_ps = n;
                }
            }
        }
    }
    Ok(())
}

/// Per link: the link's own settings, its MPS lowered to that of any device at either end.
fn link_table(spec: &ParamsSpec, ends: &[LinkSpec], f: &Fabric, t: &Tuning, overrides: &mut Vec<(String, String)>) -> SResult<Vec<LinkTuning>> {
    let mut links: Vec<LinkTuning> = (0..f.links.len()).map(|l| t.link(l as LinkId)).collect();
    for (end, kv) in &spec.links {
        let path = format!("/params/links/{end}");
        let which: Vec<usize> = if end == ALL_LINKS { (0..links.len()).collect() } else { vec![link_of(f, ends, end).ok_or_else(|| no_link(end, &path))?] };
        for (k, v) in kv {
            let n = num(setting(LINK, &format!("links.{end}"), k, v, &path, overrides)?);
            for &l in &which {
                let lt = &mut links[l];
                match k.as_str() {
                    "max_payload" => lt.max_payload = n as u32,
                    "rx_buffer_tlps" => lt.rx_buffer_tlps = n as u32,
                    "cable_length_m" => lt.cable_length_m = n,
                    _ => {} // gen and width: applied before the links were built and trained (`link_specs`)
                }
            }
        }
    }
    for (i, l) in f.links.iter().enumerate() {
        for node in [l.up, l.down] {
            if let NodeKind::Endpoint { device } = f.nodes[node as usize].kind {
                links[i].max_payload = links[i].max_payload.min(t.devices[device as usize].max_payload);
            }
        }
    }
    Ok(links)
}

fn no_link(end: &str, path: &str) -> SpecError {
    SpecError::at(path, ParamFault::NoLink { end: end.to_string() })
}

/// The description's links with the `gen` and `width` that `params` gives them (`links.*` for
/// every link, then a link's own by either end): what is built and trained. Checked here, so an
/// error names the setting, not the link.
pub fn link_specs(spec: Option<&ParamsSpec>, links: &[LinkSpec]) -> SResult<Vec<LinkSpec>> {
    let mut out = links.to_vec();
    for (end, kv) in spec.map(|p| &p.links).into_iter().flatten() {
        let path = format!("/params/links/{end}");
        let which: Vec<usize> = if end == ALL_LINKS {
            (0..out.len()).collect()
        } else {
            vec![links.iter().position(|l| &l.a == end || &l.b == end).ok_or_else(|| no_link(end, &path))?]
        };
        for (k, v) in kv.iter().filter(|(k, _)| *k == "gen" || *k == "width") {
            let n = parse(Kind::of(k), v).map_err(|error| SpecError::at(format!("{path}/{k}"), ParamFault::Value { key: k.clone(), error }))?;
            for &l in &which {
                let n = num(n.clone()) as u8;
                if k == "gen" {
                    out[l].gen = n;
                } else {
                    out[l].width = n;
                }
            }
        }
    }
    Ok(out)
}

/// Interrupt remapping of host `name` as `params` sets it (`hosts.NAME.interrupt_remapping`), if it does.
pub fn interrupt_remapping(spec: Option<&ParamsSpec>, name: &str) -> SResult<Option<bool>> {
    let Some(v) = spec.and_then(|p| p.hosts.get(name)).and_then(|kv| kv.get("interrupt_remapping")) else {
        return Ok(None);
    };
    let at = format!("/params/hosts/{name}/interrupt_remapping");
    parse(Kind::Flag, v).map(|b| b.as_bool()).map_err(|error| SpecError::at(at, ParamFault::Value { key: "interrupt_remapping".into(), error }))
}

/// Every constant `--set` (or a topology's `params`) may set: (key as written, its unit, what
/// it defaults to), for `devlend params`.
pub fn settable() -> Vec<(String, &'static str, String)> {
    let mut out = Vec::new();
    let mut add = |key: String, k: Kind, default: String| out.push((key, k.unit(), default));
    for k in GLOBAL {
        let d = if *k == "iommu_walk_read_ps" { "dram_latency_ps (one DRAM access per page-table read)".to_string() } else { format!("[timing] {k}") };
        add(format!("timing.{k}"), Kind::of(k), d);
    }
    for k in CPU {
        let d = if *k == "root_latency_ps" { format!("[cpu.PROFILE] {k}, else [timing] {k}") } else { format!("[cpu.PROFILE] {k}") };
        add(format!("cpus.PROFILE.{k}"), Kind::of(k), d);
    }
    for k in HOST {
        let d = match *k {
            "interrupt_remapping" => "on in a host with an IOMMU unless its description says interrupt_remapping: false".to_string(),
            _ => format!("the host's CPU profile, else [timing] {k}"),
        };
        add(format!("hosts.NAME.{k}"), Kind::of(k), d);
    }
    for k in DEVICE {
        add(format!("devices.NAME.{k}"), Kind::of(k), format!("[device.PROFILE] {k}, else [timing] {k}"));
    }
    for (kind, p) in &crate::params::params().device_kind {
        for s in &p.settings {
            let (k, or) = (&s.key, s.default.as_ref().map(|d| format!(", else {d}")).unwrap_or_default());
            add(format!("devices.NAME.{k}"), unit_of(kind, s), format!("[device.PROFILE] {k}{or} (kind {kind} only)"));
        }
    }
    for k in LINK {
        let d = match *k {
            "gen" | "width" => format!("the link's own {k} in the description, trained down to what both ends support"),
            _ => format!("[timing] {k}"),
        };
        add(format!("links.END.{k}"), Kind::of(k), d);
    }
    for k in LIMITS {
        add(format!("limits.{k}"), Kind::of(k), format!("[limits] {k}"));
    }
    out
}

/// The link with `end` as one of its ends, written as the description's `links` writes it.
fn link_of(f: &Fabric, links: &[LinkSpec], end: &str) -> Option<usize> {
    let j = links.iter().position(|l| l.a == end || l.b == end)?;
    let at = format!("/links/{j}");
    f.links.iter().position(|l| l.spec_path == at)
}

fn unknown(what: &'static str, name: &str, path: &str, known: impl Iterator<Item = String>) -> SpecError {
    SpecError::at(path, ParamFault::Unknown { what, name: name.to_string(), known: known.collect() })
}

fn num(v: Value) -> u64 {
    v.as_u64().expect("per-scope settings are numbers")
}

/// Check one `key: value` against the constants `allowed` in this scope; record and return it.
fn setting(allowed: &[&str], scope: &str, key: &str, v: &Value, path: &str, overrides: &mut Vec<(String, String)>) -> SResult<Value> {
    setting_as(Kind::of(key), allowed, scope, key, v, path, overrides)
}

/// As [`setting`], the value read as `kind`.
fn setting_as(kind: Kind, allowed: &[&str], scope: &str, key: &str, v: &Value, path: &str, overrides: &mut Vec<(String, String)>) -> SResult<Value> {
    let at = format!("{path}/{key}");
    if !allowed.contains(&key) {
        let allowed = allowed.iter().map(|k| k.to_string()).collect();
        return Err(SpecError::at(at, ParamFault::Constant { key: key.to_string(), scope: scope.to_string(), allowed }));
    }
    let n = parse(kind, v).map_err(|error| SpecError::at(at, ParamFault::Value { key: key.to_string(), error }))?;
    overrides.push((format!("{scope}.{key}"), n.to_string()));
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::{Kind, ValueError};
    use crate::error::{ParamFault, SpecFault};

    /// A host with a GPU and an NVMe drive, and `params` as given.
    fn gpu_and_drive(params: &str) -> Result<crate::Fabric, crate::error::SpecError> {
        crate::build_json(&format!(
            r#"{{"name":"t","hosts":[{{"name":"h","cpu":"intel-xeon-e5","ram":4294967296,"root_ports":2}}],
              "devices":[{{"name":"gpu0","profile":"quadro-k420"}},{{"name":"nvme0","profile":"optane-900p"}}],
              "links":[{{"a":"h.rp0","b":"gpu0","gen":2,"width":16}},{{"a":"h.rp1","b":"nvme0","gen":3,"width":4}}],
              "params":{params}}}"#
        ))
    }

    fn refused(params: &str) -> crate::error::SpecError {
        gpu_and_drive(params).err().expect("params refused")
    }

    /// A kind's own setting ([device_kind.nvme]) is kept by key for the drive's model, read in its
    /// table's unit, and recorded; every device's settings still go where they did.
    #[test]
    fn a_kinds_own_settings_are_kept_by_key_in_their_unit() {
        let f = gpu_and_drive(r#"{"devices":{"nvme0":{"capacity":"1 GiB","media_bandwidth":"2 GB/s","endpoint_latency_ps":7}}}"#).unwrap();
        let t = f.tuning();
        let own: Vec<(&str, u64)> = t.own_settings(1).iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(own, [("capacity", 1 << 30), ("media_bandwidth", 2_000_000_000)]);
        assert!(t.own_settings(0).is_empty() && t.own_settings(9).is_empty());
        assert_eq!(t.device(1).endpoint_latency_ps, 7);
        assert!(t.overrides.contains(&("devices.nvme0.capacity".into(), (1u64 << 30).to_string())));
        // the unit is the table's: a count of commands is 1 to 1024, a capacity at least a block
        let e = refused(r#"{"devices":{"nvme0":{"media_parallelism":0}}}"#);
        assert_eq!(e.path, "/params/devices/nvme0/media_parallelism");
        let parallelism = ParamFault::Value { key: "media_parallelism".into(), error: ValueError::OutOfRange { kind: Kind::Count, value: 0 } };
        assert_eq!(*e.fault, SpecFault::Param(parallelism));
        assert!(e.fault.to_string().contains("1 to 1024"), "{e}");
        assert!(refused(r#"{"devices":{"nvme0":{"capacity":100}}}"#).fault.to_string().contains("512-byte block"));
    }

    /// Another kind's own setting names the device's kind and the kind that has it; an unknown
    /// key lists what the device's kind may set.
    #[test]
    fn another_kinds_setting_names_both_kinds() {
        let e = refused(r#"{"devices":{"gpu0":{"media_bandwidth":1}}}"#);
        assert_eq!(e.path, "/params/devices/gpu0/media_bandwidth");
        let other = ParamFault::OtherKind { key: "media_bandwidth".into(), device: "gpu0".into(), kind: "gpu".into(), kinds: vec!["nvme".into()] };
        assert_eq!(*e.fault, SpecFault::Param(other));
        assert!(e.to_string().contains("media_bandwidth: gpu0 is of kind gpu, not kind nvme: only a device of kind nvme has this setting"), "{e}");
        let e = refused(r#"{"devices":{"nvme0":{"media_size":1}}}"#);
        let SpecFault::Param(ParamFault::Constant { key, scope, allowed }) = &*e.fault else { panic!("{e:?}") };
        assert_eq!((key.as_str(), scope.as_str()), ("media_size", "devices.nvme0"));
        assert!(allowed.first().is_some_and(|k| k == "endpoint_latency_ps") && allowed.ends_with(&["media_parallelism".into(), "capacity".into()]), "{e}");
    }

    /// Every kind's own setting is listed for `devlend params` in its table's unit.
    #[test]
    fn settable_lists_each_kinds_own_settings() {
        let s = super::settable();
        let row = |k: &str| s.iter().find(|r| r.0 == k).cloned().unwrap();
        assert_eq!(row("devices.NAME.media_bandwidth").1, "bytes/s");
        assert_eq!(row("devices.NAME.capacity").2, "[device.PROFILE] capacity, else 8 GiB (nvme.rs DEFAULT_CAPACITY) (kind nvme only)");
        assert_eq!(row("devices.NAME.media_parallelism").1, "commands");
    }

    /// A CPU profile's value is what its hosts' paths use (the profile changed behind the
    /// description's back, which only this crate can do).
    #[test]
    fn a_hosts_completion_size_is_its_cpu_profiles() {
        let mut f = crate::build_json(&crate::fixtures::two_hosts_pxh830("intel-xeon-e5", 1 << 30, false, false)).unwrap();
        f.hosts[0].cpu.ram_completion_bytes = 256;
        let t = super::resolve(&super::ParamsSpec::default(), &[], &mut f).unwrap();
        assert_eq!(t.host(0).ram_completion_bytes, 256);
    }
}
