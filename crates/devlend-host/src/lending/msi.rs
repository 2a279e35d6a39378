//! Interrupts of a borrowed device: the reverse mapping for MSI (000 §4: "The lender is
//! responsible for setting up reverse mappings for DMA and MSI"; Fig 4: "it is also possible to
//! map local resources for the remote device, allowing it to write MSI interrupts ... across the
//! NTB"). Legacy INTx is not supported, as in the paper (000 §4, footnote 2: "they cannot be
//! remapped over the NTB").
//!
//! An MSI/MSI-X interrupt is a memory write of the message data to the message address (000
//! §2.1). The borrower's message address is its own MSI page (x86: 0xFEE0_0000 with destination
//! APIC ID 0, Intel SDM vol. 3 §10.11.1), which the device in the lender cannot reach; so:
//! - the lender maps the borrower's MSI page through its NTB: a LUT segment (else a whole window)
//!   of the lender adapter `la`, translated by the borrower's adapter `bb` straight onto the MSI
//!   page. Not onto an IOVA: the borrower's root complex recognises the MSI range before DMA
//!   remapping (VT-d 3.0 §3.14: requests to 0xFEEx_xxxx "are not subjected to DMA remapping"),
//!   which is what the fabric's router does (an upstream write into `Host.msi` is an interrupt,
//!   looked at before the IOMMU), so the borrower's IOMMU needs no entry for it. Interrupt
//!   remapping is not modelled (nor, in 000, used). A LUT segment is larger than a page (8 MiB
//!   with the pxh830 profile): past the MSI page it reaches the rest of the borrower's MSI range
//!   and what lies above it, which no RAM or device claims; without interrupt remapping only the
//!   table entry keeps a device to its own vector, on real hardware as here. One mapping per NTB
//!   pair, shared by every device lent over it, made when the borrower's driver first requests
//!   an interrupt for such a device and undone with the last one (or when the device is
//!   returned);
//! - under Rem-IOMMU (lender IOMMU on) the lender-side address is also mapped one-to-one in the
//!   device's own domain, like every address handed to the driver (see `lending`), for as long
//!   as the device has a vector;
//! - the borrower writes the lender-side address and its own vector into the device's MSI-X
//!   table (`HostOs::request_irq`); the driver never sees the difference.

use super::windows::Windows;
use super::{atomically, map_held, DevDomain, Held, LendMsi, LendState, Shared};
use crate::error::{BadLend, HResult, HostError};
use crate::kernel::PAGE;
use devlend_fabric::model::FuncId;
use devlend_fabric::Fabric;

impl LendState {
    /// The lender-side address at which the borrowed device `func` reaches its borrower's MSI
    /// page; takes one reference (one interrupt vector) until `msi_release`.
    pub fn msi_acquire(&mut self, f: &mut Fabric, func: FuncId) -> HResult<u64> {
        let l = self.lends.get_mut(&func).ok_or_else(|| HostError::from(BadLend::NotBorrowed { device: f.func(func).name.clone() }))?;
        if let Some(m) = &mut l.msi {
            m.users += 1;
            return Ok(m.addr);
        }
        let (la, bb, dev_domain) = (l.la, l.bb, l.dev_domain);
        let (addr, held) = atomically!(self, f, held, self.open_msi(f, la, bb, dev_domain, &mut held))?;
        if let Some(l) = self.lends.get_mut(&func) {
            l.msi = Some(LendMsi { addr, users: 1, held });
        }
        Ok(addr)
    }

    fn open_msi(&mut self, f: &mut Fabric, la: u32, bb: u32, dev_domain: DevDomain, held: &mut Vec<Held>) -> HResult<u64> {
        held.push(self.acquire_msi_win(f, la, bb)?);
        let addr = self.msi_wins.get(&(la, bb)).map(|s| s.addr).ok_or_else(|| HostError::from(BadLend::MsiWindowVanished { la, bb }))?;
        if let Some((host, d)) = dev_domain {
            held.push(map_held(f, host, d, addr, addr, PAGE, true)?);
        }
        Ok(addr)
    }

    /// Drop one vector's reference; the last one undoes the mapping.
    pub fn msi_release(&mut self, f: &mut Fabric, func: FuncId) {
        let Some(l) = self.lends.get_mut(&func) else { return };
        let Some(m) = &mut l.msi else { return self.anomalies.push(format!("MSI of {} released without a mapping", f.func(func).name)) };
        m.users -= 1;
        if m.users == 0 {
            if let Some(m) = l.msi.take() {
                self.release_all(f, m.held);
            }
        }
    }

    /// Take a reference to the mapping of `bb`'s host's MSI page through the windows of `la`.
    fn acquire_msi_win(&mut self, f: &mut Fabric, la: u32, bb: u32) -> HResult<Held> {
        if let Some(s) = self.msi_wins.get_mut(&(la, bb)) {
            s.refs += 1;
            return Ok(Held::MsiWin(la, bb));
        }
        let borrower = f.ntb(bb).host;
        let page = f.host(borrower).msi.start & !(PAGE - 1);
        let what = format!("the MSI page of {}", f.host(borrower).name);
        let m = self.windows.map_range(f, la, bb, page, PAGE, &what)?;
        let addr = match Windows::addr(f, &m) {
            Ok(a) => a,
            Err(e) => {
                let r = self.windows.unmap(f, &m);
                self.note("unmap window", r);
                return Err(e);
            }
        };
        self.msi_wins.insert((la, bb), Shared { addr, refs: 1, inner: vec![Held::Win(m)] });
        Ok(Held::MsiWin(la, bb))
    }
}
