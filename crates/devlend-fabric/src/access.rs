//! What outer layers may ask of a [`Fabric`] and the few direct changes they may make. Every
//! other change goes through the Linux-named interfaces (`ntb_api`, the IOMMU API in `iommu`,
//! config space in `fabric`, `intremap`) or the injected faults (`link`, `aer`).

use crate::cluster::{ClusterSwitchInfo, TrainedDown};
use crate::config::ConfigState;
use crate::events::{Event, EventLog};
use crate::fabric::{DeviceInfo, Fabric, SwitchInfo};
use crate::iommu::Iommu;
use crate::memory::SparseMem;
use crate::model::{FuncId, Function, Host, HostId, Link, Node, NodeId};
use crate::ntb::NtbState;
use crate::tuning::Tuning;
use std::sync::Arc;

impl Fabric {
    // ----- queries ---------------------------------------------------------------------------

    /// The topology's name.
    #[inline]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every host, indexed by [`HostId`].
    #[inline]
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    #[inline]
    pub fn host(&self, h: HostId) -> &Host {
        &self.hosts[h as usize]
    }

    /// Every node (root complex, root port, switch port, endpoint, NTB), indexed by [`NodeId`].
    #[inline]
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    #[inline]
    pub fn node(&self, n: NodeId) -> &Node {
        &self.nodes[n as usize]
    }

    /// Every PCI function, indexed by [`FuncId`].
    #[inline]
    pub fn funcs(&self) -> &[Function] {
        &self.funcs
    }

    #[inline]
    pub fn func(&self, f: FuncId) -> &Function {
        &self.funcs[f as usize]
    }

    /// Every link, in the description's order.
    #[inline]
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// Every NTB adapter's state, indexed by NTB id ([`Fabric::ntb_id`]).
    #[inline]
    pub fn ntbs(&self) -> &[NtbState] {
        &self.ntbs
    }

    #[inline]
    pub fn ntb(&self, n: u32) -> &NtbState {
        &self.ntbs[n as usize]
    }

    #[inline]
    pub fn switches(&self) -> &[SwitchInfo] {
        &self.switches
    }

    /// The described devices (each with its functions).
    #[inline]
    pub fn devices(&self) -> &[DeviceInfo] {
        &self.devices
    }

    /// Each host's IOMMU, indexed by [`HostId`].
    #[inline]
    pub fn iommus(&self) -> &[Iommu] {
        &self.iommus
    }

    #[inline]
    pub fn iommu(&self, h: HostId) -> &Iommu {
        &self.iommus[h as usize]
    }

    /// A function's config-space state (command register, BARs, capabilities' registers).
    #[inline]
    pub fn config_state(&self, f: FuncId) -> &ConfigState {
        &self.config[f as usize]
    }

    /// A host's functional RAM.
    #[inline]
    pub fn ram(&self, h: HostId) -> &SparseMem {
        &self.ram[h as usize]
    }

    /// A BAR's functional memory, if anything was ever stored there.
    #[inline]
    pub fn bar_mem(&self, f: FuncId, bar: u8) -> Option<&SparseMem> {
        self.bar_mem.get(&(f, bar))
    }

    /// The bounded event log (failed accesses, MSIs, faults, AER messages).
    #[inline]
    pub fn events(&self) -> &EventLog {
        &self.events
    }

    /// The effective parameters: the compiled defaults and the description's overrides.
    #[inline]
    pub fn tuning(&self) -> &Arc<Tuning> {
        &self.tuning
    }

    #[inline]
    pub fn cluster_switches(&self) -> &[ClusterSwitchInfo] {
        &self.cluster_switches
    }

    /// Links that trained down to what their ends support.
    #[inline]
    pub fn trained_down(&self) -> &[TrainedDown] {
        &self.trained_down
    }

    /// The route cache's (hits, misses) so far.
    #[inline]
    pub fn route_cache_stats(&self) -> (u64, u64) {
        (self.cache_hits, self.cache_misses)
    }

    // ----- direct changes --------------------------------------------------------------------

    /// An NTB adapter's state, to change as its registers would (a register face over the
    /// adapter). Cached routes are dropped, since windows and LUTs decide routes.
    pub fn ntb_mut(&mut self, n: u32) -> &mut NtbState {
        self.invalidate_routes();
        &mut self.ntbs[n as usize]
    }

    /// A device model sets bytes of its own BAR memory (registers it answers with), without a TLP.
    pub fn bar_store(&mut self, f: FuncId, bar: u8, offset: u64, data: &[u8]) {
        self.bar_mem.entry((f, bar)).or_default().write(offset, data);
    }

    /// Bytes placed in a host's RAM without a TLP (memory a test or a guest set up beforehand).
    pub fn ram_store(&mut self, h: HostId, addr: u64, data: &[u8]) {
        self.ram[h as usize].write(addr, data);
    }

    /// Back a range of a host's RAM with memory outside the model (a guest's RAM, mapped).
    ///
    /// # Safety
    /// As [`SparseMem::attach`]: `ptr` valid for `len` bytes while the fabric (or a clone) is used.
    pub unsafe fn attach_ram(&mut self, h: HostId, base: u64, ptr: *mut u8, len: u64) {
        self.ram[h as usize].attach(base, ptr, len);
    }

    /// Append an event that a layer above observed (a hot-plug step, an AER message).
    pub fn record_event(&mut self, e: Event) {
        self.events.push(e);
    }

    /// Keep only the events `keep` accepts (a kernel taking the MSIs delivered to its host).
    pub fn retain_events(&mut self, keep: impl FnMut(&Event) -> bool) {
        self.events.retain(keep);
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{CMD_BUS_MASTER, CMD_MEMORY, COMMAND};
    use crate::ntb::Inbound;
    use crate::route::{Failure, Outcome, Requester};
    use devlend_wire::Access;

    /// A change through `ntb_mut` (as a register face over the adapter makes) is what the next
    /// route sees, not a route cached before it.
    #[test]
    fn a_change_through_ntb_mut_reaches_the_next_route() {
        let mut f = crate::build_json(&crate::fixtures::two_hosts_pxh830("amd-epyc", 1 << 30, false, false)).unwrap();
        let (na, nb) = (f.ntb_id("na").unwrap(), f.ntb_id("nb").unwrap());
        let ram = f.resolve_expr("b.ram+0x100000").unwrap();
        f.mw_set_trans(nb, 0, ram, 1 << 20).unwrap();
        let cpu = Requester::Cpu(f.host_id("a").unwrap());
        let window = f.peer_mw_get_addr(na, 0).unwrap().0;
        assert!(matches!(f.route(cpu, window, Access::Write).outcome, Outcome::Delivered(_)));
        f.ntb_mut(nb).inbound[0][0] = Inbound::Unset;
        let after = f.route(cpu, window, Access::Write);
        assert!(matches!(after.outcome, Outcome::Failed(Failure::NtbUnmapped { .. })), "{after:?}");
    }

    /// Issue 17's audit: only a state built behind the config space's back (the fields, which
    /// only this crate reaches) can put a decoding BAR over RAM; routing still refuses it.
    #[test]
    fn routing_never_delivers_to_ram_that_a_decoding_bar_claims() {
        let mut f = crate::build_json(
            r#"{"name":"audit","hosts":[{"name":"l","cpu":"intel-xeon-e5","ram":8589934592,"iommu":false,"root_ports":1}],
              "devices":[{"name":"gpu0","profile":"quadro-k420"}],
              "links":[{"a":"l.rp0","b":"gpu0","gen":2,"width":16}]}"#,
        )
        .unwrap();
        let g = f.func_id("gpu0").unwrap();
        f.config_write(g, COMMAND, 2, (CMD_MEMORY | CMD_BUS_MASTER) as u32).unwrap();
        f.funcs[g as usize].bars.iter_mut().find(|b| b.index == 1).unwrap().addr = 0x1000_0000;
        let before = f.memory_digest();
        let (n, fail) = f.write(Requester::Cpu(f.host_id("l").unwrap()), 0x1000_0010, b"over");
        assert_eq!(n, 0);
        assert!(matches!(fail, Some(Failure::BarOverRam { bar: 1, .. })), "{fail:?}");
        assert_eq!(f.memory_digest(), before);
        assert_eq!(f.events().counts().get("bar-over-ram"), Some(&1));
    }
}
