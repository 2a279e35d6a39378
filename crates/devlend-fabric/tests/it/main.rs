//! devlend-fabric's integration tests in one binary: one module per topic, one link for all of them (see README, "Testing").
//! Run one topic with `cargo test -p devlend-fabric --test it <module>::`.

mod addr_host;
mod audit;
mod cluster_switch;
mod layout;
mod properties;
