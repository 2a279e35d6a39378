//! devlend-workloads's integration tests as one test binary, each file a module: one link of the
//! dependency tree for the crate instead of one per file (`autotests = false` and one `[[test]]`
//! in Cargo.toml). A new test file is added here.

mod nic;
mod poison;
mod scenario;
mod vm_faults;
