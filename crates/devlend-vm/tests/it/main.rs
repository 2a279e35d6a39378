//! devlend-vm's integration tests in one binary: one module per topic, one link for all of them (see README, "Testing").
//! Run one topic with `cargo test -p devlend-vm --test it <module>::`.

mod attacks;
mod describe;
mod errors;
mod interrupts;
mod isolation;
mod migration;
mod timeouts;
