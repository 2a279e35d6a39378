//! The put/get library's operations on the session's machine: a blocking call runs alone, `quiet`
//! runs every queued non-blocking one together, so they overlap and share the links.
//!
//! On the machine: the calling CPU does the PIO operations one after another in the order they
//! were issued (a CPU copies with its own stores): a put's stores through the BAR as one thread
//! per store slot (one UC store, or a WC fill buffer each, in flight), a get's loads through the
//! BAR as one thread, one round trip each, as UC loads are; each DMA channel is one
//! driver thread doing its DMA operations in order (the DMA operations dealt to the channels
//! round-robin); the NT registers and the DMA engine are devices. A put rings the peer's data
//! doorbell once its data is out (a CPU store to the peer's doorbell register, after the last
//! data store, or after the DMA call returned) and is done when the peer's handler runs: the
//! peer's handler thread takes the doorbell interrupts in the order they land and pays the
//! interrupt entry for each. A get is done when its data is in this host.

use crate::driver::{self, Regs};
use crate::error::{RResult, RdmaError};
use crate::node::DB_DATA;
use crate::params::params;
use crate::pio::{copy_slot, Mapping};
use crate::session::Shmem;
use crate::shmem::Timing;
use devlend_devices::plx_dma::Desc;
use devlend_devices::plx_ntregs::{doorbell_irq_count, CpuRegs};
use devlend_engine::machine::{Machine, Thread, ThreadError, Watch};
use devlend_engine::queue::Ps;
use devlend_fabric::Fabric;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// One operation, checked and staged, ready to run.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// CPU stores of `data` at `win` (the window), then the doorbell.
    PioPut { win: u64, data: Vec<u8> },
    /// CPU loads of `len` bytes at `win`; with `land`, written at that local address afterwards.
    PioGet { win: u64, len: u64, land: Option<u64> },
    /// A DMA call; `ring`: a put, which rings the doorbell after it.
    Dma { descs: Vec<Desc>, sg: bool, ring: bool },
}

/// What became of one operation.
#[derive(Clone, Debug, Default)]
pub(crate) struct Done {
    pub timing: Timing,
    /// The bytes a PIO get read.
    pub data: Vec<u8>,
    /// When it was done, from the start of the run, in ps.
    pub end: Ps,
    /// A put's doorbell: which one of the run it was (its end is when the peer handled it).
    ring: Option<usize>,
}

/// The calling host's side of a run: where its CPU and DMA channels find their registers.
pub(crate) struct Caller {
    pub host: u16,
    pub ntb: u32,
    pub mapping: Mapping,
    /// One per DMA channel (empty without an engine).
    pub channels: Vec<Regs>,
}

/// Shared between the threads of a run.
#[derive(Default)]
struct Board {
    /// Doorbells rung so far.
    rung: Cell<usize>,
    /// The calling CPU's operations done so far (the next one's turn).
    turn: Rc<Cell<usize>>,
    /// When the peer's handler ran for each doorbell, in order.
    handled: RefCell<Vec<Ps>>,
    done: RefCell<Vec<Option<Done>>>,
    /// The run is over: its peer handler, still waiting for a doorbell, ends at the next one.
    closed: Rc<Cell<bool>>,
}

/// Run `ops` on the session's machine (the DMA engine on it already, if any), from its present
/// time; each operation's `end` is counted from then.
pub(crate) fn run(s: &mut Shmem, c: &Caller, ops: Vec<Op>) -> RResult<Vec<Done>> {
    let regs = CpuRegs::of(&s.fabric(), c.ntb)?;
    s.nt_regs(c.ntb)?;
    let board = Rc::new(Board { done: RefCell::new(vec![None; ops.len()]), ..Board::default() });
    let mut cpu = Vec::new();
    let mut dma: Vec<Vec<(usize, Op)>> = vec![Vec::new(); c.channels.len()];
    for (i, op) in ops.into_iter().enumerate() {
        match op {
            Op::Dma { .. } if c.channels.is_empty() => return Err(RdmaError::NoDmaEngine { host: c.host }),
            Op::Dma { .. } => {
                let k = dma.iter().map(Vec::len).sum::<usize>() % c.channels.len();
                dma[k].push((i, op));
            }
            _ => cpu.push((i, op)),
        }
    }
    let start = s.now();
    spawn(s.machine(), start, c, regs, &board, cpu, dma);
    let ran = s.run();
    // The peer's handler of this run serves no later one.
    board.closed.set(true);
    ran?;
    let done = board.done.take();
    let handled = board.handled.borrow();
    let finished = |d: Done| {
        let mut d = finish(d, &handled);
        d.end -= start;
        d
    };
    done.into_iter().enumerate().map(|(operation, d)| d.map(finished).ok_or(RdmaError::NeverEnded { operation })).collect()
}

/// A put is done when the peer's handler has run for its doorbell.
fn finish(mut d: Done, handled: &[Ps]) -> Done {
    if let Some(at) = d.ring.and_then(|k| handled.get(k).copied()) {
        d.timing.add("doorbell to the peer", at - d.end);
        d.end = at;
    }
    d
}

fn spawn(m: &mut Machine<Fabric>, at: Ps, c: &Caller, regs: CpuRegs, board: &Rc<Board>, cpu: Vec<(usize, Op)>, dma: Vec<Vec<(usize, Op)>>) {
    let (host, mapping) = (c.host, c.mapping);
    for (turn, (i, op)) in cpu.into_iter().enumerate() {
        spawn_cpu_op(m, (host, at), mapping, regs, board, turn, i, op);
    }
    for (k, queue) in dma.into_iter().enumerate() {
        let (r, b) = (c.channels[k], board.clone());
        m.spawn(&format!("shmem DMA channel {k}"), at, move |t| {
            for (i, op) in queue {
                let Op::Dma { descs, sg, ring: put } = op else { unreachable!("only DMA operations queue on a channel") };
                let call = driver::dma_call(t, r, &descs, sg)?.map_err(|e| ThreadError::Other(Box::new(e)))?;
                let mut timing = Timing::default();
                timing.add("DMA", call.total_ps);
                let ring = if put { Some(ring(t, &b, &regs)?) } else { None };
                b.done.borrow_mut()[i] = Some(Done { timing, data: Vec::new(), end: t.now(), ring });
            }
            Ok(())
        });
    }
    let b = board.clone();
    let peer = regs.peer.host;
    m.spawn_service("peer doorbell handler", at, move |t| {
        let since = t.world().events().total();
        loop {
            let n = b.handled.borrow().len();
            let closed = b.closed.clone();
            t.wait_for("the data doorbell", Watch::Msi { host: peer }, move |f: &mut Fabric| closed.get() || doorbell_irq_count(f, peer, since) > n);
            if b.closed.get() {
                return Ok(());
            }
            t.sleep(params().rdma_sw.irq_entry_ps);
            b.handled.borrow_mut().push(t.now());
        }
    });
}

/// The calling CPU's `turn`-th operation (operation `i`): it starts once the one before is done.
/// A put's store slots are threads; the last one to finish rings the doorbell.
#[allow(clippy::too_many_arguments)]
fn spawn_cpu_op(m: &mut Machine<Fabric>, (host, at): (u16, Ps), mapping: Mapping, regs: CpuRegs, board: &Rc<Board>, turn: usize, i: usize, op: Op) {
    let gate = move |t: &mut Thread<'_, Fabric>, b: &Board| {
        let turns = b.turn.clone();
        t.wait_until(format!("the calling CPU's operation {turn}"), move |_: &mut Fabric| turns.get() == turn);
    };
    match op {
        Op::PioGet { win, len, land } => {
            let b = board.clone();
            m.spawn(&format!("shmem CPU, operation {i}"), at, move |t| {
                gate(t, &b);
                let d = pio_get(t, host, win, len, land)?;
                b.done.borrow_mut()[i] = Some(d);
                b.turn.set(turn + 1);
                Ok(())
            });
        }
        Op::PioPut { win, data } => {
            let data: Rc<[u8]> = Rc::from(data);
            let left = Rc::new(Cell::new(mapping.slots()));
            for lane in 0..mapping.slots() {
                let (b, data, left) = (board.clone(), data.clone(), left.clone());
                m.spawn(&format!("shmem CPU, operation {i}, store slot {lane}"), at, move |t| {
                    gate(t, &b);
                    let start = t.now();
                    copy_slot(t, host, win, &data, lane, mapping)?;
                    left.set(left.get() - 1);
                    if left.get() == 0 {
                        let mut timing = Timing::default();
                        timing.add("CPU stores through the BAR", t.now() - start);
                        let k = ring(t, &b, &regs)?;
                        b.done.borrow_mut()[i] = Some(Done { timing, data: Vec::new(), end: t.now(), ring: Some(k) });
                        b.turn.set(turn + 1);
                    }
                    Ok(())
                });
            }
        }
        Op::Dma { .. } => unreachable!("DMA operations go to the channels"),
    }
}

/// Ring the peer's data doorbell (a UC store): which doorbell of the run it is.
fn ring(t: &mut Thread<'_, Fabric>, b: &Board, regs: &CpuRegs) -> Result<usize, ThreadError> {
    let k = b.rung.get();
    b.rung.set(k + 1);
    crate::pio::uc_store(t, regs.host, regs.peer_db(), DB_DATA as u32)?;
    Ok(k)
}

/// UC loads of `store_bytes` through the BAR, one round trip each.
fn pio_get(t: &mut Thread<'_, Fabric>, host: u16, win: u64, len: u64, land: Option<u64>) -> Result<Done, ThreadError> {
    let start = t.now();
    let unit = params().cpu_store.store_bytes;
    let mut data = Vec::with_capacity(len as usize);
    let mut at = 0;
    while at < len {
        let n = unit.min(len - at);
        data.extend(t.cpu_read(host, win + at, n as usize)?);
        at += n;
    }
    if let Some(local) = land {
        t.world().write(devlend_fabric::route::Requester::Cpu(host), local, &data);
    }
    let mut timing = Timing::default();
    timing.add("CPU loads through the BAR", t.now() - start);
    Ok(Done { timing, data, end: t.now(), ring: None })
}
