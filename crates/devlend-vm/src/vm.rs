//! A VM: its guest-physical layout (`layout`), the host pages behind its RAM (the EPT, for RAM),
//! the guest kernel's page allocator, and the devices passed through to it with the
//! guest-physical addresses of their BARs (placed by the guest firmware in the PCI holes).
//!
//! Guest RAM is backed by host chunks handed out *scattered*: chunk i of the guest sits on the
//! host chunk `perm(i)` of what the hypervisor allocated (000 §8.1: "A VM may allocate several GB
//! of memory, which may be scattered in physical memory").

use crate::config::VirtCfg;
use crate::irq::GuestIrqs;
use crate::layout::{Layout, CHUNK, GUEST_RESERVED, HIGH_BASE};
use devlend_fabric::model::{FuncId, HostId};
use devlend_host::alloc::{align_up, RangeAlloc};
use devlend_host::{DevId, EptFault};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VmId(pub u32);

/// How a device reaches the VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// VFIO pass-through of a device in the VM's own host (VMLoc).
    Vfio,
    /// Device Lending's mediated device: a device in another host, borrowed on bus-master enable.
    Mdev,
}

#[derive(Clone, Debug)]
pub struct GuestBar {
    pub index: u8,
    pub size: u64,
    /// Where the guest sees the BAR.
    pub gpa: u64,
    /// Where the host's CPUs reach it (the EPT's target); None until the device is attached.
    pub host: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct GuestDev {
    pub id: DevId,
    pub name: String,
    pub func: FuncId,
    pub path: Path,
    pub bars: Vec<GuestBar>,
    /// The hypervisor host's handle of the device (an mdev's only once borrowed).
    pub host_dev: Option<DevId>,
    /// Whether the device is attached: in the VM's IOMMU domain, and bus mastering.
    pub attached: bool,
    /// The guest driver's live DMA mappings (bus address, length).
    pub dma_maps: Vec<(u64, u64)>,
    /// Its config space and MSI-X table as the guest sees them (`config`).
    pub virt: VirtCfg,
}

pub struct Vm {
    pub id: VmId,
    pub name: String,
    pub host: HostId,
    pub layout: Layout,
    /// Guest chunk -> host chunk.
    backing: BTreeMap<u64, u64>,
    pages: RangeAlloc,
    pub devices: BTreeMap<DevId, GuestDev>,
    /// The guest kernel's interrupt vectors.
    pub irqs: GuestIrqs,
    next_dev: u32,
    next32: u64,
    next64: u64,
}

/// A deterministic permutation of n chunks that scatters neighbours apart.
fn scatter(n: usize) -> Vec<usize> {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut stride = (n / 3) | 1;
    while n > 1 && gcd(stride, n) != 1 {
        stride += 2;
    }
    (0..n).map(|i| (i * stride) % n.max(1)).collect()
}

impl Vm {
    /// A VM whose RAM is backed by `host_chunks` (one per [`CHUNK`] of guest RAM).
    pub(crate) fn new(id: VmId, name: &str, host: HostId, layout: Layout, host_chunks: &[u64]) -> Vm {
        let gpas: Vec<u64> = layout.ranges().iter().flat_map(|&(s, e)| (s..e).step_by(CHUNK as usize)).collect();
        let perm = scatter(host_chunks.len());
        let backing = gpas.iter().enumerate().map(|(i, &g)| (g, host_chunks[perm[i]])).collect();
        let free: Vec<(u64, u64)> = layout.ranges().iter().map(|&(s, e)| (s.max(GUEST_RESERVED).min(e), e)).filter(|r| r.0 < r.1).collect();
        let (next32, next64) = (layout.mmio32().0, layout.mmio64_base());
        Vm {
            id,
            name: name.to_string(),
            host,
            layout,
            backing,
            pages: RangeAlloc::new(&free),
            devices: BTreeMap::new(),
            irqs: GuestIrqs::default(),
            next_dev: 0,
            next32,
            next64,
        }
    }

    /// Put the guest's RAM on other host chunks of another host (cold migration); returns the
    /// old host and backing, for `restore` or for copying the image.
    pub(crate) fn rebase(&mut self, host: HostId, host_chunks: &[u64]) -> (HostId, BTreeMap<u64, u64>) {
        let perm = scatter(host_chunks.len());
        let backing = self.backing.keys().enumerate().map(|(i, &g)| (g, host_chunks[perm[i]])).collect();
        let old = std::mem::replace(&mut self.backing, backing);
        (std::mem::replace(&mut self.host, host), old)
    }

    pub(crate) fn restore(&mut self, (host, backing): (HostId, BTreeMap<u64, u64>)) {
        self.host = host;
        self.backing = backing;
    }

    /// KVM pinning one guest page: the host page behind it, if the guest has memory there.
    pub fn pin(&self, gpa: u64) -> Option<u64> {
        let chunk = gpa & !(CHUNK - 1);
        self.backing.get(&chunk).map(|h| h + (gpa - chunk))
    }

    /// 000 §5's probe of the guest's memory layout: pin chunk by chunk from the well-known low
    /// (0) and high (4 GiB) addresses until a pin fails. Returns the (gpa, host) chunks found.
    pub fn probe(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for base in [0, HIGH_BASE] {
            let mut g = base;
            while let Some(h) = self.pin(g) {
                out.push((g, h));
                g += CHUNK;
            }
        }
        out
    }

    pub fn kmalloc(&mut self, len: u64) -> Option<u64> {
        let n = align_up(len.max(1), 4096)?;
        self.pages.alloc(n, 4096)
    }

    pub fn kfree(&mut self, gpa: u64) -> bool {
        self.pages.free(gpa).is_some()
    }

    /// Add a device: its BARs get guest-physical addresses (naturally aligned, 64-bit BARs in
    /// the 64-bit hole), as the guest firmware assigns them.
    pub(crate) fn add_device(&mut self, name: &str, func: FuncId, path: Path, bars: &[(u8, u64, bool)], virt: VirtCfg) -> DevId {
        let id = DevId(self.next_dev);
        self.next_dev += 1;
        let mut gbars = Vec::new();
        for &(index, size, bits64) in bars {
            let next = if bits64 { &mut self.next64 } else { &mut self.next32 };
            let gpa = align_up(*next, size.next_power_of_two()).unwrap_or(*next);
            *next = gpa + size;
            gbars.push(GuestBar { index, size, gpa, host: None });
        }
        let d = GuestDev { id, name: name.to_string(), func, path, bars: gbars, host_dev: None, attached: false, dma_maps: Vec::new(), virt };
        self.devices.insert(id, d);
        id
    }

    /// The EPT: host addresses for [gpa, gpa+len), split at chunk boundaries.
    pub fn translate(&self, gpa: u64, len: usize) -> Result<Vec<(u64, usize)>, EptFault> {
        let end = gpa.checked_add(len as u64).ok_or(EptFault::Overflow { gpa, len: len as u64 })?;
        if self.layout.is_ram(gpa, len as u64) {
            let mut out = Vec::new();
            let mut g = gpa;
            while g < end {
                let n = ((g | (CHUNK - 1)) + 1).min(end) - g;
                out.push((self.pin(g).ok_or_else(|| EptFault::NoBacking { vm: self.name.clone(), gpa: g })?, n as usize));
                g += n;
            }
            return Ok(out);
        }
        for d in self.devices.values() {
            for b in &d.bars {
                if gpa >= b.gpa && end <= b.gpa + b.size {
                    return match b.host {
                        Some(h) => Ok(vec![(h + (gpa - b.gpa), len)]),
                        None => Err(EptFault::BarNotBacked { vm: self.name.clone(), device: d.name.clone(), bar: b.index, gpa: b.gpa }),
                    };
                }
            }
        }
        Err(EptFault::Violation { vm: self.name.clone(), gpa, len: len as u64 })
    }

    /// The guest device whose BAR holds [gpa, gpa+len).
    pub fn bar_holding(&self, gpa: u64, len: u64) -> Option<(DevId, u8)> {
        self.devices.values().find_map(|d| d.bars.iter().find(|b| gpa >= b.gpa && gpa.saturating_add(len) <= b.gpa + b.size).map(|b| (d.id, b.index)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backing_is_scattered_and_the_probe_finds_low_and_high_memory() {
        let layout = Layout::for_ram(4 << 30);
        let n = (layout.ram() / CHUNK) as usize;
        let chunks: Vec<u64> = (0..n as u64).map(|i| (1 << 34) + i * CHUNK).collect();
        let vm = Vm::new(VmId(0), "t", 0, layout, &chunks);
        let (a, b) = (vm.pin(0).unwrap(), vm.pin(CHUNK).unwrap());
        assert_ne!(b, a + CHUNK, "neighbouring guest chunks are not neighbours in the host");
        let p = vm.probe();
        assert_eq!(p.len(), n);
        assert_eq!(p.iter().filter(|(g, _)| *g >= HIGH_BASE).count() as u64, (1 << 30) / CHUNK);
        let mut hs: Vec<u64> = p.iter().map(|x| x.1).collect();
        hs.sort();
        hs.dedup();
        assert_eq!(hs.len(), n, "every host chunk used once");
        assert_eq!(vm.translate(CHUNK - 8, 16).unwrap().len(), 2);
        assert_eq!(vm.translate(3 << 30, 4), Err(EptFault::Violation { vm: "t".into(), gpa: 3 << 30, len: 4 }));
        assert_eq!(vm.translate(u64::MAX, 2), Err(EptFault::Overflow { gpa: u64::MAX, len: 2 }));
    }
}
