//! # devlend-drivers: the drivers of the device models
//!
//! The host-software layer of devlend's devices (see the README's architecture section), above the
//! device models (`devlend-devices`), the host (`devlend-host`: the kernel interface `Os` the
//! drivers are written against, and the `Cluster` world of `gpu_run` and `nvme_run`), the engine,
//! the fabric and the wire. Drivers run on the engine's threads (`devlend_host::ThreadOs`, or a
//! VM's guest kernel in `devlend-vm`) and see the host only through `devlend_host::Os`: the same
//! driver code runs against a local device and a borrowed one (000 §4: the driver does not know
//! the DMA addresses it hands out are far-side).
//!
//! The NVMe driver ([`nvme_driver::Driver`]) follows the NVM Express 1.3 specification and Linux's
//! `drivers/nvme/host/pci.c`; the GPU driver ([`gpu_driver::Driver`]) programs the GPU model's
//! copy engine and semaphores, enough for 000 §7.1-7.2. [`gpu_run`] and [`nvme_run`] put the
//! devices and a host's thread on one machine; the papers' procedures that use them live in
//! devlend-experiments. [`registry`] lists the device types by their profile's `kind` and what
//! each serves, for the workloads, the Python binding and the topology schema to ask, and per
//! service the function that makes a kind's device and driver ready; [`service`] has one trait
//! per service (block I/O, device copies), which the drivers implement and the workloads are
//! written against. Errors are typed ([`error::DeviceError`], which wraps a device model's
//! `devlend_devices::error::ModelError`), naming the device, address or parameter they concern.

pub mod error;
pub mod gpu_driver;
pub mod gpu_run;
pub mod nvme_driver;
pub mod nvme_run;
pub mod registry;
pub mod service;
