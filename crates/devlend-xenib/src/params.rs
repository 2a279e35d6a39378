//! The `[xenib]` table of `params/hardware.toml` (each value's source, and whether it is assumed,
//! is written there): Xen's and the host software's values here; the HCA's own (its queue entry
//! sizes, engines, 4X link, and the page its TPT translates in) are the device model's,
//! [`hca_params`].

pub use devlend_devices::ib_hca::params::params as hca_params;

use serde::Deserialize;
use std::sync::OnceLock;

#[derive(Debug, Clone, Deserialize)]
pub struct XenIbParams {
    pub channel_one_way_ps: u64,
    pub channel_ps_per_byte: u64,
    pub ring_page_bytes: u64,
    pub ring_slots: u64,
    pub request_bytes: u64,
    pub evtchn_notify_ps: u64,
    pub pirq_to_dom0_ps: u64,
    pub pirq_unmask_notify_ps: u64,
    pub grant_map_ps: u64,
    pub backend_verb_ps: u64,
    pub backend_page_check_ps: u64,
    pub verb_post_ps: u64,
    pub cpu_poll_ps: u64,
    pub irq_to_handler_ps: u64,
    pub syscall_ps: u64,
    pub pin_page_ps: u64,
    pub pv_p2m_page_ps: u64,
    pub mtt_entries_per_cmd: u64,
    pub vfio_irq_inject_ps: u64,
    pub mtt_entry_bytes: u64,
    pub source: String,
}

impl XenIbParams {
    /// What Xen adds to one HCA interrupt handled in domain 0: the pirq's delivery as an event,
    /// then, the HCA's INTx line being level-triggered, the PHYSDEVOP_IRQ_UNMASK_NOTIFY hypercall
    /// with which dom0's `end_pirq` lets Xen unmask the line (XenLinux evtchn.c, Xen physdev.c).
    pub fn dom0_pirq_ps(&self) -> u64 {
        self.pirq_to_dom0_ps + self.pirq_unmask_notify_ps
    }
    /// One-way time of a message of `bytes` through the inter-domain device channel.
    pub fn channel_ps(&self, bytes: u64) -> u64 {
        self.channel_one_way_ps + bytes * self.channel_ps_per_byte
    }
}

#[derive(Deserialize)]
struct File {
    xenib: XenIbParams,
}

pub fn params() -> &'static XenIbParams {
    static P: OnceLock<XenIbParams> = OnceLock::new();
    P.get_or_init(|| devlend_fabric::params::from_hardware::<File>().expect("[xenib] in params/hardware.toml is malformed").xenib)
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_parses() {
        let p = super::params();
        assert!(p.channel_one_way_ps >= 10_000_000, "004 Fig 9: at least 10 us");
        assert!(!p.source.is_empty());
    }
}
