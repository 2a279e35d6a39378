//! The hyper-tenant NIC (seed 002, HyperTRIO) as a device on the one clock, generic over its
//! world: it asks the world for nothing but the fabric (its DMA goes out as its own requester).
//!
//! Two models meet here. The HyperTRIO pipeline (`devlend-hypertrio`: DevTLB, PTB, prefetch,
//! nested walks; Base or HyperTRIO configuration of 002 Table IV) stays the NIC's fast internal
//! model: given the PCIe round trip of one translation request it says how fast packets go
//! (Gb/s) and how many translation requests leave the NIC per unit of time. The engine carries
//! what leaves the NIC: packets arrive from the wire at the pipeline's rate; each is a DMA write
//! of `packet_bytes` into a buffer in the runner's RAM, and with each packet the NIC sends the
//! pipeline's translation requests per packet (demand requests reaching the IOMMU and
//! prefetches) as 8-byte DMA reads of the runner's RAM (an ATS request and its one-translation
//! completion), on the same links as every other workload of the run.
//!
//! Coupling (a fixed-point iteration carried along the run's clock): the NIC starts with one
//! probe read whose round trip seeds the pipeline. It then drives its traffic in epochs
//! (`NicSpec::epoch`); at the end of each, the mean round trip its reads saw in that epoch (the
//! loaded round trip, less the engine's charge at the completer, its DRAM read and IOTLB hit,
//! which the pipeline charges itself) is compared with the one the pipeline ran with, r. The
//! seen round trip falls as r grows (a longer round trip, a lower rate, less queueing), so the
//! fixed point lies above r if the requests saw more, below it if less: the epochs bisect. A
//! bracket [lo, hi] keeps the largest r known to be below the fixed point and the smallest
//! known to be above; the next r is its middle, or the seen round trip while one side is open.
//! The pipeline runs again only when the next r differs from r by 1% or more. Plain iteration
//! (r <- seen) and its damped form swing for ever here: the round trip seen is nearly a step
//! (the NIC's read tags and the shared link's queue fill past a rate), so the fixed point sits
//! on the step, and bisection finds it. While the other load is steady, epoch k+1 is iteration
//! k+1 of "pipeline(r) -> run -> seen round trip -> pipeline"; when the load changes (a
//! neighbour ends) a side of the bracket is contradicted, dropped, and found again.
//! [`NicResult`] gives the pipeline runs (`iterations`), since when the round trip has held
//! within 1% (None: it was still moving at the end), and every epoch's round trip and rate.
//!
//! The path pushes back: a packet that arrives while the previous packet's write has not yet
//! left the NIC (its link's credits, and so every link behind it, are the limit) is dropped
//! (`NicResult::drops`), as a NIC without receive buffering beyond one packet would drop it;
//! so the NIC never sends more than the path takes, and its delivered rate is the smaller of
//! the pipeline's and the path's.
//!
//! The workload that attaches the NIC, maps its packet buffer and rings its doorbell is
//! `devlend-workloads`' `nic` module; the model here is what runs on the machine.

use devlend_engine::machine::{Cx, Device, FlowDone, World};
use devlend_engine::queue::Ps;
use devlend_hypertrio::{simulate, Config, Stats, WorkloadSpec};
use devlend_wire::Tlp;
use std::collections::HashMap;

/// The packet buffers the NIC writes into, reused as a ring (bytes).
pub const BUFFER_BYTES: u64 = 16 << 20;
/// PCIe ATS: a translation request reads 2 DW, one translation's completion.
const TRANSLATION_BYTES: u64 = 8;
/// A change of the round trip below this fraction ends the iteration (the pipeline keeps its rates).
const CONVERGED: f64 = 0.01;

/// What the NIC serves: a Table IV configuration, its tenants and their traffic, and how long.
#[derive(Clone, Debug, PartialEq)]
pub struct NicSpec {
    /// 002 Table IV column: "base" or "hypertrio".
    pub config: String,
    pub tenants: u32,
    /// 002 Table III workload profile ("iperf3", ...).
    pub profile: String,
    /// Interleaving of the tenants' packets ("RR1", "RAND", ...).
    pub order: String,
    /// Each tenant's log cut to this many packets (None: the profile's whole log).
    pub packets_per_tenant: Option<u64>,
    /// How long packets arrive (ps).
    pub duration: Ps,
    /// How often the round trip is fed back to the pipeline (ps).
    pub epoch: Ps,
}

impl NicSpec {
    /// `tenants` iperf3 tenants in round robin (RR1) for `duration`, fed back every 5 us.
    pub fn new(config: &str, tenants: u32, duration: Ps) -> NicSpec {
        NicSpec { config: config.into(), tenants, profile: "iperf3".into(), order: "RR1".into(), packets_per_tenant: None, duration, epoch: 5_000_000 }
    }
}

/// One epoch: when it ended, the mean round trip its reads saw (ps, None: no read completed),
/// and the pipeline's rate the next epoch is driven at (Gb/s).
#[derive(Clone, Debug, PartialEq)]
pub struct NicEpoch {
    pub end: Ps,
    pub round_trip_ps: Option<f64>,
    pub gbps: f64,
}

/// What the NIC did: its packets and translation requests on the machine and the coupling.
#[derive(Clone, Debug, PartialEq)]
pub struct NicResult {
    pub packets: u64,
    /// Packets that arrived while the previous one's write had not left the NIC.
    pub drops: u64,
    pub translations: u64,
    /// The probe's round trip (ps): what the pipeline ran with first.
    pub first_round_trip_ps: u64,
    /// Mean round trip of every translation request of the run (ps).
    pub round_trip_ps: f64,
    /// The round trip the pipeline last ran with (ps), and its rate (Gb/s).
    pub model_round_trip_ps: u64,
    pub model_gbps: f64,
    /// Pipeline runs (the probe's included).
    pub iterations: u32,
    /// Since when the pipeline's round trip has held (the end of the first epoch of the final
    /// run of epochs whose next round trip moved by less than 1%); None: it moved to the end.
    pub converged_at: Option<Ps>,
    pub epochs: Vec<NicEpoch>,
}

/// Token kinds (high bits) for DMA and timers.
const PACKET: u64 = 1 << 60;
const READ: u64 = 2 << 60;
const T_PACKET: u64 = 3 << 60;
const T_EPOCH: u64 = 5 << 60;
const KIND: u64 = 0xf << 60;

/// The bisection's bracket of pipeline round trips (ps).
#[derive(Default)]
struct Bracket {
    lo: Option<u64>,
    hi: Option<u64>,
}

impl Bracket {
    /// The pipeline ran with `r` and the requests saw `seen`: the next round trip to run with.
    fn next(&mut self, r: u64, seen: u64) -> u64 {
        if seen >= r {
            self.hi = self.hi.filter(|&h| h > r);
            self.lo = Some(r);
        } else {
            self.lo = self.lo.filter(|&l| l < r);
            self.hi = Some(r);
        }
        match (self.lo, self.hi) {
            (Some(l), Some(h)) => (l + h) / 2,
            _ => seen.max(1),
        }
    }
}

struct Rates {
    round_trip: u64,
    stats: Stats,
    packet_gap: Ps,
    reads_per_packet: f64,
}

/// The NIC on the machine.
pub struct Nic {
    spec: NicSpec,
    cfg: Config,
    wl: WorkloadSpec,
    packet_bytes: u64,
    buf: u64,
    completer: Ps,
    stop: Option<Ps>,
    rates: Option<Rates>,
    bracket: Bracket,
    issued: HashMap<u64, Ps>,
    next: u64,
    /// This epoch's round trips (sum, count), and the whole run's.
    epoch_rtt: (f64, u64),
    all_rtt: (f64, u64),
    first: u64,
    start: Option<Ps>,
    end: Option<Ps>,
    packets: u64,
    drops: u64,
    /// A packet's write has not left the NIC yet.
    sending: bool,
    /// Translation requests owed (the pipeline's per packet, fractional).
    owed: f64,
    bytes: u64,
    iterations: u32,
    converged_at: Option<Ps>,
    epochs: Vec<NicEpoch>,
    error: Option<NicFault>,
}

/// Why the NIC stopped: kept as a value while the machine runs, reported as
/// [`WorkloadError::Failed`] with the workload's name.
#[derive(Clone, Debug)]
pub enum NicFault {
    /// The HyperTRIO pipeline refused the configuration or workload.
    Pipeline(devlend_hypertrio::HtError),
    /// The pipeline moved nothing with this round trip (ps).
    Idle { round_trip: u64 },
    /// A DMA could not be issued.
    Issue { what: &'static str, why: devlend_fabric::route::Failure },
    /// A DMA faulted on its way.
    Dma { addr: u64, why: devlend_fabric::route::Failure },
}

impl std::error::Error for NicFault {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NicFault::Pipeline(e) => Some(e),
            _ => None,
        }
    }
}

impl std::fmt::Display for NicFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NicFault::Pipeline(e) => write!(f, "the HyperTRIO pipeline: {e}"),
            NicFault::Idle { round_trip } => write!(f, "the pipeline moved nothing with a {round_trip} ps round trip"),
            NicFault::Issue { what, why } => write!(f, "{what}: {why:?}"),
            NicFault::Dma { addr, why } => write!(f, "DMA at {addr:#x} failed: {why:?}"),
        }
    }
}

impl Nic {
    fn rates(&mut self, round_trip: u64) -> Result<Rates, NicFault> {
        let mut cfg = self.cfg.clone();
        cfg.pcie_round_trip_ps = Some(round_trip);
        let stats = simulate(&cfg, &self.wl).map_err(NicFault::Pipeline)?;
        self.iterations += 1;
        if stats.gbps <= 0.0 || stats.time_ps == 0 {
            return Err(NicFault::Idle { round_trip });
        }
        let packet_gap = (self.packet_bytes as f64 * 8.0 / stats.gbps * 1000.0).round().max(1.0) as Ps;
        let reads_per_packet = (stats.iommu_requests + stats.prefetch_requests) as f64 / stats.packets.max(1) as f64;
        Ok(Rates { round_trip, stats, packet_gap, reads_per_packet })
    }

    fn token(&mut self, kind: u64) -> u64 {
        self.next += 1;
        kind | self.next
    }

    fn running<W: World>(&self, cx: &Cx<W>) -> bool {
        self.error.is_none() && self.stop.is_some_and(|s| cx.now() < s)
    }

    fn read<W: World>(&mut self, cx: &mut Cx<W>) {
        let tok = self.token(READ);
        match cx.dma_read(self.buf, TRANSLATION_BYTES, tok) {
            Ok(()) => {
                self.issued.insert(tok, cx.now());
            }
            Err(e) => self.error = Some(NicFault::Issue { what: "a translation request", why: e }),
        }
    }

    fn packet<W: World>(&mut self, cx: &mut Cx<W>) {
        let off = (self.packets * self.packet_bytes) % (BUFFER_BYTES - self.packet_bytes);
        let tok = self.token(PACKET);
        match cx.dma_write(self.buf + off, vec![0; self.packet_bytes as usize], tok) {
            Ok(()) => {
                self.packets += 1;
                self.sending = true;
                self.start.get_or_insert(cx.now());
            }
            Err(e) => return self.error = Some(NicFault::Issue { what: "a packet write", why: e }),
        }
        self.owed += self.rates.as_ref().map_or(0.0, |r| r.reads_per_packet);
        while self.owed >= 1.0 && self.error.is_none() {
            self.owed -= 1.0;
            self.read(cx);
        }
    }

    /// A translation request's round trip, as the pipeline counts it.
    fn sample<W: World>(&mut self, cx: &mut Cx<W>, tok: u64) {
        let Some(at) = self.issued.remove(&tok) else { return };
        let rtt = (cx.now() - at).saturating_sub(self.completer) as f64;
        if self.rates.is_none() {
            self.first = rtt as u64;
            return self.begin(cx);
        }
        self.epoch_rtt = (self.epoch_rtt.0 + rtt, self.epoch_rtt.1 + 1);
        self.all_rtt = (self.all_rtt.0 + rtt, self.all_rtt.1 + 1);
    }

    /// The probe is back: the pipeline with its round trip, then the traffic and the epochs.
    fn begin<W: World>(&mut self, cx: &mut Cx<W>) {
        match self.rates(self.first.max(1)) {
            Ok(r) => self.rates = Some(r),
            Err(e) => return self.error = Some(e),
        }
        self.stop = Some(cx.now() + self.spec.duration);
        cx.set_timer(0, T_PACKET);
        cx.set_timer(self.spec.epoch, T_EPOCH);
    }

    /// An epoch ends: feed its round trip back when it moved by 1% or more.
    fn epoch<W: World>(&mut self, cx: &mut Cx<W>) {
        let (sum, n) = std::mem::take(&mut self.epoch_rtt);
        let measured = (n > 0).then(|| sum / n as f64);
        let last = self.rates.as_ref().map_or(1, |r| r.round_trip);
        if let Some(m) = measured {
            let next = self.bracket.next(last, m.round() as u64);
            if (next.abs_diff(last) as f64) < CONVERGED * last as f64 {
                self.converged_at.get_or_insert(cx.now());
            } else {
                self.converged_at = None;
                match self.rates(next) {
                    Ok(r) => self.rates = Some(r),
                    Err(e) => self.error = Some(e),
                }
            }
        }
        let gbps = self.rates.as_ref().map_or(0.0, |r| r.stats.gbps);
        self.epochs.push(NicEpoch { end: cx.now(), round_trip_ps: measured, gbps });
        if self.running(cx) {
            cx.set_timer(self.spec.epoch, T_EPOCH);
        }
    }

    /// The NIC for `spec`, the pipeline's `cfg` and `wl`, writing `packet_bytes` packets into the
    /// buffer at bus address `buf`; `completer` is the engine's charge at the completer (its DRAM
    /// read and IOTLB hit, ps), taken off each round trip since the pipeline charges it itself.
    pub fn new(spec: NicSpec, (cfg, wl): (Config, WorkloadSpec), packet_bytes: u64, buf: u64, completer: Ps) -> Nic {
        Nic {
            spec,
            cfg,
            wl,
            packet_bytes,
            buf,
            completer,
            stop: None,
            rates: None,
            bracket: Bracket::default(),
            issued: HashMap::new(),
            next: 0,
            epoch_rtt: (0.0, 0),
            all_rtt: (0.0, 0),
            first: 0,
            start: None,
            end: None,
            packets: 0,
            drops: 0,
            sending: false,
            owed: 0.0,
            bytes: 0,
            iterations: 0,
            converged_at: None,
            epochs: Vec::new(),
            error: None,
        }
    }

    /// What the NIC did, when its first packet left and its last write landed, and the bytes it
    /// wrote; `Ok(None)`: it never started (its doorbell or probe read did not complete).
    pub fn outcome(&self) -> Result<Option<NicOutcome>, NicFault> {
        if let Some(fault) = &self.error {
            return Err(fault.clone());
        }
        let Some(r) = &self.rates else { return Ok(None) };
        let res = NicResult {
            packets: self.packets,
            drops: self.drops,
            translations: self.all_rtt.1,
            first_round_trip_ps: self.first,
            round_trip_ps: if self.all_rtt.1 > 0 { self.all_rtt.0 / self.all_rtt.1 as f64 } else { self.first as f64 },
            model_round_trip_ps: r.round_trip,
            model_gbps: r.stats.gbps,
            iterations: self.iterations,
            converged_at: self.converged_at,
            epochs: self.epochs.clone(),
        };
        Ok(Some((res, self.start.unwrap_or(0), self.end, self.bytes)))
    }
}

/// The NIC's result, its first packet's time, its last write's landing and its bytes written.
pub type NicOutcome = (NicResult, Ps, Option<Ps>, u64);

impl<W: World> Device<W> for Nic {
    fn mmio_write(&mut self, cx: &mut Cx<W>, _bar: u8, _offset: u64, _tlp: &Tlp) {
        if self.stop.is_none() && self.issued.is_empty() && self.rates.is_none() {
            self.read(cx);
        }
    }

    fn dma_done(&mut self, cx: &mut Cx<W>, done: FlowDone) {
        if let Some((addr, why)) = done.fault {
            self.error = Some(NicFault::Dma { addr, why });
            return;
        }
        match done.token & KIND {
            PACKET => {
                self.bytes += self.packet_bytes;
                self.end = Some(done.end);
            }
            READ => self.sample(cx, done.token),
            _ => {}
        }
    }

    fn dma_sent(&mut self, _cx: &mut Cx<W>, token: u64) {
        if token & KIND == PACKET {
            self.sending = false;
        }
    }

    /// An epoch's end, or a packet's arrival from the wire.
    fn timer(&mut self, cx: &mut Cx<W>, token: u64) {
        match token & KIND {
            T_EPOCH => self.epoch(cx),
            T_PACKET if self.running(cx) => {
                if self.sending {
                    self.drops += 1;
                } else {
                    self.packet(cx);
                }
                if let Some(r) = &self.rates {
                    cx.set_timer(r.packet_gap, T_PACKET);
                }
            }
            _ => {}
        }
    }
}
