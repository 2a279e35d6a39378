//! devlend-experiments's integration tests in one binary: one module per topic, one link for all of them (see README, "Testing").
//! Run one topic with `cargo test -p devlend-experiments --test it <module>::`.

mod current;
mod gpu;
mod mechanisms;
mod nvme;
mod rdma;
mod vm_d4;
mod vm_d6;
