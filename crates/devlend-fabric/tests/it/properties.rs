//! Property tests of the fabric: random valid topologies must enumerate consistently, route every
//! BAR from its own host, move bytes through every valid route (NTBs and IOMMUs included), and keep
//! the route cache identical to the uncached router; random invalid descriptions must never panic
//! and must report a JSON pointer that exists in the description.
//!
//! Run: `cargo test -p devlend-fabric --test properties`. A failure prints the shrunk generator
//! value; `PROPTEST_CASES=N` changes the number of cases.

use devlend_fabric::fabric::Fabric;
use devlend_fabric::model::{Bar, FuncId, HostId, NodeId, NodeKind, Range};
use devlend_fabric::ntb::Inbound;
use devlend_fabric::params::params;
use devlend_fabric::route::Failure;
use devlend_fabric::spec::*;
use devlend_fabric::{build, CarriedRoute, HopKind, Outcome, Requester, Target};
use devlend_wire::{Access, TlpHeader};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

const CPUS: [&str; 3] = ["intel-xeon-e5", "amd-epyc", "generic-x86"];
const PAGE: u64 = 0x1000;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Control BAR of an NTB described by explicit windows (build.rs default).
const NTB_CONTROL_DEFAULT: u64 = 0x10000;

/// 64 cases per property; failures are reported with the shrunk input and turned into the
/// explicit regression tests at the end of this file (no persistence file).
fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(64), max_shrink_iters: 2048, failure_persistence: None, ..ProptestConfig::default() }
}

/// `PROPTEST_CASES` scales every property (the default is `default`).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

// =============================================================================================
// Generator of valid topologies
// =============================================================================================

#[derive(Clone, Debug)]
struct BarG {
    log2: u32,
    bits64: bool,
    pref: bool,
}

impl BarG {
    fn size(&self) -> u64 {
        1 << self.log2
    }
    fn high(&self) -> bool {
        self.bits64 && self.pref
    }
}

#[derive(Clone, Debug)]
struct NtbG {
    profile: bool,
    /// (log2 of the window size, log2 of the LUT segment count or None for a direct window)
    windows: Vec<(u32, Option<u32>)>,
    rid_entries: u16,
}

impl NtbG {
    fn control(&self) -> u64 {
        if self.profile {
            params().ntb["pxh830"].control_bar_size
        } else {
            NTB_CONTROL_DEFAULT
        }
    }
    fn window_sizes(&self) -> Vec<u64> {
        if self.profile {
            params().ntb["pxh830"].windows.iter().map(|w| w.size).collect()
        } else {
            self.windows.iter().map(|w| 1u64 << w.0).collect()
        }
    }
}

#[derive(Clone, Debug)]
enum Tree {
    Empty,
    /// Functions, each a list of BARs (indices assigned in order, 64-bit BARs take two registers),
    /// and optionally SR-IOV VFs on function 0 (count, VF BARs).
    Endpoint(Vec<Vec<BarG>>, Option<(u16, Vec<BarG>)>),
    Switch(Vec<Tree>),
    Ntb(NtbG),
}

#[derive(Clone, Debug)]
struct HostG {
    cpu: usize,
    ram_gib: u64,
    iommu: bool,
    ports: Vec<Tree>,
}

/// 4 KiB-256 MiB, and now and then a BAR below a page (16 B-2 KiB; placed on a page boundary).
fn bar_g() -> impl Strategy<Value = BarG> {
    (prop_oneof![9 => 12u32..=28, 1 => 4u32..12], any::<bool>(), any::<bool>()).prop_map(|(log2, bits64, pref)| BarG { log2, bits64, pref })
}

/// 1-4 BARs, dropping those that no longer fit the six BAR registers.
fn bars_g() -> impl Strategy<Value = Vec<BarG>> {
    vec(bar_g(), 1..=4).prop_map(|bars| {
        let mut regs = 0;
        bars.into_iter()
            .filter(|b| {
                let slots = if b.bits64 { 2 } else { 1 };
                let ok = regs + slots <= 6;
                if ok {
                    regs += slots;
                }
                ok
            })
            .collect()
    })
}

/// VF BARs: 1-2 small ones (they repeat for every VF).
fn vf_bars_g() -> impl Strategy<Value = Vec<BarG>> {
    vec((12u32..=16, any::<bool>(), any::<bool>()).prop_map(|(log2, bits64, pref)| BarG { log2, bits64, pref }), 1..=2)
}

fn ntb_g() -> impl Strategy<Value = NtbG> {
    let win = (12u32..=30, prop::option::of(0u32..=6)).prop_map(|(l, s)| (l, s.map(|s| s.min(l - 12))));
    (any::<bool>(), vec(win, 1..=2), 1u16..=32).prop_map(|(profile, windows, rid_entries)| NtbG { profile, windows, rid_entries })
}

fn tree_g() -> impl Strategy<Value = Tree> {
    let leaf = prop_oneof![
        2 => Just(Tree::Empty),
        5 => (vec(bars_g(), 1..=3), prop::option::weighted(0.15, (prop_oneof![4 => 1u16..=8, 1 => 250u16..=300], vf_bars_g())))
            .prop_map(|(fs, vfs)| Tree::Endpoint(fs, vfs)),
        2 => ntb_g().prop_map(Tree::Ntb),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| vec(inner, 1..=4).prop_map(Tree::Switch))
}

fn host_g() -> impl Strategy<Value = HostG> {
    (0..CPUS.len(), 1u64..=64, any::<bool>(), vec(tree_g(), 1..=4)).prop_map(|(cpu, ram_gib, iommu, ports)| HostG { cpu, ram_gib, iommu, ports })
}

fn spec_g() -> impl Strategy<Value = TopologySpec> {
    vec(host_g(), 1..=4).prop_map(make_spec)
}

/// At least two hosts with an NTB each, so at least one cable pair exists.
fn spec_with_ntb_g() -> impl Strategy<Value = TopologySpec> {
    (vec(host_g(), 2..=4), ntb_g(), ntb_g(), any::<Index>(), any::<Index>(), any::<Index>()).prop_map(|(mut hs, g0, g1, p0, p1, second)| {
        let h1 = 1 + second.index(hs.len() - 1);
        let n0 = hs[0].ports.len();
        hs[0].ports[p0.index(n0)] = Tree::Ntb(g0);
        let n1 = hs[h1].ports.len();
        hs[h1].ports[p1.index(n1)] = Tree::Ntb(g1);
        make_spec(hs)
    })
}

fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

/// An upper bound on what the items behind one bridge occupy (size, alignment), independent of
/// the packing code under test: items are packed by descending alignment, so the padding before
/// an item is below its alignment, and there is none between size-aligned BARs only.
fn pack_bound(items: &[(u64, u64, bool)]) -> Option<(u64, u64)> {
    if items.is_empty() {
        return None;
    }
    let windows = items.iter().any(|i| i.2);
    let sum: u64 = items.iter().map(|i| i.0 + if windows { i.1 } else { 0 }).sum();
    let align = items.iter().map(|i| i.1).max().unwrap().max(MIB);
    Some((align_up(sum, MIB), align))
}

/// Items directly behind a downstream-facing port whose child is `t`.
fn port_items(t: &Tree, high: bool) -> Vec<(u64, u64, bool)> {
    match t {
        Tree::Empty => vec![],
        Tree::Endpoint(fs, vfs) => {
            let vf_bars = vfs.iter().flat_map(|(n, bars)| bars.iter().flat_map(move |b| std::iter::repeat_n(b, *n as usize)));
            fs.iter().flatten().chain(vf_bars).filter(|b| b.high() == high).map(|b| (b.size().max(PAGE), b.size().max(PAGE), false)).collect()
        }
        Tree::Ntb(g) => {
            if high {
                g.window_sizes().into_iter().map(|s| (s, s, false)).collect()
            } else {
                vec![(g.control(), g.control(), false)]
            }
        }
        Tree::Switch(ch) => {
            let downs: Vec<_> = ch.iter().filter_map(|c| pack_bound(&port_items(c, high))).map(|(s, a)| (s, a, true)).collect();
            pack_bound(&downs).map(|(s, a)| vec![(s, a, true)]).unwrap_or_default()
        }
    }
}

fn host_need(h: &HostG, high: bool) -> u64 {
    h.ports.iter().filter_map(|t| pack_bound(&port_items(t, high))).map(|(s, a)| s + a).sum()
}

fn port_buses(t: &Tree) -> u32 {
    1 + match t {
        Tree::Switch(ch) => 1 + ch.iter().map(port_buses).sum::<u32>(),
        // VFs follow the PFs in routing-ID space and may spill onto the next buses.
        Tree::Endpoint(fs, Some((n, _))) => (fs.len() as u32 + *n as u32 - 1) / 256,
        _ => 0,
    }
}

fn collect_bars<'a>(t: &'a mut Tree, out: &mut Vec<&'a mut BarG>) {
    match t {
        Tree::Endpoint(fs, vfs) => {
            out.extend(fs.iter_mut().flatten());
            out.extend(vfs.iter_mut().flat_map(|v| v.1.iter_mut()));
        }
        Tree::Switch(ch) => ch.iter_mut().for_each(|c| collect_bars(c, out)),
        _ => {}
    }
}

/// Drop the last non-empty subtree of a root port (NTB leaves are kept); false when none is left.
fn prune_one(h: &mut HostG) -> bool {
    match h.ports.iter_mut().rev().find(|t| !matches!(t, Tree::Empty | Tree::Ntb(_))) {
        Some(t) => {
            *t = Tree::Empty;
            true
        }
        None => false,
    }
}

/// Shrink BARs (largest first) until the host's MMIO apertures surely hold them; keep bus numbers in range.
fn fit_host(h: &mut HostG) {
    while h.ports.iter().map(port_buses).sum::<u32>() > 250 && prune_one(h) {}
    let cpu = &params().cpu[CPUS[h.cpu]];
    let low_cap = cpu.mmio32_end - cpu.low_ram_top;
    let high_cap = (1u64 << cpu.phys_addr_bits) - cpu.mmio64_base;
    for (high, cap) in [(false, low_cap), (true, high_cap)] {
        while host_need(h, high) > cap {
            let mut bars = Vec::new();
            for t in &mut h.ports {
                collect_bars(t, &mut bars);
            }
            match bars.into_iter().filter(|b| b.high() == high && b.log2 > 4).max_by_key(|b| b.log2) {
                Some(b) => b.log2 -= 1,
                None => {
                    if !prune_one(h) {
                        break;
                    }
                }
            }
        }
    }
}

fn bar_specs(bars: &[BarG]) -> Vec<BarSpec> {
    let mut idx = 0u8;
    bars.iter()
        .map(|b| {
            let s = BarSpec { index: idx, size: b.size(), bits: if b.bits64 { 64 } else { 32 }, pref: b.pref };
            idx += if b.bits64 { 2 } else { 1 };
            s
        })
        .collect()
}

struct SpecBuilder {
    spec: TopologySpec,
    ntb_hosts: Vec<usize>,
}

impl SpecBuilder {
    fn link(&mut self, a: String, b: String) {
        self.spec.links.push(LinkSpec { a, b, gen: 3, width: 8, kind: LinkKind::Slot });
    }

    fn place(&mut self, t: &Tree, up: String, host: usize) {
        match t {
            Tree::Empty => {}
            Tree::Endpoint(fs, vfs) => {
                let name = format!("dev{}", self.spec.devices.len());
                let functions = fs
                    .iter()
                    .map(|bars| {
                        let bars = bar_specs(bars);
                        FunctionSpec { bars, msix_vectors: 0, sriov: None }
                    })
                    .collect::<Vec<_>>();
                let mut functions = functions;
                if let Some((n, vf_bars)) = vfs {
                    functions[0].sriov = Some(SriovSpec { num_vfs: *n, total_vfs: None, vf_bars: Some(bar_specs(vf_bars)) });
                }
                self.spec.devices.push(DeviceSpec { name: name.clone(), profile: None, kind: None, functions: Some(functions), num_vfs: None });
                self.link(up, name);
            }
            Tree::Switch(ch) => {
                let name = format!("sw{}", self.spec.switches.len());
                self.spec.switches.push(SwitchSpec { name: name.clone(), profile: None, downstream_ports: ch.len() as u8 });
                self.link(up, name.clone());
                for (i, c) in ch.iter().enumerate() {
                    self.place(c, format!("{name}.d{i}"), host);
                }
            }
            Tree::Ntb(g) => {
                let name = format!("ntb{}", self.spec.ntbs.len());
                let spec = if g.profile {
                    NtbSpec {
                        name: name.clone(),
                        profile: Some("pxh830".into()),
                        windows: None,
                        rid_lut_entries: None,
                        doorbells: None,
                        scratchpads: None,
                        message_registers: None,
                        cable_ports: None,
                    }
                } else {
                    NtbSpec {
                        name: name.clone(),
                        profile: None,
                        windows: Some(g.windows.iter().map(|(l, s)| WindowSpec { size: 1 << l, lut_segments: s.map(|s| 1 << s).unwrap_or(0) }).collect()),
                        rid_lut_entries: Some(g.rid_entries),
                        doorbells: Some(16),
                        scratchpads: Some(4),
                        message_registers: Some(2),
                        cable_ports: None,
                    }
                };
                self.spec.ntbs.push(spec);
                self.ntb_hosts.push(host);
                self.link(up, name);
            }
        }
    }
}

fn make_spec(mut hs: Vec<HostG>) -> TopologySpec {
    for h in &mut hs {
        fit_host(h);
    }
    let mut b = SpecBuilder { spec: TopologySpec { name: "prop".into(), ..Default::default() }, ntb_hosts: Vec::new() };
    for (i, h) in hs.iter().enumerate() {
        b.spec.hosts.push(HostSpec {
            name: format!("h{i}"),
            cpu: CPUS[h.cpu].into(),
            ram: h.ram_gib * GIB,
            iommu: h.iommu,
            root_ports: h.ports.len() as u8,
            memory_map: None,
            interrupt_remapping: None,
        });
        for (p, t) in h.ports.iter().enumerate() {
            b.place(t, format!("h{i}.rp{p}"), i);
        }
    }
    // Pair NTBs of different hosts by cables, in order; leftovers stay unconnected (link down).
    let n = b.ntb_hosts.len();
    let mut paired = vec![false; n];
    for i in 0..n {
        if paired[i] {
            continue;
        }
        if let Some(j) = (i + 1..n).find(|&j| !paired[j] && b.ntb_hosts[j] != b.ntb_hosts[i]) {
            paired[i] = true;
            paired[j] = true;
            b.spec.links.push(LinkSpec { a: format!("ntb{i}.cable"), b: format!("ntb{j}.cable"), gen: 3, width: 8, kind: LinkKind::Cable });
        }
    }
    b.spec
}

fn build_ok(spec: &TopologySpec) -> Result<Fabric, TestCaseError> {
    build(spec).map_err(|e| TestCaseError::fail(format!("valid spec rejected: {e}\n{}", serde_json::to_string(spec).unwrap())))
}

// =============================================================================================
// Helpers on a built fabric
// =============================================================================================

fn is_window_bar(f: &Fabric, func: FuncId, index: u8) -> bool {
    match f.node(f.func(func).node).kind {
        NodeKind::Ntb { ntb } => f.ntb(ntb).window_bars.contains(&index),
        _ => false,
    }
}

/// BARs that software reaches as memory (every BAR but the NTB windows, which forward).
fn plain_bars(f: &Fabric, host: Option<HostId>) -> Vec<(FuncId, Bar)> {
    let mut v = Vec::new();
    for (i, func) in f.funcs().iter().enumerate() {
        let fid = i as FuncId;
        if host.is_some_and(|h| f.func_host(fid) != h) {
            continue;
        }
        for b in &func.bars {
            if !is_window_bar(f, fid, b.index) {
                v.push((fid, *b));
            }
        }
    }
    v
}

fn is_bridge(k: NodeKind) -> bool {
    matches!(k, NodeKind::RootPort { .. } | NodeKind::SwitchDown { .. } | NodeKind::SwitchUp { .. })
}

fn ancestors(f: &Fabric, n: NodeId) -> Vec<NodeId> {
    let mut v = Vec::new();
    let mut c = n;
    while let Some(p) = f.node(c).parent {
        v.push(p);
        c = p;
    }
    v
}

fn root_port_of(f: &Fabric, n: NodeId) -> Option<NodeId> {
    ancestors(f, n).into_iter().find(|a| matches!(f.node(*a).kind, NodeKind::RootPort { .. }))
}

/// Whether a peer write from function `from` to a BAR of function `to` (same host) has a route:
/// not to its own device; with the IOMMU on (ACS redirect) always through the root; without it
/// through the root only between root ports; through the root only where the CPU allows P2P.
fn p2p_valid(f: &Fabric, from: FuncId, to: FuncId) -> bool {
    let (a, b) = (f.func(from).node, f.func(to).node);
    let h = f.host(f.func_host(from));
    if a == b || f.func_host(from) != f.func_host(to) {
        return false;
    }
    if h.iommu || root_port_of(f, a) != root_port_of(f, b) {
        return h.cpu.p2p_through_root;
    }
    true
}

fn contains(outer: Range, inner: Range) -> bool {
    inner.start >= outer.start && inner.end <= outer.end
}

fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Device DMA addresses in an IOMMU domain are IOVAs: physical address + 2^47 (distinct from
/// every physical address of the generated hosts, so a route that skips the IOMMU cannot deliver).
const IOVA_BASE: u64 = 1 << 47;

/// Map [addr, addr+len) for `func` at IOVA_BASE + addr (or 1:1 when `identity`) in a host IOMMU
/// domain named `domain` (created on first use); returns the IOVA of `addr`.
fn dma_map(f: &mut Fabric, host: HostId, domain: &str, func: FuncId, addr: u64, len: u64, identity: bool) -> u64 {
    let base = if identity { 0 } else { IOVA_BASE };
    let d = match f.iommu_domain(host, domain) {
        Ok(d) => d,
        Err(_) => f.iommu_domain_alloc(host, domain).unwrap(),
    };
    f.iommu_attach(host, d, func).unwrap();
    let mut p = addr & !(PAGE - 1);
    while p < addr + len {
        let _ = f.iommu_map(host, d, base + p, p, PAGE, true); // already mapped (the same way) is fine
        p += PAGE;
    }
    base + addr
}

fn requesters(f: &Fabric) -> Vec<Requester> {
    (0..f.hosts().len()).map(|h| Requester::Cpu(h as HostId)).chain((0..f.funcs().len()).map(|i| Requester::Func(i as FuncId))).collect()
}

// =============================================================================================
// (1) Every BAR is reachable from its own host's CPU, and from no other host's CPU
// =============================================================================================

fn check_bar_reachability(f: &mut Fabric, r: u64) -> Result<usize, TestCaseError> {
    let mut checked = 0;
    let all: Vec<Vec<Bar>> = f.funcs().iter().map(|x| x.bars.clone()).collect();
    for (i, func) in all.into_iter().enumerate() {
        let fid = i as FuncId;
        let h = f.func_host(fid);
        for bar in func {
            for off in [0, bar.size - 1, r % bar.size] {
                let addr = bar.addr + off;
                let route = f.route(Requester::Cpu(h), addr, Access::Write);
                if is_window_bar(f, fid, bar.index) {
                    // An NTB window forwards to the peer; nothing is programmed yet.
                    prop_assert!(
                        matches!(route.outcome, Outcome::Failed(Failure::NtbUnmapped { .. } | Failure::NtbLinkDown { .. })),
                        "CPU of host {h} to NTB window BAR {} of {} at {addr:#x}: {:?}",
                        bar.index,
                        f.funcs()[i].name,
                        route.outcome
                    );
                } else {
                    prop_assert_eq!(
                        route.outcome,
                        Outcome::Delivered(Target::Bar { func: fid, bar: bar.index, offset: off }),
                        "CPU of host {} to BAR {} of {} at {:#x}",
                        h,
                        bar.index,
                        &f.funcs()[i].name,
                        addr
                    );
                    if off == 0 {
                        let rd = f.route(Requester::Cpu(h), addr, Access::Read);
                        prop_assert_eq!(rd.outcome, Outcome::Delivered(Target::Bar { func: fid, bar: bar.index, offset: 0 }));
                        prop_assert_eq!(rd.completion.as_ref().and_then(|c| c.delivered()), Some(Target::Cpu { host: h }));
                    }
                    checked += 1;
                }
                for h2 in 0..f.hosts().len() as HostId {
                    if h2 == h {
                        continue;
                    }
                    let other = f.route(Requester::Cpu(h2), addr, Access::Write);
                    match other.outcome {
                        Outcome::Delivered(Target::Bar { func: g, .. }) => {
                            prop_assert_ne!(g, fid, "CPU of host {} reached {} of host {} at {:#x}", h2, &f.funcs()[i].name, h, addr);
                            prop_assert_eq!(f.func_host(g), h2);
                        }
                        Outcome::Delivered(Target::Ram { host, .. } | Target::Msi { host, .. }) => prop_assert_eq!(host, h2),
                        _ => {}
                    }
                }
            }
        }
    }
    Ok(checked)
}

// =============================================================================================
// (3) Enumeration invariants
// =============================================================================================

fn windows(f: &Fabric, n: NodeId) -> Vec<Range> {
    let b = &f.node(n).bridge;
    b.mem.into_iter().chain(b.pref).collect()
}

fn check_enumeration(f: &Fabric) -> Result<(), TestCaseError> {
    let min_align = params().pci.min_bar_align;
    for (hi, h) in f.hosts().iter().enumerate() {
        let in_host = |n: &NodeId| f.node(*n).host as usize == hi;
        // Sibling ports: the root ports, and the downstream ports of each switch.
        let mut groups: Vec<Vec<NodeId>> = vec![h.root_ports.clone()];
        for node in f.nodes() {
            if node.host as usize == hi && matches!(node.kind, NodeKind::SwitchUp { .. }) {
                groups.push(node.children.clone());
            }
        }
        for g in &groups {
            for (i, a) in g.iter().enumerate() {
                for b in &g[i + 1..] {
                    for wa in windows(f, *a) {
                        for wb in windows(f, *b) {
                            prop_assert!(
                                !wa.overlaps(&wb),
                                "host {}: windows {} of {}.{} and {} of {}.{} overlap",
                                h.name,
                                wa,
                                f.node(*a).component,
                                f.node(*a).port,
                                wb,
                                f.node(*b).component,
                                f.node(*b).port
                            );
                        }
                    }
                    let (ba, bb) = (f.node(*a).bridge, f.node(*b).bridge);
                    prop_assert!(
                        ba.subordinate < bb.secondary || bb.subordinate < ba.secondary,
                        "host {}: sibling bus ranges {}-{} and {}-{} overlap",
                        h.name,
                        ba.secondary,
                        ba.subordinate,
                        bb.secondary,
                        bb.subordinate
                    );
                }
            }
        }
        for (n, node) in f.nodes().iter().enumerate().filter(|(n, _)| in_host(&(*n as NodeId))) {
            let n = n as NodeId;
            if is_bridge(node.kind) {
                let b = node.bridge;
                prop_assert!(b.secondary >= 1 && b.secondary <= b.subordinate, "{}.{}: bus range {}-{}", node.component, node.port, b.secondary, b.subordinate);
                if let Some(m) = b.mem {
                    prop_assert!(contains(h.mmio32, m), "{}.{}: window {} outside the 32-bit aperture {}", node.component, node.port, m, h.mmio32);
                }
                if let Some(p) = b.pref {
                    prop_assert!(contains(h.mmio64, p), "{}.{}: window {} outside the 64-bit aperture {}", node.component, node.port, p, h.mmio64);
                }
                // Bus ranges and windows nest in the parent bridge's.
                if let Some(p) = node.parent.filter(|p| is_bridge(f.node(*p).kind)) {
                    let pb = f.node(p).bridge;
                    prop_assert_eq!(b.bdf.bus(), pb.secondary, "{}.{} sits on its parent's secondary bus", &node.component, &node.port);
                    prop_assert!(
                        b.secondary > pb.secondary && b.subordinate <= pb.subordinate,
                        "{}.{}: buses {}-{} not within parent's {}-{}",
                        node.component,
                        node.port,
                        b.secondary,
                        b.subordinate,
                        pb.secondary,
                        pb.subordinate
                    );
                    for (w, pw) in [(b.mem, pb.mem), (b.pref, pb.pref)] {
                        if let Some(w) = w {
                            prop_assert!(pw.is_some_and(|pw| contains(pw, w)), "{}.{}: window {} not within parent's {:?}", node.component, node.port, w, pw);
                        }
                    }
                } else {
                    prop_assert_eq!(b.bdf.bus(), 0, "root port on bus 0");
                }
            }
            for fid in &node.functions {
                let func = f.func(*fid);
                let parent = f.node(node.parent.unwrap()).bridge;
                if func.vf.is_none() {
                    prop_assert_eq!(func.bdf.bus(), parent.secondary, "{} on its port's secondary bus", &func.name);
                } else {
                    prop_assert!(parent.claims_bus(func.bdf.bus()), "VF {} on a bus below its port", func.name);
                }
                for bar in &func.bars {
                    let r = bar.range();
                    prop_assert_eq!(bar.addr % bar.size.max(min_align), 0, "BAR {} of {} at {:#x} misaligned", bar.index, &func.name, bar.addr);
                    let aperture = if bar.goes_high() { h.mmio64 } else { h.mmio32 };
                    prop_assert!(contains(aperture, r), "BAR {} of {} at {} outside its aperture {}", bar.index, func.name, r, aperture);
                    for a in ancestors(f, n).into_iter().filter(|a| is_bridge(f.node(*a).kind)) {
                        let ab = f.node(a).bridge;
                        let w = if bar.goes_high() { ab.pref } else { ab.mem };
                        prop_assert!(
                            w.is_some_and(|w| contains(w, r)),
                            "BAR {} of {} at {} not inside the window {:?} of {}.{}",
                            bar.index,
                            func.name,
                            r,
                            w,
                            f.node(a).component,
                            f.node(a).port
                        );
                    }
                }
            }
        }
        // No two BARs of a host overlap, and none overlaps RAM or the MSI range.
        let mut rs: Vec<(Range, String)> = Vec::new();
        for (i, func) in f.funcs().iter().enumerate() {
            if f.func_host(i as FuncId) as usize == hi {
                for bar in &func.bars {
                    rs.push((bar.range(), format!("{} BAR {}", func.name, bar.index)));
                }
            }
        }
        rs.sort_by_key(|r| r.0.start);
        for w in rs.windows(2) {
            prop_assert!(!w[0].0.overlaps(&w[1].0), "host {}: {} at {} overlaps {} at {}", h.name, w[0].1, w[0].0, w[1].1, w[1].0);
        }
        for (r, name) in &rs {
            prop_assert!(!r.overlaps(&h.msi) && !h.ram_regions.iter().any(|m| m.overlaps(r)), "{name} at {r} overlaps RAM or MSI");
        }
    }
    Ok(())
}

// =============================================================================================
// (2) Write then read returns the bytes, over every valid route
// =============================================================================================

#[derive(Clone, Copy, Debug)]
enum Dest {
    Ram(usize),
    Bar(FuncId, Bar),
}

fn check_write_read(f: &mut Fabric, ops: &[(Index, Index, u64, usize, u64)]) -> Result<usize, TestCaseError> {
    let reqs = requesters(f);
    let mut done = 0;
    for (ri, ti, pos, len, seed) in ops {
        let req = reqs[ri.index(reqs.len())];
        let host = f.requester_host(req);
        let mut dests: Vec<Dest> = (0..f.host(host).ram_regions.len()).map(Dest::Ram).collect();
        for (fid, bar) in plain_bars(f, Some(host)) {
            match req {
                Requester::Func(r) if !p2p_valid(f, r, fid) => {}
                _ => dests.push(Dest::Bar(fid, bar)),
            }
        }
        let dest = dests[ti.index(dests.len())];
        let (addr, len, expect) = match dest {
            Dest::Ram(r) => {
                let reg = f.host(host).ram_regions[r];
                let len = (*len as u64).min(reg.size());
                let a = reg.start + pos % (reg.size() - len + 1);
                (a, len as usize, Target::Ram { host, addr: a })
            }
            Dest::Bar(fid, bar) => {
                let len = (*len as u64).min(bar.size);
                let off = pos % (bar.size - len + 1);
                (bar.addr + off, len as usize, Target::Bar { func: fid, bar: bar.index, offset: off })
            }
        };
        // `phys` is where the bytes land; `addr` is what the requester issues (an IOVA for DMA
        // through an IOMMU).
        let phys = addr;
        let (addr, completer) = match req {
            Requester::Cpu(h) => (phys, Target::Cpu { host: h }),
            Requester::Func(fid) => {
                f.set_bus_master(fid, true);
                let a = if f.host(host).iommu { dma_map(f, host, "dma", fid, phys, len as u64, seed & 1 == 0) } else { phys };
                (a, Target::Func { func: fid })
            }
        };
        let data = bytes(*seed, len);
        let (n, fail) = f.write(req, addr, &data);
        prop_assert!(fail.is_none() && n == len, "{req:?} write of {len} bytes at {addr:#x} ({dest:?}): {n} delivered, {fail:?}");
        let route = f.route(req, addr, Access::Write);
        prop_assert_eq!(route.outcome, Outcome::Delivered(expect));
        if matches!(req, Requester::Func(_)) && f.host(host).iommu {
            // ACS redirect: device requests climb to the root and are translated, peers included.
            prop_assert!(route.hops.iter().any(|h| h.kind == HopKind::Iommu), "{:?} to {:#x} skipped the IOMMU: {:?}", req, addr, route.hops);
        }
        let (back, fail) = f.read(req, addr, len);
        prop_assert!(fail.is_none(), "{req:?} read at {addr:#x}: {fail:?}");
        prop_assert!(back == data, "{req:?} read back different bytes at {addr:#x} ({dest:?}, {len} bytes)");
        let rd = f.route(req, addr, Access::Read);
        prop_assert_eq!(rd.completion.as_ref().and_then(|c| c.delivered()), Some(completer), "completion of {:?} read at {:#x}", req, addr);
        let addr = phys;
        // The host's CPU sees the same bytes at the same physical address.
        let (cpu_view, fail) = f.read(Requester::Cpu(host), addr, len);
        prop_assert!(fail.is_none() && cpu_view == data, "CPU of host {host} sees other bytes at {addr:#x}");
        done += 1;
    }
    Ok(done)
}

/// A write into an NTB window lands in the far host's RAM at the programmed translation (through
/// the far IOMMU when it is on), from the near CPU and from a near device with a LUT entry.
fn check_ntb_write_read(f: &mut Fabric, pick: &Index, widx: &Index, pages: u64, seeds: [u64; 4], len: usize, dev: &Index) -> Result<(), TestCaseError> {
    let paired: Vec<u32> = (0..f.ntbs().len() as u32).filter(|n| f.ntb(*n).peer.is_some()).collect();
    prop_assert!(!paired.is_empty(), "generator must produce a cable pair");
    let near = paired[pick.index(paired.len())];
    let far = f.ntb(near).peer.unwrap();
    let (nh, fh) = (f.ntb(near).host, f.ntb(far).host);
    let w = widx.index(f.peer_mw_count(near));
    let (win, wsize) = f.peer_mw_get_addr(near, w).unwrap();
    let size = (pages * PAGE).min(wsize);
    let low = f.host(fh).ram_regions[0];
    let phys = (seeds[0] % (low.size() - size)) & !(PAGE - 1);
    let trans = if f.host(fh).iommu { (4 * GIB + seeds[1] % GIB) & !(PAGE - 1) } else { phys };
    // Requesters on the near side: the CPU, and a device function that may reach the window.
    // Each with the address it issues for the window (an IOVA for DMA through the near IOMMU).
    let mut reqs = vec![(Requester::Cpu(nh), win)];
    let nfunc = f.ntb(near).func;
    let devs: Vec<FuncId> = (0..f.funcs().len() as FuncId).filter(|g| f.func_host(*g) == nh && *g != nfunc && p2p_valid(f, *g, nfunc)).collect();
    if !devs.is_empty() {
        let g = devs[dev.index(devs.len())];
        f.set_bus_master(g, true);
        let rid = f.func(g).bdf;
        if f.rid_lut_add(near, rid).is_ok() {
            let a = if f.host(nh).iommu { dma_map(f, nh, "dma", g, win, size, seeds[1] & 1 == 0) } else { win };
            reqs.push((Requester::Func(g), a));
        }
    }
    if f.host(fh).iommu {
        let ffunc = f.ntb(far).func;
        let d = f.iommu_domain_alloc(fh, "ntb-in").unwrap();
        f.iommu_attach(fh, d, ffunc).unwrap(); // after the LUT additions: attaches every alias
        f.iommu_map(fh, d, trans, phys, size, true).unwrap();
    }
    f.mw_set_trans(far, w, trans, size).map_err(|e| TestCaseError::fail(format!("mw_set_trans: {e}")))?;
    for (k, (req, base)) in reqs.into_iter().enumerate() {
        let len = len.min(size as usize);
        let off = seeds[2].rotate_left(k as u32 * 7) % (size - len as u64 + 1);
        let data = bytes(seeds[3] ^ k as u64, len);
        let (n, fail) = f.write(req, base + off, &data);
        prop_assert!(fail.is_none() && n == len, "{req:?} write into {} window {w} at {:#x}: {n} of {len} bytes, {fail:?}", f.ntb(near).name, base + off);
        let route = f.route(req, base + off, Access::Write);
        prop_assert_eq!(route.outcome, Outcome::Delivered(Target::Ram { host: fh, addr: phys + off }));
        prop_assert_eq!(route.ntb_crossings(), 1);
        let (back, fail) = f.read(Requester::Cpu(fh), phys + off, len);
        prop_assert!(fail.is_none() && back == data, "far CPU reads other bytes at {:#x}", phys + off);
        let (back, fail) = f.read(req, base + off, len);
        prop_assert!(fail.is_none() && back == data, "{req:?} reads other bytes back through the window: {fail:?}");
        let rd = f.route(req, base + off, Access::Read);
        let completer = match req {
            Requester::Cpu(h) => Target::Cpu { host: h },
            Requester::Func(g) => Target::Func { func: g },
        };
        prop_assert_eq!(rd.completion.as_ref().and_then(|c| c.delivered()), Some(completer));
    }
    // Just past the translation of a direct window, nothing is mapped.
    let direct = f.ntb(near).windows[w].lut_segments == 0;
    if direct && size < wsize {
        let out = f.lookup(Requester::Cpu(nh), win + size, Access::Write);
        prop_assert_eq!(out, Outcome::Failed(Failure::NtbUnmapped { ntb: near, window: w as u8, offset: size }));
    }
    Ok(())
}

// =============================================================================================
// (4) Route cache consistency
// =============================================================================================

#[derive(Clone, Debug)]
enum AddrG {
    Bar(Index, u64),
    Ram(Index, u64),
    Window(Index, Index, u64),
    Msi(u64),
    Raw(u64),
    Edge(Index, u8),
}

fn addr_g() -> impl Strategy<Value = AddrG> {
    prop_oneof![
        4 => (any::<Index>(), any::<u64>()).prop_map(|(i, o)| AddrG::Bar(i, o)),
        3 => (any::<Index>(), any::<u64>()).prop_map(|(i, o)| AddrG::Ram(i, o)),
        3 => (any::<Index>(), any::<Index>(), any::<u64>()).prop_map(|(i, w, o)| AddrG::Window(i, w, o)),
        1 => any::<u64>().prop_map(AddrG::Msi),
        1 => any::<u64>().prop_map(AddrG::Raw),
        2 => (any::<Index>(), 0u8..4).prop_map(|(i, e)| AddrG::Edge(i, e)),
    ]
}

fn resolve(f: &Fabric, a: &AddrG) -> u64 {
    match a {
        AddrG::Bar(i, o) => {
            let bars: Vec<Bar> = f.funcs().iter().flat_map(|x| x.bars.iter().copied()).collect();
            if bars.is_empty() {
                return o & 0xffff_ffff;
            }
            let b = bars[i.index(bars.len())];
            b.addr + o % b.size
        }
        AddrG::Ram(i, o) => {
            let h = &f.hosts()[i.index(f.hosts().len())];
            f.ram_offset_to_phys(h, o % h.ram).unwrap()
        }
        AddrG::Window(i, w, o) => {
            if f.ntbs().is_empty() {
                return o & 0xffff_ffff_ffff;
            }
            let n = i.index(f.ntbs().len()) as u32;
            let (a, s) = f.peer_mw_get_addr(n, w.index(f.peer_mw_count(n))).unwrap();
            // Half the time near the start, where translations of a few pages end.
            if o & 1 == 0 {
                a + (o >> 1) % s.min(4 * MIB)
            } else {
                a + o % s
            }
        }
        AddrG::Msi(o) => params().x86.msi_base + o % params().x86.msi_size,
        AddrG::Raw(v) => {
            if v & 1 == 0 {
                v & 0xffff_ffff_ffff
            } else {
                *v
            }
        }
        AddrG::Edge(i, e) => {
            let ws: Vec<Range> = (0..f.nodes().len() as NodeId).flat_map(|n| windows(f, n)).collect();
            if ws.is_empty() {
                return 0;
            }
            let r = ws[i.index(ws.len())];
            match e {
                0 => r.start,
                1 => r.end - 1,
                2 => r.end,
                _ => r.start.wrapping_sub(1),
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Op4 {
    Look {
        req: Index,
        addr: AddrG,
        offs: Vec<u16>,
        write: bool,
    },
    /// The near host's CPU around the end of the translation programmed for an NTB window.
    LookTransEnd {
        window: Index,
        delta: u16,
        offs: Vec<u16>,
        write: bool,
    },
    SetTrans {
        ntb: Index,
        w: Index,
        addr: AddrG,
        pages: u64,
        extra: u64,
    },
    LutSet {
        ntb: Index,
        w: Index,
        seg: u32,
        addr: AddrG,
    },
    IommuMap {
        func: Index,
        iova: AddrG,
        paddr: AddrG,
        pages: u64,
    },
    BusMaster {
        func: Index,
        on: bool,
    },
    RidAdd {
        ntb: Index,
        req: Index,
    },
}

fn op4_g() -> impl Strategy<Value = Op4> {
    prop_oneof![
        10 => (any::<Index>(), addr_g(), vec(any::<u16>(), 1..4), any::<bool>()).prop_map(|(req, addr, offs, write)| Op4::Look { req, addr, offs, write }),
        3 => (any::<Index>(), 0u16..(2 * PAGE as u16), vec(any::<u16>(), 1..4), any::<bool>()).prop_map(|(window, delta, offs, write)| Op4::LookTransEnd { window, delta, offs, write }),
        3 => (any::<Index>(), any::<Index>(), addr_g(), 1u64..=600, prop_oneof![Just(0u64), 1u64..PAGE]).prop_map(|(ntb, w, addr, pages, extra)| Op4::SetTrans { ntb, w, addr, pages, extra }),
        1 => (any::<Index>(), any::<Index>(), 0u32..80, addr_g()).prop_map(|(ntb, w, seg, addr)| Op4::LutSet { ntb, w, seg, addr }),
        2 => (any::<Index>(), addr_g(), addr_g(), 1u64..=600).prop_map(|(func, iova, paddr, pages)| Op4::IommuMap { func, iova, paddr, pages }),
        1 => (any::<Index>(), any::<bool>()).prop_map(|(func, on)| Op4::BusMaster { func, on }),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(ntb, req)| Op4::RidAdd { ntb, req }),
    ]
}

/// Route `base` and other addresses of its page, cached and uncached; they must agree.
fn compare_routes(f: &mut Fabric, req: Requester, base: u64, offs: &[u16], write: bool) -> Result<usize, TestCaseError> {
    let acc = if write { Access::Write } else { Access::Read };
    let addrs = std::iter::once(base).chain(offs.iter().map(|o| (base & !(PAGE - 1)) | (*o as u64 % PAGE)));
    let mut n = 0;
    for a in addrs {
        let cached = f.route(req, a, acc);
        let fresh = f.route_uncached(req, a, acc);
        prop_assert_eq!(&*cached, &fresh, "route({:?}, {:#x}, {:?}) from the cache differs", req, a, acc);
        let out = f.lookup(req, a, acc);
        prop_assert_eq!(out, fresh.outcome, "lookup({:?}, {:#x}, {:?}) differs", req, a, acc);
        n += 1;
    }
    Ok(n)
}

/// Carry the route of `req`'s TLP at `base` as a flow does; then every route carried so far (also
/// across the reprogramming between looks) must land its TLP where a fresh arrival does.
fn compare_carried(
    f: &mut Fabric,
    carried: &mut Vec<(Requester, TlpHeader, Option<CarriedRoute>)>,
    req: Requester,
    base: u64,
    write: bool,
) -> Result<(), TestCaseError> {
    let header = f.request_header(req, base, if write { Access::Write } else { Access::Read });
    let (_, c) = f.route_to_carry(req, &header);
    carried.push((req, header, c));
    for (r, h, c) in carried.iter() {
        let along = f.arrival_along(&mut c.clone(), *r, h);
        prop_assert_eq!(along, f.arrival(*r, h), "the route carried for {:?} at {:#x} is not the route now", r, h.addr);
    }
    Ok(())
}

fn check_cache(f: &mut Fabric, ops: &[Op4]) -> Result<usize, TestCaseError> {
    let reqs = requesters(f);
    let mut looks = 0;
    let mut carried = Vec::new();
    for op in ops {
        match op {
            Op4::Look { req, addr, offs, write } => {
                let req = reqs[req.index(reqs.len())];
                let base = resolve(f, addr);
                looks += compare_routes(f, req, base, offs, *write)?;
                compare_carried(f, &mut carried, req, base, *write)?;
            }
            Op4::LookTransEnd { window, delta, offs, write } => {
                // An outbound window (near adapter, index) of a cabled pair, preferring translated ones.
                let cands: Vec<(u32, usize)> =
                    (0..f.ntbs().len() as u32).filter(|n| f.ntb(*n).peer.is_some()).flat_map(|n| (0..f.peer_mw_count(n)).map(move |w| (n, w))).collect();
                let set: Vec<(u32, usize)> = cands.iter().copied().filter(|(n, w)| f.ntb(f.ntb(*n).peer.unwrap()).inbound[0][*w] != Inbound::Unset).collect();
                let Some((near, w)) = pick(if set.is_empty() { &cands } else { &set }, window) else { continue };
                let far = f.ntb(near).peer.unwrap();
                let (win, wsize) = f.peer_mw_get_addr(near, w).unwrap();
                let end = match &f.ntb(far).inbound[0][w] {
                    Inbound::Unset => 0,
                    Inbound::Direct { size, .. } => *size,
                    Inbound::Lut(segs) => segs.iter().filter(|s| s.is_some()).count() as u64 * (wsize / segs.len() as u64),
                };
                let base = win + (end.saturating_sub(PAGE) + *delta as u64).min(wsize - 1);
                let req = Requester::Cpu(f.ntb(near).host);
                looks += compare_routes(f, req, base, offs, *write)?;
                compare_carried(f, &mut carried, req, base, *write)?;
            }
            Op4::SetTrans { ntb, w, addr, pages, extra } => {
                if f.ntbs().is_empty() {
                    continue;
                }
                let n = ntb.index(f.ntbs().len()) as u32;
                if let Ok(c) = f.mw_count(n) {
                    let a = resolve(f, addr) & !(PAGE - 1);
                    let _ = f.mw_set_trans(n, w.index(c.max(1)), a, pages * PAGE + extra);
                }
            }
            Op4::LutSet { ntb, w, seg, addr } => {
                if f.ntbs().is_empty() {
                    continue;
                }
                let n = ntb.index(f.ntbs().len()) as u32;
                if let Ok(c) = f.mw_count(n) {
                    let a = resolve(f, addr) & !(PAGE - 1);
                    let _ = f.lut_set_trans(n, w.index(c.max(1)), *seg as usize, a);
                }
            }
            Op4::IommuMap { .. } | Op4::BusMaster { .. } if f.funcs().is_empty() => {}
            Op4::IommuMap { func, iova, paddr, pages } => {
                let g = func.index(f.funcs().len()) as FuncId;
                let h = f.func_host(g);
                if !f.host(h).iommu {
                    continue;
                }
                let d = match f.iommu_domain(h, "d4") {
                    Ok(d) => d,
                    Err(_) => f.iommu_domain_alloc(h, "d4").unwrap(),
                };
                f.iommu_attach(h, d, g).unwrap();
                let (i, p) = (resolve(f, iova) & !(PAGE - 1), resolve(f, paddr) & !(PAGE - 1));
                let _ = f.iommu_map(h, d, i, p, pages * PAGE, pages % 3 != 0);
            }
            Op4::BusMaster { func, on } => {
                let g = func.index(f.funcs().len()) as FuncId;
                f.set_bus_master(g, *on);
            }
            Op4::RidAdd { ntb, req } => {
                if f.ntbs().is_empty() {
                    continue;
                }
                let n = ntb.index(f.ntbs().len()) as u32;
                let r = reqs[req.index(reqs.len())];
                if f.requester_host(r) == f.ntb(n).host {
                    let rid = f.requester_rid(r);
                    let _ = f.rid_lut_add(n, rid);
                }
            }
        }
    }
    Ok(looks)
}

// =============================================================================================
// (5) Random, possibly invalid descriptions: no panic, and error paths point into the description
// =============================================================================================

#[derive(Clone, Debug)]
enum Mut {
    Name { comp: Index, bad: Index },
    LinkEnd { link: Index, a_end: bool, bad: Index },
    DupLink { link: Index },
    DupPortNewDevice { link: Index },
    RemoveLink { link: Index },
    Cycle { n: u8, self_loop: bool },
    BarSize { dev: Index, size: u64, bits: u8, pref: bool, index: u8 },
    HugeBars { dev: Index, log2: u32, pref: bool },
    ManyDevices { host: Index, count: u8, profile: Index, num_vfs: Option<u16> },
    Host { host: Index, field: u8, v: u64 },
    LinkParams { link: Index, gen: u8, width: u8, kind: bool },
    Ntb { ntb: Index, field: u8, v: u64, n: u8 },
    Cable { a: Index, b: Index },
    Setup { kind: u8, name: Index, name2: Index, window: u8, addr: Index, v: u64, size: u64 },
}

fn size_g() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => (4u32..64).prop_map(|l| 1u64 << l),
        1 => any::<u64>(),
        1 => Just(0u64),
        1 => Just(u64::MAX),
    ]
}

fn big_g() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 0u64..=64,
        3 => (0u32..64).prop_map(|l| 1u64 << l),
        2 => any::<u64>(),
        1 => (0u64..0x10000).prop_map(|v| v << 20),
        1 => prop_oneof![Just(u64::MAX << 12), Just(1u64 << 63), Just((u64::MAX << 12) - (1 << 30)), Just(u64::MAX - 0xfff_ffff)],
    ]
}

fn mut_g() -> impl Strategy<Value = Mut> {
    prop_oneof![
        (any::<Index>(), any::<Index>()).prop_map(|(comp, bad)| Mut::Name { comp, bad }),
        (any::<Index>(), any::<bool>(), any::<Index>()).prop_map(|(link, a_end, bad)| Mut::LinkEnd { link, a_end, bad }),
        any::<Index>().prop_map(|link| Mut::DupLink { link }),
        any::<Index>().prop_map(|link| Mut::DupPortNewDevice { link }),
        any::<Index>().prop_map(|link| Mut::RemoveLink { link }),
        (1u8..4, any::<bool>()).prop_map(|(n, self_loop)| Mut::Cycle { n, self_loop }),
        (any::<Index>(), size_g(), prop_oneof![Just(32u8), Just(64u8), any::<u8>()], any::<bool>(), 0u8..8)
            .prop_map(|(dev, size, bits, pref, index)| Mut::BarSize { dev, size, bits, pref, index }),
        (any::<Index>(), 30u32..64, any::<bool>()).prop_map(|(dev, log2, pref)| Mut::HugeBars { dev, log2, pref }),
        (any::<Index>(), 1u8..=32, any::<Index>(), prop::option::of(0u16..80)).prop_map(|(host, count, profile, num_vfs)| Mut::ManyDevices {
            host,
            count,
            profile,
            num_vfs
        }),
        (any::<Index>(), 0u8..6, big_g()).prop_map(|(host, field, v)| Mut::Host { host, field, v }),
        (any::<Index>(), 0u8..8, any::<u8>(), any::<bool>()).prop_map(|(link, gen, width, kind)| Mut::LinkParams { link, gen, width, kind }),
        (any::<Index>(), 0u8..8, big_g(), 0u8..4).prop_map(|(ntb, field, v, n)| Mut::Ntb { ntb, field, v, n }),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mut::Cable { a, b }),
        (0u8..7, any::<Index>(), any::<Index>(), any::<u8>(), any::<Index>(), big_g(), prop_oneof![Just(PAGE), Just(64 * MIB), 0u64..(64 * MIB)])
            .prop_map(|(kind, name, name2, window, addr, v, size)| Mut::Setup { kind, name, name2, window, addr, v, size }),
    ]
}

fn names(spec: &TopologySpec) -> Vec<String> {
    spec.hosts
        .iter()
        .map(|h| h.name.clone())
        .chain(spec.switches.iter().map(|s| s.name.clone()))
        .chain(spec.devices.iter().map(|d| d.name.clone()))
        .chain(spec.ntbs.iter().map(|n| n.name.clone()))
        .collect()
}

fn pick<T: Clone>(v: &[T], i: &Index) -> Option<T> {
    (!v.is_empty()).then(|| v[i.index(v.len())].clone())
}

fn apply_mut(spec: &mut TopologySpec, m: &Mut) {
    let all = names(spec);
    let any_name = all.first().cloned().unwrap_or_default();
    match m {
        Mut::Name { comp, bad } => {
            let bads =
                ["".to_string(), "1abc".into(), "a b".into(), "a.b".into(), "cpu".into(), "ümlaut".into(), "-x".into(), any_name.clone(), "ok-name".into()];
            let b = pick(&bads, bad).unwrap();
            let n = spec.hosts.len() + spec.switches.len() + spec.devices.len() + spec.ntbs.len();
            let mut k = comp.index(n);
            for list in [
                spec.hosts.iter_mut().map(|h| &mut h.name).collect::<Vec<_>>(),
                spec.switches.iter_mut().map(|h| &mut h.name).collect(),
                spec.devices.iter_mut().map(|h| &mut h.name).collect(),
                spec.ntbs.iter_mut().map(|h| &mut h.name).collect(),
            ] {
                if k < list.len() {
                    *list.into_iter().nth(k).unwrap() = b;
                    return;
                }
                k -= list.len();
            }
        }
        Mut::LinkEnd { link, a_end, bad } => {
            if spec.links.is_empty() {
                return;
            }
            let h = spec.hosts[0].name.clone();
            let mut bads = vec![
                "nosuch".to_string(),
                "nosuch.rp0".into(),
                format!("{h}.rp99"),
                format!("{h}.rpx"),
                h.clone(),
                format!("{h}.cable"),
                "".into(),
                ".".into(),
                format!("{h}.rp0.up"),
            ];
            if let Some(s) = spec.switches.first() {
                bads.extend([format!("{}.d99", s.name), format!("{}.up", s.name), format!("{}.d0", s.name), s.name.clone()]);
            }
            if let Some(d) = spec.devices.first() {
                bads.extend([format!("{}.up", d.name), format!("{}.x", d.name), d.name.clone()]);
            }
            if let Some(n) = spec.ntbs.first() {
                bads.extend([format!("{}.cable", n.name), format!("{}.x", n.name), n.name.clone()]);
            }
            let b = pick(&bads, bad).unwrap();
            let i = link.index(spec.links.len());
            if *a_end {
                spec.links[i].a = b
            } else {
                spec.links[i].b = b
            }
        }
        Mut::DupLink { link } => {
            if let Some(l) = pick(&spec.links, link) {
                spec.links.push(l);
            }
        }
        Mut::DupPortNewDevice { link } => {
            if let Some(l) = pick(&spec.links, link) {
                let name = format!("extra{}", spec.devices.len());
                spec.devices.push(DeviceSpec { name: name.clone(), profile: Some("optane-900p".into()), kind: None, functions: None, num_vfs: None });
                spec.links.push(LinkSpec { a: l.a, b: name, gen: 3, width: 4, kind: LinkKind::Slot });
            }
        }
        Mut::RemoveLink { link } => {
            if !spec.links.is_empty() {
                let i = link.index(spec.links.len());
                spec.links.remove(i);
            }
        }
        Mut::Cycle { n, self_loop } => {
            let base = spec.switches.len();
            let names: Vec<String> = (0..*n as usize).map(|i| format!("cyc{}", base + i)).collect();
            for s in &names {
                spec.switches.push(SwitchSpec { name: s.clone(), profile: None, downstream_ports: 2 });
            }
            for (i, s) in names.iter().enumerate() {
                let next = if *self_loop { s.clone() } else { names[(i + 1) % names.len()].clone() };
                spec.links.push(LinkSpec { a: format!("{s}.d0"), b: next, gen: 3, width: 8, kind: LinkKind::Slot });
            }
            if *self_loop {
                // Also hang the cycle below a real root port where one is free, via a fresh root port.
                let h = &mut spec.hosts[0];
                if h.root_ports < 31 {
                    h.root_ports += 1;
                    let rp = format!("{}.rp{}", h.name, h.root_ports - 1);
                    spec.links.push(LinkSpec { a: rp, b: format!("{}.d1", names[0]), gen: 3, width: 8, kind: LinkKind::Slot });
                }
            }
        }
        Mut::BarSize { dev, size, bits, pref, index } => {
            let with_fns: Vec<usize> = (0..spec.devices.len()).filter(|i| spec.devices[*i].functions.as_ref().is_some_and(|f| !f.is_empty())).collect();
            if let Some(d) = pick(&with_fns, dev) {
                let f = &mut spec.devices[d].functions.as_mut().unwrap()[0];
                let b = BarSpec { index: *index, size: *size, bits: *bits, pref: *pref };
                if f.bars.is_empty() {
                    f.bars.push(b)
                } else {
                    f.bars[0] = b
                }
            }
        }
        Mut::HugeBars { dev, log2, pref } => {
            if let Some(d) = pick(&spec.devices.iter().map(|d| d.name.clone()).collect::<Vec<_>>(), dev) {
                let d = spec.devices.iter_mut().find(|x| x.name == d).unwrap();
                for f in d.functions.iter_mut().flatten() {
                    for b in &mut f.bars {
                        b.size = 1 << log2;
                        b.bits = 64;
                        b.pref = *pref;
                    }
                }
            }
        }
        Mut::ManyDevices { host, count, profile, num_vfs } => {
            let profiles = ["tesla-k40c", "quadro-k420", "sriov-nic", "optane-900p", "nosuch"];
            let p = pick(&profiles, profile).unwrap();
            let hi = host.index(spec.hosts.len());
            let h = &mut spec.hosts[hi];
            if h.root_ports >= 31 {
                return;
            }
            h.root_ports += 1;
            let rp = format!("{}.rp{}", h.name, h.root_ports - 1);
            let sw = format!("big{}", spec.switches.len());
            spec.switches.push(SwitchSpec { name: sw.clone(), profile: None, downstream_ports: *count });
            spec.links.push(LinkSpec { a: rp, b: sw.clone(), gen: 3, width: 16, kind: LinkKind::Slot });
            for i in 0..*count {
                let name = format!("bigdev{}", spec.devices.len());
                spec.devices.push(DeviceSpec { name: name.clone(), profile: Some(p.to_string()), kind: None, functions: None, num_vfs: *num_vfs });
                spec.links.push(LinkSpec { a: format!("{sw}.d{i}"), b: name, gen: 3, width: 16, kind: LinkKind::Slot });
            }
        }
        Mut::Host { host, field, v } => {
            let i = host.index(spec.hosts.len());
            let h = &mut spec.hosts[i];
            match field {
                0 => h.cpu = if v % 2 == 0 { "nosuch".into() } else { CPUS[(*v as usize / 2) % 3].into() },
                1 => h.ram = *v,
                2 => h.root_ports = *v as u8,
                3 => h.memory_map.get_or_insert_with(Default::default).low_ram_top = Some(*v),
                4 => h.memory_map.get_or_insert_with(Default::default).mmio32_end = Some(*v),
                _ => h.memory_map.get_or_insert_with(Default::default).mmio64_base = Some(*v),
            }
        }
        Mut::LinkParams { link, gen, width, kind } => {
            if spec.links.is_empty() {
                return;
            }
            let i = link.index(spec.links.len());
            let l = &mut spec.links[i];
            l.gen = *gen;
            l.width = *width;
            if *kind {
                l.kind = LinkKind::Cable;
            }
        }
        Mut::Ntb { ntb, field, v, n } => {
            if spec.ntbs.is_empty() {
                return;
            }
            let i = ntb.index(spec.ntbs.len());
            let s = &mut spec.ntbs[i];
            match field {
                0 => s.profile = Some(if v % 2 == 0 { "nosuch".into() } else { "pex8749".into() }),
                1 => {
                    s.windows = Some((0..*n).map(|k| WindowSpec { size: v.rotate_left(k as u32 * 3), lut_segments: (*v as u32) >> (k * 4) }).collect());
                }
                2 => s.windows = Some(vec![WindowSpec { size: v.wrapping_shl(12), lut_segments: 0 }]),
                3 => s.rid_lut_entries = Some(*v as u16),
                4 => s.doorbells = Some(*v as u8),
                5 => {
                    s.profile = None;
                    s.windows = None;
                }
                6 => {
                    s.profile = None;
                    s.rid_lut_entries = None;
                }
                _ => s.windows = Some(vec![WindowSpec { size: 1u64 << (30 + (*v % 34)), lut_segments: 0 }; (*n as usize).max(1)]),
            }
        }
        Mut::Cable { a, b } => {
            let ntbs: Vec<String> = spec.ntbs.iter().map(|n| n.name.clone()).chain([any_name.clone()]).collect();
            let (x, y) = (pick(&ntbs, a).unwrap(), pick(&ntbs, b).unwrap());
            let y = if a.index(3) == 0 { y } else { format!("{y}.cable") };
            spec.links.push(LinkSpec { a: format!("{x}.cable"), b: y, gen: 3, width: 8, kind: LinkKind::Cable });
        }
        Mut::Setup { kind, name, name2, window, addr, v, size } => {
            let mut ns = all.clone();
            ns.extend(["nosuch".into(), "cpu".into()]);
            let n1 = pick(&ns, name).unwrap();
            let n2 = pick(&ns, name2).unwrap();
            let exprs = [
                Addr::Num(*v),
                Addr::Expr(format!("{n2}.bar0+{v:#x}")),
                Addr::Expr(format!("{n2}.bar1")),
                Addr::Expr(format!("{n2}.ram+{v:#x}")),
                Addr::Expr(format!("{n2}.msi+{v:#x}")),
                Addr::Expr(format!("{n2}.mw0+{v}")),
                Addr::Expr(format!("{n2}.mw1-{v}")),
                Addr::Expr(format!("{n2}.bogus")),
                Addr::Expr("+".into()),
                Addr::Expr("0x".into()),
            ];
            let a = pick(&exprs, addr).unwrap();
            let op = match kind {
                0 => SetupOp::NtbMwSetTrans { ntb: n1, window: *window, addr: a, size: *size },
                1 => SetupOp::NtbLutSetTrans { ntb: n1, window: *window, segment: *v as u32, addr: a },
                2 => SetupOp::NtbRidLutAdd { ntb: n1, requester: format!("{n2}:cpu") },
                3 => SetupOp::IommuDomain { host: n1, domain: "d".into() },
                4 => SetupOp::IommuAttach { host: n1, domain: "d".into(), device: n2 },
                5 => SetupOp::IommuMap { host: n1, domain: "d".into(), iova: Addr::Num(v & !(PAGE - 1)), addr: a, size: *size, write: v % 2 == 0 },
                _ => SetupOp::BusMaster { device: n2, enable: v % 2 == 0 },
            };
            spec.setup.push(op);
        }
    }
}

fn check_invalid(spec: &TopologySpec) -> Result<bool, TestCaseError> {
    let r = build(spec);
    match r {
        Ok(_) => Ok(true),
        Err(e) => {
            let v = serde_json::to_value(spec).unwrap();
            prop_assert!(
                e.path.is_empty() || v.pointer(&e.path).is_some(),
                "error path {:?} does not exist in the description ({})\n{}",
                e.path,
                e.fault,
                serde_json::to_string(spec).unwrap()
            );
            Ok(false)
        }
    }
}

// =============================================================================================
// The properties
// =============================================================================================

proptest! {
    #![proptest_config(config())]

    /// (1) Every enumerated BAR is reachable from its own host's CPU at offsets 0, size-1 and a
    /// random one, and the CPU of any other host never reaches it (nor anything outside its host).
    #[test]
    fn every_bar_is_reachable_from_its_own_cpu_only(spec in spec_g(), r in any::<u64>()) {
        let mut f = build_ok(&spec)?;
        check_bar_reachability(&mut f, r)?;
    }

    /// (2) A write followed by a read through a valid route returns the bytes written.
    #[test]
    fn write_then_read_returns_the_data(spec in spec_g(), ops in vec((any::<Index>(), any::<Index>(), any::<u64>(), 1usize..=3 * PAGE as usize, any::<u64>()), 1..16)) {
        let mut f = build_ok(&spec)?;
        check_write_read(&mut f, &ops)?;
    }

    /// (2, NTB) A CPU or device write into an NTB window reads back from the far host's CPU at the
    /// translated RAM address (through the far IOMMU when it is on), and back through the window.
    #[test]
    fn write_through_ntb_reads_back_on_the_far_host(spec in spec_with_ntb_g(), pick in any::<Index>(), w in any::<Index>(), pages in 1u64..=64,
                                                    seeds in any::<[u64; 4]>(), len in 1usize..=3 * PAGE as usize, dev in any::<Index>()) {
        let mut f = build_ok(&spec)?;
        check_ntb_write_read(&mut f, &pick, &w, pages, seeds, len, &dev)?;
    }

    /// (3) Enumeration invariants: sibling windows and bus ranges disjoint, nesting of bus ranges
    /// and windows, BARs inside every ancestor window, aligned, and pairwise disjoint.
    #[test]
    fn enumeration_invariants_hold(spec in spec_g()) {
        let f = build_ok(&spec)?;
        check_enumeration(&f)?;
    }

    /// (4) The cached router agrees with the uncached one, also after reprogramming.
    #[test]
    fn route_cache_agrees_with_uncached_routes(spec in spec_g(), ops in vec(op4_g(), 1..40)) {
        let mut f = build_ok(&spec)?;
        check_cache(&mut f, &ops)?;
    }
}

proptest! {
    // Building is cheap: more cases for the many kinds of bad input.
    #![proptest_config(ProptestConfig { cases: 12 * cases(64), ..config() })]

    /// (5) Random, possibly invalid descriptions never panic; errors carry a JSON pointer that
    /// exists in the description (or none).
    #[test]
    fn invalid_specs_give_errors_with_existing_paths(spec in spec_g(), muts in vec(mut_g(), 1..4)) {
        let mut spec = spec;
        for m in &muts {
            apply_mut(&mut spec, m);
        }
        check_invalid(&spec)?;
    }
}

/// The JSON pointer check also holds for descriptions that arrive as JSON (the Python path).
#[test]
fn malformed_json_reports_the_whole_document() {
    let e = devlend_fabric::build_json("{\"name\": 3}").err().unwrap();
    assert_eq!(e.path, "");
    assert!(matches!(*e.fault, devlend_fabric::SpecFault::Malformed(_)), "{e}");
}

// =============================================================================================
// Regression tests for the bugs these properties found (minimal cases)
// =============================================================================================

fn two_hosts_pxh830() -> Fabric {
    let json = r#"{"name":"t",
      "hosts":[{"name":"a","cpu":"amd-epyc","ram":1073741824,"root_ports":1},{"name":"b","cpu":"amd-epyc","ram":1073741824,"root_ports":1}],
      "ntbs":[{"name":"na","profile":"pxh830"},{"name":"nb","profile":"pxh830"}],
      "links":[{"a":"a.rp0","b":"na","gen":3,"width":8},{"a":"b.rp0","b":"nb","gen":3,"width":8},
               {"a":"na.cable","b":"nb.cable","gen":3,"width":8,"kind":"cable"}]}"#;
    devlend_fabric::build_json(json).unwrap()
}

/// (4) found: a translation whose size is not a multiple of 4 KiB made the page-granular route
/// cache deliver past its end (window+0x1900 of a 0x1800 translation reached RAM from the cache,
/// NtbUnmapped uncached). Sizes must now be page multiples, as ntb_mw_get_align says.
#[test]
fn regression_translation_sizes_are_page_granular_and_cache_agrees() {
    let mut f = two_hosts_pxh830();
    let (na, nb) = (f.ntb_id("na").unwrap(), f.ntb_id("nb").unwrap());
    let (win, _) = f.peer_mw_get_addr(na, 1).unwrap();
    assert!(f.mw_set_trans(nb, 1, 0x10_0000, 0x1800).is_err());
    f.mw_set_trans(nb, 1, 0x10_0000, 0x2000).unwrap();
    for off in [0x1000, 0x1900, 0x1fff, 0x2000, 0x2100] {
        let c = f.route(Requester::Cpu(0), win + off, Access::Write);
        assert_eq!(*c, f.route_uncached(Requester::Cpu(0), win + off, Access::Write), "offset {off:#x}");
    }
    assert_eq!(f.lookup(Requester::Cpu(0), win + 0x2100, Access::Write), Outcome::Failed(Failure::NtbUnmapped { ntb: na, window: 1, offset: 0x2100 }));
}

fn spec_err(json: &str) -> devlend_fabric::SpecError {
    let spec: TopologySpec = serde_json::from_str(json).unwrap();
    let e = build(&spec).err().expect("must be rejected");
    let v = serde_json::to_value(&spec).unwrap();
    assert!(v.pointer(&e.path).is_some(), "path {} ({}) does not exist", e.path, e.fault);
    e
}

/// (5) found: two 2^63-byte BARs overflowed the packing arithmetic (a panic in debug builds; in
/// release the sum wrapped to 0 and the BARs were silently left unplaced at address 0).
#[test]
fn regression_huge_bars_fail_placement_without_overflow() {
    let e = spec_err(
        r#"{"name":"t","hosts":[{"name":"h","cpu":"amd-epyc","ram":1073741824,"root_ports":1}],
      "devices":[{"name":"d","functions":[{"bars":[{"index":0,"size":9223372036854775808,"bits":64,"pref":true},
                                                   {"index":2,"size":9223372036854775808,"bits":64,"pref":true}]}]}],
      "links":[{"a":"h.rp0","b":"d","gen":3,"width":8}]}"#,
    );
    assert_eq!(e.path, "/devices/0/functions/0/bars/0/size");
}

/// (5) found: a RAM size near 2^64 overflowed `4 GiB + high RAM` (panic in debug; in release the
/// end wrapped below the limit and the host was accepted with an inverted RAM range).
#[test]
fn regression_ram_near_2_64_is_an_error() {
    let e = spec_err(r#"{"name":"t","hosts":[{"name":"h","cpu":"generic-x86","ram":18446744073709547520,"root_ports":1}]}"#);
    assert_eq!(e.path, "/hosts/0/ram");
}

/// (5) found: placement errors pointed at paths that do not exist: `/devices/N/profile/bars/K/size`
/// for profile devices, `/ntbs/N/windows/K+1/size` for window K (BAR positions count the control
/// BAR), and `/hosts/N/memory_map/mmio64_base` without a memory_map.
#[test]
fn regression_placement_error_paths_exist() {
    let mut devices = Vec::new();
    let mut links = vec![r#"{"a":"h.rp0","b":"sw","gen":3,"width":16}"#.to_string()];
    for i in 0..20 {
        devices.push(format!(r#"{{"name":"g{i}","profile":"tesla-k40c-large-bar1"}}"#));
        links.push(format!(r#"{{"a":"sw.d{i}","b":"g{i}","gen":3,"width":16}}"#));
    }
    let e = spec_err(&format!(
        r#"{{"name":"t","hosts":[{{"name":"h","cpu":"generic-x86","ram":1073741824,"root_ports":1}}],
           "switches":[{{"name":"sw","downstream_ports":20}}],"devices":[{}],"links":[{}]}}"#,
        devices.join(","),
        links.join(",")
    ));
    assert!(e.path.starts_with("/devices/") && e.path.ends_with("/profile"), "{}", e.path);

    let e = spec_err(
        r#"{"name":"t","hosts":[{"name":"h","cpu":"generic-x86","ram":1073741824,"root_ports":1}],
      "ntbs":[{"name":"n","windows":[{"size":4096},{"size":1099511627776}],"rid_lut_entries":4,"doorbells":4,"scratchpads":4,"message_registers":1}],
      "links":[{"a":"h.rp0","b":"n","gen":3,"width":8}]}"#,
    );
    assert_eq!(e.path, "/ntbs/0/windows/1/size");

    let e = spec_err(r#"{"name":"t","hosts":[{"name":"h","cpu":"amd-epyc","ram":2199023255552,"root_ports":1}]}"#);
    assert_eq!(e.path, "/hosts/0/ram");
}
