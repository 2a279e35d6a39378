//! devlend-rdma's integration tests in one binary: one module per topic, one link for all of them (see README, "Testing").
//! Run one topic with `cargo test -p devlend-rdma --test it <module>::`.

mod rdma;
mod session;
