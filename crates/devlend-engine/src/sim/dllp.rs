//! The data link layer's DLLPs, kept as timestamps in the ports' records (not events): the Ack of
//! PCIe Base 3.0 §3.5.3.1 and one UpdateFC per credit type (§2.6.1.2) a port sends on the reverse
//! direction of its link, once per AckNak latency period while TLPs arrive or credits are freed.
//! A DLLP due while its port sends a TLP goes after it and delays the next one; due while the
//! port is idle, it costs only its own bytes. The simulation (`sim`) calls in here where a TLP
//! starts out (`ack_event`, `dllps_before`) and where a credit is freed (`dllp_event`).

use super::{PortId, Ps, Sim, NONE};

/// `Dllps::peer_ack` of a port whose other direction has no link layer (or no port): an Ack
/// timer that never needs setting.
pub(super) const NEVER: Ps = Ps::MAX - 1;
/// DLLP timers of a port: the Ack, then an UpdateFC per traffic class.
const ACK: usize = 3;

/// The DLLPs a port sends for the other direction of its link: when each pending one is due, and
/// when those already owed are done being sent. One cache line of the port's record (`Port`): the
/// reverse direction of a link that carries TLPs one way is touched for its DLLPs only.
///
/// A TLP sent on port `p` reads `p`'s record (DLLPs due go first) and asks whether `p ^ 1` has an
/// Ack pending that covers it; `peer_ack` answers that from `p`'s own line, so a send touches one
/// DLLP record, not two (issue 33: at 8192 streams each is a likely last-level miss). It is
/// written wherever `p ^ 1`'s Ack timer changes (`Sim::set_ack`). A DLLP sent waits for the TLP
/// its port is sending: `gate` keeps the later of the two, so that sending one (often on the
/// other direction of a link that carries TLPs one way) does not read the port's own line.
#[repr(C, align(64))]
pub(super) struct Dllps {
    /// AckNak / UpdateFC latency period of this link, ps (0: no link layer modelled); 32 bits, so
    /// that `peer_ack` fits the line (`Sim::set_dllp_periods` checks).
    pub(super) period: u32,
    /// Serialisation time of one DLLP (`Timing::dllp_bytes`) on this port, ps (32 bits, checked).
    pub(super) ser: u32,
    /// Per UpdateFC class (0-2) and the Ack (3): when the pending DLLP is due, or NONE.
    pub(super) due: [Ps; 4],
    /// When the DLLPs sent so far have left the port, or the port's TLP (`Port::busy_until`) if
    /// that is later: the earliest a DLLP sent now can start. Raised with `busy_until` on each
    /// send (`Sim::try_tx`).
    pub(super) gate: Ps,
    /// DLLPs sent: added to the port's statistics when they are read (`Sim::port_stats`), so
    /// that sending one touches this record only.
    pub(super) sent: u64,
    /// The other direction's (`p ^ 1`'s) `due[ACK]`, or NEVER when it has no link layer.
    pub(super) peer_ack: Ps,
}

const _: () = assert!(std::mem::size_of::<Dllps>() == 64);

impl Dllps {
    /// The earliest pending DLLP's due time, or NONE.
    #[inline]
    fn next(&self) -> Ps {
        self.due[0].min(self.due[1]).min(self.due[2].min(self.due[3]))
    }
}

impl Sim {
    /// Model the data link layer: per port (by PortId), the AckNak / UpdateFC latency period of
    /// its link (`devlend_wire::dllp`); DLLPs of `t.dllp_bytes` are then sent on each port for
    /// the TLPs received on the other direction. Without this call, no DLLP is modelled. Panics
    /// if a period or a DLLP's serialisation time is 2^32 ps (4.3 ms) or more.
    pub fn set_dllp_periods(&mut self, periods: &[Ps]) {
        let bytes = self.t.dllp_bytes as u64;
        let ps32 = |ps: Ps| u32::try_from(ps).unwrap_or_else(|_| panic!("a DLLP period or serialisation time below 2^32 ps, not {ps}"));
        for (port, &period) in self.ports.iter_mut().zip(periods) {
            port.dllps.period = ps32(period);
            port.dllps.ser = ps32((bytes * port.fp_ps_per_byte) >> 16);
        }
        for p in 0..self.ports.len() {
            self.set_ack(p as PortId, self.ports[p].dllps.due[ACK]);
        }
    }

    /// Port `p`'s Ack timer is now `due` (or NONE), and so is its copy in `p ^ 1`'s record.
    #[inline]
    fn set_ack(&mut self, p: PortId, due: Ps) {
        let d = &mut self.ports[p as usize].dllps;
        d.due[ACK] = due;
        let copy = if d.period == 0 { NEVER } else { due };
        if let Some(peer) = self.ports.get_mut((p ^ 1) as usize) {
            peer.dllps.peer_ack = copy;
        }
    }

    /// A TLP starts out on port `p`: the Ack DLLP of `p ^ 1` (`dllp_event(p ^ 1, ACK)`), read from
    /// `p`'s own record while the pending one covers it.
    #[inline]
    pub(super) fn ack_event(&mut self, p: PortId) {
        let due = self.ports[p as usize].dllps.peer_ack;
        debug_assert_eq!(
            due,
            self.ports.get((p ^ 1) as usize).map_or(NEVER, |q| if q.dllps.period == 0 { NEVER } else { q.dllps.due[ACK] }),
            "port {p}'s copy of the Ack timer"
        );
        if due != NONE && self.now <= due {
            return;
        }
        self.dllp_due(p ^ 1, ACK, due);
    }

    /// Something at the far end of port `p^1` (a TLP coming in, or a credit of class `kind`
    /// freed) needs a DLLP on port `p`: covered by the one pending if that is not yet due,
    /// otherwise that one has been sent and a new one is due one period from now. (The timer
    /// starts as the TLP starts out rather than when its last byte is in: the same period, shifted
    /// by one TLP time; what is due is then never later than now.)
    #[inline]
    pub(super) fn dllp_event(&mut self, p: PortId, kind: usize) {
        let at = self.now;
        let Some(d) = self.ports.get(p as usize).map(|q| &q.dllps) else { return };
        let due = d.due[kind];
        if d.period == 0 || (due != NONE && at <= due) {
            return;
        }
        self.dllp_due(p, kind, due);
    }

    /// The DLLP of `kind` pending on port `p` (due at `due`, or NONE) is sent, and a new one is due
    /// one period from now.
    #[inline(never)]
    fn dllp_due(&mut self, p: PortId, kind: usize, due: Ps) {
        let next = self.now + self.ports[p as usize].dllps.period as Ps;
        if kind == ACK {
            self.set_ack(p, next);
        } else {
            self.ports[p as usize].dllps.due[kind] = next;
        }
        if due != NONE {
            let port = &mut self.ports[p as usize];
            debug_assert!(port.dllps.gate >= port.busy_until, "port {p}'s DLLP gate is behind its TLP");
            Self::send_dllp(&mut port.dllps, due);
        }
    }

    /// The DLLP due at `due` leaves its port: after the DLLPs before it and the TLP being sent.
    fn send_dllp(d: &mut Dllps, due: Ps) {
        d.gate = d.gate.max(due) + d.ser as Ps;
        d.sent += 1;
    }

    /// Send the DLLPs of port `p` due by `now`; returns when the port is free of them (the port's
    /// link being free by `now`).
    #[inline]
    pub(super) fn dllps_before(&mut self, p: PortId, now: Ps) -> Ps {
        let port = &mut self.ports[p as usize];
        debug_assert!(port.dllps.gate >= port.busy_until, "port {p}'s DLLP gate is behind its TLP");
        let d = &mut port.dllps;
        if d.next() > now {
            return d.gate;
        }
        let ack_sent = d.due[ACK] <= now;
        for k in 0..4 {
            let due = d.due[k];
            if due <= now {
                Self::send_dllp(d, due);
                d.due[k] = NONE;
            }
        }
        let free = d.gate;
        if ack_sent {
            self.set_ack(p, NONE);
        }
        free
    }
}
