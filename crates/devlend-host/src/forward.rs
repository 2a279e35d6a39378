//! Interrupt hooks for software other than a device's own driver: the VM layer's forwarding of
//! a device's interrupts (000 §5; §8 "Interrupt forwarding") and legacy INTx.
//!
//! - Vectors whose handler is not a driver's `request_irq` (`alloc_vector`, `free_vector`): the
//!   lender-side handler of a device lent to a VM's host (000 §5: the mediated parent "sets up
//!   an interrupt handler on the lender-side"), and the borrower's relay vector that this
//!   handler notifies ("This handler must then notify the borrower, which in turn notifies the
//!   hypervisor using eventfd"). The caller programs the device's MSI-X table itself.
//! - The path from a lender's CPUs to its borrower's MSI page for that notification: the
//!   mapping `lending::msi` keeps for borrowed devices (`msi_forward_acquire`, `_release`).
//! - Legacy INTx (PCI Local Bus 3.0 §2.2.6; PCIe Base 3.0 §2.2.8.1): a function's Assert_INTx
//!   message goes upstream to the root complex of its own PCIe tree; an NTB forwards memory
//!   requests, not messages. So only the host a function sits in can take its INTx, and a
//!   borrower's driver asking for the INTx of a borrowed device is refused (000 §4 footnote 2;
//!   000 §5: legacy interrupts are "not supported when the borrower is a physical machine").
//!   Lines are counted per function; sharing and IOAPIC routing are not modelled.

use crate::cluster::{Cluster, HostRef};
use crate::error::{BadIrq, HResult, HostError, InUse, InvalidRequest, NtbUse, OutOf};
use crate::irq::{IntxLine, IrqDesc};
use crate::kernel::{DevId, Origin};
use crate::os::HostOs;
use devlend_fabric::intremap::{remappable_addr, Irte, Source};
use devlend_fabric::model::FuncId;

impl Cluster {
    /// A vector of `host` for the handler `handler` of interrupts from `dev` (MSI-X entry
    /// `entry`) whose messages arrive at `msg_addr` as requester `source`; the device's table
    /// (or the CPU that notifies) is the caller's business. Returns the vector and the address
    /// its messages must be written to: with interrupt remapping on in `host`, the
    /// remappable-format address of an entry raising the vector that validates `source` (VT-d
    /// §5.1.4, SVT 01); `msg_addr` itself otherwise.
    pub fn alloc_vector(
        &mut self,
        host: impl HostRef,
        dev: DevId,
        entry: u16,
        handler: u32,
        (msg_addr, source): (u64, devlend_wire::Bdf),
    ) -> HResult<(u8, u64)> {
        let h = host.resolve(self)?;
        let k = &mut self.kernels[h as usize];
        k.device(dev)?;
        let Some(vector) = k.irqs.alloc() else {
            return Err(OutOf::Vector { host: k.name.clone() }.into());
        };
        let irte = match self.fabric.intr_remap_on(h) {
            true => Some(self.fabric.irte_alloc(h, Irte { vector, source: Source::Rid(source) })?),
            false => None,
        };
        let addr = irte.map_or(msg_addr, |handle| remappable_addr(msg_addr, handle));
        self.kernels[h as usize].irqs.insert(IrqDesc { vector, dev, entry, handler, msg_addr: addr, count: 0, irte });
        Ok((vector, addr))
    }

    /// Release a vector from `alloc_vector` (and its remapping entry), after taking what is
    /// pending for it.
    pub fn free_vector(&mut self, host: impl HostRef, vector: u8) -> HResult<()> {
        let h = host.resolve(self)?;
        self.os(h)?.handle_irqs();
        let k = &mut self.kernels[h as usize];
        let d = k.irqs.remove(vector).ok_or_else(|| HostError::from(BadIrq::VectorNotAllocated { host: k.name.clone(), vector }))?;
        if let Some(handle) = d.irte {
            self.fabric.irte_free(h, handle);
        }
        Ok(())
    }

    /// The address at which the lender's CPUs reach the MSI page of the host that borrowed
    /// `func` (through the lender's NTB); one reference until `msi_forward_release`.
    pub fn msi_forward_acquire(&mut self, func: FuncId) -> HResult<u64> {
        self.lending.msi_acquire(&mut self.fabric, func)
    }

    pub fn msi_forward_release(&mut self, func: FuncId) {
        self.lending.msi_release(&mut self.fabric, func)
    }

    /// Put handler `handler` on the INTx line of `func` in the host the function sits in.
    pub fn request_intx_line(&mut self, func: FuncId, handler: u32) -> HResult<()> {
        let host = self.fabric.func_host(func);
        let name = self.fabric.func(func).name.clone();
        let irqs = &mut self.kernels[host as usize].irqs;
        if let Some(l) = irqs.intx.get(&func) {
            return Err(InUse::IntxHandler { device: name.to_string(), handler: l.handler }.into());
        }
        irqs.intx.insert(func, IntxLine { handler, count: 0 });
        Ok(())
    }

    pub fn free_intx_line(&mut self, func: FuncId) -> HResult<()> {
        let host = self.fabric.func_host(func);
        match self.kernels[host as usize].irqs.intx.remove(&func) {
            Some(_) => Ok(()),
            None => Err(BadIrq::NoIntxHandler { device: self.fabric.func(func).name.clone() }.into()),
        }
    }

    /// `func` asserts its INTx line: the message reaches the root complex of its own host, whose
    /// handler on the line (if any) takes it. Returns that handler; None counts as unhandled.
    pub fn assert_intx(&mut self, func: FuncId) -> Option<u32> {
        let host = self.fabric.func_host(func);
        let irqs = &mut self.kernels[host as usize].irqs;
        match irqs.intx.get_mut(&func) {
            Some(l) => {
                l.count += 1;
                Some(l.handler)
            }
            None => {
                irqs.intx_unhandled += 1;
                None
            }
        }
    }
}

impl HostOs<'_> {
    /// A driver's `request_irq` on the legacy INTx line of a device (`pci_intx`). Refused for a
    /// borrowed device: its INTx cannot reach this host (see the module docs).
    pub fn request_intx(&mut self, dev: DevId, handler: u32) -> HResult<()> {
        let d = self.device(dev)?;
        let (func, name) = (d.func, d.name.clone());
        if let Origin::Borrowed { lender } = d.origin {
            let l = &self.c.fabric.host(lender).name;
            return Err(BadIrq::BorrowedIntx { device: name, lender: l.clone() }.into());
        }
        if d.is_ntb {
            return Err(InvalidRequest::NtbAdapter { device: name, refused: NtbUse::Interrupts }.into());
        }
        if let Some(to) = d.lent_to {
            return Err(InUse::LentTo { device: name.to_string(), borrower: self.c.fabric.host(to).name.clone() }.into());
        }
        self.c.request_intx_line(func, handler)
    }

    pub fn free_intx(&mut self, dev: DevId) -> HResult<()> {
        let func = self.device(dev)?.func;
        self.c.free_intx_line(func)
    }
}
