//! The ntb_pingpong figure of issue 6: the doorbell and scratchpad bounce of Linux's
//! drivers/ntb/test/ntb_pingpong, timed on the idle fabric (003 §2.2 doorbells and scratchpads,
//! Fig 6). Each ping's time is a sum of idle-fabric latencies, not a run on the machine, so it is
//! a procedure of this figure and not a workload that could share a machine.
//!
//! Semantics taken from the Linux tool (Documentation/driver-api/ntb.rst): the two peers interrupt
//! each other with a doorbell bit mask that is shifted by one each round, starting again from
//! `init_db` once every bit has been shifted out of the NT port's valid doorbell bits; before
//! ringing, each side reads its first scratchpad and writes that value plus one into the peer's
//! first scratchpad; `delay` is the pause between taking the doorbell interrupt and ringing back.
//! Every register access goes through the fabric's NTB registers, so the counter really travels;
//! a link that goes down stops the bounce with [`RdmaError::LinkDown`] naming the ping.
//!
//! Time of one ping (one direction): the sender's scratchpad read (a CPU read of its NT port's
//! register BAR, a round trip), the peer-scratchpad store and the doorbell store (UC stores), the
//! doorbell's MSI into the peer and its interrupt entry ([`Node::notify_ps`]); then the receiver's
//! handler reads and clears its doorbell register (a read round trip and a UC store) and waits
//! `delay`. A round trip is two pings. The Linux tool counts pings; devlend also reports the time.

use devlend_rdma::node::Node;
use devlend_rdma::params::params;
use devlend_rdma::{RResult, RdmaError};
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_wire::Access;

/// The scratchpad the counter travels in (the Linux tool's first scratchpad).
pub const SPAD: usize = 0;

#[derive(Clone, Debug)]
pub struct PingPong {
    pub pings: u32,
    /// The counter as the last receiver read it (one per ping, starting from the first value).
    pub counter: u32,
    /// Doorbell bits of every ping, in order.
    pub bits: Vec<u64>,
    /// One ping from `a` to `b`, by part (ps); `round_trip_ps` adds the ping back from `b`.
    pub steps: Vec<(&'static str, u64)>,
    pub round_trip_ps: u64,
    pub total_ps: u64,
}

fn ferr(e: devlend_fabric::FabricError) -> RdmaError {
    match e {
        devlend_fabric::FabricError::LinkDown { .. } => RdmaError::LinkDown(e.to_string()),
        e => RdmaError::Invalid(e.to_string()),
    }
}

/// Time of one ping from `from` to `to`, by part.
fn ping_steps(f: &mut Fabric, from: &Node, to: &Node, delay_ps: u64) -> RResult<Vec<(&'static str, u64)>> {
    let uc = params().cpu_store.uc_store_ps;
    let read = |f: &mut Fabric, n: &Node| -> RResult<u64> {
        let reg = n.doorbell_reg(f).ok_or_else(|| RdmaError::Invalid("the NT port has no register BAR".into()))?;
        devlend_engine::latency(f, Requester::Cpu(n.host), reg, Access::Read).map_err(|e| RdmaError::Fabric(format!("{e:?}")))
    };
    Ok(vec![
        ("read own scratchpad", read(f, from)?),
        ("write peer scratchpad (UC store)", uc),
        ("doorbell store, MSI, interrupt entry", from.notify_ps(f)),
        ("handler reads doorbell", read(f, to)?),
        ("handler clears doorbell (UC store)", uc),
        ("delay before ringing back", delay_ps),
    ])
}

/// Bounce `pings` doorbells between `a` and `b` (a rings first).
pub fn run(f: &mut Fabric, a: &Node, b: &Node, pings: u32, init_db: u64, delay_ps: u64) -> RResult<PingPong> {
    let valid_bits = f.ntbs[a.ntb as usize].doorbell_bits.min(f.ntbs[b.ntb as usize].doorbell_bits);
    let valid = if valid_bits >= 64 { u64::MAX } else { (1u64 << valid_bits) - 1 };
    if init_db == 0 || init_db & !valid != 0 {
        return Err(RdmaError::Invalid(format!("init_db {init_db:#x}: expected a non-zero mask within the {valid_bits} doorbell bits ({valid:#x})")));
    }
    if pings == 0 {
        return Err(RdmaError::Invalid("pings: expected at least 1".into()));
    }
    let ab = ping_steps(f, a, b, delay_ps)?;
    let ba = ping_steps(f, b, a, delay_ps)?;
    let sum = |s: &[(&str, u64)]| s.iter().map(|x| x.1).sum::<u64>();
    let (t_ab, t_ba) = (sum(&ab), sum(&ba));
    // The counter starts from zero on both sides.
    for n in [a, b] {
        f.spad_write(n.ntb, SPAD, 0).map_err(ferr)?;
    }
    let (mut db, mut bits, mut total, mut counter) = (init_db, Vec::new(), 0u64, 0u32);
    for i in 0..pings {
        let (from, to) = if i % 2 == 0 { (a, b) } else { (b, a) };
        let v = f.spad_read(from.ntb, SPAD).map_err(ferr)?;
        from.check_link(f).map_err(|e| RdmaError::LinkDown(format!("ping {i}: {e}")))?;
        f.peer_spad_write(from.ntb, SPAD, v.wrapping_add(1)).map_err(ferr)?;
        from.ring_peer(f, db)?;
        let got = f.db_read(to.ntb);
        if got & db != db {
            return Err(RdmaError::Fabric(format!("ping {i}: doorbell bits {db:#x} rang but {got:#x} arrived")));
        }
        f.db_clear(to.ntb, got);
        counter = f.spad_read(to.ntb, SPAD).map_err(ferr)?;
        bits.push(db);
        total += if i % 2 == 0 { t_ab } else { t_ba };
        db = (db << 1) & valid;
        if db == 0 {
            db = init_db;
        }
    }
    Ok(PingPong { pings, counter, bits, steps: ab, round_trip_ps: t_ab + t_ba, total_ps: total })
}
