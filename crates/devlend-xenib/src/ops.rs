//! The native (Gen2 mthca-style) driver's operations on an HCA, run on a kernel's thread on behalf
//! of an owner domain: native Linux, the device domain, or the back-end acting for a guest (004
//! §3.1: "performs the operations with the native kernel HCA driver on behalf of the guest
//! domain"). What the kernel's software costs is spent on the calling thread; firmware commands
//! go through the HCR to the HCA model, whose completion interrupt wakes the thread through its
//! kernel's interrupt path. Every object records its owner, and a handle of another owner is
//! refused (EACCES), a destroyed or unknown one is EINVAL.

use crate::hca::{DomKind, World};
use crate::params::{hca_params, params};
use crate::types::*;
use crate::verbs::Cpu;
use devlend_devices::ib_hca::state::{CqHw, Mpt, QpHw};
use devlend_devices::ib_hca::{CQ_DOORBELL, RECV_DOORBELL, SEND_DOORBELL};

impl World {
    fn qp_of(&self, node: usize, owner: DomId, qpn: u32) -> VResult<&QpHw> {
        let q = self.nodes[node].hca.qps.get(qpn as usize).and_then(|q| q.as_ref()).ok_or(Status::Inval)?;
        if q.owner != owner {
            Err(Status::Access)
        } else {
            Ok(q)
        }
    }
    pub(crate) fn cq_owned(&self, node: usize, owner: DomId, cq: u32) -> VResult<()> {
        let c = self.nodes[node].hca.cqs.get(cq as usize).and_then(|c| c.as_ref()).ok_or(Status::Inval)?;
        if c.owner != owner {
            Err(Status::Access)
        } else {
            Ok(())
        }
    }
    fn pd_owned(&self, node: usize, owner: DomId, pd: u32) -> VResult<()> {
        match self.nodes[node].hca.pds.get(pd as usize) {
            Some(Some(o)) if *o == owner => Ok(()),
            Some(Some(_)) => Err(Status::Access),
            _ => Err(Status::Inval),
        }
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
        let pb = hca_params().page_bytes;
        let first = addr / pb * pb;
        (0..(addr + len.max(1)).div_ceil(pb) - addr / pb).map(|i| first + i * pb).collect()
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
}

/// A posted CPU store by `node`'s CPU (a doorbell, the HCR): the thread goes on once it has left.
fn store(t: &Cpu, node: usize, addr: u64, data: &[u8]) -> VResult<()> {
    let host = t.world().nodes[node].host;
    // a store the fabric cannot route: the device is gone (a driver sees its writes dropped)
    t.cpu_write(host, addr, data).map_err(|_| Status::Inval)
}

/// One firmware command issued by the driver in event mode (as mthca does): the mailbox of
/// `bytes` is in kernel memory, the command word goes to the HCR, the HCA reads the mailbox by
/// DMA and executes the command, and its completion interrupt wakes the issuing thread through
/// that kernel's interrupt path ([`World::kernel_irq_ps`]: under Xen, through the hypervisor to
/// domain 0, 004 §4.4, where the device domain's and the back-end's commands run).
fn cmd(t: &Cpu, node: usize, bytes: u64) -> VResult<()> {
    let (hcr, mailbox, id) = {
        let mut w = t.world();
        let mailbox = match w.nodes[node].mailbox {
            Some(m) => m,
            None => {
                let m = w.kernel_buffer(node, hca_params().page_bytes)?;
                w.nodes[node].mailbox = Some(m);
                m
            }
        };
        let hca = &mut w.nodes[node].hca;
        hca.next_cmd += 1;
        (w.nodes[node].hcr, mailbox, w.nodes[node].hca.next_cmd)
    };
    let word: Vec<u8> = [mailbox, bytes, id].iter().flat_map(|x| x.to_le_bytes()).collect();
    store(t, node, hcr, &word)?;
    t.wait_until(format!("firmware command {id}"), move |w: &mut World| w.nodes[node].hca.cmds_done.remove(&id));
    let irq = t.world().kernel_irq_ps(node);
    t.sleep(irq);
    Ok(())
}

pub fn alloc_uar(t: &Cpu, node: usize, owner: DomId) -> VResult<(usize, u64)> {
    let r = {
        let mut w = t.world();
        let base = w.nodes[node].uar_base;
        let hca = &mut w.nodes[node].hca;
        let i = hca.uars.iter().position(|u| u.is_none()).ok_or(Status::NoMem)?;
        hca.uars[i] = Some(owner);
        (i, base + i as u64 * 4096)
    };
    t.sleep(params().syscall_ps);
    Ok(r)
}

pub fn alloc_pd(t: &Cpu, node: usize, owner: DomId) -> VResult<u32> {
    let pd = {
        let mut w = t.world();
        let hca = &mut w.nodes[node].hca;
        hca.pds.push(Some(owner));
        hca.pds.len() as u32 - 1
    };
    t.sleep(params().syscall_ps);
    Ok(pd)
}

/// Native registration: pin the pages (when `pin`), write the MTT entries and the MPT entry
/// through firmware commands. `pages` is the page list (checked by the caller when it comes
/// from a guest).
#[allow(clippy::too_many_arguments)]
pub fn reg_mr(t: &Cpu, node: usize, owner: DomId, pd: u32, addr: u64, len: u64, access: u32, pages: Vec<u64>, pin: bool) -> VResult<Mr> {
    let p = params();
    t.world().pd_owned(node, owner, pd)?;
    if len == 0 || pages.len() != World::pages_of(addr, len).len() {
        return Err(Status::Inval);
    }
    let pin_ps = if pin { pages.len() as u64 * t.world().pin_cost_ps(owner) } else { 0 };
    t.sleep(p.syscall_ps + pin_ps);
    // WRITE_MTT: one command per mailbox of at most `mtt_entries_per_cmd` page addresses
    for chunk in pages.chunks(p.mtt_entries_per_cmd.max(1) as usize) {
        cmd(t, node, (chunk.len() as u64 + 2) * p.mtt_entry_bytes)?;
    }
    cmd(t, node, 64)?; // SW2HW_MPT
    let mut w = t.world();
    let hca = &mut w.nodes[node].hca;
    let key = hca.next_key;
    hca.next_key += 1;
    hca.tpt.insert(key, Mpt { key, pd, owner, va: addr, len, pages, access });
    Ok(Mr { addr, len, lkey: key, rkey: key })
}

pub fn dereg_mr(t: &Cpu, node: usize, owner: DomId, lkey: u32) -> VResult<()> {
    {
        let mut w = t.world();
        let hca = &mut w.nodes[node].hca;
        match hca.tpt.get(&lkey) {
            None => return Err(Status::Inval),
            Some(m) if m.owner != owner => return Err(Status::Access),
            Some(_) => hca.tpt.remove(&lkey),
        };
    }
    t.sleep(params().syscall_ps);
    cmd(t, node, 8) // HW2SW_MPT
}

pub fn create_cq(t: &Cpu, node: usize, owner: DomId, depth: u64, buf: Option<(u64, u32)>) -> VResult<u32> {
    if depth == 0 || depth > 65536 {
        return Err(Status::Inval);
    }
    let ring = {
        let mut w = t.world();
        if let Some((va, key)) = buf {
            let ok = w.nodes[node].hca.tpt.get(&key).is_some_and(|m| m.owner == owner && va >= m.va && va + depth * hca_params().cqe_bytes <= m.va + m.len);
            if !ok {
                return Err(Status::Access);
            }
            0
        } else {
            w.kernel_buffer(node, depth * hca_params().cqe_bytes)?
        }
    };
    t.sleep(params().syscall_ps);
    cmd(t, node, 64)?; // SW2HW_CQ
    let mut w = t.world();
    let hca = &mut w.nodes[node].hca;
    hca.cqs.push(Some(CqHw { owner, depth, buf, ring, entries: Vec::new(), armed: false, events: Default::default(), produced: 0 }));
    Ok(hca.cqs.len() as u32 - 1)
}

pub fn destroy_cq(t: &Cpu, node: usize, owner: DomId, cq: u32) -> VResult<()> {
    {
        let mut w = t.world();
        w.cq_owned(node, owner, cq)?;
        if w.nodes[node].hca.qps.iter().flatten().any(|q| q.send_cq == cq || q.recv_cq == cq) {
            return Err(Status::Inval); // EBUSY in Gen2; a QP still uses it
        }
        w.nodes[node].hca.cqs[cq as usize] = None;
    }
    t.sleep(params().syscall_ps);
    cmd(t, node, 8)
}

#[allow(clippy::too_many_arguments)]
pub fn create_qp(t: &Cpu, node: usize, owner: DomId, pd: u32, scq: u32, rcq: u32, depth: u64, uar: usize, buf: Option<(u64, u32)>) -> VResult<u32> {
    let ring = {
        let mut w = t.world();
        w.pd_owned(node, owner, pd).and(w.cq_owned(node, owner, scq)).and(w.cq_owned(node, owner, rcq))?;
        if depth == 0 || depth > 16384 {
            return Err(Status::Inval);
        }
        if w.nodes[node].hca.uars.get(uar) != Some(&Some(owner)) {
            return Err(Status::Access);
        }
        match buf {
            Some((va, key)) => {
                let ok = w.nodes[node].hca.tpt.get(&key).is_some_and(|m| m.owner == owner && va >= m.va && va + depth * hca_params().wqe_bytes <= m.va + m.len);
                if !ok {
                    return Err(Status::Access);
                }
                0
            }
            // send queue, then receive queue
            None => w.kernel_buffer(node, 2 * depth * hca_params().wqe_bytes)?,
        }
    };
    t.sleep(params().syscall_ps);
    cmd(t, node, 256)?; // the QP context (RST2INIT carries it)
    let mut w = t.world();
    let hca = &mut w.nodes[node].hca;
    hca.qps.push(Some(QpHw {
        owner,
        pd,
        state: QpState::Reset,
        send_cq: scq,
        recv_cq: rcq,
        uar,
        depth,
        buf,
        ring,
        sq: Default::default(),
        rq: Default::default(),
        remote: None,
        posted: 0,
    }));
    Ok(hca.qps.len() as u32 - 1)
}

pub fn modify_qp(t: &Cpu, node: usize, owner: DomId, qpn: u32, attr: QpAttr) -> VResult<()> {
    {
        let w = t.world();
        let cur = w.qp_of(node, owner, qpn)?.state;
        use QpState as S;
        let ok = matches!(
            (cur, attr.state),
            (S::Reset, S::Init) | (S::Init, S::Init) | (S::Init, S::Rtr) | (S::Rtr, S::Rts) | (S::Rts, S::Rts) | (_, S::Err) | (_, S::Reset)
        );
        let bad_remote = attr.remote.is_some_and(|(n, _)| n >= w.nodes.len());
        if !ok || bad_remote || (attr.state == S::Rtr && attr.remote.is_none()) {
            return Err(Status::Inval);
        }
    }
    t.sleep(params().syscall_ps);
    cmd(t, node, 256)?;
    let now = t.now();
    let mut w = t.world();
    if attr.state == QpState::Err {
        w.nodes[node].hca.flush_qp(qpn, now);
    }
    let q = w.nodes[node].hca.qps[qpn as usize].as_mut().ok_or(Status::Inval)?;
    q.state = attr.state;
    if attr.remote.is_some() {
        q.remote = attr.remote;
    }
    if attr.state == QpState::Reset {
        q.sq.clear();
        q.rq.clear();
    }
    Ok(())
}

pub fn destroy_qp(t: &Cpu, node: usize, owner: DomId, qpn: u32) -> VResult<()> {
    {
        let mut w = t.world();
        w.qp_of(node, owner, qpn)?;
        w.nodes[node].hca.qps[qpn as usize] = None;
    }
    t.sleep(params().syscall_ps);
    cmd(t, node, 8)
}

/// Post a send WQE: write it into the QP buffer, then ring the send doorbell of UAR page `uar`
/// (a CPU store that crosses the host bridge and the bus to the HCA).
pub fn post_send(t: &Cpu, node: usize, owner: DomId, qpn: u32, uar: usize, wr: SendWr) -> VResult<()> {
    let db = {
        let mut w = t.world();
        match w.qp_of(node, owner, qpn) {
            Err(e) => return Err(e),
            Ok(q) if q.state != QpState::Rts => return Err(Status::Inval),
            Ok(q) if q.sq.len() as u64 >= q.depth => return Err(Status::NoMem),
            Ok(_) => {}
        }
        w.nodes[node].hca.qps[qpn as usize].as_mut().unwrap().sq.push_back(wr);
        w.nodes[node].uar_base + uar as u64 * 4096 + SEND_DOORBELL
    };
    t.sleep(params().verb_post_ps);
    store(t, node, db, &qpn.to_le_bytes())
}

pub fn post_recv(t: &Cpu, node: usize, owner: DomId, qpn: u32, wr: RecvWr) -> VResult<()> {
    let db = {
        let mut w = t.world();
        let uar = match w.qp_of(node, owner, qpn) {
            Err(e) => return Err(e),
            Ok(q) if q.state == QpState::Reset || q.state == QpState::Err => return Err(Status::Inval),
            Ok(q) if q.rq.len() as u64 >= q.depth => return Err(Status::NoMem),
            Ok(q) => q.uar,
        };
        w.nodes[node].hca.qps[qpn as usize].as_mut().unwrap().rq.push_back(wr);
        w.nodes[node].uar_base + uar as u64 * 4096 + RECV_DOORBELL
    };
    t.sleep(params().verb_post_ps);
    store(t, node, db, &qpn.to_le_bytes())
}

/// Poll: the CQEs visible in the CQ buffer (at most `max`), after one read of it.
pub fn poll_cq(t: &Cpu, node: usize, owner: DomId, cq: u32, max: usize) -> VResult<Vec<Wc>> {
    t.world().cq_owned(node, owner, cq)?;
    t.sleep(params().cpu_poll_ps);
    let now = t.now();
    let mut w = t.world();
    let c = w.nodes[node].hca.cqs[cq as usize].as_mut().ok_or(Status::Inval)?;
    let n = c.entries.iter().take(max).take_while(|(at, _)| *at <= now).count();
    Ok(c.entries.drain(..n).map(|(_, w)| w).collect())
}

/// Arm the CQ: the next CQE raises a completion event (a store to the UAR's CQ doorbell).
pub fn req_notify(t: &Cpu, node: usize, owner: DomId, cq: u32, uar: Option<usize>) -> VResult<()> {
    let db = {
        let mut w = t.world();
        w.cq_owned(node, owner, cq)?;
        w.nodes[node].hca.cqs[cq as usize].as_mut().unwrap().armed = true;
        let page = uar.or_else(|| w.nodes[node].hca.uars.iter().position(|u| *u == Some(owner))).unwrap_or(0);
        w.nodes[node].uar_base + page as u64 * 4096 + CQ_DOORBELL
    };
    store(t, node, db, &cq.to_le_bytes())
}
