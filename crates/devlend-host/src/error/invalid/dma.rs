//! Calls of the DMA API that make no sense: unmapping what was never mapped, mapping what is
//! neither RAM nor a BAR, zero bytes.

use crate::kernel::DevId;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadDma {
    /// `dma_unmap_sg` with `entries` list entries but `addrs` bus addresses.
    SgCount { entries: usize, addrs: usize },
    /// `dma_free_coherent` of `cpu`, which `dma_alloc_coherent` did not allocate.
    NotCoherent { cpu: u64 },
    /// `dma_map_resource` of 0 bytes.
    ZeroResource,
    /// A DMA mapping of 0 bytes.
    ZeroMapping,
    /// `call` (`dma_map_single`, `dma_map_sg`) of `phys`+`len`, which is not RAM of host `host`.
    NotRam { call: &'static str, phys: u64, len: u64, host: String },
    /// `dma_map_resource` of `phys`+`len`, which is not inside one BAR of a device host `host` sees.
    NotInBar { phys: u64, len: u64, host: String },
    /// A guest's `dma_map_single` of `phys`+`len`, which is not RAM of VM `vm`.
    GuestNotRam { phys: u64, len: u64, vm: String },
    /// A guest's `dma_map_resource` of `phys`+`len`, which is not inside one BAR of a device in VM `vm`.
    GuestNotInBar { phys: u64, len: u64, vm: String },
    /// `dma_unmap` of bus address `dma`, where a local device has no mapping.
    NoMapping { dma: u64 },
    /// `dma_unmap` of bus address `dma`, where borrowed `device` has no mapping.
    NoDeviceMapping { device: String, dma: u64 },
    /// `dma_unmap` of `len` bytes at `dma`, whose mapping is `mapped` bytes.
    UnmapSize { dma: u64, mapped: u64, len: u64 },
    /// A guest's `dma_unmap` of `len` bytes at `dma`, which `device` has not mapped.
    GuestNoMapping { device: String, dma: u64, len: u64 },
    /// `dma_unmap_resource` of `len` bytes at `dma`, which `device` has not mapped.
    NoResourceMapping { device: String, dma: u64, len: u64 },
    /// Local device handle `dev` has no DMA state in its host's kernel.
    NoDmaState { dev: DevId },
    /// No DMA window is open on lender adapter `la` for borrower adapter `bb` (NTB ids).
    NoWindow { la: u32, bb: u32 },
}

impl fmt::Display for BadDma {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadDma::SgCount { entries, addrs } => write!(f, "dma_unmap_sg: {entries} entries but {addrs} bus addresses"),
            BadDma::NotCoherent { cpu } => write!(f, "dma_free_coherent: {cpu:#x} was not allocated by dma_alloc_coherent"),
            BadDma::ZeroResource => f.write_str("dma_map_resource of 0 bytes"),
            BadDma::ZeroMapping => f.write_str("DMA mapping of 0 bytes"),
            BadDma::NotRam { call, phys, len, host } => {
                write!(f, "{call}: {phys:#x}+{len:#x} is not RAM of host {host} (device memory is mapped with dma_map_resource)")
            }
            BadDma::NotInBar { phys, len, host } => {
                write!(f, "dma_map_resource: {phys:#x}+{len:#x} is not inside one BAR of a device host {host} sees")
            }
            BadDma::GuestNotRam { phys, len, vm } => write!(f, "dma_map_single: {phys:#x}+{len:#x} is not RAM of VM {vm}"),
            BadDma::GuestNotInBar { phys, len, vm } => {
                write!(f, "dma_map_resource: {phys:#x}+{len:#x} is not inside one BAR of a device in VM {vm}")
            }
            BadDma::NoMapping { dma } => write!(f, "dma_unmap: no mapping at bus address {dma:#x}"),
            BadDma::NoDeviceMapping { device, dma } => write!(f, "dma_unmap: {device} has no mapping at bus address {dma:#x}"),
            BadDma::UnmapSize { dma, mapped, len } => write!(f, "dma_unmap: mapping at {dma:#x} is {mapped} bytes, not {len}"),
            BadDma::GuestNoMapping { device, dma, len } => write!(f, "dma_unmap: {device} has no mapping of {len} bytes at {dma:#x}"),
            BadDma::NoResourceMapping { device, dma, len } => {
                write!(f, "dma_unmap_resource: {device} has no resource mapping of {len} bytes at {dma:#x}")
            }
            BadDma::NoDmaState { .. } => f.write_str("device has no DMA state"),
            BadDma::NoWindow { .. } => f.write_str("no DMA window is open"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostError;

    /// The messages are the ones the host layer printed when `Invalid` held a `String`.
    #[test]
    fn each_dma_call_renders_the_host_layer_s_message() {
        let cases = [
            (BadDma::SgCount { entries: 2, addrs: 1 }, "dma_unmap_sg: 2 entries but 1 bus addresses"),
            (BadDma::NotCoherent { cpu: 0x3000 }, "dma_free_coherent: 0x3000 was not allocated by dma_alloc_coherent"),
            (BadDma::ZeroResource, "dma_map_resource of 0 bytes"),
            (BadDma::ZeroMapping, "DMA mapping of 0 bytes"),
            (
                BadDma::NotRam { call: "dma_map_sg", phys: 0x1000, len: 0x10, host: "a".into() },
                "dma_map_sg: 0x1000+0x10 is not RAM of host a (device memory is mapped with dma_map_resource)",
            ),
            (BadDma::NotInBar { phys: 0x1000, len: 0x10, host: "a".into() }, "dma_map_resource: 0x1000+0x10 is not inside one BAR of a device host a sees"),
            (BadDma::GuestNotRam { phys: 0x1000, len: 0x10, vm: "g".into() }, "dma_map_single: 0x1000+0x10 is not RAM of VM g"),
            (BadDma::GuestNotInBar { phys: 0x1000, len: 0x10, vm: "g".into() }, "dma_map_resource: 0x1000+0x10 is not inside one BAR of a device in VM g"),
            (BadDma::NoMapping { dma: 0x1234 }, "dma_unmap: no mapping at bus address 0x1234"),
            (BadDma::NoDeviceMapping { device: "gpu0".into(), dma: 0x1234 }, "dma_unmap: gpu0 has no mapping at bus address 0x1234"),
            (BadDma::UnmapSize { dma: 0x1000, mapped: 4096, len: 8192 }, "dma_unmap: mapping at 0x1000 is 4096 bytes, not 8192"),
            (BadDma::GuestNoMapping { device: "gpu0".into(), dma: 0x1000, len: 16 }, "dma_unmap: gpu0 has no mapping of 16 bytes at 0x1000"),
            (
                BadDma::NoResourceMapping { device: "gpu0".into(), dma: 0x1000, len: 16 },
                "dma_unmap_resource: gpu0 has no resource mapping of 16 bytes at 0x1000",
            ),
            (BadDma::NoDmaState { dev: DevId(3) }, "device has no DMA state"),
            (BadDma::NoWindow { la: 0, bb: 1 }, "no DMA window is open"),
        ];
        for (call, text) in cases {
            assert_eq!(HostError::from(call).to_string(), text);
        }
    }
}
