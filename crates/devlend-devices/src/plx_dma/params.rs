//! The `[ntb_dma]` table of `params/hardware.toml`: the PEX8749 DMA engine's channels, read
//! pipeline and descriptor handling (each value's source, or why it is assumed, is written there).

use serde::Deserialize;
use std::sync::OnceLock;

#[derive(Debug, Clone, Deserialize)]
pub struct NtbDma {
    pub channels: u32,
    pub max_channels: u32,
    pub read_request_bytes: u64,
    pub outstanding_reads: u64,
    pub descriptor_bytes: u64,
    pub descriptor_prefetch: u64,
    pub descriptor_turnaround_ps: u64,
    pub register_writes_block: u64,
    pub register_writes_sg: u64,
    pub status_reads_block: u64,
    pub status_reads_sg: u64,
}

#[derive(Deserialize)]
struct Table {
    ntb_dma: NtbDma,
}

/// The `[ntb_dma]` table of the parameters compiled into the core.
pub fn ntb_dma() -> &'static NtbDma {
    static P: OnceLock<NtbDma> = OnceLock::new();
    P.get_or_init(|| devlend_fabric::params::from_hardware::<Table>().expect("[ntb_dma] in params/hardware.toml is malformed").ntb_dma)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_parses() {
        let p = super::ntb_dma();
        assert_eq!(p.channels, 1);
        assert!(p.outstanding_reads >= 1 && p.max_channels >= p.channels);
    }
}
