//! devlend-engine's integration tests as one test binary, each file a module: one link of the
//! dependency tree for the crate instead of one per file (`autotests = false` and one `[[test]]`
//! in Cargo.toml). A new test file is added here.

mod credits;
mod half_duplex;
mod link_layer;
mod params;
mod pcie_model;
mod protocol;
mod streams;
mod ties;
mod transfers;
