//! The trace-driven device/chipset model of 002 §IV-C with the HyperTRIO structures of §III.
//!
//! Link: packets arrive back to back (1542 B at 200 Gb/s, one every 61.68 ns, Table II). A packet
//! is accepted when the Pending Translation Buffer has a free entry and dropped otherwise; a
//! dropped packet is retried at the next arrival slot (§IV-C). Bandwidth = accepted packets x
//! 1542 B / time to translate them all (§IV-C).
//!
//! PTB (§III, §IV-C): an entry holds one translation from its issue until its completion;
//! translations complete out of order. A packet is accepted when the PTB has a free entry, i.e.
//! fewer than `ptb_entries` translations are pending, and then issues its three translations at
//! once (the released HyperSIO model admits a packet's bundle on the same test; it is also the
//! only reading under which Table IV's 1-entry Base PTB accepts packets at all). §III counts
//! the PTB in outstanding requests ("112 outstanding requests" for 1500 B packets), so 32 entries
//! hold about 11 packets, not 32. Otherwise the packet is dropped and retried at the next
//! arrival slot. A request that misses the DevTLB goes to the IOMMU even when a request for the
//! same page is already in flight: 002 describes hit under miss (later requests are not held
//! behind a miss, §V-D), not merging of misses.
//!
//! A request: DevTLB (partitioned by SID, §III) and, with HyperTRIO, the prefetch buffer probed
//! together (hit: done after `devtlb_hit_ps`); otherwise it crosses PCIe (Table II: 450 ns; see below) to the IOMMU:
//! context cache (miss: root + context entry reads), IOTLB (2 ns), L2/L3 page-structure caches
//! (partitioned by DID) and the walk with 50 ns per memory access (`tables`), then back over
//! PCIe; the DevTLB is filled when the answer arrives. The IOMMU's caches change in the
//! order requests reach it, which is the order they were sent (the PCIe latency is constant);
//! walks are not limited in number (002 gives no walker count; assumed).
//!
//! The PCIe round trip (`Config::pcie_round_trip_ps`): what is measured and what stays Table II.
//! On 002's own system (H1-H4, no topology) it is twice Table II's 450 ns. For a NIC placed on a
//! topology (`hnic`, python/devlend/experiments/hnic.py) it is measured once per run on the
//! engine (devlend-engine's Machine): an 8-byte read, the size of an ATS translation request
//! and its one-translation completion, from the NIC to the IOMMU's root complex over the actual
//! route (the borrower's own slot, or the lender's slot through the NTB), with the engine's own
//! charge at the completer (its IOTLB probe and memory read) taken out, since the pipeline
//! charges the IOMMU's work itself from Table II (IOTLB hit, 50 ns per walk access). The
//! pipeline never calls the engine per translation: it takes that one number.
//!
//! Walk length (`Config::nested_walk`): nested, every guest level read plus a host walk of its
//! gPA (24 accesses for a 4 KiB page with nothing cached, Table II); or, as the performance model
//! was fed (§IV-A, §IV-B), the walk the logs record: the L1VM's emulated IOMMU walking its one
//! second-level table for the L2VM's addresses, as many levels as that table has (QEMU's default
//! 39-bit tables: 3 for 4 KiB, 2 for 2 MiB; what the logs record when they record it), one access
//! each below the deepest page-structure-cache hit). 002's own results need the second: a Base packet
//! at 1024 tenants takes one PCIe round trip plus a walk, and 6% of 200 Gb/s (§V-B) leaves about
//! 1.03 us for it, ~130 ns for the walk; 24 accesses alone take 1.2 us.
//!
//! Prefetch unit (§III, Table IV), consulted with the DevTLB on every request: the SID predictor
//! maps the SID seen `sid_history` requests ago to the SID seen now, so looking up the current
//! SID predicts the tenant that will come `sid_history` requests later. When the prefetch buffer
//! misses, the unit sends a prefetch for the predicted SID to the chipset (PCIe), whose IOVA
//! history reader reads that tenant's `history_pages` most recently accessed gIOVAs from memory
//! (one DRAM access) and issues a translation for each to the IOMMU; the answers fill the
//! prefetch buffer (fully associative, LRU). The history records every request of the tenant
//! (most recent distinct pages first). Accuracy = prefetched translations used at least once by
//! a demand request that missed the DevTLB / prefetched translations; coverage = such demand
//! requests served from the prefetch buffer / demand requests that missed the DevTLB. A
//! prefetch-buffer hit is answered from the buffer only.
//!
//! Belady's oracle (DevTLB only): the trace is read through a lookahead window of
//! `ORACLE_WINDOW_PACKETS` packets; each request's next use is the position of the next request
//! for the same (SID, page) inside the window, or never. With the window far longer than any
//! reuse distance a 64-entry DevTLB can exploit, this is Belady's MIN on the stream, in
//! bounded memory.

use crate::cache::{
    age_touch, find8, find_in, oldest, on_row, on_row_mut, padded_rows, Cache, CacheStats, Dynamic, Lfu, Lru, LruSet, Policy, Shape, AGE_PAD, NEVER, PAD,
};
use crate::divisor::Divisor;
use crate::error::{HtError, HtResult};
use crate::params::{params, Config, HyperTrioParams};
use crate::tables::{Tables, WalkShape};
use crate::workload::{Packet, PageId, Trace, WorkloadSpec};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::VecDeque;

pub const ORACLE_WINDOW_PACKETS: usize = 1 << 18;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub tenants: u32,
    pub packets: u64,
    pub translations: u64,
    pub time_ps: u64,
    /// Achieved link bandwidth, Gb/s.
    pub gbps: f64,
    pub utilisation: f64,
    pub devtlb_hit_rate: f64,
    pub pb_hit_rate: f64,
    pub iommu_requests: u64,
    pub context_hit_rate: f64,
    pub iotlb_hit_rate: f64,
    pub l2_hit_rate: f64,
    pub l3_hit_rate: f64,
    pub walks: u64,
    pub walk_accesses: u64,
    pub mean_walk_accesses: f64,
    /// Packet arrivals that found the PTB full (each retry counts again).
    pub drops: u64,
    /// Pending translations in the PTB: time-weighted mean and maximum (a packet enters while
    /// fewer than `ptb_entries` are pending, so the maximum can exceed it by two).
    pub ptb_mean: f64,
    pub ptb_max: usize,
    pub prefetch_requests: u64,
    pub prefetch_useful: u64,
    pub prefetch_accuracy: f64,
    pub prefetch_coverage: f64,
    pub demand_misses: u64,
    pub prefetch_served: u64,
}

/// A latency counted from a slot boundary (requests are issued on one), with the boundary it is
/// due by and its time past the boundary before that: the run's latencies take few values,
/// precomputed, so no division per request.
#[derive(Clone, Copy)]
struct Lat {
    ps: u64,
    ahead: u64,
    within: u64,
}

impl Lat {
    fn new(ps: u64, slot: Divisor) -> Lat {
        let ahead = slot.div_ceil(ps);
        Lat { ps, ahead, within: ps + slot.d - 1 - ahead * slot.d }
    }
}

/// The Pending Translation Buffer's occupancy: how many pending translations complete in each
/// packet slot, on a ring of slots. Packets arrive at slot boundaries, so an entry completing at
/// `done` is free from the first slot boundary at or after it; counting per slot is exactly a
/// priority queue of completion times here, at O(1) per entry.
struct PtbRing {
    counts: Vec<u32>,
    live: usize,
    /// Slots up to this one have been released.
    released: u64,
}

impl PtbRing {
    fn new(slot: u64, span_ps: u64) -> PtbRing {
        let n = (span_ps / slot + 2).next_power_of_two() as usize;
        PtbRing { counts: vec![0; n], live: 0, released: 0 }
    }
    /// A translation pending until the boundary of slot `j` (issued in slot `now`).
    #[inline]
    fn push(&mut self, now: u64, j: u64) {
        assert!(j > now && j - now < self.counts.len() as u64, "PTB entry beyond the slot ring");
        let m = self.counts.len() as u64 - 1;
        self.counts[(j & m) as usize] += 1;
        self.live += 1;
    }
    /// Free the entries complete by the boundary of slot `k`.
    #[inline]
    fn release(&mut self, k: u64) {
        let m = self.counts.len() as u64 - 1;
        while self.released < k {
            self.released += 1;
            let c = &mut self.counts[(self.released & m) as usize];
            self.live -= *c as usize;
            *c = 0;
        }
    }
    /// The first slot after `k` at which an entry completes (some entry is pending).
    fn next_completion(&self, k: u64) -> u64 {
        let m = self.counts.len() as u64 - 1;
        (k + 1..).find(|&j| self.counts[(j & m) as usize] > 0).expect("a pending entry")
    }
}

/// Pending fills of one structure (the DevTLB or the prefetch buffer) in a timing wheel of
/// packet slots: every fill lands within a bounded time of its request, far less than the
/// wheel's span. Drained in (time, key) order, as a heap would. An entry packs its time within
/// its slot above its key, so one integer comparison orders a bucket; the two structures' fills
/// are independent, so each has its own wheel and the buckets stay short. The buckets lie in one
/// flat array with room for the most fills that can land in one slot (`Wheel::new`), so a push
/// is one store and a length bump, with no per-bucket vector to grow or reach through. The i-th
/// entries of all buckets sit side by side (entry i of bucket b at i x buckets + b): buckets
/// hold a few fills each, so the live entries stay in a few cache lines.
struct Wheel {
    entries: Vec<u64>,
    lens: Vec<u32>,
    room: usize,
    /// A bucket's entries, gathered to sort.
    scratch: Vec<u64>,
    slot: Divisor,
    next: u64,
}

impl Wheel {
    /// A wheel spanning `span_ps` whose buckets hold `room` fills each: a bucket (slot j) takes
    /// the fills issued in slot j - a for each distinct whole-slot delay a of the run's
    /// latencies, at most `per_slot` from each issue slot, so `room` = `per_slot` x (distinct
    /// delays) never overflows (`push` checks).
    fn new(slot: Divisor, span_ps: u64, room: usize) -> Wheel {
        assert!(slot.d < 1 << 32, "packet slot of {} ps", slot.d);
        let n = (span_ps / slot.d + 2).next_power_of_two() as usize;
        Wheel { entries: vec![0; n * room], lens: vec![0; n], room, scratch: Vec::with_capacity(room), slot, next: 0 }
    }
    /// The longest time ahead a fill may land.
    fn span_ps(&self) -> u64 {
        (self.lens.len() as u64 - 2) * self.slot.d
    }
    /// A fill landing `lat` after the boundary of slot `k`.
    #[inline]
    fn push(&mut self, k: u64, lat: Lat, key: u32) {
        let j = k + lat.ahead;
        let nb = self.lens.len();
        assert!(j >= self.next && j < self.next + nb as u64, "fill beyond the timing wheel");
        let b = (j & (nb as u64 - 1)) as usize;
        let n = self.lens[b] as usize;
        assert!(n < self.room, "more fills in one slot than the wheel's bound");
        // `within` (time past the boundary before j) orders the bucket by time
        self.entries[n * nb + b] = lat.within << 32 | key as u64;
        self.lens[b] = n as u32 + 1;
    }
    /// Apply `f` to the keys of the fills due by the boundary of slot `k`, in order.
    #[inline]
    fn drain(&mut self, k: u64, mut f: impl FnMut(u32)) {
        let nb = self.lens.len();
        while self.next <= k {
            let b = (self.next & (nb as u64 - 1)) as usize;
            match std::mem::take(&mut self.lens[b]) {
                0 => {}
                1 => f(self.entries[b] as u32),
                n => {
                    self.scratch.clear();
                    self.scratch.extend((0..n as usize).map(|i| self.entries[i * nb + b]));
                    sort_short(&mut self.scratch);
                    self.scratch.iter().for_each(|&e| f(e as u32));
                }
            }
            self.next += 1;
        }
    }
}

/// Sort a bucket (a handful of entries): insertion sort, one comparison per step.
#[inline]
fn sort_short(v: &mut [u64]) {
    if v.len() > 16 {
        return v.sort_unstable();
    }
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

const NO_SID: u32 = u32::MAX;
/// Translations a packet issues (`Packet::pages`), all in its one slot.
const PAGES_PER_PACKET: usize = 3;

/// What the model reads of one page of the layout, together (one look-up per request): its
/// gIOVA, its walk, and its 1 GiB / 2 MiB region numbers (exact u16 keys for the page-structure
/// caches).
#[derive(Clone, Copy)]
struct PageRec {
    iova: u64,
    shape: WalkShape,
    region_1g: u16,
    region_2m: u16,
}

struct Pb {
    keys: Vec<u32>,
    age: Vec<u8>,
    used: Vec<bool>,
    hits: u64,
    lookups: u64,
}

impl Pb {
    /// A fully associative buffer of `entries` (at most 64), LRU (keys and ages padded to whole
    /// SSE2 groups; see `cache::age_touch`).
    fn new(entries: usize) -> Pb {
        Pb {
            keys: padded_rows(1, entries, u32::MAX, PAD),
            age: padded_rows(1, entries, (entries - 1) as u8, AGE_PAD),
            used: vec![false; entries],
            hits: 0,
            lookups: 0,
        }
    }
    #[inline(always)]
    fn find(&self, key: u32) -> Option<usize> {
        if self.used.len() <= 8 {
            return find8(&self.keys[..8], key);
        }
        on_row(&self.keys, 0, self.keys.len(), |r| find_in(r, key))
    }
    #[inline(always)]
    fn touch(&mut self, i: usize) {
        let n = self.age.len();
        on_row_mut(&mut self.age, 0, n, |a| age_touch(a, i));
    }
    #[inline(always)]
    fn lookup(&mut self, key: u32) -> Option<usize> {
        self.lookups += 1;
        let i = self.find(key)?;
        self.touch(i);
        self.hits += 1;
        Some(i)
    }
    #[inline(always)]
    fn insert(&mut self, key: u32, used: bool) {
        // the entry holding `key`, else the least recent (the first empty one while any is:
        // empty entries share the oldest age)
        let i = self.find(key).unwrap_or_else(|| on_row(&self.age, 0, self.age.len(), |a| oldest(a, self.used.len())));
        self.keys[i] = key;
        self.touch(i);
        self.used[i] = used;
    }
}

/// The cache types of one run (`cache::Shape`): chosen once per run by [`run_fitting`], so the
/// whole run loop is compiled for them.
pub trait Kinds {
    type Dev: Shape;
    type Io: Shape;
    type Pst: Shape;
}

/// 002 Table IV's structures (Base and HyperTRIO alike): an LFU DevTLB of 8-way rows, the
/// IOTLB's LRU rows of 8 ways, LFU page-structure caches of 16-way rows, tags matched by their
/// low bits.
pub struct TableIv;
impl Kinds for TableIv {
    type Dev = Lfu<8>;
    type Io = Lru<8>;
    type Pst = Lfu<16>;
}

/// Any geometry and policy, read at run time.
pub struct AnyKinds;
impl Kinds for AnyKinds {
    type Dev = Dynamic;
    type Io = Dynamic;
    type Pst = Dynamic;
}

impl TableIv {
    fn fits(cfg: &Config, p: &HyperTrioParams) -> bool {
        let ftm = cfg.full_tag_match;
        <TableIv as Kinds>::Dev::fits(cfg.devtlb_ways, cfg.devtlb_policy, ftm)
            && <TableIv as Kinds>::Io::fits(p.iotlb_ways, Policy::Lru, false)
            && <TableIv as Kinds>::Pst::fits(cfg.l2_ways, cfg.l2_policy, ftm)
            && <TableIv as Kinds>::Pst::fits(cfg.l3_ways, cfg.l3_policy, ftm)
    }
}

pub struct Sim<'a, K: Kinds = AnyKinds> {
    p: &'a HyperTrioParams,
    cfg: Config,
    /// Device-to-chipset one-way latency: half the configuration's round trip, or 002 Table II's.
    one_way_ps: u64,
    /// The layout's pages, by page number.
    pages: Vec<PageRec>,
    /// Levels of the table the logged walk reads (`qemu_walk_levels`, or what the logs recorded).
    logged_top: u32,
    npages: usize,
    devtlb: Cache<K::Dev>,
    context: LruSet,
    iotlb: Cache<K::Io>,
    l2: Cache<K::Pst>,
    l3: Cache<K::Pst>,
    pb: Option<Pb>,
    /// Packet slot (rounded up) by which the in-flight prefetch of each (SID, page) completes,
    /// to issue it once (u32: half the memory of a time, for the random reads of RAND orders).
    pending_done: Vec<u32>,
    key_next: Vec<u64>,
    /// Translations on their way back to the DevTLB and to the prefetch buffer.
    tlb_fills: Wheel,
    pb_fills: Wheel,
    /// Latency of a DevTLB or prefetch-buffer hit, and of a request answered by the IOMMU after
    /// `m` memory accesses (PCIe both ways, the IOTLB probe, the accesses), by `m`.
    hit_lat: Lat,
    iommu_lat: Vec<Lat>,
    // prefetch unit
    sid_hist: Vec<u32>,
    hist_pos: usize,
    predictor: Vec<u32>,
    pf_busy: Vec<u64>,
    /// Each tenant's IOVA history (`note_history`): four pages, most recent in the low 16 bits.
    recent: Vec<u64>,
    st: Stats,
}

impl<'a, K: Kinds> Sim<'a, K> {
    /// Walk `levels`-level tables in the logged (one-dimensional) walk: what the QEMU logs
    /// recorded (their `vtd_slpte_fetch` levels).
    pub fn with_walk_levels(mut self, levels: u32) -> Self {
        self.logged_top = levels;
        self
    }

    pub fn new(cfg: &Config, shapes: Vec<WalkShape>, tenants: u32, iovas: Vec<u64>) -> HtResult<Sim<'static, K>> {
        let p = params();
        let bits = p.lfu_counter_bits;
        if cfg.ptb_entries == 0 {
            return Err(HtError::range("ptb_entries", 0, "at least one entry in the pending translation buffer"));
        }
        if cfg.l2_policy == Policy::Oracle || cfg.l3_policy == Policy::Oracle {
            return Err(HtError::range("l2_policy/l3_policy", "oracle", "lru or lfu (the oracle is available for the DevTLB only)"));
        }
        if cfg.prefetch {
            let (pb, sh, hp) = (cfg.pb_entries, cfg.sid_history, cfg.history_pages);
            if !(1..=64).contains(&pb) || sh == 0 || !(1..=4).contains(&hp) {
                return Err(HtError::range(
                    "prefetch",
                    format_args!("pb_entries {pb}, sid_history {sh}, history_pages {hp}"),
                    "pb_entries 1..64, sid_history >= 1 and history_pages 1..4",
                ));
            }
        }
        let npages = iovas.len().next_power_of_two();
        let n = tenants as usize * npages;
        let round_trip_ps = cfg.pcie_round_trip_ps.unwrap_or(2 * p.pcie_one_way_ps);
        let one_way_ps = round_trip_ps / 2;
        let slot = Divisor::new(p.packet_slot_ps());
        // a request answered after m memory accesses: a context-cache miss plus a whole nested
        // walk, and one more for a prefetch's history read
        let iommu_lat: Vec<Lat> = (0..=p.nested_walk_accesses + p.context_miss_accesses + 1)
            .map(|m| {
                let ps = round_trip_ps + p.iotlb_hit_ps + m as u64 * p.dram_access_ps;
                Lat::new(ps, slot)
            })
            .collect();
        let fill_span = iommu_lat.last().unwrap().ps.max(p.devtlb_hit_ps);
        // fills land after one of these latencies: a wheel bucket's bound (`Wheel::new`)
        let mut aheads: Vec<u64> = iommu_lat.iter().map(|l| l.ahead).collect();
        aheads.dedup();
        let delays = aheads.len();
        Ok(Sim {
            p,
            one_way_ps,
            devtlb: Cache::shaped("DevTLB", cfg.devtlb_entries, cfg.devtlb_ways, cfg.devtlb_partitions, cfg.devtlb_policy, cfg.full_tag_match, bits)?,
            context: LruSet::new("context cache", p.context_cache_entries, tenants as usize)?,
            iotlb: Cache::shaped("IOTLB", p.iotlb_entries, p.iotlb_ways, 1, Policy::Lru, false, bits)?,
            l2: Cache::shaped("L2TLB", cfg.l2_entries, cfg.l2_ways, cfg.l2_partitions, cfg.l2_policy, cfg.full_tag_match, bits)?,
            l3: Cache::shaped("L3TLB", cfg.l3_entries, cfg.l3_ways, cfg.l3_partitions, cfg.l3_policy, cfg.full_tag_match, bits)?,
            pb: cfg.prefetch.then(|| Pb::new(cfg.pb_entries)),
            pending_done: vec![0; n],
            key_next: if cfg.devtlb_policy == Policy::Oracle { vec![NEVER; n] } else { Vec::new() },
            tlb_fills: Wheel::new(slot, fill_span, PAGES_PER_PACKET * delays),
            pb_fills: Wheel::new(slot, fill_span, PAGES_PER_PACKET * cfg.history_pages * delays),
            hit_lat: Lat::new(p.devtlb_hit_ps, slot),
            iommu_lat,
            sid_hist: vec![NO_SID; cfg.sid_history.max(1)],
            hist_pos: 0,
            predictor: vec![NO_SID; tenants as usize],
            pf_busy: vec![0; tenants as usize],
            recent: vec![u64::MAX; tenants as usize],
            pages: iovas
                .iter()
                .zip(shapes)
                .zip(region_ids(&iovas, 30).into_iter().zip(region_ids(&iovas, 21)))
                .map(|((&iova, shape), (region_1g, region_2m))| PageRec { iova, shape, region_1g, region_2m })
                .collect(),
            logged_top: p.qemu_walk_levels,
            npages,
            cfg: cfg.clone(),
            st: Stats { tenants, ..Default::default() },
        })
    }

    #[inline]
    fn key_index(&self, key: u32) -> usize {
        (key >> 16) as usize * self.npages + (key & 0xffff) as usize
    }

    /// Apply the fills due by the boundary of slot `k`.
    fn apply_fills(&mut self, k: u64) {
        let (devtlb, pages, npages) = (&mut self.devtlb, &self.pages, self.npages);
        let key_next = &self.key_next;
        self.tlb_fills.drain(k, |key| {
            let (sid, page) = ((key >> 16) as usize, (key & 0xffff) as usize);
            let nu = key_next.get(sid * npages + page).copied().unwrap_or(0);
            devtlb.insert(key, pages[page].iova >> 21, sid as u64, nu);
        });
        if let Some(pb) = self.pb.as_mut() {
            self.pb_fills.drain(k, |key| pb.insert(key, false));
        }
    }

    /// Requests reaching the IOMMU at `t`: memory accesses they need.
    #[inline]
    fn iommu(&mut self, sid: u32, page: PageId) -> u32 {
        let mut n = 0;
        let did = sid as u64;
        if !self.context.access(sid) {
            n += self.p.context_miss_accesses;
        }
        let PageRec { iova, shape, region_1g, region_2m } = self.pages[page as usize];
        let key = (sid << 16) | page as u32;
        if self.iotlb.access(key, iova >> 21, 0, 0) {
            return n;
        }
        // exact keys: DID and the layout's 1 GiB / 2 MiB region number of the page
        let (k3, k2) = ((sid << 16) | region_1g as u32, (sid << 16) | region_2m as u32);
        // Deepest page-structure cache hit wins; the walk fills the levels it read.
        let start = if shape.leaf_level == 1 && self.l2.access(k2, iova >> 21, did, 0) {
            1
        } else if self.l3.access(k3, iova >> 30, did, 0) {
            2
        } else {
            4
        };
        let a = if self.cfg.nested_walk { shape.accesses(start) } else { shape.logged_accesses(start.min(self.logged_top)) };
        self.st.walks += 1;
        self.st.walk_accesses += a as u64;
        n + a
    }

    /// A prefetch for tenant `target` at the boundary of slot `k` (time `t`).
    #[inline(always)]
    fn prefetch(&mut self, k: u64, t: u64, target: u32) {
        if self.pf_busy[target as usize] > t {
            return;
        }
        let mut last = t;
        let recent = self.recent[target as usize];
        for pg in (0..self.cfg.history_pages).map(|i| (recent >> (16 * i)) as PageId) {
            if pg == PageId::MAX {
                break;
            }
            let key = (target << 16) | pg as u32;
            let s = self.key_index(key);
            if self.pending_done[s] as u64 > k {
                continue;
            }
            // PCIe to the chipset, the history read (one memory access), the IOMMU, PCIe back
            let m = 1 + self.iommu(target, pg) as usize;
            let lat = self.iommu_lat[m];
            self.pending_done[s] = u32::try_from(k + lat.ahead).expect("simulated time beyond 2^32 packet slots");
            self.pb_fills.push(k, lat, key);
            self.st.prefetch_requests += 1;
            last = last.max(t + lat.ps);
        }
        self.pf_busy[target as usize] = last.max(t + self.one_way_ps + self.p.dram_access_ps);
    }

    /// One demand translation at the boundary of slot `k` (time `t`); its latency.
    #[inline(always)]
    fn demand(&mut self, k: u64, t: u64, sid: u32, page: PageId, next_use: u64) -> Lat {
        self.st.translations += 1;
        let key = (sid << 16) | page as u32;
        let s = self.key_index(key);
        if !self.key_next.is_empty() {
            self.key_next[s] = next_use;
        }
        let iova = self.pages[page as usize].iova;
        if self.pb.is_some() {
            // SID predictor: the SID seen `sid_history` requests ago is followed by this one.
            let q = self.sid_hist[self.hist_pos];
            if q != NO_SID {
                self.predictor[q as usize] = sid;
            }
            self.sid_hist[self.hist_pos] = sid;
            self.hist_pos += 1;
            if self.hist_pos == self.sid_hist.len() {
                self.hist_pos = 0;
            }
        }
        let hit = self.devtlb.lookup(key, iova >> 21, sid as u64, next_use);
        if !hit {
            self.st.demand_misses += 1;
        }
        if let Some(pb) = self.pb.as_mut() {
            // The prefetch unit is probed with the DevTLB (§III).
            if let Some(i) = pb.lookup(key) {
                if !hit {
                    if !pb.used[i] {
                        pb.used[i] = true;
                        self.st.prefetch_useful += 1;
                    }
                    self.st.prefetch_served += 1;
                }
                self.note_history(sid, page);
                return self.hit_lat;
            }
            self.note_history(sid, page);
            let target = self.predictor[sid as usize];
            if target != NO_SID {
                self.prefetch(k, t, target);
            }
        }
        if hit {
            return self.hit_lat;
        }
        self.st.iommu_requests += 1;
        let m = self.iommu(sid, page) as usize;
        let lat = self.iommu_lat[m];
        self.tlb_fills.push(k, lat, key);
        lat
    }

    /// The tenant's IOVA history in memory (most recent distinct pages first), read by the
    /// chipset's history reader.
    #[inline]
    fn note_history(&mut self, sid: u32, page: PageId) {
        let r = &mut self.recent[sid as usize];
        *r = move_to_front(*r, page);
    }

    /// Run a packet stream (with next-use positions for the oracle, `()` without) to the end.
    pub fn run<N: NextUses, I: Iterator<Item = (Packet, N)>>(mut self, packets: I) -> Stats {
        let slot = self.p.packet_slot_ps();
        let cap = self.cfg.ptb_entries;
        let mut ptb = PtbRing::new(slot, self.tlb_fills.span_ps());
        let mut k = 0u64; // the current slot: t = k x slot
        let mut last_done = 0u64;
        let mut occupancy_ps: u128 = 0;
        for (pkt, nu) in packets {
            loop {
                self.apply_fills(k);
                ptb.release(k);
                if ptb.live < cap {
                    break;
                }
                // Full: the packet is dropped and retried each slot until an entry frees.
                let j = ptb.next_completion(k);
                self.st.drops += j - k;
                k = j;
            }
            let t = k * slot;
            for (i, &page) in pkt.pages.iter().enumerate() {
                let lat = self.demand(k, t, pkt.sid, page, nu.at(i));
                ptb.push(k, k + lat.ahead);
                occupancy_ps += lat.ps as u128;
                last_done = last_done.max(t + lat.ps);
            }
            self.st.ptb_max = self.st.ptb_max.max(ptb.live);
            self.st.packets += 1;
            k += 1;
        }
        let t = k * slot;
        let time = last_done.max(t);
        let st = &mut self.st;
        st.time_ps = time;
        let bits = st.packets as f64 * self.p.packet_bytes as f64 * 8.0;
        st.gbps = if time > 0 { bits / (time as f64 * 1e-12) / 1e9 } else { 0.0 };
        st.utilisation = st.gbps / self.p.link_gbps as f64;
        st.ptb_mean = if time > 0 { occupancy_ps as f64 / time as f64 } else { 0.0 };
        let hr = |c: &CacheStats| c.hit_rate();
        st.devtlb_hit_rate = hr(&self.devtlb.stats);
        st.context_hit_rate = hr(&self.context.stats);
        st.iotlb_hit_rate = hr(&self.iotlb.stats);
        st.l2_hit_rate = hr(&self.l2.stats);
        st.l3_hit_rate = hr(&self.l3.stats);
        st.mean_walk_accesses = if st.walks > 0 { st.walk_accesses as f64 / st.walks as f64 } else { 0.0 };
        if let Some(pb) = &self.pb {
            st.pb_hit_rate = if pb.lookups > 0 { pb.hits as f64 / pb.lookups as f64 } else { 0.0 };
        }
        st.prefetch_accuracy = if st.prefetch_requests > 0 { st.prefetch_useful as f64 / st.prefetch_requests as f64 } else { 0.0 };
        st.prefetch_coverage = if st.demand_misses > 0 { st.prefetch_served as f64 / st.demand_misses as f64 } else { 0.0 };
        self.st
    }
}

/// `page` moved to the front of a history of four 16-bit pages (most recent in the low bits):
/// from position 1, 2 or 3, or, absent, pushed in with the last dropped. Bit masks, not lane
/// by lane: lanes 2 and 3 come from the old history where the page left a gap (it was in lane
/// 1: both; in lane 2: lane 3), from the history shifted up one lane otherwise.
#[inline(always)]
fn move_to_front(h: u64, page: PageId) -> u64 {
    let lane = |i: u32| (h >> (16 * i)) as PageId;
    let (in1, in2) = ((lane(1) == page) as u64, (lane(2) == page) as u64);
    let keep = (0u64.wrapping_sub(in1) & 0xffff_0000_0000) | (0u64.wrapping_sub(in1 | in2) & 0xffff_0000_0000_0000);
    let moved = (((h << 16) | page as u64) & !keep) | (h & keep);
    if lane(0) == page {
        h
    } else {
        moved
    }
}

/// Number each distinct `iova >> shift` of the layout (exact u16 keys for the page-structure caches).
fn region_ids(iovas: &[u64], shift: u32) -> Vec<u16> {
    let mut seen: Vec<u64> = Vec::new();
    iovas
        .iter()
        .map(|&a| {
            let r = a >> shift;
            (seen.iter().position(|&x| x == r).unwrap_or_else(|| {
                seen.push(r);
                seen.len() - 1
            })) as u16
        })
        .collect()
}

/// The next-use positions of a packet's three translations, as `Sim::run` takes them with each
/// packet: `[u64; 3]` for Belady's oracle (`Lookahead`), `()` (every one 0) for the other
/// policies, which read none. Not an array of zeros: the run loop carried that one with each
/// packet through stack copies whose pieces did not line up with the stores that made them, and
/// loads the store buffer cannot forward wait until those stores commit (BENCHMARKS.md, issue 33,
/// s26-replay).
pub trait NextUses: Copy {
    fn at(&self, i: usize) -> u64;
}

impl NextUses for [u64; 3] {
    #[inline(always)]
    fn at(&self, i: usize) -> u64 {
        self[i]
    }
}

impl NextUses for () {
    #[inline(always)]
    fn at(&self, _: usize) -> u64 {
        0
    }
}

/// Next-use positions for Belady's oracle over a bounded lookahead window.
pub struct Lookahead<I: Iterator<Item = Packet>> {
    inner: I,
    buf: VecDeque<(Packet, [u64; 3])>,
    last: FxHashMap<u32, u64>,
    head: u64,
    next: u64,
    window: usize,
}

impl<I: Iterator<Item = Packet>> Lookahead<I> {
    pub fn new(inner: I, window: usize) -> Self {
        Lookahead { inner, buf: VecDeque::with_capacity(window.min(1 << 20)), last: FxHashMap::default(), head: 0, next: 0, window: window.max(1) }
    }
}

impl<I: Iterator<Item = Packet>> Iterator for Lookahead<I> {
    type Item = (Packet, [u64; 3]);
    fn next(&mut self) -> Option<Self::Item> {
        while self.buf.len() < self.window {
            let Some(p) = self.inner.next() else { break };
            self.buf.push_back((p, [NEVER; 3]));
            let pi = self.next;
            self.next += 1;
            for i in 0..3 {
                let j = pi * 3 + i as u64;
                let key = (p.sid << 16) | p.pages[i] as u32;
                if let Some(prev) = self.last.insert(key, j) {
                    let pp = prev / 3;
                    if pp >= self.head {
                        self.buf[(pp - self.head) as usize].1[(prev % 3) as usize] = j;
                    }
                }
            }
        }
        let r = self.buf.pop_front()?;
        self.head += 1;
        Some(r)
    }
}

/// Build the model of `cfg` over the layout's pages (`shapes`, `iovas`) with the cache types
/// that fit it ([`TableIv`] or [`AnyKinds`]; the statistics are the same either way) and run it
/// on `packets` (through `Lookahead` for the oracle). `walk_levels`: see `Sim::with_walk_levels`.
pub fn run_fitting(
    cfg: &Config,
    shapes: Vec<WalkShape>,
    tenants: u32,
    iovas: Vec<u64>,
    walk_levels: Option<u32>,
    packets: impl Iterator<Item = Packet>,
) -> HtResult<Stats> {
    fn build<K: Kinds>(cfg: &Config, shapes: Vec<WalkShape>, tenants: u32, iovas: Vec<u64>, walk_levels: Option<u32>) -> HtResult<Sim<'static, K>> {
        let sim = Sim::<K>::new(cfg, shapes, tenants, iovas)?;
        Ok(match walk_levels {
            Some(levels) => sim.with_walk_levels(levels),
            None => sim,
        })
    }
    Ok(if TableIv::fits(cfg, params()) {
        build::<TableIv>(cfg, shapes, tenants, iovas, walk_levels)?.run(packets.map(|p| (p, ())))
    } else if cfg.devtlb_policy == Policy::Oracle {
        build::<AnyKinds>(cfg, shapes, tenants, iovas, walk_levels)?.run(Lookahead::new(packets, ORACLE_WINDOW_PACKETS))
    } else {
        build::<AnyKinds>(cfg, shapes, tenants, iovas, walk_levels)?.run(packets.map(|p| (p, ())))
    })
}

/// Simulate `cfg` on the workload: the whole pipeline (tables, streamed trace, model).
pub fn simulate(cfg: &Config, spec: &WorkloadSpec) -> HtResult<Stats> {
    let trace = Trace::new(spec)?;
    let shapes = Tables::shapes(&trace.layout, spec.tenants)?;
    let iovas: Vec<u64> = trace.layout.pages.iter().map(|p| p.iova).collect();
    run_fitting(cfg, shapes, spec.tenants, iovas, None, trace)
}

#[cfg(test)]
mod tests {
    use super::{Lat, Wheel};
    use crate::divisor::Divisor;
    use crate::point::run_point;

    #[test]
    fn history_moves_a_page_to_the_front_as_the_lane_by_lane_rule_does() {
        // the rule written lane by lane, on every history of pages 0..5 (5: never used)
        let want = |[a, b, c, d]: [u16; 4], p: u16| {
            if a == p {
                [a, b, c, d]
            } else {
                [p, a, if b == p { c } else { b }, if b == p || c == p { d } else { c }]
            }
        };
        let pack = |r: [u16; 4]| r.iter().rev().fold(0u64, |h, &x| h << 16 | x as u64);
        for n in 0..6u64.pow(5) {
            let d = |i: u32| (n / 6u64.pow(i) % 6) as u16;
            let (r, p) = ([d(0), d(1), d(2), d(3)], d(4));
            let r = r.map(|x| if x == 5 { u16::MAX } else { x });
            assert_eq!(super::move_to_front(pack(r), p), pack(want(r, p)), "{r:?} {p}");
        }
    }

    #[test]
    fn wheel_drains_fills_by_boundary_in_time_then_key_order() {
        let d = Divisor::new(100);
        let mut w = Wheel::new(d, 1000, 3);
        // (issued at the boundary of slot k, latency, key): lands at 100 k + latency
        for (k, ps, key) in [(1, 150, 9), (1, 50, 5), (0, 200, 7), (2, 50, 3), (0, 101, 8), (1, 200, 1)] {
            w.push(k, Lat::new(ps, d), key);
        }
        let mut got = vec![];
        w.drain(1, |k| got.push(k));
        assert!(got.is_empty(), "nothing lands by 100");
        w.drain(2, |k| got.push(k));
        assert_eq!(got, [8, 5, 7], "101, 150, then 200: due at the boundary 200");
        got.clear();
        w.drain(3, |k| got.push(k));
        assert_eq!(got, [3, 9, 1], "250 (keys 3, 9) and 300");
    }

    /// 1024 tenants in round robin: every request misses the DevTLB.
    fn cold(config: &str, overrides: Option<&str>) -> crate::Stats {
        run_point(config, overrides, "iperf3", 1024, "RR1", Some(4), 1).unwrap()
    }

    #[test]
    fn ptb_counts_translations_and_admits_a_packet_while_one_entry_is_free() {
        let base = cold("base", None);
        assert_eq!(base.ptb_max, 3, "Base: one packet's three translations at a time");
        assert!(base.drops > 0, "a packet finding the PTB full is dropped and retried");
        let ht = cold("hypertrio", Some(r#"{"prefetch": false}"#));
        assert!((32..=34).contains(&ht.ptb_max), "{}", ht.ptb_max);
        // about 32 translations in flight, ~11 packets: ~11x Base's rate, not 32x
        let r = ht.gbps / base.gbps;
        assert!((8.0..14.0).contains(&r), "{r}");
    }

    #[test]
    fn each_base_packet_waits_one_round_trip_longer_when_the_round_trip_grows() {
        // Base, cold: one packet at a time, its translations all answered by the IOMMU, so a
        // longer PCIe round trip (whole packet slots, as the pipeline counts) adds to every packet.
        let slot = crate::params().packet_slot_ps();
        let rtt = 2 * crate::params().pcie_one_way_ps;
        let o = |t: u64| format!(r#"{{"pcie_round_trip_ps": {t}}}"#);
        let (near, far) = (cold("base", Some(&o(rtt))), cold("base", Some(&o(rtt + 10 * slot))));
        assert_eq!(near.time_ps, cold("base", None).time_ps, "the default is Table II's, twice");
        assert_eq!(far.time_ps - near.time_ps, far.packets * 10 * slot);
    }

    #[test]
    fn logged_walks_are_one_dimensional_and_nested_walks_take_24_accesses() {
        let logged = cold("base", None);
        let nested = cold("base", Some(r#"{"nested_walk": true}"#));
        // cold: the ring page 4 KiB (3 / 24 accesses: the logged walk reads QEMU's default
        // 3-level table, the nested one 4-level tables in both dimensions), data pages 2 MiB (2 / 18)
        assert!(logged.mean_walk_accesses > 2.0 && logged.mean_walk_accesses <= 3.0, "{}", logged.mean_walk_accesses);
        assert!(nested.mean_walk_accesses > 18.0 && nested.mean_walk_accesses <= 24.0);
        assert!(logged.gbps > 1.5 * nested.gbps);
    }
}
