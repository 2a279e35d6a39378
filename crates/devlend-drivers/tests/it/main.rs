//! devlend-drivers's integration tests in one binary: one module per topic, one link for all of them (see README, "Testing").
//! Run one topic with `cargo test -p devlend-drivers --test it <module>::`.

mod gpu_copy;
mod gpu_errors;
mod ntb_xeon;
mod nvme_errors;
mod nvme_queues;
