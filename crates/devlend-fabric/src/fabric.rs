//! `Fabric`: the whole cluster after enumeration, with the state software programs (IOMMUs, NTBs,
//! config space), functional memory, a route cache and an event log. This is the object the
//! Python layer and later the timing engine hold.
//!
//! This file holds what is off a TLP's walk: the struct and its assembly, name lookups and
//! address expressions, the memory digest, PCI config space and the set-up programs. Where a
//! TLP goes, the route cache and the bytes stored along a route are `route`; the IOMMU API is
//! `iommu`; the NTB API `ntb_api`; queries and the few direct changes `access`.

use crate::config::{self, ConfigState, WriteEffect};
use crate::error::{BadAddress, BadNtb, BadRequest, FResult, FabricError, SpecError, Unknown};
use crate::iommu::Iommu;
use crate::memory::SparseMem;
use crate::model::*;
use crate::ntb::NtbState;
use crate::route::{Requester, Route};
use crate::spec::{Addr, DeviceKind, SetupOp};
use rustc_hash::FxHashMap;
use std::sync::Arc;

#[derive(Clone)]
pub struct SwitchInfo {
    pub name: String,
    pub up: NodeId,
    pub downs: Vec<NodeId>,
    pub spec_path: String,
}

#[derive(Clone)]
pub struct DeviceInfo {
    pub name: String,
    pub node: NodeId,
    pub kind: DeviceKind,
    pub profile: Option<String>,
    pub spec_path: String,
}

pub use crate::events::{Event, EventLog};

/// The whole cluster after enumeration. Its fields are the fabric crate's own: outer layers ask
/// through queries (`hosts`, `func(id)`, `ntb(id)`, `iommu(host)`, `events`, ... in `access`)
/// and change it only through methods named by what they do (the Linux-named NTB, IOMMU and
/// config-space interfaces, the injected faults in `link`, and `access`'s few direct changes:
/// `ntb_mut`, `bar_store`, `ram_store`, `attach_ram`, `record_event`, `retain_events`). The
/// crate docs list them.
#[derive(Clone)]
pub struct Fabric {
    pub(crate) name: String,
    pub(crate) hosts: Vec<Host>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) funcs: Vec<Function>,
    pub(crate) links: Vec<Link>,
    pub(crate) ntbs: Vec<NtbState>,
    pub(crate) switches: Vec<SwitchInfo>,
    pub(crate) devices: Vec<DeviceInfo>,
    pub(crate) iommus: Vec<Iommu>,
    pub(crate) config: Vec<ConfigState>,
    pub(crate) ram: Vec<SparseMem>,
    pub(crate) bar_mem: FxHashMap<(FuncId, u8), SparseMem>,
    /// Registers a device model sets at power-on (read-only IDs, capabilities): what a reset or a
    /// scrub restores (`Fabric::set_power_on_value`, `link`).
    pub(crate) power_on: FxHashMap<FuncId, Vec<(u8, u64, Vec<u8>)>>,
    pub(crate) events: EventLog,
    /// NTB adapters whose link is down (both of a pair); see `link`.
    pub(crate) links_down: std::collections::BTreeSet<u32>,
    /// PCIe links down, functions hung or poisoned (injected faults); see `link`.
    pub(crate) faults: crate::link::Faults,
    /// The effective parameters: the compiled defaults and the description's overrides.
    pub(crate) tuning: Arc<crate::tuning::Tuning>,
    pub(crate) cluster_switches: Vec<crate::cluster::ClusterSwitchInfo>,
    /// Links that trained down to what their ends support (a warning for the description's author).
    pub(crate) trained_down: Vec<crate::cluster::TrainedDown>,
    func_names: FxHashMap<String, FuncId>,
    /// Each host's functions, in id order (functions are only added when the fabric is built).
    pub(crate) host_funcs: Vec<Vec<FuncId>>,
    pub(crate) cache: FxHashMap<crate::route::RouteKey, Arc<Route>>,
    /// Moved on by every `invalidate_routes` ([`Fabric::route_generation`]).
    pub(crate) route_generation: u64,
    /// Each host's decoding BARs by address, made when first asked; dropped with `cache`.
    pub(crate) decoding_bars: crate::decoding::DecodingBars,
    pub(crate) cache_hits: u64,
    pub(crate) cache_misses: u64,
}

impl Fabric {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn assemble(
        name: String,
        hosts: Vec<Host>,
        nodes: Vec<Node>,
        funcs: Vec<Function>,
        links: Vec<Link>,
        ntbs: Vec<NtbState>,
        switches: Vec<SwitchInfo>,
        devices: Vec<DeviceInfo>,
        iommus: Vec<Iommu>,
        config: Vec<ConfigState>,
        ram: Vec<SparseMem>,
    ) -> Fabric {
        let func_names = funcs.iter().enumerate().map(|(i, f)| (f.name.clone(), i as FuncId)).collect();
        let hosts_len = hosts.len();
        let mut host_funcs = vec![Vec::new(); hosts_len];
        for (i, f) in funcs.iter().enumerate() {
            host_funcs[nodes[f.node as usize].host as usize].push(i as FuncId);
        }
        Fabric {
            name,
            hosts,
            nodes,
            funcs,
            links,
            ntbs,
            switches,
            devices,
            iommus,
            config,
            ram,
            bar_mem: FxHashMap::default(),
            power_on: FxHashMap::default(),
            events: EventLog::default(),
            links_down: Default::default(),
            faults: Default::default(),
            tuning: Arc::default(),
            cluster_switches: Vec::new(),
            trained_down: Vec::new(),
            func_names,
            host_funcs,
            cache: FxHashMap::default(),
            route_generation: 0,
            decoding_bars: crate::decoding::DecodingBars::new(hosts_len),
            cache_hits: 0,
            cache_misses: 0,
        }
    }

    // ----- names ---------------------------------------------------------------------------

    pub fn host_id(&self, name: &str) -> FResult<HostId> {
        self.hosts
            .iter()
            .position(|h| h.name == name)
            .map(|i| i as HostId)
            .ok_or_else(|| FabricError::from(Unknown::Host { name: name.into(), known: self.hosts.iter().map(|h| h.name.clone()).collect() }))
    }

    pub fn func_id(&self, name: &str) -> FResult<FuncId> {
        self.func_names.get(name).copied().ok_or_else(|| Unknown::Function { name: name.into() }.into())
    }

    pub fn ntb_id(&self, name: &str) -> FResult<u32> {
        self.ntbs.iter().position(|n| n.name == name).map(|i| i as u32).ok_or_else(|| Unknown::Ntb { name: name.into() }.into())
    }

    pub fn func_host(&self, f: FuncId) -> HostId {
        self.nodes[self.funcs[f as usize].node as usize].host
    }

    /// Parse `HOST:cpu`, `HOST:FUNCTION` or a bare function name.
    pub fn requester(&self, s: &str) -> FResult<Requester> {
        let (host, who) = match s.split_once(':') {
            Some((h, w)) => (Some(self.host_id(h)?), w),
            None => (None, s),
        };
        if who == "cpu" {
            return host.map(Requester::Cpu).ok_or_else(|| BadAddress::CpuNeedsHost.into());
        }
        let f = self.func_id(who)?;
        if let Some(h) = host {
            if self.func_host(f) != h {
                let (sits, asked) = (self.hosts[self.func_host(f) as usize].name.clone(), self.hosts[h as usize].name.clone());
                return Err(BadAddress::WrongHost { who: who.into(), sits, asked }.into());
            }
        }
        Ok(Requester::Func(f))
    }

    /// An address: a number, or an expression over the fabric's names ([`Fabric::resolve_expr`]).
    /// Callers that know the requester use [`Fabric::resolve_for`], which also checks the host.
    pub fn resolve_addr(&self, a: &Addr) -> FResult<u64> {
        match a {
            Addr::Num(n) => Ok(*n),
            Addr::Expr(s) => self.resolve_expr(s),
        }
    }

    /// [`Fabric::resolve_addr`] for `req`: a symbolic base must sit in the requester's own host.
    /// Each host is its own physical address space, so `other.ram` or another host's BAR is not
    /// reachable by that address: another host is reached through an NTB window (`NTB.mwN`).
    pub fn resolve_for(&self, req: Requester, a: &Addr) -> FResult<u64> {
        if let Addr::Expr(s) = a {
            if let Some((name, what, ..)) = split_expr(s.trim())? {
                let owner = match what {
                    "ram" | "msi" => Some(self.host_id(name)?),
                    w if w.starts_with("bar") => Some(self.func_host(self.func_id(name)?)),
                    w if w.starts_with("mw") => Some(self.ntbs[self.ntb_id(name)? as usize].host),
                    _ => None,
                };
                let mine = self.requester_host(req);
                if let Some(h) = owner.filter(|h| *h != mine) {
                    let (owner, requester) = (self.hosts[h as usize].name.clone(), self.hosts[mine as usize].name.clone());
                    return Err(BadAddress::OtherHost { expr: s.trim().into(), name: name.into(), owner, requester }.into());
                }
            }
        }
        self.resolve_addr(a)
    }

    /// `NUMBER`, or `BASE[+|-OFFSET]` with BASE one of `FUNC.barN`, `HOST.ram`, `HOST.msi`, `NTB.mwN`.
    pub fn resolve_expr(&self, s: &str) -> FResult<u64> {
        let s = s.trim();
        if let Some(n) = parse_num(s) {
            return Ok(n);
        }
        let Some((name, what, off, neg)) = split_expr(s)? else {
            return Err(BadAddress::Syntax { expr: s.into() }.into());
        };
        let b = if let Some(i) = what.strip_prefix("bar").and_then(|x| x.parse::<u8>().ok()) {
            let f = self.func_id(name)?;
            let bar = self.funcs[f as usize]
                .bars
                .iter()
                .find(|b| b.index == i)
                .ok_or_else(|| FabricError::from(BadAddress::NoBar { expr: s.into(), name: name.into(), bar: i }))?;
            if off >= bar.size && !neg {
                return Err(BadAddress::PastBar { expr: s.into(), off, name: name.into(), bar: i, size: bar.size }.into());
            }
            bar.addr
        } else if let Some(i) = what.strip_prefix("mw").and_then(|x| x.parse::<usize>().ok()) {
            let n = self.ntb_id(name)?;
            let (addr, size) = self.peer_mw_get_addr(n, i)?;
            if off >= size && !neg {
                return Err(BadAddress::PastWindow { expr: s.into(), off, window: i, size }.into());
            }
            addr
        } else if what == "ram" {
            let h = &self.hosts[self.host_id(name)? as usize];
            return self.ram_offset_to_phys(h, off).ok_or_else(|| BadAddress::PastRam { expr: s.into(), host: name.into(), ram: h.ram }.into());
        } else if what == "msi" {
            self.hosts[self.host_id(name)? as usize].msi.start
        } else {
            return Err(BadAddress::Base { expr: s.into(), what: what.into() }.into());
        };
        Ok(if neg { b.wrapping_sub(off) } else { b + off })
    }

    /// The physical address of byte `off` of a host's RAM (skipping the 32-bit hole).
    pub fn ram_offset_to_phys(&self, h: &Host, mut off: u64) -> Option<u64> {
        for r in &h.ram_regions {
            if off < r.size() {
                return Some(r.start + off);
            }
            off -= r.size();
        }
        None
    }

    // ----- functional memory -----------------------------------------------------------------

    /// Digest of every byte of functional memory (all RAMs and BARs), in a fixed order.
    pub fn memory_digest(&self) -> u64 {
        let mut keys: Vec<_> = self.bar_mem.keys().copied().collect();
        keys.sort_unstable();
        let mut h = 0u64;
        for m in self.ram.iter().chain(keys.iter().map(|k| &self.bar_mem[k])) {
            h = h.rotate_left(5) ^ m.digest();
        }
        h
    }

    // ----- PCI config space ------------------------------------------------------------------

    pub fn config_read(&self, f: FuncId, off: usize, len: usize) -> FResult<u32> {
        check_cfg(off, len)?;
        let d = config::read_dword(&self.funcs[f as usize], &self.config[f as usize], off);
        Ok((d >> ((off & 3) * 8)) & mask(len))
    }

    pub fn config_write(&mut self, f: FuncId, off: usize, len: usize, value: u32) -> FResult<()> {
        check_cfg(off, len)?;
        let shift = (off & 3) * 8;
        let old = config::read_dword(&self.funcs[f as usize], &self.config[f as usize], off);
        let m = mask(len) << shift;
        let dword = if len == 4 { value } else { (old & !m) | ((value << shift) & m) };
        let before = self.config[f as usize].clone();
        let effect = config::write_dword(&self.funcs[f as usize], &mut self.config[f as usize], off, dword);
        let checked = match effect {
            WriteEffect::None => Ok(()),
            WriteEffect::Command => self.check_decoding_bars(f),
            WriteEffect::Relocate { index, addr } => self.relocate_bar(f, index, addr),
        };
        if checked.is_err() {
            self.config[f as usize] = before;
        }
        self.invalidate_routes();
        checked
    }

    /// Move BAR `index` of `f` to `addr`, unless it decodes and would overlap RAM or the MSI range.
    fn relocate_bar(&mut self, f: FuncId, index: u8, addr: u64) -> FResult<()> {
        let Some(b) = self.funcs[f as usize].bars.iter().find(|b| b.index == index) else { return Ok(()) };
        if addr.checked_add(b.size).is_none() {
            return Err(BadRequest::BarWraps { function: self.funcs[f as usize].name.clone(), bar: index, addr, size: b.size }.into());
        }
        if self.decodes(f) {
            self.check_bar_range(f, index, Range::new(addr, b.size))?;
        }
        if let Some(b) = self.funcs[f as usize].bars.iter_mut().find(|b| b.index == index) {
            b.addr = addr;
        }
        Ok(())
    }

    /// Every BAR of `f` and of its VFs, now decoding, must stay clear of RAM and the MSI range.
    fn check_decoding_bars(&self, f: FuncId) -> FResult<()> {
        let vfs = (0..self.funcs.len() as FuncId).filter(|v| self.funcs[*v as usize].vf.is_some_and(|(_, pf)| pf == f));
        for g in std::iter::once(f).chain(vfs).filter(|g| self.decodes(*g)) {
            for b in &self.funcs[g as usize].bars {
                self.check_bar_range(g, b.index, b.range())?;
            }
        }
        Ok(())
    }

    /// Linux refuses a resource that overlaps another (kernel/resource.c); devlend refuses a
    /// decoding BAR over RAM or the MSI range of its host, the two places where the root complex
    /// would otherwise have to choose between memory and the device, and over another function's
    /// decoding BAR in the same host (an NTB's memory windows are its BARs), where two completers
    /// would claim one address.
    fn check_bar_range(&self, f: FuncId, index: u8, r: Range) -> FResult<()> {
        let host = self.func_host(f);
        let h = &self.hosts[host as usize];
        let other = (0..self.funcs.len() as FuncId)
            .filter(|&g| g != f && self.func_host(g) == host && self.decodes(g))
            .find_map(|g| self.funcs[g as usize].bars.iter().find(|b| b.range().overlaps(&r)).map(|b| (g, b.index)));
        let with = if h.ram_regions.iter().any(|m| m.overlaps(&r)) {
            format!("RAM of host {}", h.name)
        } else if h.msi.overlaps(&r) {
            format!("the MSI range of host {}", h.name)
        } else if let Some((g, bar)) = other {
            format!("BAR {bar} of {}", self.funcs[g as usize].name)
        } else {
            return Ok(());
        };
        Err(FabricError::ResourceConflict { function: self.funcs[f as usize].name.clone(), bar: index, addr: r.start, size: r.size(), with })
    }

    /// pci_set_master / pci_clear_master.
    pub fn set_bus_master(&mut self, f: FuncId, enable: bool) {
        let st = &mut self.config[f as usize];
        if enable {
            st.command |= config::CMD_BUS_MASTER
        } else {
            st.command &= !config::CMD_BUS_MASTER
        }
        self.invalidate_routes();
    }

    // ----- setup programs --------------------------------------------------------------------

    /// Apply the `setup` section of a description; errors point at the failing operation.
    pub fn apply_setup(&mut self, ops: &[SetupOp]) -> Result<(), SpecError> {
        for (i, op) in ops.iter().enumerate() {
            self.apply_op(op).map_err(|e| SpecError::at(format!("/setup/{i}"), e))?;
        }
        Ok(())
    }

    pub fn apply_op(&mut self, op: &SetupOp) -> FResult<()> {
        match op {
            SetupOp::NtbMwSetTrans { ntb, window, addr, size } => {
                let n = self.ntb_id(ntb)?;
                let a = self.resolve_for(Requester::Cpu(self.ntbs[n as usize].host), addr)?;
                self.mw_set_trans(n, *window as usize, a, *size)
            }
            SetupOp::NtbLutSetTrans { ntb, window, segment, addr } => {
                let n = self.ntb_id(ntb)?;
                let a = self.resolve_for(Requester::Cpu(self.ntbs[n as usize].host), addr)?;
                self.lut_set_trans(n, *window as usize, *segment as usize, a)
            }
            SetupOp::NtbRidLutAdd { ntb, requester } => {
                let n = self.ntb_id(ntb)?;
                let r = self.requester(requester)?;
                if self.requester_host(r) != self.ntbs[n as usize].host {
                    return Err(BadNtb::RequesterElsewhere { requester: requester.clone(), ntb: ntb.clone() }.into());
                }
                let rid = self.requester_rid(r);
                self.rid_lut_add(n, rid).map(|_| ())
            }
            SetupOp::IommuDomain { host, domain } => {
                let h = self.host_id(host)?;
                self.iommu_domain_alloc(h, domain).map(|_| ())
            }
            SetupOp::IommuAttach { host, domain, device } => {
                let h = self.host_id(host)?;
                let d = self.iommu_domain(h, domain)?;
                let f = self.func_id(device)?;
                self.iommu_attach(h, d, f)
            }
            SetupOp::IommuMap { host, domain, iova, addr, size, write } => {
                let h = self.host_id(host)?;
                let d = self.iommu_domain(h, domain)?;
                let (i, a) = (self.resolve_for(Requester::Cpu(h), iova)?, self.resolve_for(Requester::Cpu(h), addr)?);
                self.iommu_map(h, d, i, a, *size, *write)
            }
            SetupOp::BusMaster { device, enable } => {
                let f = self.func_id(device)?;
                self.set_bus_master(f, *enable);
                Ok(())
            }
        }
    }
}

fn check_cfg(off: usize, len: usize) -> FResult<()> {
    if !matches!(len, 1 | 2 | 4) || !off.is_multiple_of(len) || off + len > crate::params::params().pci.config_space_size {
        return Err(BadRequest::ConfigAccess { off, len }.into());
    }
    Ok(())
}

fn mask(len: usize) -> u32 {
    if len == 4 {
        u32::MAX
    } else {
        (1u32 << (len * 8)) - 1
    }
}

pub fn parse_num(s: &str) -> Option<u64> {
    let s = s.replace('_', "");
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// `BASE[+|-OFFSET]` split into (name, what, offset, negative); None when there is no `NAME.WHAT` base.
fn split_expr(s: &str) -> FResult<Option<(&str, &str, u64, bool)>> {
    if parse_num(s).is_some() {
        return Ok(None);
    }
    let cut = s.find(['+', '-']).filter(|i| s[*i..].len() > 1 && s[..*i].contains('.')).or_else(|| s.rfind(['+']));
    let (base, off, neg) = match cut {
        Some(i) => {
            let off = parse_num(s[i + 1..].trim()).ok_or_else(|| FabricError::from(BadAddress::Offset { expr: s.into(), offset: s[i + 1..].into() }))?;
            (s[..i].trim(), off, &s[i..i + 1] == "-")
        }
        None => (s, 0, false),
    };
    Ok(base.rsplit_once('.').map(|(name, what)| (name, what, off, neg)))
}
