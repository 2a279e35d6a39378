//! The `[vm]` table of `params/hardware.toml`: the software costs of a VM's interrupt path
//! (000 §5, §8). Each value's source, or why it is assumed, is written there.

use serde::Deserialize;
use std::sync::OnceLock;

#[derive(Debug, Clone, Deserialize)]
pub struct VmParams {
    pub lender_forward_ps: u64,
    pub eventfd_irqfd_ps: u64,
    pub guest_irq_entry_ps: u64,
    pub source: String,
}

#[derive(Deserialize)]
struct File {
    vm: VmParams,
}

pub fn params() -> &'static VmParams {
    static P: OnceLock<VmParams> = OnceLock::new();
    P.get_or_init(|| devlend_fabric::params::from_hardware::<File>().expect("[vm] in params/hardware.toml is malformed").vm)
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_parses() {
        let p = super::params();
        assert!(p.eventfd_irqfd_ps > 0 && p.source.contains("000 §5"));
    }
}
