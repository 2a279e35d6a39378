//! Real Linux on devlend. A User-Mode Linux guest (arch/um) reaches PCI devices through "PCI over
//! virtio" (arch/um/drivers/virt-pci.c): every config access and every MMIO load and store of a
//! device is a `virtio_pcidev` message (include/uapi/linux/virtio_pcidev.h) on a vhost-user
//! socket, the device reads and writes the guest's memory directly (the memory table's fds), and
//! its interrupts go back as MSI messages. This crate is the device side: devlend's models on
//! the engine's clock, their DMA crossing the modelled fabric into the guest's RAM.
//!
//! Time: this first version lets the guest's clock run free (wall clock); each access runs the
//! engine until the work it started is done, so the simulated clock advances by what the fabric
//! and the device take, and guest CPU work costs no simulated time. UML's time-travel mode (the
//! engine as the guest's clock, `time-travel=ext:`) is not yet wired.

pub mod error;
pub mod mem;
pub mod pcidev;
pub mod server;
pub mod vhost;
pub mod vring;

pub use error::{UmlError, UmlResult};
pub use pcidev::NvmeDevice;
pub use server::{serve, Summary};
