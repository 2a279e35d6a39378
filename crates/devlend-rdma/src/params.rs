//! The `[cpu_store]` and `[rdma_sw]` tables of `params/hardware.toml` (each value's source and
//! whether it is assumed are written there); the DMA engine's `[ntb_dma]` is read by its model,
//! `devlend_devices::plx_dma::params`.

use serde::Deserialize;
use std::sync::OnceLock;

#[derive(Debug, Clone, Deserialize)]
pub struct CpuStore {
    pub mapping: String,
    pub store_bytes: u64,
    pub uc_store_ps: u64,
    pub wc_line_bytes: u64,
    pub wc_buffers: u64,
    pub wc_flush_ps: u64,
    pub call_ps: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RdmaSw {
    pub ioctl_ps: u64,
    pub irq_wakeup_ps: u64,
    pub irq_entry_ps: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RdmaParams {
    pub cpu_store: CpuStore,
    pub rdma_sw: RdmaSw,
}

pub fn params() -> &'static RdmaParams {
    static P: OnceLock<RdmaParams> = OnceLock::new();
    P.get_or_init(|| devlend_fabric::params::from_hardware().expect("[cpu_store]/[rdma_sw] in params/hardware.toml are malformed"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tables_parse() {
        let p = super::params();
        assert!(p.cpu_store.store_bytes > 0);
    }
}
