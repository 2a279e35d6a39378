//! The HCA's own values in the `[xenib]` table of `params/hardware.toml` (each value's source,
//! and whether it is assumed, is written there): the MHXL-CF128-T's queue entry sizes, its
//! engines' times, the 4X link, and the page the TPT translates in. The rest of the table (Xen,
//! the host software) is devlend-xenib's.

use serde::Deserialize;
use std::sync::OnceLock;

#[derive(Debug, Clone, Deserialize)]
pub struct HcaParams {
    pub hca_cmd_ps: u64,
    pub page_bytes: u64,
    pub wqe_bytes: u64,
    pub cqe_bytes: u64,
    pub hca_doorbell_ps: u64,
    pub hca_send_wqe_ps: u64,
    pub hca_rx_packet_ps: u64,
    pub ib_lanes: u64,
    pub ib_lane_mbaud: u64,
    pub ib_encoding_num: u64,
    pub ib_encoding_den: u64,
    pub ib_mtu: u64,
    pub ib_header_bytes: u64,
    pub ib_reth_bytes: u64,
    pub ib_ack_bytes: u64,
    pub ib_wire_latency_ps: u64,
}

impl HcaParams {
    /// Picoseconds to serialise one byte on the IB link (after 8b/10b).
    pub fn ib_ps_per_byte(&self) -> f64 {
        let data_mbps = self.ib_lanes * self.ib_lane_mbaud * self.ib_encoding_num / self.ib_encoding_den; // Mb/s
        8.0 * 1e6 / data_mbps as f64
    }
}

#[derive(Deserialize)]
struct File {
    xenib: HcaParams,
}

pub fn params() -> &'static HcaParams {
    static P: OnceLock<HcaParams> = OnceLock::new();
    P.get_or_init(|| devlend_fabric::params::from_hardware::<File>().expect("the HCA's values in [xenib] of params/hardware.toml are malformed").xenib)
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_parses() {
        let p = super::params();
        assert!((p.ib_ps_per_byte() - 1000.0).abs() < 1e-9, "4X SDR carries 1 GB/s");
        assert_eq!((p.wqe_bytes, p.cqe_bytes, p.page_bytes), (64, 32, 4096));
    }
}
