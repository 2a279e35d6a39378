//! NTB link state: a cable pulled and put back, under the Linux NTB API's names
//! (include/linux/ntb.h: `ntb_link_disable`, `ntb_link_enable`, `ntb_link_is_up`).
//!
//! The link of a pair is one state: disabling either adapter takes it down for both, as pulling
//! the cable does. An adapter on a cluster switch has its own cable to the switch: disabling it
//! cuts it off from every peer, while the others still reach each other. While it is down nothing crosses: requests and completions through either
//! adapter fail with `Failure::NtbLinkDown` (recorded by the data path, nothing delivered), and
//! the peer's doorbells, scratchpads and message registers are refused. What stays possible is
//! what each host does with its own adapter: programming its translations and requester-ID LUT
//! (its CPU writes the adapter's registers in its own domain), so each side can tear down its
//! half of a lend whatever the link does. The pairing (the cable's two ends) is kept, so
//! `ntb_link_enable` brings back the same pair with whatever translations are programmed then.

use crate::error::{invalid, FResult};
use crate::fabric::Fabric;

impl Fabric {
    /// Whether the link of `ntb` is up (false also for an adapter with no cable).
    pub fn ntb_link_is_up(&self, ntb: u32) -> bool {
        self.ntbs[ntb as usize].peer.is_some() && !self.links_down.contains(&ntb)
    }

    /// Take the link of `ntb` (and of its peer) down. Idempotent.
    pub fn ntb_link_disable(&mut self, ntb: u32) -> FResult<()> {
        self.set_link(ntb, false)
    }

    /// Bring the link of `ntb` (and of its peer) back up. Idempotent.
    pub fn ntb_link_enable(&mut self, ntb: u32) -> FResult<()> {
        self.set_link(ntb, true)
    }

    /// The adapter's own link, and a directly cabled peer's whose only peer it is (the two ends
    /// of one cable); an adapter on a cluster switch takes down only its own cable.
    fn set_link(&mut self, ntb: u32, up: bool) -> FResult<()> {
        let s = self.ntbs.get(ntb as usize).ok_or_else(|| crate::FabricError::UnknownName(format!("NTB #{ntb}")))?;
        if s.peers.is_empty() {
            return invalid(format!("{}: no cable to a peer; there is no link to change", s.name));
        }
        let partners = s.peers.iter().filter(|p| p.via.is_none() && self.ntbs[p.ntb as usize].peers.len() == 1).map(|p| p.ntb);
        let ends: Vec<u32> = std::iter::once(ntb).chain(partners).collect();
        for n in ends {
            if up {
                self.links_down.remove(&n);
            } else {
                self.links_down.insert(n);
            }
        }
        self.invalidate_routes();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::route::{Failure, Outcome, Requester};
    use devlend_wire::Access;


    #[test]
    fn a_link_down_stops_crossings_and_peer_registers_but_not_local_programming() {
        let mut f = crate::build_json(&crate::fixtures::two_hosts_pxh830("intel-xeon-e5", 4294967296, false, false)).unwrap();
        let (na, nb) = (f.ntb_id("na").unwrap(), f.ntb_id("nb").unwrap());
        f.mw_set_trans(nb, 1, 0x1000_0000, 0x10_0000).unwrap();
        let mw = f.resolve_expr("na.mw1").unwrap();
        let cpu = Requester::Cpu(f.host_id("a").unwrap());
        assert!(matches!(f.lookup(cpu, mw, Access::Write), Outcome::Delivered(_)), "cached while up");
        f.ntb_link_disable(nb).unwrap();
        assert!(!f.ntb_link_is_up(na) && !f.ntb_link_is_up(nb), "one link for the pair");
        assert_eq!(f.lookup(cpu, mw, Access::Write), Outcome::Failed(Failure::NtbLinkDown { ntb: na }), "the cached route went with the link");
        assert!(f.peer_spad_write(na, 0, 1).is_err() && f.peer_db_set(nb, 1).is_err() && f.peer_msg_write(na, 0, 7).is_err());
        f.mw_clear_trans(nb, 1).unwrap();
        f.mw_set_trans(nb, 1, 0x2000_0000, 0x10_0000).unwrap();
        f.ntb_link_enable(na).unwrap();
        assert!(f.ntb_link_is_up(nb));
        assert_eq!(f.lookup(cpu, mw, Access::Write), Outcome::Delivered(crate::Target::Ram { host: 1, addr: 0x2000_0000 }));
        assert!(f.peer_spad_write(na, 0, 1).is_ok());
    }
}
