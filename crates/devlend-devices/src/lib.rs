//! # devlend-devices: devices and their drivers
//!
//! The devices layer of devlend, above the host software (`devlend-host`: the kernel interfaces
//! the drivers use, and the `Cluster` world of `gpu_run` and `nvme_run`), the engine, the fabric
//! and the wire (see the README's architecture section). The device models themselves (GPU and
//! NVMe controller) are generic over the machine's world (`devlend_engine::machine::World`): they
//! ask it for nothing but the fabric. A device model reads its registers from its BARs, moves data with DMA
//! through the fabric as its own requester (so IOMMUs, NTBs and Device Lending apply), and posts
//! completions and MSI-X interrupts the same way. Devices are actors on the engine's one clock
//! (`devlend_engine::machine`), drivers run on its threads (`devlend_host::ThreadOs`, or a VM's
//! guest kernel in `devlend-vm`).
//!
//! The NVMe controller ([`nvme::Controller`]) and driver ([`nvme_driver::Driver`]) follow the
//! NVM Express 1.3 specification; the GPU ([`gpu::Gpu`], [`gpu_driver::Driver`]) has a copy
//! engine, semaphores and device-initiated stores and loads, enough for 000 §7.1-7.2. Drivers see
//! the host only through `devlend_host::HostOs`: the same driver code runs against a local device
//! and a borrowed one (000 §4: the driver does not know the DMA addresses it hands out are
//! far-side). [`gpu_run`] and [`nvme_run`] put the devices and a host's thread on one machine;
//! the papers' procedures that use them live in devlend-experiments. Errors are typed
//! ([`error::DeviceError`]), naming the device, address or parameter they concern.

pub mod error;
pub mod gpu;
pub mod gpu_actor;
pub mod gpu_driver;
pub mod gpu_fifo;
pub mod gpu_kernel;
pub mod gpu_run;
pub mod ntb_xeon;
pub mod nvme;
pub mod nvme_driver;
pub mod nvme_run;
