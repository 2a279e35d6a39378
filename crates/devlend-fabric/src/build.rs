//! From a topology description to a fabric: components, ports, links, the tree of each host.
//! Every check reports a JSON pointer into the description, so the front end can name the file,
//! line and field, and what is wrong there as a typed fault (`error::SpecFault`, by group). Enumeration and resource assignment follow in `enumerate`.

use crate::config::{ConfigState, CMD_BUS_MASTER};
use crate::error::{BarFault, DeviceFault, EndFault, HostFault, LinkFault, NameFault, SpecError, SpecFault};
use crate::fabric::{DeviceInfo, Fabric, SwitchInfo};
use crate::iommu::Iommu;
use crate::memory::SparseMem;
use crate::model::*;
use crate::ntb::NtbState;
use crate::params::{params, BarParam, Params, WindowParam};
use crate::spec::*;
use devlend_wire::{Bdf, VALID_WIDTHS};
use rustc_hash::FxHashMap;

mod cabling;

type SResult<T> = Result<T, SpecError>;

fn err<T>(path: impl Into<String>, fault: impl Into<SpecFault>) -> SResult<T> {
    Err(SpecError::at(path, fault))
}

/// Link end `end` at `path` is bad: `fault`.
fn end_err<T>(path: &str, end: &str, fault: EndFault) -> SResult<T> {
    err(path, LinkFault::End { end: end.to_string(), fault })
}

#[derive(Clone, Copy)]
enum Comp {
    Host(HostId),
    Switch(u32),
    Device(u32),
    Ntb(u32),
    Cluster(u32),
}

pub fn build(spec: &TopologySpec) -> SResult<Fabric> {
    let mut b = Builder::default();
    b.check_names(spec)?;
    for (i, h) in spec.hosts.iter().enumerate() {
        b.host(h, &format!("/hosts/{i}"))?;
    }
    for (i, s) in spec.switches.iter().enumerate() {
        b.switch(s, &format!("/switches/{i}"))?;
    }
    for (i, d) in spec.devices.iter().enumerate() {
        b.device(d, &format!("/devices/{i}"))?;
    }
    for (i, n) in spec.ntbs.iter().enumerate() {
        b.ntb(n, &format!("/ntbs/{i}"))?;
    }
    for (i, s) in spec.cluster_switches.iter().enumerate() {
        b.cluster_switch(s, &format!("/cluster_switches/{i}"))?;
    }
    let links = crate::tuning::link_specs(spec.params.as_ref(), &spec.links)?;
    for (i, l) in links.iter().enumerate() {
        b.link(l, &format!("/links/{i}"))?;
    }
    b.join_clusters();
    b.check_cycles()?;
    b.assign_hosts()?;
    b.check_peers()?;
    let trained = b.train();
    let mut f = b.finish(spec.name.clone());
    f.trained_down = trained;
    crate::enumerate::enumerate(&mut f)?;
    interrupt_remapping(spec, &mut f)?;
    // Always resolved: a host's root latency and completion size come from its CPU profile, a
    // device's requester settings from its profile, even with no overrides.
    let none = crate::tuning::ParamsSpec::default();
    f.tuning = std::sync::Arc::new(crate::tuning::resolve(spec.params.as_ref().unwrap_or(&none), &links, &mut f)?);
    Ok(f)
}

/// Interrupt remapping on in every host with an IOMMU unless its description turns it off.
fn interrupt_remapping(spec: &TopologySpec, f: &mut Fabric) -> SResult<()> {
    for (i, h) in spec.hosts.iter().enumerate() {
        let set = crate::tuning::interrupt_remapping(spec.params.as_ref(), &h.name)?;
        let at = if set.is_some() { format!("/params/hosts/{}/interrupt_remapping", h.name) } else { format!("/hosts/{i}/interrupt_remapping") };
        match (h.iommu, set.or(h.interrupt_remapping)) {
            (false, Some(true)) => return err(at, HostFault::NoIommu { host: h.name.clone() }),
            (true, None | Some(true)) => f.intr_remap_enable(i as crate::model::HostId).map_err(|e| SpecError::at(at.clone(), e))?,
            _ => {}
        }
    }
    Ok(())
}

#[derive(Default)]
struct Builder {
    names: FxHashMap<String, (Comp, String)>,
    hosts: Vec<Host>,
    nodes: Vec<Node>,
    funcs: Vec<Function>,
    links: Vec<Link>,
    ntbs: Vec<NtbState>,
    switches: Vec<SwitchInfo>,
    devices: Vec<DeviceInfo>,
    /// For each port node: the link that uses it (as upstream or downstream end).
    port_link: FxHashMap<NodeId, LinkId>,
    /// For each cable port (of an adapter or a cluster switch): the link that uses it.
    cable_used: FxHashMap<cabling::CableEnd, LinkId>,
    /// Cable ports of each adapter.
    cable_ports: Vec<u8>,
    clusters: Vec<crate::cluster::ClusterSwitchInfo>,
    /// Adapters cabled to cluster switches: (switch, its port node, adapter, cable).
    attached: Vec<(u32, NodeId, u32, LinkId)>,
    /// What each port supports, where a profile says (link training).
    limits: FxHashMap<NodeId, cabling::Limit>,
}

fn check_name(name: &str, path: &str) -> SResult<()> {
    let ok = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if !ok {
        return err(format!("{path}/name"), NameFault::Invalid { name: name.to_string() });
    }
    if name == "cpu" {
        return err(format!("{path}/name"), NameFault::ReservedCpu);
    }
    Ok(())
}

impl Builder {
    fn check_names(&mut self, spec: &TopologySpec) -> SResult<()> {
        if spec.hosts.is_empty() {
            return err("/hosts", NameFault::NoHosts);
        }
        let mut seen: FxHashMap<&str, String> = FxHashMap::default();
        let all = spec
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.name.as_str(), format!("/hosts/{i}")))
            .chain(spec.switches.iter().enumerate().map(|(i, s)| (s.name.as_str(), format!("/switches/{i}"))))
            .chain(spec.devices.iter().enumerate().map(|(i, d)| (d.name.as_str(), format!("/devices/{i}"))))
            .chain(spec.ntbs.iter().enumerate().map(|(i, n)| (n.name.as_str(), format!("/ntbs/{i}"))))
            .chain(spec.cluster_switches.iter().enumerate().map(|(i, c)| (c.name.as_str(), format!("/cluster_switches/{i}"))));
        for (name, path) in all {
            check_name(name, &path)?;
            if let Some(first) = seen.insert(name, path.clone()) {
                return err(format!("{path}/name"), NameFault::Duplicate { name: name.to_string(), first });
            }
        }
        Ok(())
    }

    fn node(&mut self, kind: NodeKind, component: &str, port: &str) -> NodeId {
        self.nodes.push(Node {
            kind,
            component: component.to_string(),
            port: port.to_string(),
            host: HostId::MAX,
            parent: None,
            children: Vec::new(),
            uplink: None,
            bridge: BridgeRes::default(),
            functions: Vec::new(),
        });
        self.nodes.len() as NodeId - 1
    }

    fn host(&mut self, h: &HostSpec, path: &str) -> SResult<()> {
        let p = params();
        let Some(cpu) = p.cpu.get(&h.cpu) else {
            let known = p.cpu.keys().cloned().collect();
            return err(format!("{path}/cpu"), NameFault::UnknownProfile { of: "CPU profile", name: h.cpu.clone(), known });
        };
        if h.root_ports == 0 || h.root_ports > 31 {
            return err(format!("{path}/root_ports"), HostFault::RootPorts { n: h.root_ports });
        }
        let mm = h.memory_map.clone().unwrap_or_default();
        let low_top = mm.low_ram_top.unwrap_or(cpu.low_ram_top);
        let mmio32_end = mm.mmio32_end.unwrap_or(cpu.mmio32_end);
        let mmio64_base = mm.mmio64_base.unwrap_or(cpu.mmio64_base);
        let mib = 1 << 20;
        for (field, v) in [("low_ram_top", low_top), ("mmio32_end", mmio32_end), ("mmio64_base", mmio64_base)] {
            if v % mib != 0 {
                return err(format!("{path}/memory_map/{field}"), HostFault::Unaligned { addr: v });
            }
        }
        if h.ram == 0 || !h.ram.is_multiple_of(0x1000) {
            return err(format!("{path}/ram"), HostFault::RamSize);
        }
        let four_g = p.x86.four_gib;
        let msi = Range::new(p.x86.msi_base, p.x86.msi_size);
        if low_top > four_g || low_top >= mmio32_end {
            return err(format!("{path}/memory_map/low_ram_top"), HostFault::LowRamTop { low_top, mmio32_end });
        }
        if mmio32_end > msi.start {
            return err(format!("{path}/memory_map/mmio32_end"), HostFault::Mmio32OverMsi { mmio32_end, msi });
        }
        let low = h.ram.min(low_top);
        let high = h.ram - low;
        // Saturating: a RAM size near 2^64 must fail the check below, not overflow.
        let ram_end = if high > 0 { four_g.saturating_add(high) } else { low };
        let limit = 1u64 << cpu.phys_addr_bits;
        if ram_end > limit {
            return err(format!("{path}/ram"), HostFault::RamBeyond { ram: h.ram, bits: cpu.phys_addr_bits });
        }
        let mut ram_regions = vec![Range::new(0, low)];
        if high > 0 {
            ram_regions.push(Range::new(four_g, high));
        }
        if mmio64_base < ram_end {
            // Blame the override when there is one, else the RAM size (the profile's map is fixed).
            let field = if mm.mmio64_base.is_some() { "memory_map/mmio64_base" } else { "ram" };
            return err(format!("{path}/{field}"), HostFault::Mmio64OverRam { base: mmio64_base, ram_end });
        }
        if mmio64_base >= limit {
            return err(format!("{path}/memory_map/mmio64_base"), HostFault::Mmio64Beyond { base: mmio64_base, bits: cpu.phys_addr_bits });
        }
        let id = self.hosts.len() as HostId;
        let rc = self.node(NodeKind::RootComplex, &h.name, "rc");
        self.nodes[rc as usize].host = id;
        let mut root_ports = Vec::new();
        for i in 0..h.root_ports {
            let n = self.node(NodeKind::RootPort { index: i }, &h.name, &format!("rp{i}"));
            self.nodes[n as usize].host = id;
            self.nodes[n as usize].parent = Some(rc);
            self.nodes[rc as usize].children.push(n);
            root_ports.push(n);
        }
        self.names.insert(h.name.clone(), (Comp::Host(id), path.to_string()));
        self.hosts.push(Host {
            name: h.name.clone(),
            cpu_name: h.cpu.clone(),
            cpu: cpu.clone(),
            ram: h.ram,
            ram_regions,
            mmio32: Range { start: low_top, end: mmio32_end },
            mmio64: Range { start: mmio64_base, end: limit },
            msi,
            iommu: h.iommu,
            rc,
            root_ports,
            spec_path: path.to_string(),
        });
        Ok(())
    }

    fn switch(&mut self, s: &SwitchSpec, path: &str) -> SResult<()> {
        let p = params();
        if let Some(prof) = &s.profile {
            let Some(sp) = p.switch.get(prof) else {
                let known = p.switch.keys().cloned().collect();
                return err(format!("{path}/profile"), NameFault::UnknownProfile { of: "switch profile", name: prof.clone(), known });
            };
            if s.downstream_ports as u32 + 1 > sp.ports as u32 {
                return err(
                    format!("{path}/downstream_ports"),
                    DeviceFault::SwitchPorts { downstream: s.downstream_ports, profile: prof.clone(), ports: sp.ports },
                );
            }
        }
        if s.downstream_ports == 0 || s.downstream_ports > 32 {
            return err(format!("{path}/downstream_ports"), DeviceFault::DownstreamPorts { n: s.downstream_ports });
        }
        let idx = self.switches.len() as u32;
        let up = self.node(NodeKind::SwitchUp { switch: idx }, &s.name, "up");
        let mut downs = Vec::new();
        for i in 0..s.downstream_ports {
            let d = self.node(NodeKind::SwitchDown { switch: idx, index: i }, &s.name, &format!("d{i}"));
            self.nodes[d as usize].parent = Some(up);
            self.nodes[up as usize].children.push(d);
            downs.push(d);
        }
        if let Some(sp) = s.profile.as_ref().and_then(|n| p.switch.get(n)) {
            for n in downs.iter().chain([&up]) {
                self.limits.insert(*n, (format!("{} ({})", s.name, s.profile.as_deref().unwrap_or_default()), Some(sp.max_gen), None));
            }
        }
        self.names.insert(s.name.clone(), (Comp::Switch(idx), path.to_string()));
        self.switches.push(SwitchInfo { name: s.name.clone(), up, downs, spec_path: path.to_string() });
        Ok(())
    }

    fn device(&mut self, d: &DeviceSpec, path: &str) -> SResult<()> {
        let p = params();
        let prof = match &d.profile {
            Some(name) => match p.device.get(name) {
                Some(pr) => Some(pr),
                None => {
                    let known = p.device.keys().cloned().collect();
                    return err(format!("{path}/profile"), NameFault::UnknownProfile { of: "device profile", name: name.clone(), known });
                }
            },
            None => None,
        };
        let kind = match (&d.kind, prof) {
            (Some(k), _) => known_kind(k, p, &format!("{path}/kind"))?,
            (None, Some(pr)) => DeviceKind::new(&pr.kind),
            (None, None) => DeviceKind::generic(),
        };
        let class_code = class_code(&kind, p);
        let to_spec = |b: &BarParam| BarSpec { index: b.index, size: b.size, bits: b.bits, pref: b.pref };
        let (functions, fn_path) = match (&d.functions, prof) {
            (Some(fs), _) => (fs.clone(), format!("{path}/functions")),
            (None, Some(pr)) => {
                let sriov = d.num_vfs.filter(|n| *n > 0).map(|n| SriovSpec {
                    num_vfs: n,
                    total_vfs: Some(pr.total_vfs),
                    vf_bars: Some(pr.vf_bars.iter().map(to_spec).collect()),
                });
                (vec![FunctionSpec { bars: pr.bars.iter().map(to_spec).collect(), msix_vectors: pr.msix_vectors, sriov }], format!("{path}/profile"))
            }
            (None, None) => return err(path, NameFault::DeviceNeedsFunctions),
        };
        if functions.is_empty() || functions.len() > 8 {
            return err(format!("{path}/functions"), DeviceFault::Functions { n: functions.len() });
        }
        if d.num_vfs.is_some() && d.functions.is_some() {
            return err(format!("{path}/num_vfs"), DeviceFault::NumVfsWithFunctions);
        }
        let idx = self.devices.len() as u32;
        let node = self.node(NodeKind::Endpoint { device: idx }, &d.name, "up");
        if let (Some(pr), Some(name)) = (prof, &d.profile) {
            self.limits.insert(node, (format!("{} ({name})", d.name), Some(pr.max_gen), Some(pr.max_width)));
        }
        let (vendor, device_id) = prof.map(|p| (p.vendor, p.device)).unwrap_or((0x1af4, 0x10ff));
        for (fi, fs) in functions.iter().enumerate() {
            let fpath = if d.functions.is_some() { format!("{fn_path}/{fi}") } else { fn_path.clone() };
            let bars = check_bars(&fs.bars, &format!("{fpath}/bars"))?;
            let name = if fi == 0 { d.name.clone() } else { format!("{}.f{fi}", d.name) };
            // Where the BARs come from: the function's `bars` list, or the `profile` field.
            let bars_path = if d.functions.is_some() { format!("{fpath}/bars") } else { fpath.clone() };
            let pf = self.func(node, name, class_code, vendor, device_id, None, bars, fs.msix_vectors, bars_path);
            if let Some(sr) = &fs.sriov {
                let spath = if d.functions.is_some() { format!("{fpath}/sriov") } else { format!("{path}/num_vfs") };
                if let Some(total) = sr.total_vfs {
                    if sr.num_vfs > total {
                        return err(spath, DeviceFault::Vfs { asked: sr.num_vfs, total });
                    }
                }
                let vf_bars = check_bars(sr.vf_bars.as_deref().unwrap_or(&[]), &format!("{spath}/vf_bars"))?;
                for v in 0..sr.num_vfs {
                    let vf_path = if d.functions.is_some() { format!("{spath}/vf_bars") } else { spath.clone() };
                    self.func(node, format!("{}.vf{v}", d.name), class_code, vendor, device_id.wrapping_add(1), Some((v, pf)), vf_bars.clone(), 3, vf_path);
                }
            }
        }
        self.names.insert(d.name.clone(), (Comp::Device(idx), path.to_string()));
        self.devices.push(DeviceInfo { name: d.name.clone(), node, kind, profile: d.profile.clone(), spec_path: path.to_string() });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn func(
        &mut self,
        node: NodeId,
        name: String,
        class_code: u32,
        vendor: u16,
        device_id: u16,
        vf: Option<(u16, FuncId)>,
        bars: Vec<Bar>,
        msix: u16,
        spec_path: String,
    ) -> FuncId {
        self.funcs.push(Function { node, name, bdf: Bdf(0), class_code, vendor, device_id, vf, bars, msix_vectors: msix, spec_path });
        let id = self.funcs.len() as FuncId - 1;
        self.nodes[node as usize].functions.push(id);
        id
    }

    fn ntb(&mut self, n: &NtbSpec, path: &str) -> SResult<()> {
        let p = params();
        let prof = match &n.profile {
            Some(name) => match p.ntb.get(name) {
                Some(pr) => Some(pr),
                None => {
                    let known = p.ntb.keys().cloned().collect();
                    return err(format!("{path}/profile"), NameFault::UnknownProfile { of: "NTB profile", name: name.clone(), known });
                }
            },
            None => None,
        };
        let windows: Vec<WindowParam> = match (&n.windows, prof) {
            (Some(w), _) => w.iter().map(|w| WindowParam { size: w.size, lut_segments: w.lut_segments }).collect(),
            (None, Some(pr)) => pr.windows.clone(),
            (None, None) => return err(path, NameFault::NtbNeedsWindows),
        };
        if windows.is_empty() || windows.len() > 2 {
            return err(format!("{path}/windows"), DeviceFault::Windows { n: windows.len() });
        }
        for (i, w) in windows.iter().enumerate() {
            let wp = format!("{path}/windows/{i}");
            if !w.size.is_power_of_two() || w.size < 0x1000 {
                return err(format!("{wp}/size"), DeviceFault::WindowSize { size: w.size });
            }
            if w.lut_segments > 0 && (!w.lut_segments.is_power_of_two() || w.size / (w.lut_segments as u64) < 0x1000) {
                return err(format!("{wp}/lut_segments"), DeviceFault::LutSegments { n: w.lut_segments });
            }
        }
        let pick = |v: Option<u16>, d: Option<u16>, field: &'static str| -> SResult<u16> {
            v.or(d).ok_or_else(|| SpecError::at(format!("{path}/{field}"), NameFault::Required { field }))
        };
        let rid_entries = pick(n.rid_lut_entries, prof.map(|p| p.rid_lut_entries), "rid_lut_entries")?;
        let doorbells = pick(n.doorbells.map(u16::from), prof.map(|p| p.doorbells as u16), "doorbells")?;
        let spads = pick(n.scratchpads.map(u16::from), prof.map(|p| p.scratchpads as u16), "scratchpads")?;
        let msgs = pick(n.message_registers.map(u16::from), prof.map(|p| p.message_registers as u16), "message_registers")?;
        if rid_entries == 0 || rid_entries > 255 {
            return err(format!("{path}/rid_lut_entries"), DeviceFault::RidLutEntries { n: rid_entries });
        }
        if doorbells > 64 {
            return err(format!("{path}/doorbells"), DeviceFault::Doorbells { n: doorbells });
        }
        let control = prof.map(|p| p.control_bar_size).unwrap_or(0x10000);
        let idx = self.ntbs.len() as u32;
        let node = self.node(NodeKind::Ntb { ntb: idx }, &n.name, "up");
        if let (Some(pr), Some(name)) = (prof, &n.profile) {
            self.limits.insert(node, (format!("{} ({name})", n.name), Some(pr.max_gen), Some(pr.max_width)));
        }
        let cable_ports = n.cable_ports.or(prof.map(|p| p.cable_ports)).unwrap_or(1);
        if cable_ports == 0 || cable_ports > 4 {
            return err(format!("{path}/cable_ports"), DeviceFault::CablePorts { n: cable_ports });
        }
        self.cable_ports.push(cable_ports);
        let mut bars = vec![Bar { index: 0, size: control, bits: 32, pref: false, addr: 0 }];
        let mut window_bars = Vec::new();
        for (i, w) in windows.iter().enumerate() {
            let index = 2 + 2 * i as u8;
            bars.push(Bar { index, size: w.size, bits: 64, pref: true, addr: 0 });
            window_bars.push(index);
        }
        let func = self.func(
            node,
            n.name.clone(),
            OTHER_BRIDGE,
            0x10b5,
            0x87b0,
            None,
            bars,
            4,
            if n.windows.is_some() { format!("{path}/windows") } else { format!("{path}/profile") },
        );
        let mut rid_lut = vec![None; rid_entries as usize];
        rid_lut[0] = Some(Bdf(0)); // the root complex, as NTB drivers program at probe
        self.names.insert(n.name.clone(), (Comp::Ntb(idx), path.to_string()));
        self.ntbs.push(NtbState {
            name: n.name.clone(),
            node,
            func,
            host: HostId::MAX,
            peer: None,
            cable: None,
            peers: Vec::new(),
            out_peer: Vec::new(),
            alias_base: Vec::new(),
            windows,
            window_bars,
            inbound: Vec::new(),
            rid_lut,
            doorbell: 0,
            doorbell_mask: 0,
            doorbell_bits: doorbells as u8,
            doorbell_irqs: 0,
            spads: vec![0; spads as usize],
            msgs: vec![None; msgs as usize],
        });
        Ok(())
    }

    /// Resolve `component[.port]` to a port node; `up` tells which end of a link it is.
    fn port(&self, s: &str, path: &str, up: bool) -> SResult<NodeId> {
        let (name, port) = match s.split_once('.') {
            Some((n, p)) => (n, Some(p)),
            None => (s, None),
        };
        let Some((comp, _)) = self.names.get(name) else {
            return end_err(path, s, EndFault::NoSuchName { name: name.to_string() });
        };
        let bad = |fault: EndFault| end_err(path, s, fault);
        match (*comp, port, up) {
            (Comp::Host(h), Some(p), true) => {
                let host = &self.hosts[h as usize];
                match p.strip_prefix("rp").and_then(|i| i.parse::<usize>().ok()).and_then(|i| host.root_ports.get(i)) {
                    Some(n) => Ok(*n),
                    None => bad(EndFault::RootPort { name: name.into(), ports: host.root_ports.len() }),
                }
            }
            (Comp::Host(_), _, _) => bad(EndFault::Host { name: name.into() }),
            (Comp::Switch(i), Some(p), true) => {
                let sw = &self.switches[i as usize];
                match p.strip_prefix('d').and_then(|i| i.parse::<usize>().ok()).and_then(|i| sw.downs.get(i)) {
                    Some(n) => Ok(*n),
                    None => bad(EndFault::DownstreamPort { name: name.into(), ports: sw.downs.len() }),
                }
            }
            (Comp::Switch(_), None, true) => bad(EndFault::SwitchAsUpstream { name: name.into() }),
            (Comp::Switch(i), None | Some("up"), false) => Ok(self.switches[i as usize].up),
            (Comp::Switch(_), Some(_), false) => bad(EndFault::SwitchPortAsDownstream { name: name.into() }),
            (Comp::Device(i), None | Some("up"), false) => Ok(self.devices[i as usize].node),
            (Comp::Device(_), _, true) => bad(EndFault::DeviceAsUpstream { name: name.into() }),
            (Comp::Device(_), Some(_), false) => bad(EndFault::DevicePort { name: name.into() }),
            (Comp::Ntb(i), None | Some("up"), false) => Ok(self.ntbs[i as usize].node),
            (Comp::Ntb(_), _, _) => bad(EndFault::Ntb { name: name.into() }),
            (Comp::Cluster(_), _, _) => bad(EndFault::ClusterSwitch { name: name.into() }),
        }
    }

    fn link(&mut self, l: &LinkSpec, path: &str) -> SResult<()> {
        if !(1..=5).contains(&l.gen) {
            return err(format!("{path}/gen"), LinkFault::Gen { gen: l.gen });
        }
        if !VALID_WIDTHS.contains(&l.width) {
            return err(format!("{path}/width"), LinkFault::Width { width: l.width });
        }
        let ea = self.cable_end(&l.a, &format!("{path}/a"))?;
        let eb = self.cable_end(&l.b, &format!("{path}/b"))?;
        let id = self.links.len() as LinkId;
        let (a, b) = if let (Some(ea), Some(eb)) = (ea, eb) {
            self.cable(ea, eb, l, path)?
        } else if ea.is_some() || eb.is_some() {
            return err(path, LinkFault::CableToSlot { a: l.a.clone(), b: l.b.clone() });
        } else {
            (self.port(&l.a, &format!("{path}/a"), true)?, self.port(&l.b, &format!("{path}/b"), false)?)
        };
        if ea.is_none() {
            for (n, end) in [(a, "a"), (b, "b")] {
                if let Some(prev) = self.port_link.insert(n, id) {
                    let node = &self.nodes[n as usize];
                    return err(format!("{path}/{end}"), LinkFault::PortUsed { component: node.component.clone(), port: node.port.clone(), link: prev });
                }
            }
            self.nodes[b as usize].parent = Some(a);
            self.nodes[b as usize].uplink = Some(id);
            self.nodes[a as usize].children.push(b);
        }
        self.links.push(Link { up: a, down: b, gen: l.gen, width: l.width, kind: l.kind, spec_path: path.to_string() });
        Ok(())
    }

    /// A cycle of transparent links (a switch below itself) cannot be enumerated.
    fn check_cycles(&self) -> SResult<()> {
        // Walk up from every switch's upstream port; a walk that returns to its start is a cycle.
        for sw in &self.switches {
            let mut n = sw.up;
            let mut steps = 0;
            while let Some(p) = self.nodes[n as usize].parent {
                n = p;
                steps += 1;
                if n == sw.up || steps > self.nodes.len() {
                    let link = self.nodes[sw.up as usize].uplink.unwrap_or(0);
                    return err(format!("/links/{link}"), LinkFault::Cycle { switch: sw.name.clone() });
                }
            }
        }
        Ok(())
    }

    fn assign_hosts(&mut self) -> SResult<()> {
        for h in 0..self.hosts.len() {
            let mut stack = self.hosts[h].root_ports.clone();
            while let Some(n) = stack.pop() {
                self.nodes[n as usize].host = h as HostId;
                stack.extend(self.nodes[n as usize].children.iter().copied());
            }
        }
        for n in self.nodes.iter().filter(|n| !matches!(n.kind, NodeKind::ClusterPort { .. })) {
            if n.host == HostId::MAX {
                let (_, path) = &self.names[&n.component];
                return err(path.clone(), LinkFault::NotConnected { component: n.component.clone() });
            }
        }
        for s in &mut self.ntbs {
            s.host = self.nodes[s.node as usize].host;
        }
        Ok(())
    }

    fn finish(self, name: String) -> Fabric {
        let mut config = vec![ConfigState::default(); self.funcs.len()];
        for s in &self.ntbs {
            // NTB drivers enable bus mastering at probe so the adapter can forward inbound TLPs.
            config[s.func as usize].command |= CMD_BUS_MASTER;
        }
        let iommus = self.hosts.iter().map(|h| Iommu::new(h.iommu)).collect();
        let ram = self.hosts.iter().map(|_| SparseMem::default()).collect();
        let mut f = Fabric::assemble(name, self.hosts, self.nodes, self.funcs, self.links, self.ntbs, self.switches, self.devices, iommus, config, ram);
        f.cluster_switches = self.clusters;
        f
    }
}

/// PCI Code and ID Assignment 1.11: 06 80 00, other bridge (an NTB; a device of no profile's kind).
const OTHER_BRIDGE: u32 = 0x06_80_00;

/// `kind` as a description gives it: a kind some device profile has, or generic.
fn known_kind(kind: &DeviceKind, p: &Params, path: &str) -> SResult<DeviceKind> {
    let mut known: Vec<&str> = p.device.values().map(|pr| pr.kind.as_str()).filter(|k| *k != DeviceKind::GENERIC).collect();
    known.sort_unstable();
    known.dedup();
    known.push(DeviceKind::GENERIC);
    match known.contains(&kind.as_str()) {
        true => Ok(kind.clone()),
        false => err(path, NameFault::UnknownKind { kind: kind.as_str().to_string(), known: known.iter().map(|k| k.to_string()).collect() }),
    }
}

/// The config-space class code of a device of `kind`: its kind's profiles' (one per kind,
/// `params` checks), or for a kind no profile has (generic) [`OTHER_BRIDGE`].
fn class_code(kind: &DeviceKind, p: &Params) -> u32 {
    p.device.values().find(|pr| pr.kind == kind.as_str()).map_or(OTHER_BRIDGE, |pr| pr.class_code)
}

fn check_bars(bars: &[BarSpec], path: &str) -> SResult<Vec<Bar>> {
    let mut used = 0u8;
    let mut out = Vec::new();
    for (i, b) in bars.iter().enumerate() {
        let bp = format!("{path}/{i}");
        if b.bits != 32 && b.bits != 64 {
            return err(format!("{bp}/bits"), BarFault::Bits { bits: b.bits });
        }
        let slots = if b.bits == 64 { 2 } else { 1 };
        if b.index as usize + slots > 6 {
            return err(format!("{bp}/index"), BarFault::Index { index: b.index, bits: b.bits });
        }
        let mask = if slots == 2 { 3u8 << b.index } else { 1u8 << b.index };
        if used & mask != 0 {
            return err(format!("{bp}/index"), BarFault::Overlap { index: b.index });
        }
        used |= mask;
        if !b.size.is_power_of_two() || b.size < 16 {
            return err(format!("{bp}/size"), BarFault::Size { size: b.size });
        }
        if b.bits == 32 && b.size > 1 << 31 {
            return err(format!("{bp}/size"), BarFault::TooLargeFor32 { size: b.size });
        }
        out.push(Bar { index: b.index, size: b.size, bits: b.bits, pref: b.pref, addr: 0 });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::error::{EndFault, LinkFault, NameFault, SpecError, SpecFault};

    /// One host with device `d` of `kind`, described by its functions.
    fn described(kind: &str) -> Result<crate::Fabric, SpecError> {
        crate::build_json(&format!(
            r#"{{"name":"t","hosts":[{{"name":"h","cpu":"intel-xeon-e5","ram":1073741824,"iommu":false,"root_ports":1}}],"switches":[],
                "devices":[{{"name":"d","kind":"{kind}","functions":[{{"bars":[{{"index":0,"size":4096}}]}}]}}],"ntbs":[],
                "links":[{{"a":"h.rp0","b":"d","gen":3,"width":4}}]}}"#
        ))
    }

    #[test]
    fn a_described_device_takes_a_profiles_kind_and_its_class_code() {
        for (kind, class) in [("gpu", 0x03_00_00), ("nvme", 0x01_08_02), ("nic", 0x02_00_00), ("generic", 0x06_80_00)] {
            let f = described(kind).unwrap();
            let func = f.func_id("d").unwrap();
            assert_eq!(f.config_read(func, 0x08, 4).unwrap() >> 8, class, "{kind}");
            assert_eq!(f.devices()[0].kind.as_str(), kind);
        }
    }

    #[test]
    fn a_kind_no_profile_has_is_refused_naming_the_kinds() {
        let e = described("fpga").err().expect("refused");
        let text = e.to_string();
        assert!(text.contains("/devices/0/kind") && text.contains("unknown device kind 'fpga': expected one of gpu, nic, nvme, generic"), "{text}");
        assert!(matches!(&*e.fault, SpecFault::Name(NameFault::UnknownKind { kind, known }) if kind == "fpga" && known.len() == 4), "{e:?}");
    }

    /// A link end that names no component is the link's fault at that end, with the end and
    /// the name as written.
    #[test]
    fn a_link_end_naming_nothing_is_refused_at_that_end() {
        let json = r#"{"name":"t","hosts":[{"name":"h","cpu":"intel-xeon-e5","ram":1073741824,"iommu":false,"root_ports":1}],"switches":[],
            "devices":[],"ntbs":[],"links":[{"a":"h.rp0","b":"gpu9.up","gen":3,"width":4}]}"#;
        let Err(e) = crate::build_json(json) else { panic!("built") };
        assert_eq!(e.path, "/links/0/b");
        assert_eq!(*e.fault, SpecFault::Link(LinkFault::End { end: "gpu9.up".into(), fault: EndFault::NoSuchName { name: "gpu9".into() } }));
    }
}
