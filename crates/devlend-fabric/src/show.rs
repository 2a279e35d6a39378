//! Structured views of the fabric and of routes, as JSON values, for the command line, plots and
//! exports (the Python layer renders them as trees, tables, DOT and SVG).

use crate::error::DmaFault;
use crate::fabric::{Event, Fabric};
use crate::model::*;
use crate::ntb::Inbound;
use crate::route::{Failure, Hop, Outcome, Route, Target};
use serde_json::{json, Value};

fn range(r: Option<Range>) -> Value {
    r.map(|r| json!([r.start, r.end])).unwrap_or(Value::Null)
}

impl Fabric {
    pub fn inventory(&self) -> Value {
        let hosts: Vec<Value> = self
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                json!({
                    "name": h.name, "cpu": h.cpu_name, "ram": h.ram, "iommu": h.iommu,
                    "ram_regions": h.ram_regions.iter().map(|r| json!([r.start, r.end])).collect::<Vec<_>>(),
                    "mmio32": [h.mmio32.start, h.mmio32.end], "mmio64": [h.mmio64.start, h.mmio64.end],
                    "p2p_through_root": h.cpu.p2p_through_root,
                    "tree": self.node_json(h.rc),
                    "iommu_domains": self.iommus[i].domains.iter().map(|d| json!({"name": d.name, "mapped_bytes": d.mapped_bytes})).collect::<Vec<_>>(),
                    "iommu_faults": self.iommus[i].faults.len(),
                })
            })
            .collect();
        let links: Vec<Value> = self
            .links
            .iter()
            .map(|l| {
                let (u, d) = (&self.nodes[l.up as usize], &self.nodes[l.down as usize]);
                json!({"up": format!("{}.{}", u.component, u.port), "down": format!("{}.{}", d.component, d.port),
                   "up_component": u.component, "down_component": d.component,
                   "gen": l.gen, "width": l.width, "kind": format!("{:?}", l.kind).to_lowercase(),
                   "ntb": matches!(u.kind, NodeKind::Ntb{..}) && matches!(d.kind, NodeKind::Ntb{..})})
            })
            .collect();
        json!({"name": self.name, "hosts": hosts, "links": links})
    }

    fn node_json(&self, n: NodeId) -> Value {
        let node = &self.nodes[n as usize];
        let kind = match node.kind {
            NodeKind::RootComplex => "root_complex",
            NodeKind::RootPort { .. } => "root_port",
            NodeKind::SwitchUp { .. } => "switch_up",
            NodeKind::SwitchDown { .. } => "switch_down",
            NodeKind::Endpoint { .. } => "endpoint",
            NodeKind::Ntb { .. } => "ntb",
            NodeKind::ClusterPort { .. } => "cluster_port",
        };
        let mut v = json!({"component": node.component, "port": node.port, "kind": kind,
            "children": node.children.iter().map(|c| self.node_json(*c)).collect::<Vec<_>>()});
        if node.kind.is_bridge() {
            let b = node.bridge;
            v["bdf"] = json!(b.bdf.to_string());
            v["secondary"] = json!(b.secondary);
            v["subordinate"] = json!(b.subordinate);
            v["mem"] = range(b.mem);
            v["pref"] = range(b.pref);
        }
        if let Some(l) = node.uplink {
            let l = &self.links[l as usize];
            v["link"] = json!({"gen": l.gen, "width": l.width, "kind": format!("{:?}", l.kind).to_lowercase()});
        }
        if !node.functions.is_empty() {
            v["functions"] = node.functions.iter().map(|f| self.func_json(*f)).collect();
        }
        if let NodeKind::Endpoint { device } = node.kind {
            let d = &self.devices[device as usize];
            v["device_kind"] = json!(d.kind.as_str());
            v["profile"] = json!(d.profile);
        }
        if let NodeKind::Ntb { ntb } = node.kind {
            let s = &self.ntbs[ntb as usize];
            v["peer"] = json!(s.peer.map(|p| self.ntbs[p as usize].name.clone()));
            v["peer_host"] = json!(s.peer.map(|p| self.hosts[self.ntbs[p as usize].host as usize].name.clone()));
            v["windows"] = s
                .windows
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    let (addr, _) = self.peer_mw_get_addr(ntb, i).unwrap_or((0, 0));
                    json!({"index": i, "bar": s.window_bars[i], "addr": addr, "size": w.size, "lut_segments": w.lut_segments})
                })
                .collect();
            let inbound = |tables: &[Inbound]| -> Value {
                tables
                    .iter()
                    .map(|t| match t {
                        Inbound::Unset => json!(null),
                        Inbound::Direct { addr, size } => json!({"addr": addr, "size": size}),
                        Inbound::Lut(segs) => json!({"segments": segs}),
                    })
                    .collect()
            };
            v["inbound"] = s.inbound.first().map_or(json!([]), |t| inbound(t));
            v["peers"] = s
                .peers
                .iter()
                .zip(&s.inbound)
                .map(|(p, t)| {
                    json!({
                "ntb": self.ntbs[p.ntb as usize].name, "host": self.hosts[self.ntbs[p.ntb as usize].host as usize].name,
                "via": p.via.map(|v| self.nodes[v.ingress as usize].component.clone()), "inbound": inbound(t)})
                })
                .collect();
            v["rid_lut"] = s.rid_lut.iter().map(|e| e.map(|b| b.to_string())).collect();
            v["doorbells"] = json!(s.doorbell_bits);
            v["scratchpads"] = json!(s.spads.len());
            v["message_registers"] = json!(s.msgs.len());
        }
        v
    }

    fn func_json(&self, f: FuncId) -> Value {
        let func = &self.funcs[f as usize];
        json!({"name": func.name, "bdf": func.bdf.to_string(), "vf": func.vf.map(|v| v.0),
               "bus_master": self.config[f as usize].bus_master(),
               "bars": func.bars.iter().map(|b| json!({"index": b.index, "addr": b.addr, "size": b.size, "bits": b.bits, "pref": b.pref})).collect::<Vec<_>>()})
    }

    pub fn hop_json(&self, h: &Hop) -> Value {
        let n = &self.nodes[h.node as usize];
        let via_cable = h.kind == crate::route::HopKind::Ntb
            || (h.kind == crate::route::HopKind::Link
                && matches!(n.kind, NodeKind::Ntb { .. })
                && self
                    .links
                    .get(h.aux as usize)
                    .is_some_and(|l| matches!(self.nodes[l.up as usize].kind, NodeKind::Ntb { .. } | NodeKind::ClusterPort { .. })));
        let port = if via_cable { "cable" } else { n.port.as_str() };
        json!({"kind": h.kind.name(), "component": n.component, "port": port, "host": self.hosts[h.host as usize].name,
               "addr": h.addr, "rid": h.rid.to_string(), "counts": h.kind.counts(), "aux": h.aux})
    }

    pub fn route_json(&self, r: &Route) -> Value {
        json!({"access": if r.access.is_write() {"write"} else {"read"},
               "hops": r.hops.iter().map(|h| self.hop_json(h)).collect::<Vec<_>>(),
               "hop_count": r.hop_count(), "roots": r.roots(), "ntb_crossings": r.ntb_crossings(),
               "outcome": self.outcome_json(&r.outcome),
               "completion": r.completion.as_ref().map(|c| self.route_json(c))})
    }

    pub fn target_json(&self, t: &Target) -> Value {
        match *t {
            Target::Ram { host, addr } => json!({"kind": "ram", "host": self.hosts[host as usize].name, "addr": addr}),
            Target::Bar { func, bar, offset } => {
                json!({"kind": "bar", "function": self.funcs[func as usize].name, "bar": bar, "offset": offset, "host": self.hosts[self.func_host(func) as usize].name})
            }
            Target::Msi { host, addr } => json!({"kind": "msi", "host": self.hosts[host as usize].name, "addr": addr}),
            Target::Cpu { host } => json!({"kind": "cpu", "host": self.hosts[host as usize].name}),
            Target::Func { func } => json!({"kind": "function", "function": self.funcs[func as usize].name}),
        }
    }

    pub fn outcome_json(&self, o: &Outcome) -> Value {
        match o {
            Outcome::Delivered(t) => json!({"delivered": true, "target": self.target_json(t)}),
            Outcome::Failed(f) => json!({"delivered": false, "failure": self.failure_json(f)}),
        }
    }

    /// One sentence for a failure, naming the component, host and address (its
    /// [`crate::report::FailureReport`]'s text).
    pub fn describe_failure(&self, f: &Failure) -> String {
        self.failure_report(f).to_string()
    }

    pub fn failure_json(&self, f: &Failure) -> Value {
        let message = self.describe_failure(f);
        match *f {
            Failure::Iommu { host, fault } => {
                json!({"kind": "iommu-fault", "host": self.hosts[host as usize].name, "requester": fault.requester.to_string(), "addr": fault.addr, "write": fault.write, "reason": fault.reason.code(), "message": message})
            }
            Failure::Unsupported { node, host, addr, .. } => {
                let n = &self.nodes[node as usize];
                json!({"kind": "unsupported-request", "host": self.hosts[host as usize].name, "component": n.component, "port": n.port, "addr": addr, "message": message})
            }
            Failure::BusMasterOff { func } => json!({"kind": "bus-master-disabled", "function": self.funcs[func as usize].name, "message": message}),
            Failure::RidLutMiss { ntb, rid } => {
                json!({"kind": "rid-lut-miss", "ntb": self.ntbs[ntb as usize].name, "requester": rid.to_string(), "message": message})
            }
            Failure::NtbUnmapped { ntb, window, offset } => {
                json!({"kind": "ntb-unmapped", "ntb": self.ntbs[ntb as usize].name, "window": window, "offset": offset, "message": message})
            }
            Failure::NtbLinkDown { ntb } => json!({"kind": "ntb-link-down", "ntb": self.ntbs[ntb as usize].name, "message": message}),
            Failure::RoutingLoop { ntb, window, host, addr } => {
                json!({"kind": f.kind(), "ntb": self.ntbs[ntb as usize].name, "window": window, "host": self.hosts[host as usize].name, "addr": addr, "message": message})
            }
            Failure::BarOverRam { host, addr, func, bar } => {
                json!({"kind": f.kind(), "host": self.hosts[host as usize].name, "addr": addr, "function": self.funcs[func as usize].name, "bar": bar, "message": message})
            }
            Failure::Interrupt { host, rid, addr, fault } => {
                json!({"kind": f.kind(), "host": self.hosts[host as usize].name, "requester": rid.to_string(), "addr": addr, "reason": fault.code(), "message": message})
            }
            Failure::PortDown { node } => {
                json!({"kind": f.kind(), "component": self.nodes[node as usize].component, "port": self.nodes[node as usize].port, "message": message})
            }
            Failure::Unresponsive { func } | Failure::Poisoned { func } => {
                json!({"kind": f.kind(), "function": self.funcs[func as usize].name, "message": message})
            }
        }
    }

    /// A stopped transfer: the failure's record, with the transfer's address where it stopped
    /// (`transfer_addr`) and the bytes before it (`delivered`).
    pub fn dma_fault_json(&self, e: &DmaFault) -> Value {
        let mut v = self.failure_json(&e.failure);
        let message = format!("transfer stopped at {:#x} after {} bytes: {}", e.addr, e.delivered, self.describe_failure(&e.failure));
        v["transfer_addr"] = json!(e.addr);
        v["delivered"] = json!(e.delivered);
        v["message"] = json!(message);
        v
    }

    /// Events ever recorded by kind, and how many the ring keeps.
    pub fn event_counts_json(&self) -> Value {
        json!({"total": self.events.total(), "by_kind": self.events.counts(), "kept": self.events.len(), "cap": self.events.cap()})
    }

    /// The events still in the log's ring (the most recent, oldest first).
    pub fn events_json(&self) -> Value {
        self.events.iter().map(|e| match e {
            Event::Failed(f) => self.failure_json(f),
            Event::Msi { host, addr, data } => json!({"kind": "msi", "host": self.hosts[*host as usize].name, "addr": addr, "data": data}),
            Event::Aer { at, detect: d, more } => json!({"kind": "aer", "at_ps": at, "host": self.hosts[d.host as usize].name, "root_port": format!("{}.{}", self.nodes[d.root_port as usize].component, self.nodes[d.root_port as usize].port),
                "source": d.source.to_string(), "error": d.error.name(), "severity": d.error.severity().name(), "more": more}),
            Event::Hotplug { at, host, func, step } => json!({"kind": "hotplug", "at_ps": at, "host": self.hosts[*host as usize].name, "device": self.func_name(*func), "step": step.name()}),
        }).collect()
    }

    pub fn iommu_faults_json(&self, host: HostId) -> Value {
        self.iommus[host as usize]
            .faults
            .iter()
            .map(|f| json!({"requester": f.requester.to_string(), "addr": f.addr, "write": f.write, "reason": f.reason.code()}))
            .collect()
    }
}
