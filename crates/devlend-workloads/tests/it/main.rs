//! devlend-workloads's integration tests in one binary: one module per topic, one link for all of them (see README, "Testing").
//! Run one topic with `cargo test -p devlend-workloads --test it <module>::`.

mod nic;
mod poison;
mod scenario;
mod service;
mod service_copy;
mod vm_faults;
