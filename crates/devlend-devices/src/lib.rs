//! # devlend-devices: the device models
//!
//! The devices layer of devlend, above the engine, the fabric and the wire (see the README's
//! architecture section); it knows nothing of hosts or drivers (those are `devlend-host` and
//! `devlend-drivers`, outside it). The device models (GPU, NVMe controller, the Intel Xeon NTB's
//! register face) are generic over the machine's world (`devlend_engine::machine::World`): they
//! ask it for nothing but the fabric. A device model reads its registers from its BARs, moves data
//! with DMA through the fabric as its own requester (so IOMMUs, NTBs and Device Lending apply), and
//! posts completions and MSI-X interrupts the same way. Devices are actors on the engine's one
//! clock (`devlend_engine::machine`).
//!
//! The NVMe controller ([`nvme::Controller`]) follows the NVM Express 1.3 specification; the GPU
//! ([`gpu::Gpu`]) has a copy engine, semaphores and device-initiated stores and loads, enough for
//! 000 §7.1-7.2. The PLX PEX8749's DMA engine ([`plx_dma::DmaEngine`], 003 §3-4) and its NT
//! port's doorbell and scratchpad registers ([`plx_ntregs::NtRegs`]) serve 003's RDMA library
//! (`devlend-rdma`, the driver side). Errors are typed ([`error::ModelError`]), naming the function, address or
//! parameter they concern. HyperTRIO's hyper-tenant NIC ([`nic::Nic`], 002) runs its
//! pipeline (`devlend-hypertrio`) at the round trip its DMA reads see on the machine. The
//! interrupt-only [`raiser::Raiser`] sends MSI-X or INTx as its world's [`raiser::Interrupts`] say.
//! 004's InfiniHost HCA ([`ib_hca::Hca`]) runs its send and receive engines and its 4X link to
//! the other HCA over the tables its world's [`ib_hca::HcaWorld`] gives it (`devlend-xenib`'s
//! testbed, whose drivers fill them).

pub mod error;
pub mod gpu;
pub mod gpu_kernel;
pub mod ib_hca;
pub mod nic;
pub mod ntb_xeon;
pub mod nvme;
pub mod plx_dma;
pub mod plx_ntregs;
pub mod raiser;
