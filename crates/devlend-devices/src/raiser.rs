//! A device model that only interrupts (PCIe 4.0 §6.1: MSI-X and INTx emulation), used by the VM
//! interrupt path's tests and 000 §5/§8's interrupt latencies: a write to [`RAISE`] in its BAR 0
//! makes it interrupt as itself at that moment, unless masked. With MSI-X on, its entry's message
//! is a DMA write on the links; with MSI-X off, an Assert_INTx message (a 4-byte message TLP
//! upstream to its root, `Cx::message_to_root`) asserts its line at its host's root when it
//! arrives. Both wait behind the data on the links.
//!
//! It is generic over its world through [`Interrupts`]: what it asks of it is its MSI-X entry's
//! message (or that MSI-X is off) and the assertion of its INTx line, which the outer crate that
//! owns the interrupt routes implements (`devlend-vm`'s `irq_clock`).

use devlend_engine::machine::{Cx, Device, FlowDone, World};
use devlend_engine::queue::Ps;
use devlend_fabric::model::FuncId;
use devlend_wire::Tlp;
use std::marker::PhantomData;

/// Where a [`Raiser`] is told to interrupt: a write to BAR 0 at this offset (a register the
/// profiles leave unused; devlend's own, as the GPU's register map is).
pub const RAISE: u64 = 0x800;

/// The interrupt a function sends for an MSI-X entry (`pci_msi`'s view of its table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqMessage {
    /// MSI-X is off: the function asserts INTx.
    Intx,
    /// The entry's message: write `data` at `addr` as the function.
    Msi { addr: u64, data: u32 },
}

/// What an interrupting device asks of its world `W`.
pub trait Interrupts<W> {
    /// The message `func` sends for MSI-X entry `entry`; None: masked, or no route (nothing is sent).
    fn message(world: &mut W, func: FuncId, entry: u16) -> Option<IrqMessage>;
    /// `func`'s Assert_INTx message has reached its root: the line is asserted.
    fn assert_intx(world: &mut W, func: FuncId);
}

/// The interrupt-only device, raising MSI-X entry `entry` (or INTx); `sent` records when it sent each.
pub struct Raiser<I> {
    pub entry: u16,
    pub sent: Vec<Ps>,
    irq: PhantomData<I>,
}

impl<I> Raiser<I> {
    pub fn new(entry: u16) -> Raiser<I> {
        Raiser { entry, sent: Vec::new(), irq: PhantomData }
    }
}

/// The token of a [`Raiser`]'s Assert_INTx message (its MSI-X writes carry 0).
const ASSERT_INTX: u64 = 1;

impl<W: World, I: Interrupts<W> + 'static> Device<W> for Raiser<I> {
    fn mmio_write(&mut self, cx: &mut Cx<W>, bar: u8, offset: u64, _tlp: &Tlp) {
        if (bar, offset) != (0, RAISE) {
            return;
        }
        let func = cx.func();
        let sent = match I::message(cx.world(), func, self.entry) {
            Some(IrqMessage::Msi { addr, data }) => cx.dma_write(addr, data.to_le_bytes().to_vec(), 0).is_ok(),
            Some(IrqMessage::Intx) => cx.message_to_root(ASSERT_INTX).is_ok(),
            None => false,
        };
        if sent {
            self.sent.push(cx.now());
        }
    }

    /// The Assert_INTx message has reached the root: the line is asserted (unless a fault
    /// stopped it on the way).
    fn dma_done(&mut self, cx: &mut Cx<W>, done: FlowDone) {
        if done.token == ASSERT_INTX && done.fault.is_none() {
            let func = cx.func();
            I::assert_intx(cx.world(), func);
        }
    }
}
