//! devlend-engine's integration tests in one binary: one module per topic, one link for all of them (see README, "Testing").
//! Run one topic with `cargo test -p devlend-engine --test it <module>::`.

mod credits;
mod half_duplex;
mod link_layer;
mod params;
mod pcie_model;
mod protocol;
mod streams;
mod ties;
mod transfers;
