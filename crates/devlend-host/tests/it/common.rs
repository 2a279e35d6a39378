//! Topologies equivalent to the shipped testbeds (python/devlend/topologies), without their
//! `setup` sections (Device Lending does that programming), a snapshot of all the programming
//! Device Lending touches, and the one "driver" every test uses.
#![allow(dead_code)]

use devlend_fabric::config::{MSIX_ENABLE, MSIX_TABLE_OFFSET};
use devlend_fabric::Requester;
use devlend_host::{Cluster, DevId, DmaDir, HResult, HostOs};

pub const GIB32: u64 = 32 << 30;

/// pxh830-two-host.yaml (000 §7.1, Fig 9), with the IOMMUs as given; `gpu` is the lender's GPU profile.
pub fn two_host_json(borrower_iommu: bool, lender_iommu: bool, gpu: &str) -> String {
    format!(
        r#"{{"name":"pxh830-two-host","hosts":[
  {{"name":"borrower","cpu":"intel-xeon-e5","ram":{GIB32},"iommu":{borrower_iommu},"root_ports":3}},
  {{"name":"lender","cpu":"intel-xeon-e5","ram":{GIB32},"iommu":{lender_iommu},"root_ports":3}}],
 "switches":[{{"name":"lender-sw","profile":"pex8796","downstream_ports":4}}],
 "devices":[{{"name":"gpu0","profile":"{gpu}"}}],
 "ntbs":[{{"name":"ntb-b","profile":"pxh830"}},{{"name":"ntb-l","profile":"pxh830"}}],
 "links":[{{"a":"borrower.rp0","b":"ntb-b","gen":3,"width":8}},
  {{"a":"lender.rp0","b":"lender-sw","gen":3,"width":16}},
  {{"a":"lender-sw.d0","b":"ntb-l","gen":3,"width":8}},
  {{"a":"lender-sw.d1","b":"gpu0","gen":2,"width":16}},
  {{"a":"ntb-b.cable","b":"ntb-l.cable","gen":3,"width":8,"kind":"cable"}}]}}"#
    )
}

pub fn two_host(lender_iommu: bool) -> Cluster {
    Cluster::from_json(&two_host_json(true, lender_iommu, "quadro-k420")).unwrap()
}

/// three-host-cluster.yaml (000 §7.2, Fig 11) plus a local K420 `gpu4` in the borrower (for the
/// first P2P case of 000 §6). `ab_link`: whether lender-a and lender-b are joined.
pub fn three_host_json(a_iommu: bool, b_iommu: bool, ab_link: bool) -> String {
    let ab = if ab_link {
        r#",{"a":"sw-a.d3","b":"ntb-a-c","gen":3,"width":8},{"a":"sw-b.d2","b":"ntb-c-a","gen":3,"width":8},
            {"a":"ntb-a-c.cable","b":"ntb-c-a.cable","gen":3,"width":8,"kind":"cable"}"#
    } else {
        ""
    };
    let ab_ntbs = if ab_link { r#",{"name":"ntb-a-c","profile":"pxh830"},{"name":"ntb-c-a","profile":"pxh830"}"# } else { "" };
    format!(
        r#"{{"name":"three-host-cluster","hosts":[
  {{"name":"borrower","cpu":"intel-xeon-e5","ram":{GIB32},"iommu":true,"root_ports":3}},
  {{"name":"lender-a","cpu":"intel-xeon-e5","ram":{GIB32},"iommu":{a_iommu},"root_ports":3}},
  {{"name":"lender-b","cpu":"intel-xeon-e5","ram":{GIB32},"iommu":{b_iommu},"root_ports":3}}],
 "switches":[{{"name":"sw-a","profile":"pex8796","downstream_ports":4}},{{"name":"sw-a2","profile":"pex8796","downstream_ports":2}},
  {{"name":"sw-b","profile":"pex8796","downstream_ports":4}}],
 "devices":[{{"name":"gpu0","profile":"quadro-k420"}},{{"name":"gpu1","profile":"quadro-k420"}},{{"name":"gpu2","profile":"quadro-k420"}},
  {{"name":"gpu3","profile":"quadro-k420"}},{{"name":"gpu4","profile":"quadro-k420"}}],
 "ntbs":[{{"name":"ntb-b-a","profile":"pxh830"}},{{"name":"ntb-b-b","profile":"pxh830"}},{{"name":"ntb-a-b","profile":"pxh830"}},
  {{"name":"ntb-c-b","profile":"pxh830"}}{ab_ntbs}],
 "links":[{{"a":"borrower.rp0","b":"ntb-b-a","gen":3,"width":8}},{{"a":"borrower.rp1","b":"ntb-b-b","gen":3,"width":8}},
  {{"a":"borrower.rp2","b":"gpu4","gen":2,"width":16}},
  {{"a":"lender-a.rp0","b":"sw-a","gen":3,"width":16}},{{"a":"sw-a.d0","b":"gpu0","gen":2,"width":16}},
  {{"a":"sw-a.d1","b":"gpu1","gen":2,"width":16}},{{"a":"sw-a.d2","b":"ntb-a-b","gen":3,"width":8}},
  {{"a":"lender-a.rp1","b":"sw-a2","gen":3,"width":16}},{{"a":"sw-a2.d0","b":"gpu2","gen":2,"width":16}},
  {{"a":"lender-b.rp0","b":"sw-b","gen":3,"width":16}},{{"a":"sw-b.d0","b":"gpu3","gen":2,"width":16}},
  {{"a":"sw-b.d1","b":"ntb-c-b","gen":3,"width":8}},
  {{"a":"ntb-b-a.cable","b":"ntb-a-b.cable","gen":3,"width":8,"kind":"cable"}},
  {{"a":"ntb-b-b.cable","b":"ntb-c-b.cable","gen":3,"width":8,"kind":"cable"}}{ab}]}}"#
    )
}

pub fn three_host(a_iommu: bool, b_iommu: bool) -> Cluster {
    Cluster::from_json(&three_host_json(a_iommu, b_iommu, true)).unwrap()
}

/// The unmodified driver: written only against the kernel interface, the same code for a local
/// and a borrowed device. It enables bus mastering, writes a doorbell register in BAR0, allocates
/// a receive buffer and maps it for the device. Returns (buffer address, bus address).
pub fn driver_probe(os: &mut HostOs, dev: DevId, len: u64) -> HResult<(u64, u64)> {
    os.pci_set_master(dev)?;
    let regs = os.pci_iomap(dev, 0)?;
    os.write(regs + 0x100, &0xfeed_f00d_u32.to_le_bytes())?;
    let buf = os.kmalloc(len)?;
    let dma = os.dma_map_single(dev, buf, len, DmaDir::FromDevice)?;
    Ok((buf, dma))
}

/// The device "DMA engine": the function writes `data` at a bus address. Returns the failure, if any.
pub fn device_write(c: &mut Cluster, dev_name: &str, dma: u64, data: &[u8]) -> Option<devlend_fabric::route::Failure> {
    let f = c.fabric.func_id(dev_name).unwrap();
    let (n, fail) = c.fabric.write(Requester::Func(f), dma, data);
    assert!(fail.is_some() || n == data.len());
    fail
}

pub fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Bytes of a BAR as its own host's CPU reads them.
pub fn bar_bytes(c: &mut Cluster, dev_name: &str, bar: u8, off: u64, len: usize) -> Vec<u8> {
    let f = c.fabric.func_id(dev_name).unwrap();
    let host = c.fabric.func_host(f);
    let addr = c.fabric.resolve_expr(&format!("{dev_name}.bar{bar}")).unwrap() + off;
    let (v, fail) = c.fabric.read(Requester::Cpu(host), addr, len);
    assert_eq!(fail, None);
    v
}

/// What a device does to raise MSI-X entry `entry` (PCIe 3.0 §6.1.4): read the entry from its
/// table in BAR 0 and, unless MSI-X is off or the entry is masked, write the message data to the
/// message address as itself. Returns the write's failure, or None when it was delivered (or
/// nothing was sent: see the bool).
pub fn device_msi(c: &mut Cluster, dev_name: &str, entry: u16) -> (bool, Option<devlend_fabric::route::Failure>) {
    let f = c.fabric.func_id(dev_name).unwrap();
    let e = bar_bytes(c, dev_name, 0, MSIX_TABLE_OFFSET + 16 * entry as u64, 16);
    let w = |i: usize| u32::from_le_bytes(e[i..i + 4].try_into().unwrap());
    let addr = w(0) as u64 | (w(4) as u64) << 32;
    let enabled = c.fabric.config_state(f).msix_control & MSIX_ENABLE != 0;
    if !enabled || w(12) & 1 != 0 || addr == 0 {
        return (false, None);
    }
    let (_, fail) = c.fabric.write(Requester::Func(f), addr, &w(8).to_le_bytes());
    (true, fail)
}

/// The MSI-X table entry of a device as its own host reads it: (address, data, masked).
pub fn msix_entry(c: &mut Cluster, dev_name: &str, entry: u16) -> (u64, u32, bool) {
    let e = bar_bytes(c, dev_name, 0, MSIX_TABLE_OFFSET + 16 * entry as u64, 16);
    let w = |i: usize| u32::from_le_bytes(e[i..i + 4].try_into().unwrap());
    (w(0) as u64 | (w(4) as u64) << 32, w(8), w(12) & 1 != 0)
}
