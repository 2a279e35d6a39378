//! devlend-host's integration tests in one binary: one module per topic, one link for all of them (see README, "Testing").
//! Run one topic with `cargo test -p devlend-host --test it <module>::`.

mod common;
mod faults;
mod forged_msi;
mod interrupts;
mod three_host;
mod timed;
mod two_host;
