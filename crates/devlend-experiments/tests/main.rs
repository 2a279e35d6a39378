//! devlend-experiments's integration tests as one test binary, each file a module: one link of the
//! dependency tree for the crate instead of one per file (`autotests = false` and one `[[test]]`
//! in Cargo.toml). A new test file is added here.

mod current;
mod gpu;
mod mechanisms;
mod nvme;
mod rdma;
mod vm_d4;
mod vm_d6;
