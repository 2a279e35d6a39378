//! Enumeration and resource assignment per host, as Linux does it.
//!
//! - Bus numbers depth-first (drivers/pci/probe.c `pci_scan_bridge`): root ports are bridges
//!   00:01.0, 00:02.0, ...; each bridge gets the next bus as secondary and, after its subtree,
//!   the highest bus used below as subordinate. SR-IOV VFs take routing IDs PF + n_functions + i
//!   (ARI offset and stride, PCIe Base 3.0 §9.3.3.10) and reserve the bus numbers they reach.
//! - Memory (drivers/pci/setup-bus.c `pbus_size_mem`, `__pci_assign_resource`): every bridge has
//!   a non-prefetchable window below 4 GiB and a 64-bit prefetchable window. 64-bit prefetchable
//!   BARs go in the prefetchable window, placed in the host's 64-bit MMIO range; every other BAR
//!   goes in the non-prefetchable window in the 32-bit MMIO hole. Items are packed largest
//!   alignment first; windows are 1 MiB granular; BARs are aligned to their size (at least 4 KiB).
//! - A window that does not fit gives an error naming the host, the root port and the largest BAR
//!   behind it, so the user knows what to shrink.

use crate::config::CMD_MEMORY;
use crate::error::{ResourceFault, SpecError};
use crate::fabric::Fabric;
use crate::model::*;
use crate::params::params;
use devlend_wire::Bdf;

type SResult<T> = Result<T, SpecError>;

pub fn enumerate(f: &mut Fabric) -> SResult<()> {
    for h in 0..f.hosts.len() {
        number_buses(f, h as HostId)?;
        assign_memory(f, h as HostId)?;
    }
    for (i, func) in f.funcs.iter().enumerate() {
        if !func.bars.is_empty() {
            f.config[i].command |= CMD_MEMORY;
        }
    }
    Ok(())
}

fn number_buses(f: &mut Fabric, h: HostId) -> SResult<()> {
    let mut next: u32 = 1;
    let rc = f.hosts[h as usize].rc;
    let rps = f.hosts[h as usize].root_ports.clone();
    for (i, rp) in rps.iter().enumerate() {
        f.nodes[*rp as usize].bridge.bdf = Bdf::new(0, i as u8 + 1, 0);
        number_below(f, *rp, &mut next)?;
    }
    let _ = rc;
    Ok(())
}

fn overflow(f: &Fabric, n: NodeId) -> SpecError {
    let host = &f.hosts[f.nodes[n as usize].host as usize];
    SpecError::at(host.spec_path.clone(), ResourceFault::BusNumbers { host: host.name.clone(), at: f.nodes[n as usize].component.clone() })
}

/// Number the subtree below a downstream-facing bridge `b`.
fn number_below(f: &mut Fabric, b: NodeId, next: &mut u32) -> SResult<()> {
    if *next > 255 {
        return Err(overflow(f, b));
    }
    let sec = *next as u8;
    *next += 1;
    f.nodes[b as usize].bridge.secondary = sec;
    if let Some(&c) = f.nodes[b as usize].children.first() {
        match f.nodes[c as usize].kind {
            NodeKind::SwitchUp { .. } => {
                if *next > 255 {
                    return Err(overflow(f, c));
                }
                let internal = *next as u8;
                *next += 1;
                let nb = &mut f.nodes[c as usize].bridge;
                nb.bdf = Bdf::new(sec, 0, 0);
                nb.secondary = internal;
                let downs = f.nodes[c as usize].children.clone();
                for (j, d) in downs.iter().enumerate() {
                    f.nodes[*d as usize].bridge.bdf = Bdf::new(internal, j as u8, 0);
                    number_below(f, *d, next)?;
                }
                f.nodes[c as usize].bridge.subordinate = (*next - 1) as u8;
            }
            _ => {
                let funcs = f.nodes[c as usize].functions.clone();
                let npf = funcs.iter().filter(|x| f.funcs[**x as usize].vf.is_none()).count() as u32;
                // PFs take functions 0..npf; VFs follow them in ARI routing-ID space (offset npf, stride 1).
                let (mut pf_rank, mut vf_rank) = (0u32, 0u32);
                let mut max_bus = sec as u32;
                for fid in funcs {
                    let rank = match f.funcs[fid as usize].vf {
                        None => {
                            pf_rank += 1;
                            pf_rank - 1
                        }
                        Some(_) => {
                            vf_rank += 1;
                            npf + vf_rank - 1
                        }
                    };
                    let rid = ((sec as u32) << 8) + rank;
                    if rid >> 8 > 255 {
                        return Err(overflow(f, c));
                    }
                    max_bus = max_bus.max(rid >> 8);
                    f.funcs[fid as usize].bdf = Bdf(rid as u16);
                }
                *next = (*next).max(max_bus + 1);
            }
        }
    }
    f.nodes[b as usize].bridge.subordinate = (*next - 1) as u8;
    Ok(())
}

#[derive(Clone, Copy)]
enum Item {
    Bar(FuncId, usize),
    Window(NodeId),
}

struct Packed {
    items: Vec<(Item, u64)>, // item and its offset
    size: u64,
    align: u64,
}

/// Saturating: an impossible total (BARs near 2^64) becomes u64::MAX and fails placement.
fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a).saturating_mul(a)
}

/// Pack what sits directly behind downstream-facing bridge `b` (or switch upstream port) for one window kind.
fn pack(f: &Fabric, b: NodeId, high: bool) -> Packed {
    let mut items: Vec<(Item, u64, u64)> = Vec::new(); // item, size, align
    let min_bar = params().pci.min_bar_align;
    let win = params().pci.bridge_mem_align;
    let node = &f.nodes[b as usize];
    let children: Vec<NodeId> = match node.kind {
        NodeKind::SwitchUp { .. } => node.children.clone(),
        _ => node.children.clone(),
    };
    for c in children {
        let cn = &f.nodes[c as usize];
        match cn.kind {
            NodeKind::SwitchUp { .. } | NodeKind::SwitchDown { .. } => {
                let p = pack(f, c, high);
                if p.size > 0 {
                    items.push((Item::Window(c), p.size, p.align));
                }
            }
            _ => {
                for fid in &cn.functions {
                    for (bi, bar) in f.funcs[*fid as usize].bars.iter().enumerate() {
                        if bar.goes_high() == high {
                            items.push((Item::Bar(*fid, bi), bar.size, bar.size.max(min_bar)));
                        }
                    }
                }
            }
        }
    }
    items.sort_by_key(|x| std::cmp::Reverse(x.2)); // stable: equal alignments keep device order
    let mut off = 0;
    let mut align = win;
    let mut out = Vec::new();
    for (it, size, al) in items {
        off = align_up(off, al);
        out.push((it, off));
        off = off.saturating_add(size);
        align = align.max(al);
    }
    let size = if out.is_empty() { 0 } else { align_up(off, win) };
    Packed { items: out, size, align }
}

fn place(f: &mut Fabric, b: NodeId, high: bool, base: u64) {
    let p = pack(f, b, high);
    if p.size > 0 {
        let r = Some(Range::new(base, p.size));
        let br = &mut f.nodes[b as usize].bridge;
        if high {
            br.pref = r
        } else {
            br.mem = r
        }
    }
    for (it, off) in p.items {
        match it {
            Item::Bar(fid, bi) => f.funcs[fid as usize].bars[bi].addr = base + off,
            Item::Window(c) => place(f, c, high, base + off),
        }
    }
}

/// The largest BAR behind a bridge for one window kind, for error messages.
fn largest_bar(f: &Fabric, b: NodeId, high: bool) -> Option<(FuncId, Bar)> {
    let mut best: Option<(FuncId, Bar)> = None;
    let mut stack = vec![b];
    while let Some(n) = stack.pop() {
        let node = &f.nodes[n as usize];
        stack.extend(node.children.iter().copied());
        for fid in &node.functions {
            for bar in &f.funcs[*fid as usize].bars {
                if bar.goes_high() == high && best.is_none_or(|(_, x)| bar.size > x.size) {
                    best = Some((*fid, *bar));
                }
            }
        }
    }
    best
}

fn assign_memory(f: &mut Fabric, h: HostId) -> SResult<()> {
    let rps = f.hosts[h as usize].root_ports.clone();
    for high in [false, true] {
        let aperture = if high { f.hosts[h as usize].mmio64 } else { f.hosts[h as usize].mmio32 };
        let mut cursor = aperture.start;
        for rp in &rps {
            let p = pack(f, *rp, high);
            if p.size == 0 {
                continue;
            }
            let base = align_up(cursor, p.align);
            if base.checked_add(p.size).is_none_or(|end| end > aperture.end) {
                return Err(no_space(f, h, *rp, high, p.size, aperture, cursor));
            }
            place(f, *rp, high, base);
            cursor = base + p.size;
        }
    }
    // A switch's upstream port forwards exactly what the port above it forwards.
    for n in 0..f.nodes.len() {
        if matches!(f.nodes[n].kind, NodeKind::SwitchUp { .. }) && f.nodes[n].host == h {
            if let Some(p) = f.nodes[n].parent {
                let pb = f.nodes[p as usize].bridge;
                f.nodes[n].bridge.mem = pb.mem;
                f.nodes[n].bridge.pref = pb.pref;
            }
        }
    }
    Ok(())
}

fn no_space(f: &Fabric, h: HostId, rp: NodeId, high: bool, need: u64, aperture: Range, cursor: u64) -> SpecError {
    let host = &f.hosts[h as usize];
    let left = aperture.end.saturating_sub(cursor);
    let port = &f.nodes[rp as usize].port;
    match largest_bar(f, rp, high) {
        Some((fid, bar)) => {
            let func = &f.funcs[fid as usize];
            let bar_pos = func.bars.iter().position(|b| *b == bar).unwrap_or(0);
            // `spec_path` is a BAR list (`.../bars`, `.../vf_bars`), an NTB's `windows` list (BAR0 is
            // its control BAR, then one BAR per window), or the profile field the BARs came from.
            let path = match f.nodes[func.node as usize].kind {
                NodeKind::Ntb { ntb } if func.spec_path.ends_with("/windows") => match f.ntbs[ntb as usize].window_bars.iter().position(|i| *i == bar.index) {
                    Some(w) => format!("{}/{w}/size", func.spec_path),
                    None => func.spec_path.trim_end_matches("/windows").to_string(),
                },
                _ if func.spec_path.ends_with("bars") => format!("{}/{bar_pos}/size", func.spec_path),
                _ => func.spec_path.clone(),
            };
            let (function, host, port) = (func.name.clone(), host.name.clone(), port.clone());
            SpecError::at(path, ResourceFault::Placement { bar, function, host, port, high, aperture, left, need })
        }
        None => SpecError::at(host.spec_path.clone(), ResourceFault::Exhausted { host: host.name.clone(), high }),
    }
}
