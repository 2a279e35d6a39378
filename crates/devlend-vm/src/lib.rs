//! # devlend-vm: Device Lending to virtual machines (seed 000 §5, §6, §7.3, §8)
//!
//! A hypervisor model on the simulated hosts, first slice of the VM issue:
//!
//! - [`layout`]: the x86 guest-physical layout (low memory, high memory from 4 GiB, PCI holes);
//! - [`vm`]: a VM with its RAM on scattered host chunks (the EPT for RAM), its guest page
//!   allocator, its devices and their guest-physical BARs, and the §5 memory probe;
//! - [`guest`]: [`GuestOs`], the guest kernel: the same `devlend_host::Os` interface drivers are
//!   written against, so devlend-devices' GPU driver runs in the guest unmodified;
//! - [`vmm`] and `attach`: [`Vmm`], VFIO pass-through of local devices (VMLoc) and the mediated
//!   path for remote devices (VMRem, borrow on bus-master enable, lender-side IOMMU mapping the
//!   guest-physical addresses onto the NTB window), peer-to-peer at guest addresses (§6), hot-add,
//!   hot-remove and shutdown with everything undone;
//! - [`d4`]: the D4 workloads of 000 §7.3 (GPU-to-GPU bandwidth and ping-pong in a VM).
//!
//! Not yet: interrupts (the eventfd path, INTx), cold migration, config-space virtualization
//! (BAR registers and the attack suite's config-space cases), NVMe in a VM (D5's VM rows), D6.

mod attach;
pub mod attacks;
pub mod config;
pub mod d4;
pub mod d6;
pub mod guest;
mod held;
mod migrate;
pub mod irq;
pub mod layout;
pub mod params;
pub mod vm;
pub mod vmm;

pub use guest::GuestOs;
pub use layout::Layout;
pub use vm::{GuestDev, Path, Vm, VmId};
pub use vmm::Vmm;
