//! Cables between NTB adapters and cluster switches, the peers they give each adapter, and link
//! training (see `cluster`).

use super::{end_err, err, Builder, Comp, SResult};
use crate::cluster::{ClusterSwitchInfo, TrainedDown};
use crate::error::{DeviceFault, EndFault, LinkFault, NameFault};
use crate::model::*;
use crate::ntb::{Inbound, NtbPeer, Via};
use crate::params::params;
use crate::spec::{ClusterSwitchSpec, LinkSpec};

/// One end of a cable.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum CableEnd {
    Ntb { ntb: u32, port: u8 },
    Switch { switch: u32, port: u8 },
}

/// What a port supports, for link training: (who, generation, width), each optional.
pub(super) type Limit = (String, Option<u8>, Option<u8>);

impl Builder {
    pub(super) fn cluster_switch(&mut self, s: &ClusterSwitchSpec, path: &str) -> SResult<()> {
        let p = params();
        let name = s.profile.as_deref().unwrap_or("mxs824");
        let Some(prof) = p.cluster_switch.get(name) else {
            let known = p.cluster_switch.keys().cloned().collect();
            return err(format!("{path}/profile"), NameFault::UnknownProfile { of: "cluster switch profile", name: name.to_string(), known });
        };
        let ports = s.ports.unwrap_or(prof.ports);
        if ports == 0 || ports > prof.ports {
            return err(format!("{path}/ports"), DeviceFault::ClusterPorts { ports, profile: name.to_string(), max: prof.ports });
        }
        let idx = self.clusters.len() as u32;
        let nodes: Vec<NodeId> = (0..ports).map(|i| self.node(NodeKind::ClusterPort { switch: idx, index: i }, &s.name, &format!("p{i}"))).collect();
        for n in &nodes {
            self.limits.insert(*n, (format!("{} ({name})", s.name), Some(prof.max_gen), Some(prof.max_width)));
        }
        self.names.insert(s.name.clone(), (Comp::Cluster(idx), path.to_string()));
        self.clusters.push(ClusterSwitchInfo { name: s.name.clone(), profile: s.profile.clone(), ports: nodes, spec_path: path.to_string() });
        Ok(())
    }

    /// `NTB.cable`, `NTB.cableK` or `CLUSTERSWITCH.pN`; None for any other end.
    pub(super) fn cable_end(&self, s: &str, path: &str) -> SResult<Option<CableEnd>> {
        let Some((name, port)) = s.split_once('.') else { return Ok(None) };
        match self.names.get(name).map(|(c, _)| *c) {
            Some(Comp::Ntb(i)) => {
                let Some(k) = port.strip_prefix("cable") else { return Ok(None) };
                let n = self.cable_ports[i as usize];
                match if k.is_empty() { Some(0) } else { k.parse::<u8>().ok() } {
                    Some(port) if port < n => Ok(Some(CableEnd::Ntb { ntb: i, port })),
                    _ => end_err(path, s, EndFault::CablePort { name: name.to_string(), ports: n }),
                }
            }
            Some(Comp::Cluster(i)) => {
                let ports = self.clusters[i as usize].ports.len();
                match port.strip_prefix('p').and_then(|k| k.parse::<u8>().ok()) {
                    Some(port) if (port as usize) < ports => Ok(Some(CableEnd::Switch { switch: i, port })),
                    _ => end_err(path, s, EndFault::ClusterPort { name: name.to_string(), ports }),
                }
            }
            _ => Ok(None),
        }
    }

    /// A cable between two adapters, or an adapter and a cluster switch port.
    pub(super) fn cable(&mut self, a: CableEnd, b: CableEnd, l: &LinkSpec, path: &str) -> SResult<(NodeId, NodeId)> {
        let id = self.links.len() as LinkId;
        for (e, end) in [(a, "a"), (b, "b")] {
            if let Some(prev) = self.cable_used.insert(e, id) {
                let fault = match e {
                    CableEnd::Ntb { ntb, port } => LinkFault::CablePortUsed { ntb: self.ntbs[ntb as usize].name.clone(), port, link: prev },
                    CableEnd::Switch { switch, port } => LinkFault::ClusterPortUsed { switch: self.clusters[switch as usize].name.clone(), port, link: prev },
                };
                return err(format!("{path}/{end}"), fault);
            }
        }
        match (a, b) {
            (CableEnd::Ntb { ntb: na, .. }, CableEnd::Ntb { ntb: nb, .. }) => {
                if na == nb {
                    return err(path, LinkFault::Loopback);
                }
                self.add_peer(na, NtbPeer { ntb: nb, cable: id, via: None });
                self.add_peer(nb, NtbPeer { ntb: na, cable: id, via: None });
                Ok((self.ntbs[na as usize].node, self.ntbs[nb as usize].node))
            }
            (CableEnd::Switch { switch, port }, CableEnd::Ntb { ntb, .. }) | (CableEnd::Ntb { ntb, .. }, CableEnd::Switch { switch, port }) => {
                let node = self.clusters[switch as usize].ports[port as usize];
                self.attached.push((switch, node, ntb, id));
                Ok((node, self.ntbs[ntb as usize].node))
            }
            (CableEnd::Switch { .. }, CableEnd::Switch { .. }) => err(path, LinkFault::Cascaded { a: l.a.clone(), b: l.b.clone() }),
        }
    }

    fn add_peer(&mut self, ntb: u32, p: NtbPeer) {
        let s = &mut self.ntbs[ntb as usize];
        if s.peers.is_empty() {
            s.peer = Some(p.ntb);
            s.cable = Some(p.cable);
        }
        s.peers.push(p);
    }

    /// Every adapter on a cluster switch becomes a peer of every other one on it.
    pub(super) fn join_clusters(&mut self) {
        let attached = std::mem::take(&mut self.attached);
        for &(sw, ingress, a, cable) in &attached {
            for &(sw2, egress, b, far_cable) in &attached {
                if sw == sw2 && a != b {
                    self.add_peer(a, NtbPeer { ntb: b, cable, via: Some(Via { ingress, egress, far_cable }) });
                }
            }
        }
        self.attached = attached;
    }

    /// After hosts are known: peers in other hosts, inbound tables, far-side aliases that fit.
    pub(super) fn check_peers(&mut self) -> SResult<()> {
        for i in 0..self.ntbs.len() {
            let peers = self.ntbs[i].peers.clone();
            for p in &peers {
                if self.ntbs[p.ntb as usize].host == self.ntbs[i].host {
                    return err(format!("/links/{}", p.cable), LinkFault::SameHost { a: self.ntbs[i].name.clone(), b: self.ntbs[p.ntb as usize].name.clone() });
                }
            }
            let mut base = Vec::new();
            let mut total = 0usize;
            for p in &peers {
                base.push(total as u16);
                total += self.ntbs[p.ntb as usize].rid_lut.len();
            }
            if total > 255 {
                let (_, path) = &self.names[&self.ntbs[i].name];
                return err(path.clone(), LinkFault::Aliases { ntb: self.ntbs[i].name.clone(), peers: peers.len(), entries: total });
            }
            let inbound = peers.iter().map(|p| vec![Inbound::Unset; self.ntbs[p.ntb as usize].windows.len()]).collect();
            let s = &mut self.ntbs[i];
            s.alias_base = base;
            s.inbound = inbound;
            s.out_peer = s.windows.iter().map(|w| vec![None; w.lut_segments.max(1) as usize]).collect();
        }
        Ok(())
    }

    /// Train each link to what both of its ends support; record the links that trained down.
    pub(super) fn train(&mut self) -> Vec<TrainedDown> {
        let mut out = Vec::new();
        for (i, l) in self.links.iter_mut().enumerate() {
            let ends: Vec<&Limit> = [l.up, l.down].iter().filter_map(|n| self.limits.get(n)).collect();
            let gen = ends.iter().filter_map(|e| e.1).fold(l.gen, u8::min);
            let width = ends.iter().filter_map(|e| e.2).fold(l.width, u8::min);
            if (gen, width) != (l.gen, l.width) {
                let limited_by = ends
                    .iter()
                    .filter(|e| e.1.is_some_and(|g| g < l.gen) || e.2.is_some_and(|w| w < l.width))
                    .map(|e| format!("{} (Gen{} x{})", e.0, e.1.map_or("?".into(), |g| g.to_string()), e.2.map_or("?".into(), |w| w.to_string())))
                    .collect();
                out.push(TrainedDown { link: i as LinkId, spec_path: l.spec_path.clone(), asked: (l.gen, l.width), trained: (gen, width), limited_by });
                (l.gen, l.width) = (gen, width);
            }
        }
        out
    }
}
