//! # devlend-xenib: InfiniBand in Xen with device-domain bypass (seed 004, Xen-IB)
//!
//! What is taken from which part of 004 (Huang, Liu, Abali, Panda, OSU-CISRC-10/05-TR63):
//! - [`xen`]: domains, grant-style shared pages, event channels, the device channel (request ring on
//!   a shared page + event channel, 004 §2.1, §3.1) whose one-way latency is Fig 9's "at least
//!   10 us"; the back-end daemon in the device domain and its validation (004 §3.1-3.2).
//! - The HCA of 004 §2.2 (QPs of WQEs, CQs, UAR doorbell pages, the key-indexed TPT, lkey/rkey,
//!   RDMA write and send/receive across the back-to-back 4X link of §4.1, completion events; on
//!   the PCI-X bus of the MHXL-CF128-T) is a device model of devlend-devices
//!   (`devlend_devices::ib_hca`), generic over its world; [`machine`] puts both cards on.
//! - [`hca`]: the world it lives in: the two servers, their domains and the HCA each drives
//!   (implementing the device's `HcaWorld`), the testbed.
//! - [`ops`]: the native driver's operations (Gen2 mthca), run by native Linux, the device domain,
//!   or the back-end for a guest: what its firmware commands do to the HCA's tables.
//! - [`error`]: [`XenIbError`], what a testbed or benchmark that cannot be built or run reports
//!   (a verb's own return code stays the errno-style [`Status`]).
//! - [`verbs`]: the Gen2-style verbs API and its three drivers: native, basic split (§3.1-3.2, with
//!   CQE buffering) and device-domain bypass (§3.3: UAR mapped into the guest, two-stage QP/CQ
//!   creation, registration validated by the back-end).
//!
//! The micro-benchmarks of §4 (X1-X4) and the comparison beyond 004 (xcmp) are procedures of the
//! experiments: devlend-experiments' `xenib` and `xcmp`.
//!
//! Constants: `params/hardware.toml` `[xenib]` and the `mhxl-cf128-t` device profile. The
//! testbed: `python/devlend/topologies/xenib-back-to-back.yaml` ([`hca::TESTBED_JSON`]).

pub mod error;
pub mod hca;
pub mod ops;
pub mod params;
pub mod types;
pub mod verbs;
pub mod xen;

pub use error::{RunFailure, XResult, XenIbError};
pub use hca::World;
pub use types::*;
pub use verbs::{Basic, Bypass, Cpu, Native, Verbs};

use devlend_devices::ib_hca::Hca;
use devlend_engine::machine::Machine;
use std::cell::RefCell;
use std::rc::Rc;

/// A machine on the world: both HCAs as device models, and, with guests under Xen, the
/// back-end daemon as a service thread of domain 0.
pub fn machine(w: World) -> Machine<World> {
    let funcs = [w.nodes[0].func, w.nodes[1].func];
    let guests = w.domains.iter().any(|d| d.kind == hca::DomKind::Guest);
    let mut m = Machine::new(w);
    for (i, f) in funcs.iter().enumerate() {
        m.add_device(*f, Rc::new(RefCell::new(Hca::new(i, funcs[1 - i]))));
    }
    if guests {
        m.spawn_service("xenib-backend", 0, |t| xen::serve(t));
    }
    m
}
