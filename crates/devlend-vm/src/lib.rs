//! # devlend-vm: Device Lending to virtual machines (seed 000 §5, §6, §7.3, §8)
//!
//! A hypervisor model on the simulated hosts, first slice of the VM issue:
//!
//! - [`layout`]: the x86 guest-physical layout (low memory, high memory from 4 GiB, PCI holes);
//! - [`vm`]: a VM with its RAM on scattered host chunks (the EPT for RAM), its guest page
//!   allocator, its devices and their guest-physical BARs, and the §5 memory probe;
//! - [`guest`]: [`GuestOs`], the guest kernel: the same `devlend_host::Os` interface drivers are
//!   written against, so devlend-drivers' GPU driver runs in the guest unmodified;
//! - [`timed`]: [`GuestKernel`] (a VM's kernel for workloads' threads) and [`GuestThreadOs`], that kernel on a thread of the one clock (its CPU accesses
//!   through the EPT, timed as the host CPU's), and [`timed::on_machine`];
//! - [`irq_clock`]: the VM interrupt path as a chain of events on the hypervisor's threads;
//! - [`vmm`] and `attach`: [`Vmm`], VFIO pass-through of local devices (VMLoc) and the mediated
//!   path for remote devices (VMRem, borrow on bus-master enable, lender-side IOMMU mapping the
//!   guest-physical addresses onto the NTB window), peer-to-peer at guest addresses (§6), hot-add,
//!   hot-remove and shutdown with everything undone;
//! - [`fixtures`]: the expansion-chassis VM testbed (two GPUs passed through, VMLoc or VMRem)
//!   that D4-D6 (`devlend-experiments`), the attack suite and the interrupt tests build on;
//! - [`config`]: config-space and MSI-X table virtualization (what a guest may write, what the
//!   hypervisor refuses and records);
//! - [`irq`]: interrupts (000 §5, §8): VFIO's eventfd path, the mediated path's lender-side
//!   handler forwarding through the NTB to the borrower's eventfd, legacy INTx for VMs, each
//!   timed on the machine only, by [`irq_clock`] ([`params`]: the `[vm]` software costs);
//! - [`describe`]: VMs from a topology's `vms` section, on any topology;
//! - [`unplug`]: a device's removal forwarded into the guest that has it (the guest driver's
//!   `remove`, after its host's);
//! - `migrate`: cold migration of a VM with its devices (000 §8, `Vmm::migrate`);
//! - [`attacks`]: the named attack suite (DMA outside the guest, into another VM, stale after
//!   hot-remove; BAR relocation, MSI-X table redirection, Bus Master of another function;
//!   a device's MSI write into another VM's interrupt, blocked by interrupt remapping).
//!
//! The paper figures' procedures on VMs (D4-D6) live in `devlend-experiments`. Not modelled: guest-side
//! BAR moves, plain MSI, the time of INTx's EOI handshake (its masking is modelled), live migration.

mod attach;
pub mod attacks;
pub mod config;
pub mod describe;
pub mod error;
pub mod fixtures;
pub mod guest;
mod held;
pub mod irq;
pub mod irq_clock;
pub mod layout;
mod migrate;
mod msi_attacks;
pub mod params;
pub mod timed;
pub mod unplug;
pub mod vm;
pub mod vmm;

pub use error::{Anomaly, RunError, SetupError};
pub use guest::GuestOs;
pub use held::Held;
pub use layout::Layout;
pub use timed::{GuestKernel, GuestThreadOs};
pub use vm::{GuestDev, Path, Vm, VmId};
pub use vmm::Vmm;
