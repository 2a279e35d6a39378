//! Real Linux on devlend. A User-Mode Linux guest (arch/um) reaches PCI devices through "PCI over
//! virtio" (arch/um/drivers/virt-pci.c): every config access and every MMIO load and store of a
//! device is a `virtio_pcidev` message (include/uapi/linux/virtio_pcidev.h) on a vhost-user
//! socket, the device reads and writes the guest's memory directly (the memory table's fds), and
//! its interrupts go back as MSI messages. This crate is the device side: devlend's models on
//! the engine's clock, their DMA crossing the modelled fabric into the guest's RAM.
//!
//! Time: the engine is the guest's clock (UML's `time-travel=ext:`, this crate's `clock.rs` the
//! controller): every MMIO access, DMA and interrupt takes the time the engine gives it; guest
//! CPU work costs no simulated time (see `clock.rs` and the README's "Real Linux in a guest").

pub mod clock;
pub mod conn;
pub mod engine;
pub mod error;
pub mod guests;
pub mod mem;
pub mod pcidev;
pub mod server;
pub mod timetravel;
pub mod trace;
pub mod vhost;
pub mod vring;

pub use engine::Engine;
pub use error::{UmlError, UmlResult};
pub use guests::{control, DeviceSummary, GuestSpec, GuestSummary, RunSummary};
pub use pcidev::PciFunction;
pub use server::{serve, serve_with_faults, Messages, Summary};
