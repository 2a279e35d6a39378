//! The native (Gen2 mthca-style) driver's operations on an HCA, executed by a kernel on behalf of
//! an owner domain: native Linux, the device domain, or the back-end acting for a guest (004 §3.1:
//! "performs the operations with the native kernel HCA driver on behalf of the guest domain").
//! Each takes the time the caller starts and returns the result with the time it is done; every
//! object records its owner, and a handle of another owner is refused (EACCES), a destroyed or
//! unknown one is EINVAL.

use crate::hca::{CqHw, DomKind, Mpt, QpHw, World};
use crate::params::params;
use crate::types::*;

pub type Timed<T> = (VResult<T>, u64);

impl World {
    fn qp_of(&self, node: usize, owner: DomId, qpn: u32) -> VResult<&QpHw> {
        let q = self.nodes[node].hca.qps.get(qpn as usize).and_then(|q| q.as_ref()).ok_or(Status::Inval)?;
        if q.owner != owner { Err(Status::Access) } else { Ok(q) }
    }
    fn cq_owned(&self, node: usize, owner: DomId, cq: u32) -> VResult<()> {
        let c = self.nodes[node].hca.cqs.get(cq as usize).and_then(|c| c.as_ref()).ok_or(Status::Inval)?;
        if c.owner != owner { Err(Status::Access) } else { Ok(()) }
    }
    fn pd_owned(&self, node: usize, owner: DomId, pd: u32) -> VResult<()> {
        match self.nodes[node].hca.pds.get(pd as usize) {
            Some(Some(o)) if *o == owner => Ok(()),
            Some(Some(_)) => Err(Status::Access),
            _ => Err(Status::Inval),
        }
    }
    /// One firmware command issued by the driver in event mode (as mthca does): the HCA executes it
    /// ([`World::firmware_cmd`]) and raises the command-completion interrupt, which wakes the
    /// issuing kernel thread through that kernel's interrupt path ([`World::kernel_irq_ps`]: under
    /// Xen, through the hypervisor to domain 0, 004 §4.4, where the device domain's and the
    /// back-end's commands run).
    fn hca_cmd(&mut self, node: usize, t: u64, bytes: u64) -> u64 {
        self.firmware_cmd(node, t, bytes) + self.kernel_irq_ps(node)
    }

    pub fn op_alloc_uar(&mut self, node: usize, owner: DomId, t: u64) -> Timed<(usize, u64)> {
        let hca = &mut self.nodes[node].hca;
        let Some(i) = hca.uars.iter().position(|u| u.is_none()) else { return (Err(Status::NoMem), t) };
        hca.uars[i] = Some(owner);
        (Ok((i, self.nodes[node].uar_base + i as u64 * 4096)), t + params().syscall_ps)
    }

    pub fn op_alloc_pd(&mut self, node: usize, owner: DomId, t: u64) -> Timed<u32> {
        let hca = &mut self.nodes[node].hca;
        hca.pds.push(Some(owner));
        (Ok(hca.pds.len() as u32 - 1), t + params().syscall_ps)
    }

    /// Pinning one page for `owner`: get_user_pages and accounting, plus, in a paravirtualised
    /// Xen domain, the pseudo-physical to machine translation of the page (004 §2.1, §3.2).
    pub fn pin_cost_ps(&self, owner: DomId) -> u64 {
        let p = params();
        let pv = matches!(self.domains[owner as usize].kind, DomKind::Device | DomKind::Guest);
        p.pin_page_ps + if pv { p.pv_p2m_page_ps } else { 0 }
    }

    /// The machine pages of [addr, addr+len) (paravirtualised: DMA address = machine address).
    pub fn pages_of(addr: u64, len: u64) -> Vec<u64> {
        let pb = params().page_bytes;
        let first = addr / pb * pb;
        (0..(addr + len.max(1)).div_ceil(pb) - addr / pb).map(|i| first + i * pb).collect()
    }

    /// Native registration: pin the pages (when `pin`), write the MTT entries and the MPT entry
    /// through firmware commands. `pages` is the page list (checked by the caller when it comes
    /// from a guest).
    pub fn op_reg_mr(&mut self, node: usize, owner: DomId, pd: u32, addr: u64, len: u64, access: u32, pages: Vec<u64>, pin: bool, t: u64) -> Timed<Mr> {
        let p = params();
        if let Err(e) = self.pd_owned(node, owner, pd) {
            return (Err(e), t);
        }
        if len == 0 || pages.len() as u64 != Self::pages_of(addr, len).len() as u64 {
            return (Err(Status::Inval), t);
        }
        let mut t = t + p.syscall_ps;
        if pin {
            t += pages.len() as u64 * self.pin_cost_ps(owner);
        }
        // WRITE_MTT: one command per mailbox of at most `mtt_entries_per_cmd` page addresses
        for chunk in pages.chunks(p.mtt_entries_per_cmd.max(1) as usize) {
            t = self.hca_cmd(node, t, (chunk.len() as u64 + 2) * p.mtt_entry_bytes);
        }
        t = self.hca_cmd(node, t, 64); // SW2HW_MPT
        let hca = &mut self.nodes[node].hca;
        let key = hca.next_key;
        hca.next_key += 1;
        hca.tpt.insert(key, Mpt { key, pd, owner, va: addr, len, pages, access });
        (Ok(Mr { addr, len, lkey: key, rkey: key }), t)
    }

    pub fn op_dereg_mr(&mut self, node: usize, owner: DomId, lkey: u32, t: u64) -> Timed<()> {
        let hca = &mut self.nodes[node].hca;
        match hca.tpt.get(&lkey) {
            None => (Err(Status::Inval), t),
            Some(m) if m.owner != owner => (Err(Status::Access), t),
            Some(_) => {
                hca.tpt.remove(&lkey);
                let t = self.hca_cmd(node, t + params().syscall_ps, 8); // HW2SW_MPT
                (Ok(()), t)
            }
        }
    }

    pub fn op_create_cq(&mut self, node: usize, owner: DomId, depth: u64, buf: Option<(u64, u32)>, t: u64) -> Timed<u32> {
        if depth == 0 || depth > 65536 {
            return (Err(Status::Inval), t);
        }
        if let Some((va, key)) = buf {
            let ok = self.nodes[node].hca.tpt.get(&key).is_some_and(|m| m.owner == owner && va >= m.va && va + depth * params().cqe_bytes <= m.va + m.len);
            if !ok {
                return (Err(Status::Access), t);
            }
        }
        let t = self.hca_cmd(node, t + params().syscall_ps, 64); // SW2HW_CQ
        let hca = &mut self.nodes[node].hca;
        hca.cqs.push(Some(CqHw { owner, depth, buf, entries: Vec::new(), armed: false, events: Default::default(), produced: 0 }));
        (Ok(hca.cqs.len() as u32 - 1), t)
    }

    pub fn op_destroy_cq(&mut self, node: usize, owner: DomId, cq: u32, t: u64) -> Timed<()> {
        if let Err(e) = self.cq_owned(node, owner, cq) {
            return (Err(e), t);
        }
        let busy = self.nodes[node].hca.qps.iter().flatten().any(|q| q.send_cq == cq || q.recv_cq == cq);
        if busy {
            return (Err(Status::Inval), t); // EBUSY in Gen2; a QP still uses it
        }
        self.nodes[node].hca.cqs[cq as usize] = None;
        (Ok(()), self.hca_cmd(node, t + params().syscall_ps, 8))
    }

    #[allow(clippy::too_many_arguments)]
    pub fn op_create_qp(&mut self, node: usize, owner: DomId, pd: u32, scq: u32, rcq: u32, depth: u64, uar: usize, buf: Option<(u64, u32)>, t: u64) -> Timed<u32> {
        let chk = self.pd_owned(node, owner, pd).and(self.cq_owned(node, owner, scq)).and(self.cq_owned(node, owner, rcq));
        if let Err(e) = chk {
            return (Err(e), t);
        }
        if depth == 0 || depth > 16384 {
            return (Err(Status::Inval), t);
        }
        if self.nodes[node].hca.uars.get(uar) != Some(&Some(owner)) {
            return (Err(Status::Access), t);
        }
        if let Some((va, key)) = buf {
            let ok = self.nodes[node].hca.tpt.get(&key).is_some_and(|m| m.owner == owner && va >= m.va && va + depth * params().wqe_bytes <= m.va + m.len);
            if !ok {
                return (Err(Status::Access), t);
            }
        }
        let t = self.hca_cmd(node, t + params().syscall_ps, 256); // the QP context (RST2INIT carries it)
        let hca = &mut self.nodes[node].hca;
        hca.qps.push(Some(QpHw { owner, pd, state: QpState::Reset, send_cq: scq, recv_cq: rcq, uar, depth, buf, sq: Default::default(), rq: Default::default(), remote: None, posted: 0 }));
        (Ok(hca.qps.len() as u32 - 1), t)
    }

    pub fn op_modify_qp(&mut self, node: usize, owner: DomId, qpn: u32, attr: QpAttr, t: u64) -> Timed<()> {
        let cur = match self.qp_of(node, owner, qpn) {
            Ok(q) => q.state,
            Err(e) => return (Err(e), t),
        };
        use QpState as S;
        let ok = matches!((cur, attr.state), (S::Reset, S::Init) | (S::Init, S::Init) | (S::Init, S::Rtr) | (S::Rtr, S::Rts) | (S::Rts, S::Rts) | (_, S::Err) | (_, S::Reset));
        let bad_remote = attr.remote.is_some_and(|(n, _)| n >= self.nodes.len());
        if !ok || bad_remote || (attr.state == S::Rtr && attr.remote.is_none()) {
            return (Err(Status::Inval), t);
        }
        let t = self.hca_cmd(node, t + params().syscall_ps, 256);
        if attr.state == S::Err {
            self.flush_qp_pub(node, qpn, t);
        }
        let q = self.nodes[node].hca.qps[qpn as usize].as_mut().unwrap();
        q.state = attr.state;
        if attr.remote.is_some() {
            q.remote = attr.remote;
        }
        if attr.state == S::Reset {
            q.sq.clear();
            q.rq.clear();
        }
        (Ok(()), t)
    }

    pub fn op_destroy_qp(&mut self, node: usize, owner: DomId, qpn: u32, t: u64) -> Timed<()> {
        if let Err(e) = self.qp_of(node, owner, qpn) {
            return (Err(e), t);
        }
        self.nodes[node].hca.qps[qpn as usize] = None;
        (Ok(()), self.hca_cmd(node, t + params().syscall_ps, 8))
    }

    /// Post a send WQE: write it into the QP buffer, ring the doorbell through UAR page `uar`
    /// (a CPU store that crosses the host bridge and the PCI-X bus). Returns when the CPU is free.
    pub fn op_post_send(&mut self, node: usize, owner: DomId, qpn: u32, uar: usize, wr: SendWr, t: u64) -> Timed<()> {
        let p = params();
        match self.qp_of(node, owner, qpn) {
            Err(e) => return (Err(e), t),
            Ok(q) if q.state != QpState::Rts => return (Err(Status::Inval), t),
            Ok(q) if q.sq.len() as u64 >= q.depth => return (Err(Status::NoMem), t),
            Ok(_) => {}
        }
        self.nodes[node].hca.qps[qpn as usize].as_mut().unwrap().sq.push_back(wr);
        let t_cpu = t + p.verb_post_ps + p.pio_write_ps;
        let t_db = self.doorbell_at(node, t + p.verb_post_ps);
        self.doorbell(node, uar, qpn, t_db);
        (Ok(()), t_cpu)
    }

    pub fn op_post_recv(&mut self, node: usize, owner: DomId, qpn: u32, wr: RecvWr, t: u64) -> Timed<()> {
        let p = params();
        match self.qp_of(node, owner, qpn) {
            Err(e) => return (Err(e), t),
            Ok(q) if q.state == QpState::Reset || q.state == QpState::Err => return (Err(Status::Inval), t),
            Ok(q) if q.rq.len() as u64 >= q.depth => return (Err(Status::NoMem), t),
            Ok(_) => {}
        }
        self.nodes[node].hca.qps[qpn as usize].as_mut().unwrap().rq.push_back(wr);
        let t_cpu = t + p.verb_post_ps + p.pio_write_ps;
        self.doorbell_at(node, t + p.verb_post_ps);
        (Ok(()), t_cpu)
    }

    /// Poll: the CQEs visible in the CQ buffer at `t` (at most `max`).
    pub fn op_poll_cq(&mut self, node: usize, owner: DomId, cq: u32, max: usize, t: u64) -> Timed<Vec<Wc>> {
        if let Err(e) = self.cq_owned(node, owner, cq) {
            return (Err(e), t);
        }
        let t = t + params().cpu_poll_ps;
        let c = self.nodes[node].hca.cqs[cq as usize].as_mut().unwrap();
        let n = c.entries.iter().take(max).take_while(|(at, _)| *at <= t).count();
        (Ok(c.entries.drain(..n).map(|(_, w)| w).collect()), t)
    }

    /// Arm the CQ: the next CQE raises a completion event (a doorbell-page write).
    pub fn op_req_notify(&mut self, node: usize, owner: DomId, cq: u32, t: u64) -> Timed<()> {
        if let Err(e) = self.cq_owned(node, owner, cq) {
            return (Err(e), t);
        }
        let t = t + params().pio_write_ps;
        self.nodes[node].hca.cqs[cq as usize].as_mut().unwrap().armed = true;
        (Ok(()), t)
    }

    /// Whether a completion event of `cq` is raised and not yet taken (false: none yet, but the
    /// CQ is armed); ETIMEDOUT when none is raised and the CQ is not armed.
    pub fn op_event_pending(&self, node: usize, owner: DomId, cq: u32) -> VResult<bool> {
        self.cq_owned(node, owner, cq)?;
        let c = self.nodes[node].hca.cqs[cq as usize].as_ref().unwrap();
        match (c.events.is_empty(), c.armed) {
            (false, _) => Ok(true),
            (true, true) => Ok(false),
            (true, false) => Err(Status::TimedOut),
        }
    }

    /// The next completion event the HCA raised for `cq` (its time), consumed.
    pub fn op_take_event(&mut self, node: usize, owner: DomId, cq: u32) -> VResult<u64> {
        self.cq_owned(node, owner, cq)?;
        self.nodes[node].hca.cqs[cq as usize].as_mut().unwrap().events.pop_front().ok_or(Status::TimedOut)
    }

    pub(crate) fn flush_qp_pub(&mut self, node: usize, qpn: u32, at: u64) {
        let has = self.nodes[node].hca.qps.get(qpn as usize).is_some_and(|q| q.is_some());
        if has {
            let q = self.nodes[node].hca.qps[qpn as usize].as_mut().unwrap();
            let (cq, wrs): (u32, Vec<SendWr>) = (q.send_cq, q.sq.drain(..).collect());
            for wr in wrs {
                let op = match wr.op { SendOp::RdmaWrite { .. } => WcOpcode::RdmaWrite, SendOp::Send => WcOpcode::Send };
                let c = self.nodes[node].hca.cqs.get_mut(cq as usize).and_then(|c| c.as_mut());
                if let Some(c) = c {
                    c.entries.push((at, Wc { wr_id: wr.wr_id, status: WcStatus::WrFlushErr, opcode: op, byte_len: 0, qp_num: qpn }));
                }
            }
        }
    }
}
