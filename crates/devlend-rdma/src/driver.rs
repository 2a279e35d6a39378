//! The DMA driver's call, as a thread on a machine.
//!
//! The driver's call works on any machine (the library's session, [`crate::session::Shmem`], or
//! a cluster shared with other workloads). A DMA call is what the PLX driver's ioctl
//! does (003 §3): enter the driver, read the channel's status register over PCIe where block mode
//! does, write the SG ring into host RAM, program the channel's registers with uncached stores
//! (START last), sleep until the channel's MSI-X interrupt lands, read the status in the ISR, and
//! wake the caller. Every store, read and interrupt travels on the machine's links.

use crate::error::{DmaStop, RResult, RdmaError};
use crate::params::params;
use crate::shmem::Timing;
use devlend_devices::plx_dma::{self as dma, Desc};
use devlend_engine::machine::{Machine, MachineError, Thread, ThreadError, World};
use devlend_fabric::fabric::Event;
use devlend_fabric::route::Requester;

/// Where a driver finds one channel: its host, registers, SG ring slice and MSI data.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Regs {
    pub host: u16,
    pub func: devlend_fabric::model::FuncId,
    /// The channel's registers: bus address (for the CPU) and offset in BAR 0.
    pub base: u64,
    pub offset: u64,
    pub ring: u64,
    pub ring_bytes: u64,
    pub msi_data: u32,
}

/// Run `m` until nothing is left to happen; its failure as the library's error. A thread on it
/// fails with the engine's own errors or with an [`RdmaError`] (boxed in `ThreadError::Other`);
/// any other error of a thread is its spawner's bug, and panics here.
pub fn run<W: World>(m: &mut Machine<W>) -> RResult<()> {
    m.run().map_err(machine_error)
}

/// A machine's error as the library's: a thread's own
/// error is an [`RdmaError`] (the library's threads, and those of the tools on its machines,
/// fail with nothing else), and `Machine::run` reports no workload's set-up error.
fn machine_error(e: MachineError) -> RdmaError {
    match e.into_run_failure() {
        Ok((thread, failure)) => RdmaError::Run { thread, failure },
        Err(MachineError::Thread { thread, error }) => match *error {
            ThreadError::Other(inner) => match inner.downcast::<RdmaError>() {
                Ok(r) => *r,
                Err(other) => panic!("thread {thread} failed with an error that is not an RdmaError: {other}"),
            },
            error => unreachable!("into_run_failure keeps every engine error of a thread: {error}"),
        },
        Err(e) => panic!("{e}: the library's machines run no workload, so no workload's error reaches them"),
    }
}

/// The channel registers a call programs, as 32-bit uncached stores (START last).
fn register_stores(descs: &[Desc], sg: bool, ring_at: u64) -> Vec<(u64, u32)> {
    let split = |off: u64, v: u64| [(off, v as u32), (off + 4, (v >> 32) as u32)];
    let mut regs: Vec<(u64, u32)> = Vec::new();
    if sg {
        regs.extend(split(dma::RING, ring_at));
        regs.push((dma::NDESC, descs.len() as u32));
    } else {
        regs.extend(split(dma::SRC, descs[0].src));
        regs.extend(split(dma::DST, descs[0].dst));
        regs.push((dma::COUNT, descs[0].count));
    }
    let ctrl = dma::CTRL_START | dma::CTRL_IRQ | if sg { dma::CTRL_SG } else { 0 };
    regs.push((dma::CTRL, ctrl));
    regs
}

/// One DMA call on a channel, from the ioctl to the woken caller: its time by part, or the
/// channel's error status (the call returns normally then, as the ioctl does, so other channels'
/// threads go on).
pub(crate) fn dma_call<W: World>(t: &mut Thread<'_, W>, r: Regs, descs: &[Desc], sg: bool) -> Result<RResult<Timing>, ThreadError> {
    let p = devlend_devices::plx_dma::params::ntb_dma();
    let sw = &params().rdma_sw;
    let mut timing = Timing::default();
    let mut mark = t.now();
    let mut lap = |t: &Thread<'_, W>, timing: &mut Timing, what: &'static str| {
        let now = t.now();
        timing.add(what, now - mark);
        mark = now;
    };
    t.sleep(sw.ioctl_ps);
    lap(t, &mut timing, "ioctl into the DMA driver");
    let reads = if sg { p.status_reads_sg } else { p.status_reads_block };
    let before = reads.min(1);
    for _ in 0..before {
        t.cpu_read(r.host, r.base + dma::STATUS, 4)?;
    }
    lap(t, &mut timing, "status register reads");
    if sg {
        let table: Vec<u8> = descs.iter().flat_map(|d| d.encode()).collect();
        t.world().fabric().write(Requester::Cpu(r.host), r.ring, &table);
    }
    let events = t.world().fabric().events().total();
    for (off, v) in register_stores(descs, sg, r.ring) {
        crate::pio::uc_store(t, r.host, r.base + off, v)?;
    }
    lap(t, &mut timing, "register stores (UC)");
    let data = r.msi_data;
    t.wait_until(format!("the completion interrupt (MSI data {data:#x})"), move |w: &mut W| {
        w.fabric().events().since(events).any(|e| matches!(e, Event::Msi { data: d, .. } if *d == data))
    });
    lap(t, &mut timing, "engine: descriptors, data, MSI");
    for _ in before..reads {
        t.cpu_read(r.host, r.base + dma::STATUS, 4)?;
    }
    lap(t, &mut timing, "status register reads");
    t.sleep(sw.irq_wakeup_ps);
    lap(t, &mut timing, "interrupt and wake-up");
    Ok(check_status(t, r).map(|_| timing))
}

/// The channel's status after its interrupt: an error names the descriptor and what landed.
fn check_status<W: World>(t: &mut Thread<'_, W>, r: Regs) -> RResult<()> {
    let mut w = t.world();
    let f = w.fabric();
    let status = dma::reg_read(f, r.func, r.offset + dma::STATUS, 4) as u32;
    if status & dma::STATUS_ERROR == 0 {
        return Ok(());
    }
    let bytes_done = dma::reg_read(f, r.func, r.offset + dma::BYTES_DONE, 8);
    Err(RdmaError::Dma { descriptor: (status >> 8) as usize, bytes_done, stop: DmaStop::Status })
}

/// Each thread's time from its start to its end (0 for one that did not end), in ps.
pub fn thread_ps<W: World>(m: &Machine<W>, ids: &[usize]) -> Vec<u64> {
    ids.iter().map(|&i| m.thread_end(i).map_or(0, |e| e - m.thread_start(i))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::RunFailure;
    use devlend_fabric::route::Failure;

    use crate::session::Shmem;
    use devlend_fabric::Fabric;

    const J: &str = include_str!("../tests/pex8749-rdma.json");

    #[test]
    fn a_thread_that_waits_for_ever_or_reads_nowhere_is_a_typed_run_failure() {
        let mut s = Shmem::new(devlend_fabric::build_json(J).unwrap());
        s.machine().spawn("waiter", 0, |t| {
            t.wait_until("what never comes", |_: &mut Fabric| false);
            Ok(())
        });
        let e = s.run().unwrap_err();
        let RdmaError::Run { thread, failure: RunFailure::Stuck { waiting_for, .. } } = &e else { panic!("{e:?}") };
        assert_eq!((thread.as_str(), waiting_for.as_str()), ("waiter", "what never comes"));
        // A CPU read of an address no RAM or device decodes: the fabric's failure, with its names.
        // The failed run left a fresh machine: the waiter is gone, only the reader runs.
        let host = s.fabric().host_id("host-a").unwrap();
        let at = s.now();
        s.machine().spawn("reader", at, move |t| t.cpu_read(host, 1 << 60, 4).map(|_| ()));
        let e = s.run().unwrap_err();
        let RdmaError::Run { thread, failure: RunFailure::Access { addr, route } } = &e else { panic!("{e:?}") };
        assert_eq!((thread.as_str(), *addr, route.host.as_deref()), ("reader", 1 << 60, Some("host-a")));
        assert!(matches!(route.failure, Failure::Unsupported { .. }), "{route:?}");
        assert!(e.to_string().starts_with("thread reader: access at 0x1000000000000000 failed: unsupported request"), "{e}");
    }

    #[test]
    fn the_driver_programs_as_many_registers_as_params_say() {
        let p = devlend_devices::plx_dma::params::ntb_dma();
        let d = [Desc { src: 0x1000, dst: 0x2000, count: 64 }];
        assert_eq!(register_stores(&d, false, 0).len() as u64, p.register_writes_block);
        assert_eq!(register_stores(&d, true, 0x3000).len() as u64, p.register_writes_sg);
        assert_eq!(register_stores(&d, true, 0x3000).last(), Some(&(dma::CTRL, dma::CTRL_START | dma::CTRL_IRQ | dma::CTRL_SG)), "START goes last");
    }
}
