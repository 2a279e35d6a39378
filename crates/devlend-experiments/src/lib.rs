//! # devlend-experiments: the paper experiments' Rust side
//!
//! The outermost Rust layer: each figure's testbed construction and measurement procedure,
//! called by the Python experiments (`python/devlend/experiments/`) through devlend-py.
//! - [`gpu`]: 000 §7.1-7.2 natively (D1's cudaMemcpy, D2's GPU-to-GPU copy, D3's ping-pong);
//!   [`nvme`]: 000 §7.4's block reads natively (D5's native rows);
//! - [`rdma`]: 003 Figs 8-9 (R1, R2), the Gen3/Gen4 extension (RX) and issue 6's ntb_perf and
//!   ntb_pingpong figures on the PEX8749 testbed;
//! - [`xenib`]: 004 §4's micro-benchmarks (X1-X4); [`xcmp`]: the comparison beyond 004;
//! - [`hypertrio`]: 002's H1 and H2 grids and `grid` for H3, H4 and sweeps;
//! - [`vm`]: 000 §7.3-7.5 in a VM on the expansion-chassis testbed (`devlend_vm::fixtures`): D4's
//!   GPU-to-GPU bandwidth, ping-pong, RAM-bounce path and interrupt latency, D5's NVMe reads, D6's
//!   input copy, and D6's whole epoch on one machine in all five set-ups (`vm::epoch`).
//!
//! Where a piece of code lives: a *mechanism* (a device, a driver, a library such as put/get, a
//! hypervisor's path) lives in its mechanism crate; a *workload* (something a user runs on any
//! topology, on the one machine shared with other workloads: a DMA stream, a GPU copy or
//! ping-pong, an fio job, the ntb_perf tool) lives in devlend-workloads; a *paper figure's
//! procedure* (a named testbed, the sizes and repetitions of a figure, a shortcut that is valid
//! only on an otherwise idle fabric, such as ntb_perf's one timed pass or ntb_pingpong's sum of
//! latencies) lives here. Nothing in a mechanism crate or in devlend-workloads depends on this
//! crate.

pub mod gpu;
pub mod hypertrio;
pub mod nvme;
pub mod rdma;
pub mod vm;
pub mod xcmp;
pub mod xenib;
