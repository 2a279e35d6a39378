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
//!
//! Below the NTBs, injected faults (`Faults`): a PCIe link down (a switch port, a device's slot
//! after a surprise removal), a function that stops answering (completion timeouts), and a
//! function whose completions are poisoned. Each is a `Failure` on the data path, recorded like
//! any other; a Function Level Reset (`flr`) clears poisoning and is refused for a function that
//! cannot take it.
//!
//! Poisoned data (PCIe Base 3.0 §2.7.2.2): a completer that cannot return good data (an
//! uncorrectable error in the memory it reads) sets EP on the completion, and the receiver must
//! not use the data and reports Poisoned TLP Received. Two sources are modelled: a poisoned
//! function (`func_poison`: every read completion to or from it is poisoned, as an error in its
//! own data path would make it), and a poisoned page of a host's RAM (`ram_poison`: an
//! uncorrectable memory error; the root complex returns poisoned completions to the devices that
//! read it, and the device reports it). A CPU load of poisoned RAM is a machine check, not a PCIe
//! matter, and is not modelled. Writes are never poisoned here: the data a device writes is its
//! own, and a completer that detects nothing bad in it stores it.

use crate::error::{BadNtb, BadRequest, FResult};
use crate::fabric::Fabric;
use crate::model::{FuncId, HostId, NodeId};
use crate::route::{Failure, Outcome, Requester, Target};
use devlend_wire::Access;
use std::collections::BTreeSet;

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
        let s = self.ntbs.get(ntb as usize).ok_or(crate::error::Unknown::NtbId { ntb })?;
        if s.peers.is_empty() {
            return Err(BadNtb::NoCable { ntb: s.name.clone() }.into());
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

/// Faults injected below the NTB layer: PCIe links down, functions that stopped answering, and
/// functions whose completions are poisoned. Empty unless a fault was injected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Nodes whose upstream link is down.
    pub(crate) ports_down: BTreeSet<NodeId>,
    pub(crate) hung: BTreeSet<FuncId>,
    pub(crate) poisoned: BTreeSet<FuncId>,
    /// Pages of host RAM (host, page number) whose reads by a device complete poisoned.
    pub(crate) poisoned_ram: BTreeSet<(HostId, u64)>,
}

impl Fabric {
    /// Take the PCIe link above `node` down (a switch downstream port, a slot): nothing crosses
    /// it either way until `port_enable` (PCIe Base 4.0 §2.9.1: in DL_Down a port terminates
    /// non-posted requests as Unsupported Requests and discards posted ones).
    pub fn port_disable(&mut self, node: NodeId) -> FResult<()> {
        self.set_port(node, false)
    }

    pub fn port_enable(&mut self, node: NodeId) -> FResult<()> {
        self.set_port(node, true)
    }

    pub fn port_is_up(&self, node: NodeId) -> bool {
        !self.faults.ports_down.contains(&node)
    }

    fn set_port(&mut self, node: NodeId, up: bool) -> FResult<()> {
        let n = self.nodes.get(node as usize).ok_or(crate::error::Unknown::Node { node })?;
        if n.parent.is_none() {
            return Err(BadRequest::NoUpstream { component: n.component.clone(), port: n.port.clone() }.into());
        }
        if up {
            self.faults.ports_down.remove(&node);
        } else {
            self.faults.ports_down.insert(node);
        }
        self.invalidate_routes();
        Ok(())
    }

    /// The node whose upstream link is the slot of function `func` (the link a surprise removal takes down).
    pub fn slot_of(&self, func: FuncId) -> NodeId {
        self.funcs[func as usize].node
    }

    /// Function `func` stops answering (a hung device): reads of its BARs and configuration
    /// space end in a completion timeout, posted writes to it are lost, and it issues nothing.
    pub fn func_hang(&mut self, func: FuncId) {
        self.faults.hung.insert(func);
        self.invalidate_routes();
    }

    /// Every completion to or from `func` carries poisoned data until the function is reset.
    pub fn func_poison(&mut self, func: FuncId) {
        self.faults.poisoned.insert(func);
        self.invalidate_routes();
    }

    /// An uncorrectable error in the 4 KiB page of host `host`'s RAM that holds `addr`: every
    /// device read of it completes poisoned until the host reboots (`ram_unpoison`).
    pub fn ram_poison(&mut self, host: HostId, addr: u64) {
        self.faults.poisoned_ram.insert((host, addr / crate::memory::PAGE));
        self.invalidate_routes();
    }

    /// Host `host`'s RAM is good again (the host rebooted and its memory was initialised).
    pub fn ram_unpoison(&mut self, host: HostId) {
        self.faults.poisoned_ram.retain(|(h, _)| *h != host);
        self.invalidate_routes();
    }

    pub fn func_is_hung(&self, func: FuncId) -> bool {
        self.faults.hung.contains(&func)
    }

    /// A Function Level Reset of `func` (PCIe Base 4.0 §6.6.2, issued as a configuration write
    /// to Device Control's Initiate FLR bit; Linux's `pcie_flr` then waits 100 ms): its
    /// poisoned state is cleared and it stops bus mastering (Linux restores the rest of its
    /// configuration around the reset). A function that does not answer cannot take the
    /// configuration write, nor can one behind a link that is down: the error says which.
    pub fn flr(&mut self, func: FuncId) -> Result<(), Failure> {
        if let Some(f) = self.unreachable_for_reset(func) {
            self.record(f);
            return Err(f);
        }
        self.faults.poisoned.remove(&func);
        self.set_bus_master(func, false);
        self.invalidate_routes();
        Ok(())
    }

    /// Everything of `func` a driver could read back cleared, as a scrub before the device's next
    /// user leaves it (`devlend_host::hygiene`): every byte behind its BARs gone (registers, and a
    /// GPU's device memory, which `bar_mem` holds), so they read as zero; with `reset`, by a
    /// Function Level Reset ([`Fabric::flr`]), else by the device's own engine and the lender's
    /// driver. Refused as an FLR is when the device cannot be reached.
    pub fn scrub(&mut self, func: FuncId, reset: bool) -> Result<(), Failure> {
        if reset {
            self.flr(func)?;
        } else if let Some(f) = self.unreachable_for_reset(func) {
            self.record(f);
            return Err(f);
        }
        self.bar_mem.retain(|&(f, _), _| f != func);
        for (bar, off, data) in self.power_on.get(&func).cloned().unwrap_or_default() {
            self.bar_mem.entry((func, bar)).or_default().write(off, &data);
        }
        self.msix_table_defaults(func);
        Ok(())
    }

    /// Set a register of `func` (BAR `bar`, offset `off`) that its hardware sets at power-on (an
    /// ID, a capability): written now, and again by every scrub.
    pub fn set_power_on_value(&mut self, func: FuncId, bar: u8, off: u64, data: &[u8]) {
        self.bar_mem.entry((func, bar)).or_default().write(off, data);
        let regs = self.power_on.entry(func).or_default();
        regs.retain(|(b, o, _)| (*b, *o) != (bar, off));
        regs.push((bar, off, data.to_vec()));
    }

    /// Every MSI-X table entry of `func` back to its reset value: zero, but for Vector Control's
    /// Mask bit, which resets to 1 (PCIe Base 4.0 §7.7.2.2).
    fn msix_table_defaults(&mut self, func: FuncId) {
        let f = &self.funcs[func as usize];
        let Some(bar0) = f.bars.iter().find(|b| b.index == 0).map(|b| b.size) else { return };
        let mem = self.bar_mem.entry((func, 0)).or_default();
        for i in 0..f.msix_vectors as u64 {
            let at = crate::config::MSIX_TABLE_OFFSET + i * 16 + 12;
            if at + 4 <= bar0 {
                mem.write(at, &1u32.to_le_bytes());
            }
        }
    }

    /// Whether `func` can take a reset or a scrub now (asked without recording anything: a lender
    /// that knows its device is gone does not try).
    pub fn can_scrub(&self, func: FuncId) -> bool {
        self.unreachable_for_reset(func).is_none()
    }

    /// Whether a configuration request reaches `func` and is answered: not when it hangs (a
    /// Completion Timeout) nor when a link above it is down (the port ends the request as an
    /// Unsupported Request, PCIe Base 4.0 §2.9.1). Either way software reads all ones (§2.3.2;
    /// §7.5.1.1: a Vendor ID of FFFFh is no function at all, Linux `pci_device_is_present`).
    pub fn config_answers(&self, func: FuncId) -> bool {
        self.unreachable_for_reset(func).is_none()
    }

    /// Why `func` cannot take a reset or a scrub: it hangs, or a link above it is down.
    fn unreachable_for_reset(&self, func: FuncId) -> Option<Failure> {
        if self.faults.hung.contains(&func) {
            return Some(Failure::Unresponsive { func });
        }
        self.path_down(self.slot_of(func)).map(|node| Failure::PortDown { node })
    }

    /// A conventional reset of `func` (its host rebooted, its slot powered again): hung and
    /// poisoned states are gone, bus mastering is off until a driver enables it.
    pub fn power_on_reset(&mut self, func: FuncId) {
        self.faults.hung.remove(&func);
        self.faults.poisoned.remove(&func);
        self.set_bus_master(func, false);
        self.invalidate_routes();
    }

    /// The first node, from `node` up to its root port, whose upstream link is down.
    fn path_down(&self, mut node: NodeId) -> Option<NodeId> {
        loop {
            if self.faults.ports_down.contains(&node) {
                return Some(node);
            }
            node = self.nodes[node as usize].parent?;
        }
    }

    /// What injected faults make of a routed request: a hung requester issues nothing; a hung
    /// completer never answers; a read's completion to or from a poisoned function is poisoned.
    pub(crate) fn fault_outcome(&self, req: Requester, access: Access, outcome: Outcome) -> Outcome {
        let f = &self.faults;
        if f.hung.is_empty() && f.poisoned.is_empty() && f.poisoned_ram.is_empty() {
            return outcome;
        }
        let from = match req {
            Requester::Func(func) => Some(func),
            Requester::Cpu(_) => None,
        };
        if let Some(func) = from.filter(|x| f.hung.contains(x)) {
            return Outcome::Failed(Failure::Unresponsive { func });
        }
        let to = match outcome {
            Outcome::Delivered(Target::Bar { func, .. }) => Some(func),
            // The receiver of the poisoned completion reports it: the device that read.
            Outcome::Delivered(Target::Ram { host, addr }) if access == Access::Read && f.poisoned_ram.contains(&(host, addr / crate::memory::PAGE)) => {
                if let Some(func) = from {
                    return Outcome::Failed(Failure::Poisoned { func });
                }
                None
            }
            Outcome::Delivered(_) => None,
            Outcome::Failed(_) => return outcome,
        };
        if let Some(func) = to.filter(|x| f.hung.contains(x)) {
            return Outcome::Failed(Failure::Unresponsive { func });
        }
        if access == Access::Read {
            if let Some(func) = from.into_iter().chain(to).find(|x| f.poisoned.contains(x)) {
                return Outcome::Failed(Failure::Poisoned { func });
            }
        }
        outcome
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

    /// One host with a GPU on its second root port.
    fn fabric() -> crate::Fabric {
        crate::build_json(
            r#"{"name":"t","hosts":[{"name":"a","cpu":"intel-xeon-e5","ram":4294967296,"iommu":false,"root_ports":1}],
          "devices":[{"name":"gpu0","profile":"quadro-k420"}],"links":[{"a":"a.rp0","b":"gpu0","gen":2,"width":16}]}"#,
        )
        .unwrap()
    }

    /// The GPU, with its first BAR's address.
    fn endpoint(f: &crate::Fabric) -> (u32, u64) {
        let func = f.func_id("gpu0").unwrap();
        (func, f.funcs[func as usize].bars[0].addr)
    }

    #[test]
    fn a_port_down_stops_requests_both_ways_and_comes_back() {
        let mut f = fabric();
        let (func, bar) = endpoint(&f);
        let cpu = Requester::Cpu(f.func_host(func));
        let node = f.slot_of(func);
        let digest = f.memory_digest();
        f.port_disable(node).unwrap();
        assert_eq!(f.lookup(cpu, bar, Access::Write), Outcome::Failed(Failure::PortDown { node }));
        let (data, fail) = f.read(cpu, bar, 8);
        assert_eq!((data, fail), (vec![0xff; 8], Some(Failure::PortDown { node })), "a read through a down link is all ones");
        assert_eq!(f.write(cpu, bar, b"lost").0, 0);
        assert_eq!(f.memory_digest(), digest, "the posted write was dropped");
        assert!(f.flr(func).is_err(), "no FLR through a down link");
        f.port_enable(node).unwrap();
        assert!(matches!(f.lookup(cpu, bar, Access::Write), Outcome::Delivered(_)));
    }

    #[test]
    fn a_device_reading_a_poisoned_ram_page_gets_a_poisoned_completion_and_reports_it() {
        let mut f = fabric();
        let (func, _) = endpoint(&f);
        let host = f.func_host(func);
        f.set_bus_master(func, true);
        let (gpu, cpu) = (Requester::Func(func), Requester::Cpu(host));
        f.ram_poison(host, 0x10_0800);
        assert_eq!(f.lookup(gpu, 0x10_0000, Access::Read), Outcome::Failed(Failure::Poisoned { func }), "the page's completion is poisoned");
        assert_eq!(f.read(gpu, 0x10_0ffc, 8).1, Some(Failure::Poisoned { func }), "a read that touches the page");
        assert!(matches!(f.lookup(gpu, 0x10_1000, Access::Read), Outcome::Delivered(_)), "the next page is good");
        assert!(matches!(f.lookup(gpu, 0x10_0000, Access::Write), Outcome::Delivered(_)), "a write is stored");
        assert!(matches!(f.lookup(cpu, 0x10_0000, Access::Read), Outcome::Delivered(_)), "a CPU load is no PCIe completion");
        f.ram_unpoison(host);
        assert!(matches!(f.lookup(gpu, 0x10_0000, Access::Read), Outcome::Delivered(_)), "the reboot initialised the memory");
    }

    #[test]
    fn a_hung_function_times_out_and_cannot_be_reset_a_poisoned_one_is_cleared_by_flr() {
        let mut f = fabric();
        let (func, bar) = endpoint(&f);
        let cpu = Requester::Cpu(f.func_host(func));
        f.func_poison(func);
        assert_eq!(f.lookup(cpu, bar, Access::Read), Outcome::Failed(Failure::Poisoned { func }));
        assert!(matches!(f.lookup(cpu, bar, Access::Write), Outcome::Delivered(_)), "a posted write carries no completion");
        f.flr(func).unwrap();
        assert!(matches!(f.lookup(cpu, bar, Access::Read), Outcome::Delivered(_)), "FLR cleared the poison");
        f.func_hang(func);
        assert_eq!(f.lookup(cpu, bar, Access::Read), Outcome::Failed(Failure::Unresponsive { func }));
        assert_eq!(f.lookup(Requester::Func(func), 0x1000, Access::Write), Outcome::Failed(Failure::Unresponsive { func }), "a hung device issues nothing");
        assert_eq!(f.flr(func), Err(Failure::Unresponsive { func }));
    }
}
