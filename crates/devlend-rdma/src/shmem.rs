//! An OpenSHMEM-style put/get library over the NTB (003 §3, Fig 5-6: `shmem_int_put`,
//! `shmem_double_put`, `shmem_int_get`, `shmem_double_get` on top of a physically contiguous,
//! page-locked buffer and `blockDMATransfer`).
//!
//! Addresses of remote data are physical addresses in the peer, inside the buffer it published
//! (003 §4 exchanges physical addresses). The heap is symmetric: a put stages its data at the same
//! offset of the local buffer, so DMA moves it buffer-to-buffer. Each call picks a [`Method`]: CPU
//! stores through the BAR (PIO), block DMA or scatter-gather DMA with N descriptors (the buffer
//! divided evenly, as in 003 §4's Fig 9). Every input is checked before any byte moves, so a
//! refused call leaves the peer's memory untouched. Blocking calls return their [`Timing`];
//! `*_nbi` calls queue it and `quiet` waits for all (one DMA channel: their times add up).

use crate::dma::{self, Desc, DmaEngine};
use crate::error::{RResult, RdmaError};
use crate::node::{Node, Pinned};
use crate::params::params;
use crate::pio::{pio_time, Mapping};
use devlend_fabric::fabric::Event;
use devlend_fabric::route::Requester;
use devlend_fabric::Fabric;
use devlend_wire::Access;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Pio,
    BlockDma,
    SgDma(usize),
}

/// Simulated time of one operation, with its parts (ps).
#[derive(Clone, Debug, Default)]
pub struct Timing {
    pub total_ps: u64,
    pub steps: Vec<(&'static str, u64)>,
}

impl Timing {
    fn add(&mut self, what: &'static str, ps: u64) {
        self.steps.push((what, ps));
        self.total_ps += ps;
    }
}

/// The DMA channel this host drives: the engine, its register BAR, its MSI message.
pub struct Channel {
    pub engine: DmaEngine,
    pub bar0: u64,
    pub msi: (u64, u32),
}

/// One processing element: a host with its node and, if it has one, a DMA channel.
pub struct Pe {
    pub node: Node,
    pub dma: Option<Channel>,
    pub mapping: Mapping,
    pending: Vec<Timing>,
}

fn fail(f: &Fabric, e: &devlend_fabric::route::Failure) -> String {
    f.failure_json(e)["message"].as_str().unwrap_or("fabric failure").to_string()
}

impl Pe {
    pub fn new(node: Node) -> Pe {
        Pe { node, dma: None, mapping: Mapping::from_params(), pending: Vec::new() }
    }

    /// Attach the DMA function `name` (in this host): bus master, requester-ID LUT entry in this
    /// host's NT port, MSI-X vector 0 aimed at this host.
    pub fn attach_dma(&mut self, f: &mut Fabric, name: &str) -> RResult<()> {
        let func = f.func_id(name).map_err(|e| RdmaError::Invalid(e.to_string()))?;
        if f.func_host(func) != self.node.host {
            return Err(RdmaError::Invalid(format!("{name} is not in this host")));
        }
        f.set_bus_master(func, true);
        let bdf = f.funcs[func as usize].bdf;
        f.rid_lut_add(self.node.ntb, bdf).map_err(|e| RdmaError::Invalid(e.to_string()))?;
        let bar0 = f.funcs[func as usize].bars.iter().find(|b| b.index == 0).map(|b| b.addr).ok_or_else(|| RdmaError::Invalid(format!("{name} has no BAR 0")))?;
        let msi = (f.hosts[self.node.host as usize].msi.start, 0x41u32);
        let mut entry = [0u8; 16];
        entry[0..8].copy_from_slice(&msi.0.to_le_bytes());
        entry[8..12].copy_from_slice(&msi.1.to_le_bytes());
        f.write(Requester::Cpu(self.node.host), bar0 + devlend_fabric::config::MSIX_TABLE_OFFSET, &entry);
        self.dma = Some(Channel { engine: DmaEngine::new(func), bar0, msi });
        Ok(())
    }

    fn cpu(&self) -> Requester {
        Requester::Cpu(self.node.host)
    }

    // ----- typed front end ---------------------------------------------------------------------

    pub fn put_bytes(&mut self, f: &mut Fabric, dst: u64, data: &[u8], how: Method) -> RResult<Timing> {
        self.put(f, dst, data, how)
    }
    pub fn put_int(&mut self, f: &mut Fabric, dst: u64, v: &[i32], how: Method) -> RResult<Timing> {
        self.put(f, dst, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(), how)
    }
    pub fn put_double(&mut self, f: &mut Fabric, dst: u64, v: &[f64], how: Method) -> RResult<Timing> {
        self.put(f, dst, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(), how)
    }
    pub fn get_bytes(&mut self, f: &mut Fabric, src: u64, len: u64, how: Method) -> RResult<(Vec<u8>, Timing)> {
        self.get(f, src, len, how)
    }
    pub fn get_int(&mut self, f: &mut Fabric, src: u64, n: usize, how: Method) -> RResult<(Vec<i32>, Timing)> {
        let (b, t) = self.get(f, src, n as u64 * 4, how)?;
        Ok((b.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect(), t))
    }
    pub fn get_double(&mut self, f: &mut Fabric, src: u64, n: usize, how: Method) -> RResult<(Vec<f64>, Timing)> {
        let (b, t) = self.get(f, src, n as u64 * 8, how)?;
        Ok((b.chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect(), t))
    }

    /// Non-blocking put: the data is on its way when this returns; `quiet` waits for it.
    pub fn put_nbi(&mut self, f: &mut Fabric, dst: u64, data: &[u8], how: Method) -> RResult<()> {
        let t = self.put(f, dst, data, how)?;
        self.pending.push(t);
        Ok(())
    }

    /// Wait for every outstanding non-blocking operation; returns the time they took together.
    pub fn quiet(&mut self) -> Timing {
        let mut t = Timing::default();
        for p in self.pending.drain(..) {
            t.add("non-blocking operation", p.total_ps);
        }
        t
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    // ----- put and get -------------------------------------------------------------------------

    /// Put `data` at `dst` (a physical address in the peer's published buffer), then ring the
    /// peer's data doorbell. Time ends when the peer's doorbell handler runs (003 §4).
    pub fn put(&mut self, f: &mut Fabric, dst: u64, data: &[u8], how: Method) -> RResult<Timing> {
        let len = data.len() as u64;
        let win = self.node.peer_to_window(dst, len)?;
        let off = win - self.node.window.0;
        let mut t = Timing::default();
        match how {
            Method::Pio => {
                let p = pio_time(f, self.node.host, win, len, self.mapping).map_err(RdmaError::Fabric)?;
                if let (_, Some(e)) = f.write(self.cpu(), win, data) {
                    return Err(RdmaError::Fabric(fail(f, &e)));
                }
                t.add("CPU stores through the BAR", p.total_ps);
            }
            Method::BlockDma | Method::SgDma(_) => {
                let local = self.node.buf.phys + off;
                if !self.node.buf.contains(local, len) {
                    return Err(RdmaError::OutsideRegistered { descriptor: 0, addr: local, len });
                }
                f.write(self.cpu(), local, data);
                let descs = split(local, win, len, how);
                let d = self.run_dma(f, &descs, how)?;
                t.add("DMA", d.total_ps);
            }
        }
        self.node.ring_peer(f, crate::node::DB_DATA)?;
        t.add("doorbell to the peer", self.node.notify_ps(f));
        Ok(t)
    }

    /// Get `len` bytes from `src` in the peer's published buffer into this host.
    pub fn get(&mut self, f: &mut Fabric, src: u64, len: u64, how: Method) -> RResult<(Vec<u8>, Timing)> {
        let win = self.node.peer_to_window(src, len)?;
        let off = win - self.node.window.0;
        let mut t = Timing::default();
        let data = match how {
            Method::Pio => {
                let (d, e) = f.read(self.cpu(), win, len as usize);
                if let Some(e) = e {
                    return Err(RdmaError::Fabric(fail(f, &e)));
                }
                // CPU loads are non-posted: one read round trip per load, one at a time (UC).
                let unit = params().cpu_store.store_bytes;
                let rtt = devlend_engine::latency(f, self.cpu(), win, Access::Read).map_err(|e| RdmaError::Fabric(fail(f, &e)))?;
                t.add("CPU loads through the BAR", len.div_ceil(unit) * rtt);
                d
            }
            _ => {
                let local = self.node.buf.phys + off;
                let descs = split(win, local, len, how);
                let d = self.run_dma(f, &descs, how)?;
                t.add("DMA", d.total_ps);
                f.read(self.cpu(), local, len as usize).0
            }
        };
        Ok((data, t))
    }

    /// Check descriptors against registered memory (this host's buffer on one side, the peer's
    /// window on the other), then run them on the channel. Nothing moves if any is outside.
    pub fn dma_checked(&mut self, f: &mut Fabric, descs: &[Desc], sg: bool) -> RResult<Timing> {
        self.run_dma(f, descs, if sg { Method::SgDma(descs.len()) } else { Method::BlockDma })
    }

    fn run_dma(&mut self, f: &mut Fabric, descs: &[Desc], how: Method) -> RResult<Timing> {
        for (i, d) in descs.iter().enumerate() {
            let n = d.count as u64;
            let local = |a: u64| self.node.buf.contains(a, n);
            let remote = |a: u64| a >= self.node.window.0 && a.checked_add(n).is_some_and(|e| e <= self.node.window.0 + self.node.window_size());
            if !(local(d.src) && remote(d.dst) || remote(d.src) && local(d.dst)) {
                return Err(RdmaError::OutsideRegistered { descriptor: i, addr: if local(d.src) || remote(d.src) { d.dst } else { d.src }, len: n });
            }
        }
        self.dma_raw(f, descs, matches!(how, Method::SgDma(_)))
    }

    /// Hand descriptors to the channel as they are (no checks: what the hardware would do with a
    /// buggy driver). Errors come back from the channel's status, with the fault recorded.
    pub fn dma_raw(&mut self, f: &mut Fabric, descs: &[Desc], sg: bool) -> RResult<Timing> {
        let (host, ring) = (self.node.host, self.node.ring);
        let ch = self.dma.as_mut().ok_or_else(|| RdmaError::NoDmaEngine(format!("host {host} has no DMA channel attached")))?;
        let p = &params().ntb_dma;
        if sg && descs.len() as u64 * p.descriptor_bytes > ring.size {
            return Err(RdmaError::Invalid(format!("{} descriptors do not fit the descriptor ring", descs.len())));
        }
        if !sg && descs.len() != 1 {
            return Err(RdmaError::Invalid("block mode takes exactly one descriptor".into()));
        }
        let cpu = Requester::Cpu(host);
        let regs: Vec<(u64, Vec<u8>)> = if sg {
            let table: Vec<u8> = descs.iter().flat_map(|d| d.encode()).collect();
            f.write(cpu, ring.phys, &table);
            vec![(dma::RING, ring.phys.to_le_bytes().to_vec()), (dma::NDESC, (descs.len() as u32).to_le_bytes().to_vec())]
        } else {
            let d = descs[0];
            vec![(dma::SRC, d.src.to_le_bytes().to_vec()), (dma::DST, d.dst.to_le_bytes().to_vec()), (dma::COUNT, d.count.to_le_bytes().to_vec())]
        };
        let ctrl = dma::CTRL_START | dma::CTRL_IRQ | if sg { dma::CTRL_SG } else { 0 };
        for (off, v) in regs.iter().chain(std::iter::once(&(dma::CTRL, ctrl.to_le_bytes().to_vec()))) {
            f.write(cpu, ch.bar0 + off, v);
        }
        let msis = f.events.len();
        ch.engine.ops.clear();
        ch.engine.internal_ps = 0;
        ch.engine.process(f);
        let status = ch.engine.reg_read(f, dma::STATUS, 4) as u32;
        let fired = f.events[msis..].iter().any(|e| matches!(e, Event::Msi { data, .. } if *data == ch.msi.1));
        if status & dma::STATUS_ERROR != 0 {
            let fault = ch.engine.faults.last().copied();
            let message = fault.and_then(|x| x.failure).map_or("invalid descriptor".to_string(), |e| fail(f, &e));
            return Err(RdmaError::Dma { descriptor: (status >> 8) as usize, bytes_done: ch.engine.reg_read(f, dma::BYTES_DONE, 8), message });
        }
        if !fired {
            return Err(RdmaError::Fabric("DMA completion interrupt did not arrive".into()));
        }
        channel_time(f, ch, host, sg)
    }
}

/// The time one DMA call takes, from the ioctl to the woken caller: register programming (UC
/// stores), status reads over PCIe, the engine's accesses in program order, its descriptor
/// turnarounds, and the completion interrupt's wake-up.
fn channel_time(f: &mut Fabric, ch: &Channel, host: u16, sg: bool) -> RResult<Timing> {
    let p = &params().ntb_dma;
    let sw = &params().rdma_sw;
    let mut t = Timing::default();
    t.add("ioctl into the DMA driver", sw.ioctl_ps);
    let (writes, reads) = if sg { (p.register_writes_sg, p.status_reads_sg) } else { (p.register_writes_block, p.status_reads_block) };
    t.add("register stores (UC)", writes * params().cpu_store.uc_store_ps);
    let rd = devlend_engine::latency(f, Requester::Cpu(host), ch.bar0 + dma::STATUS, Access::Read).map_err(|e| RdmaError::Fabric(fail(f, &e)))?;
    t.add("status register reads", reads * rd);
    let engine = devlend_devices::time_ops(f, &ch.engine.ops).map_err(RdmaError::Fabric)?;
    t.add("engine: descriptors, data, MSI", engine);
    t.add("engine: descriptor turnaround", ch.engine.internal_ps);
    t.add("interrupt and wake-up", sw.irq_wakeup_ps);
    Ok(t)
}

/// Split [src, src+len) -> [dst, ...) into the descriptors of a method: one for block mode, N
/// even pieces for SG (003 §4: "dividing evenly the same size to the buffer size").
pub fn split(src: u64, dst: u64, len: u64, how: Method) -> Vec<Desc> {
    let n = match how {
        Method::SgDma(n) => (n as u64).clamp(1, len.max(1)),
        _ => 1,
    };
    let (piece, rest) = (len / n, len % n);
    let mut out = Vec::new();
    let mut at = 0u64;
    for i in 0..n {
        let c = piece + u64::from(i < rest);
        out.push(Desc { src: src + at, dst: dst + at, count: c as u32 });
        at += c;
    }
    out
}

/// Both ends of a two-host testbed after the handshake.
pub struct Pair {
    pub a: Pe,
    pub b: Pe,
}

/// Open both nodes, publish, learn each other (003 §4's scratchpad handshake), and attach the
/// DMA function to whichever host it sits in.
pub fn handshake(f: &mut Fabric, ntb_a: &str, ntb_b: &str, ram_offset: u64, size: u64, dma: Option<&str>) -> RResult<Pair> {
    let mut a = Node::open(f, ntb_a, ram_offset, size)?;
    let mut b = Node::open(f, ntb_b, ram_offset, size)?;
    a.publish(f)?;
    b.publish(f)?;
    for n in [&mut a, &mut b] {
        if n.learn_peer(f)?.is_none() {
            return Err(RdmaError::NotPublished { addr: 0, len: 0, published: None });
        }
    }
    let (mut a, mut b) = (Pe::new(a), Pe::new(b));
    if let Some(name) = dma {
        let func = f.func_id(name).map_err(|e| RdmaError::Invalid(e.to_string()))?;
        let pe = if f.func_host(func) == a.node.host { &mut a } else { &mut b };
        pe.attach_dma(f, name)?;
    }
    Ok(Pair { a, b })
}

pub fn pinned_of(pe: &Pe) -> Pinned {
    pe.node.buf
}
