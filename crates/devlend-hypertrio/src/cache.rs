//! Set-associative translation caches with partitioning (002 §III "Partitioned Device-TLB", and
//! the partitioned L2/L3 page-structure caches of Table IV) and the three replacement policies
//! of 002 §V-C: LRU, LFU with 4-bit counters (all counters of a row halved when one saturates,
//! [24]; among the entries with the lowest count the victim is drawn at random, as in the released
//! HyperSIO model's LFU row — 002 names no tie rule, and breaking ties by recency would make LFU
//! degrade into LRU on the cyclic reuse of many tenants) and Belady's oracle (evict the entry used furthest in the future; the caller supplies
//! each access's next-use position, see `sim::Lookahead`).
//!
//! Rows: `sets` rows of `ways` entries. With `partitions` P > 1 the rows are split evenly, P
//! groups of sets/P rows; a request's partition is its tag (SID for the DevTLB, DID for the
//! page-structure caches) modulo P, i.e. a partition tag that matches the low bits of the SID
//! (002 §III "matching lower bits of SID and PTag"). With `full_tag_match` a row holds entries of
//! one tag only (the complete SID): a request with another tag misses, and filling re-tags the
//! row and drops its entries. Within a partition the row is chosen by the address index bits.
//!
//! Cost: the replay spends most of its instructions here, spread over many small operations
//! rather than one hot spot (BENCHMARKS.md, issue 33's replay sections): at 256 tenants in the
//! HyperTRIO configuration a translation makes about 1.3 IOMMU requests (demand misses and
//! prefetches), each probing the context cache, the IOTLB and an L2 or L3 row, besides its
//! DevTLB and prefetch-buffer probes and about 1.3 fills. Rows of at most 16 ways (every
//! structure of Table IV) are scanned as constant-length slices (`on_row`): one SSE2 group, no
//! loop over groups; rows of at most 8 ways (the DevTLB, the IOTLB, the prefetch buffer) in two
//! compares (`find8`). A cache's type ([`Shape`]) can fix its policy, ways and tag match at
//! compile time: `sim::run_fitting` runs Table IV's structures as `Lfu<8>`, `Lru<8>` and
//! `Lfu<16>` (no run-time branch on the policy, row offsets by shifts) and any other
//! configuration as [`Dynamic`], the same code reading the run's values; the answers are the
//! same either way (tested). An LRU row's ages are written back as whole 16-byte chunks
//! (`age_touch`), never with a byte store inside a chunk that the row's next scan loads: a
//! 16-byte load over a 16-byte and a 1-byte store waits until they commit instead of taking its
//! bytes from the store buffer; this cut the HyperTRIO replay's CPU time by 5-8 %. The same for
//! the LFU counts (a 16-byte blend per count) measured no faster, since a count is read back as a
//! byte on every hit and a byte load from a 16-byte store is slow too (BENCHMARKS.md, issue 33,
//! s26-replay).

use crate::error::{HtError, HtResult};
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Lru,
    Lfu,
    Oracle,
}

impl Policy {
    pub fn parse(s: &str) -> HtResult<Policy> {
        match s.to_ascii_lowercase().as_str() {
            "lru" => Ok(Policy::Lru),
            "lfu" => Ok(Policy::Lfu),
            "oracle" | "belady" | "opt" => Ok(Policy::Oracle),
            _ => Err(HtError::UnknownName { kind: "replacement policy", name: s.into(), expected: "lru, lfu or oracle".into() }),
        }
    }
}

const EMPTY: u32 = u32::MAX;
/// Key of the padding ways that round a row up to 16: never looked up, never evicted.
pub(crate) const PAD: u32 = u32::MAX - 1;
/// Ways per SSE2 group: rows are stored `stride` = ways rounded up to 16 apart.
pub(crate) const GROUP: usize = 16;

/// The first way of `row` (a multiple of 16 keys) holding `key`: 16 keys compared in four SSE2
/// registers per group, no data-dependent branches inside a group.
#[inline(always)]
fn find(row: &[u32], key: u32) -> Option<usize> {
    debug_assert!(row.len().is_multiple_of(GROUP) && row.len() <= 64);
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        let mut m = 0u64;
        // SAFETY: SSE2 is part of the x86_64 baseline; unaligned loads within each 16-key group.
        unsafe {
            let k = _mm_set1_epi32(key as i32);
            for (g, grp) in row.chunks_exact(GROUP).enumerate() {
                let p = grp.as_ptr() as *const __m128i;
                let eq = |i: usize| {
                    let v = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(i)), k);
                    _mm_movemask_ps(_mm_castsi128_ps(v)) as u64
                };
                let e = eq(0) | eq(1) << 4 | eq(2) << 8 | eq(3) << 12;
                m |= e << (GROUP * g);
            }
        }
        (m != 0).then(|| m.trailing_zeros() as usize)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        row.iter().position(|&k| k == key)
    }
}
/// `find` on a row of at most 8 ways (`row`: its first 8 keys, padding after the ways): half
/// the compares of a 16-key group.
#[inline(always)]
pub(crate) fn find8(row: &[u32], key: u32) -> Option<usize> {
    let row: &[u32; 8] = row.try_into().expect("8 keys");
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; two unaligned loads within the 8 keys.
        let m = unsafe {
            let k = _mm_set1_epi32(key as i32);
            let p = row.as_ptr() as *const __m128i;
            let eq = |i: usize| _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_loadu_si128(p.add(i)), k))) as u32;
            eq(0) | eq(1) << 4
        };
        (m != 0).then(|| m.trailing_zeros() as usize)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        row.iter().position(|&k| k == key)
    }
}

/// Bit i set for each way i (< `ways`) holding the row's lowest count. `count` is the row padded
/// to a multiple of 16 bytes (padding 0xff): SSE2 takes the minimum 16 counts at a time, then
/// compares every count with it, with no data-dependent branches.
#[inline(always)]
fn lowest(count: &[u8], ways: usize) -> u64 {
    debug_assert!(count.len().is_multiple_of(16) && ways <= count.len() && ways <= 64);
    let valid = if ways == 64 { u64::MAX } else { (1u64 << ways) - 1 };
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; unaligned loads within each 16-byte chunk.
        unsafe {
            let load = |ch: &[u8]| _mm_loadu_si128(ch.as_ptr() as *const __m128i);
            let mut mn = _mm_set1_epi8(-1);
            for ch in count.chunks_exact(16) {
                mn = _mm_min_epu8(mn, load(ch));
            }
            mn = _mm_min_epu8(mn, _mm_srli_si128::<8>(mn));
            mn = _mm_min_epu8(mn, _mm_srli_si128::<4>(mn));
            mn = _mm_min_epu8(mn, _mm_srli_si128::<2>(mn));
            mn = _mm_min_epu8(mn, _mm_srli_si128::<1>(mn));
            let b = _mm_set1_epi8(_mm_cvtsi128_si32(mn) as i8);
            let mut ties = 0u64;
            for (k, ch) in count.chunks_exact(16).enumerate().take(4) {
                let e = _mm_movemask_epi8(_mm_cmpeq_epi8(load(ch), b)) as u16 as u64;
                ties |= e << (16 * k);
            }
            ties & valid
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let low = count[..ways].iter().copied().min().unwrap_or(0);
        count[..ways].iter().enumerate().fold(0u64, |t, (i, &v)| t | (((v == low) as u64) << i))
    }
}

/// Age of a padding way in an LRU row: above every real age (at most 63), so no touch ages it.
pub(crate) const AGE_PAD: u8 = 0x7f;

/// LRU by age: the ways of a row hold a permutation of 0..ways (0 = most recent) once it is
/// full; a way not yet filled holds ways - 1. Touching way `w` ages every way younger than it by
/// one and makes it 0, 16 ways per SSE2 step. `ages` is the row padded to a multiple of 16.
/// Way `w`'s 0 goes into the same 16-byte store as the others' ages, not a byte store after it:
/// the row's next scan (a 16-byte load, often a few dozen instructions later) then takes its
/// bytes from one store of the same size and place, which the store buffer forwards; a byte
/// store inside the loaded 16 bytes cannot be forwarded and the load waits for it to commit.
#[inline(always)]
pub(crate) fn age_touch(ages: &mut [u8], w: usize) {
    debug_assert!(ages.len().is_multiple_of(16) && w < ages.len() && w < 64);
    let a = ages[w];
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; unaligned loads/stores within each chunk.
        unsafe {
            let b = _mm_set1_epi8(a as i8);
            let lanes = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            for (k, ch) in ages.chunks_exact_mut(16).enumerate() {
                let p = ch.as_mut_ptr() as *mut __m128i;
                let v = _mm_loadu_si128(p);
                // ages are below 0x80: a signed compare is exact; younger ways gain one (- -1)
                let aged = _mm_sub_epi8(v, _mm_cmplt_epi8(v, b));
                // way w's lane in this chunk (w - 16 k: no lane when negative or above 15)
                let at_w = _mm_cmpeq_epi8(lanes, _mm_set1_epi8((w as isize - 16 * k as isize) as i8));
                _mm_storeu_si128(p, _mm_andnot_si128(at_w, aged));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        for v in ages.iter_mut() {
            *v += (*v < a) as u8;
        }
        ages[w] = 0;
    }
}

/// The least recently used way of a full LRU row: the one aged `ways - 1`.
#[inline(always)]
pub(crate) fn oldest(ages: &[u8], ways: usize) -> usize {
    let old = (ways - 1) as u8;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; unaligned loads within each chunk.
        unsafe {
            let b = _mm_set1_epi8(old as i8);
            let mut m = 0u64;
            for (k, ch) in ages.chunks_exact(16).enumerate() {
                let v = _mm_loadu_si128(ch.as_ptr() as *const __m128i);
                m |= (_mm_movemask_epi8(_mm_cmpeq_epi8(v, b)) as u16 as u64) << (16 * k);
            }
            m.trailing_zeros() as usize
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        ages.iter().position(|&v| v == old).unwrap()
    }
}

/// SEL[b][k]: position of the k-th (from 0) set bit of byte b (0 where there is none).
static SEL: [[u8; 8]; 256] = {
    let mut t = [[0u8; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let (mut k, mut i) = (0, 0);
        while i < 8 {
            if b & (1 << i) != 0 {
                t[b][k] = i as u8;
                k += 1;
            }
            i += 1;
        }
        b += 1;
    }
    t
};

/// Position of the k-th set bit of `mask` (k < its popcount), a byte at a time without
/// data-dependent branches; `bytes` = how many low bytes of `mask` can be set.
#[inline(always)]
fn select_bit(mask: u64, mut k: u64, bytes: usize) -> usize {
    let mut found = usize::MAX;
    for b in 0..bytes {
        let byte = (mask >> (8 * b)) as u8;
        let c = byte.count_ones() as u64;
        let here = 8 * b + SEL[byte as usize][k.min(7) as usize] as usize;
        found = if k < c && found == usize::MAX { here } else { found };
        k = k.wrapping_sub(c);
    }
    found
}

/// The lowest of 16 ranks and the first way holding it: a tournament of neighbours (the left one
/// wins ties, so the first minimum wins), four levels deep instead of a 16-step chain.
#[inline(always)]
fn first_min(r: &[u64; GROUP]) -> (u64, usize) {
    let mut v = *r;
    let mut ix: [u8; GROUP] = std::array::from_fn(|i| i as u8);
    let mut n = GROUP;
    while n > 1 {
        n /= 2;
        for i in 0..n {
            let right = v[2 * i + 1] < v[2 * i];
            (v[i], ix[i]) = if right { (v[2 * i + 1], ix[2 * i + 1]) } else { (v[2 * i], ix[2 * i]) };
        }
    }
    (v[0], ix[0] as usize)
}

/// The first of the lowest ranks in `r` (a multiple of 16 long, padding u64::MAX after the rest).
#[inline(always)]
fn first_min_of(r: &[u64]) -> usize {
    let (mut v, mut m) = (0, u64::MAX);
    for (g, grp) in r.chunks_exact(GROUP).enumerate() {
        let (x, i) = first_min(grp.try_into().unwrap());
        if x < m {
            (v, m) = (GROUP * g + i, x);
        }
    }
    v
}

/// The first position of `key` in `keys` (a multiple of 16 long), any length.
#[inline(always)]
pub(crate) fn find_in(keys: &[u32], key: u32) -> Option<usize> {
    keys.chunks(64).enumerate().find_map(|(c, ch)| find(ch, key).map(|i| 64 * c + i))
}

/// `f` on `v[base..base + stride]`. A row one SSE2 group wide (at most 16 ways: every structure
/// of 002 Table IV) is passed as a slice of constant length, so the scans on it inline without
/// loops over groups; wider rows take the general path.
#[inline(always)]
pub(crate) fn on_row<T, R>(v: &[T], base: usize, stride: usize, f: impl FnOnce(&[T]) -> R) -> R {
    if stride == GROUP {
        f(&v[base..base + GROUP])
    } else {
        f(&v[base..base + stride])
    }
}

/// `on_row` for a row to change.
#[inline(always)]
pub(crate) fn on_row_mut<T, R>(v: &mut [T], base: usize, stride: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    if stride == GROUP {
        f(&mut v[base..base + GROUP])
    } else {
        f(&mut v[base..base + stride])
    }
}

/// `sets` rows of `ways` values `fill`, each padded with `pad` to a multiple of 16.
pub(crate) fn padded_rows<T: Copy>(sets: usize, ways: usize, fill: T, pad: T) -> Vec<T> {
    let stride = ways.next_multiple_of(GROUP);
    (0..sets * stride).map(|i| if i % stride < ways { fill } else { pad }).collect()
}

/// Oracle next-use position of an entry never used again.
pub const NEVER: u64 = u64::MAX;

/// What a cache's type fixes at compile time, so that its look-ups fold the policy, the row width
/// and the tag match to constants (no run-time branch on them, row offsets by shifts): the
/// structures of 002 Table IV are [`Lfu`] and [`Lru`] rows of 8 or 16 ways; any other geometry
/// runs as [`Dynamic`], the same code with the run's values.
pub trait Shape {
    /// The replacement policy, when fixed.
    const POLICY: Option<Policy>;
    /// Ways per row, when fixed (0: the run's).
    const WAYS: usize;
    /// Full tag match, when fixed.
    const FULL_MATCH: Option<bool>;
    /// Whether a run's geometry is this type's.
    fn fits(ways: usize, policy: Policy, full_match: bool) -> bool {
        (Self::WAYS == 0 || Self::WAYS == ways) && Self::POLICY.is_none_or(|p| p == policy) && Self::FULL_MATCH.is_none_or(|f| f == full_match)
    }
}

/// Every geometry and policy, read at run time.
pub struct Dynamic;
impl Shape for Dynamic {
    const POLICY: Option<Policy> = None;
    const WAYS: usize = 0;
    const FULL_MATCH: Option<bool> = None;
}

/// LFU rows of `W` ways (at most 16), tags matched by their low bits (002 §III).
pub struct Lfu<const W: usize>;
impl<const W: usize> Shape for Lfu<W> {
    const POLICY: Option<Policy> = Some(Policy::Lfu);
    const WAYS: usize = W;
    const FULL_MATCH: Option<bool> = Some(false);
}

/// LRU rows of `W` ways (at most 16), tags matched by their low bits.
pub struct Lru<const W: usize>;
impl<const W: usize> Shape for Lru<W> {
    const POLICY: Option<Policy> = Some(Policy::Lru);
    const WAYS: usize = W;
    const FULL_MATCH: Option<bool> = Some(false);
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

impl CacheStats {
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

pub struct Cache<S: Shape = Dynamic> {
    ways_rt: usize,
    /// Row of (tag, index): (tag & part_mask) << part_shift | (index & index_mask); sets and
    /// partitions are powers of two (checked in `new`).
    part_mask: u64,
    part_shift: u32,
    index_mask: u64,
    full_match_rt: bool,
    policy_rt: Policy,
    lfu_max: u64,
    keys: Vec<u32>,
    /// Oracle only: replacement rank, !next_use (the victim is the lowest). Keys are u32:
    /// callers pack (tag, page or region id). Empty ways rank 0, so they fill first.
    rank: Vec<u64>,
    /// LRU only: one age byte per way (`age_touch`).
    age: Vec<u8>,
    /// LFU access counts (4-bit by default), one byte per way, so a row is scanned in one go.
    count: Vec<u8>,
    /// Distance between rows in `keys`, `rank` and `count`: the ways rounded up to 16, the rest
    /// padding (key PAD, rank and count at their maximum) so every scan is whole SSE2 groups.
    stride_rt: usize,
    /// Ways of each row filled so far: rows fill in way order, so the first empty way of a row
    /// is its `filled` count (no scan for an empty way once a row is full).
    filled: Vec<u8>,
    ptag: Vec<u64>,
    /// Deterministic generator for LFU's random choice among equal counts.
    rng: u64,
    pub stats: CacheStats,
    shape: PhantomData<S>,
}

impl Cache {
    /// `what` names the structure in errors (e.g. "DevTLB").
    pub fn new(what: &str, entries: usize, ways: usize, partitions: usize, policy: Policy, full_match: bool, lfu_bits: u32) -> HtResult<Cache> {
        Cache::shaped(what, entries, ways, partitions, policy, full_match, lfu_bits)
    }
}

impl<S: Shape> Cache<S> {
    /// `new` for a cache of the type `S`: an error when the geometry is not what `S` fixes.
    pub fn shaped(what: &str, entries: usize, ways: usize, partitions: usize, policy: Policy, full_match: bool, lfu_bits: u32) -> HtResult<Cache<S>> {
        let bad = |problem: String| Err(HtError::Geometry { structure: what.into(), problem });
        if !S::fits(ways, policy, full_match) {
            return bad(format!("{ways} ways, {policy:?}, full tag match {full_match}: not what its type fixes"));
        }
        if entries == 0 || ways == 0 || !entries.is_multiple_of(ways) {
            return bad(format!("{entries} entries cannot be split into {ways}-way rows"));
        }
        if ways > 64 {
            return bad(format!("{ways} ways: at most 64"));
        }
        let sets = entries / ways;
        if partitions == 0 || partitions > sets || !sets.is_multiple_of(partitions) {
            return bad(format!("{partitions} partitions do not divide its {sets} rows ({entries} entries, {ways} ways); at most one partition per row"));
        }
        if !sets.is_power_of_two() || !partitions.is_power_of_two() {
            return bad(format!("{sets} rows and {partitions} partitions must be powers of two"));
        }
        if !(1..=8).contains(&lfu_bits) {
            return bad(format!("LFU counter width {lfu_bits} bits: expected 1..8"));
        }
        Ok(Cache {
            ways_rt: ways,
            part_mask: partitions as u64 - 1,
            part_shift: (sets / partitions).trailing_zeros(),
            index_mask: (sets / partitions) as u64 - 1,
            full_match_rt: full_match,
            policy_rt: policy,
            lfu_max: (1u64 << lfu_bits) - 1,
            keys: padded_rows(sets, ways, EMPTY, PAD),
            rank: if policy == Policy::Oracle { padded_rows(sets, ways, 0, u64::MAX) } else { Vec::new() },
            age: if policy == Policy::Lru { padded_rows(sets, ways, (ways - 1) as u8, AGE_PAD) } else { Vec::new() },
            count: if policy == Policy::Lfu { padded_rows(sets, ways, 0, u8::MAX) } else { Vec::new() },
            stride_rt: ways.next_multiple_of(GROUP),
            filled: vec![0; sets],
            ptag: vec![u64::MAX; sets],
            rng: 0x2545_F491_4F6C_DD1D,
            stats: CacheStats::default(),
            shape: PhantomData,
        })
    }

    /// Debug builds: callers' keys must not collide with the empty and padding markers.
    #[inline(always)]
    fn check(key: u32) {
        debug_assert!(key < PAD, "cache key {key:#x} collides with the empty/padding markers");
    }

    /// Ways per row: the type's when it fixes them (a constant), else the run's.
    #[inline(always)]
    fn ways(&self) -> usize {
        if S::WAYS > 0 {
            S::WAYS
        } else {
            self.ways_rt
        }
    }

    #[inline(always)]
    fn stride(&self) -> usize {
        if S::WAYS > 0 {
            S::WAYS.next_multiple_of(GROUP)
        } else {
            self.stride_rt
        }
    }

    #[inline(always)]
    fn policy(&self) -> Policy {
        S::POLICY.unwrap_or(self.policy_rt)
    }

    #[inline(always)]
    fn full_match(&self) -> bool {
        S::FULL_MATCH.unwrap_or(self.full_match_rt)
    }

    #[inline(always)]
    fn row(&self, index: u64, tag: u64) -> usize {
        ((tag & self.part_mask) << self.part_shift | (index & self.index_mask)) as usize
    }

    /// Look `key` up; on a hit the entry's replacement state is updated (`next_use` for the oracle).
    #[inline(always)]
    pub fn lookup(&mut self, key: u32, index: u64, tag: u64, next_use: u64) -> bool {
        let row = self.row(index, tag);
        if self.full_match() && self.ptag[row] != tag {
            self.stats.misses += 1;
            return false;
        }
        self.probe(row, key, next_use)
    }

    /// Whether `row` holds `key` (counted; a hit updates the replacement state).
    #[inline(always)]
    fn probe(&mut self, row: usize, key: u32, next_use: u64) -> bool {
        let Some(w) = self.find_row(row, key) else {
            self.stats.misses += 1;
            return false;
        };
        self.touch(row, w, next_use, false);
        self.stats.hits += 1;
        true
    }

    /// Whether `key` is present, without touching replacement state or statistics.
    pub fn contains(&self, key: u32, index: u64, tag: u64) -> bool {
        let row = self.row(index, tag);
        if self.full_match() && self.ptag[row] != tag {
            return false;
        }
        self.row_keys(row).contains(&key)
    }

    /// LFU access count of `key` (tests and statistics).
    pub fn count_of(&self, key: u32) -> Option<u64> {
        let i = self.keys.iter().position(|&k| k == key)?;
        self.count.get(i).map(|&c| c as u64)
    }

    #[inline(always)]
    fn row_keys(&self, row: usize) -> &[u32] {
        &self.keys[row * self.stride()..(row + 1) * self.stride()]
    }

    /// The way of `row` holding `key`.
    #[inline(always)]
    fn find_row(&self, row: usize, key: u32) -> Option<usize> {
        let base = row * self.stride();
        if S::WAYS > 0 && S::WAYS <= 8 {
            // the padding ways never hold a key: the first 8 are the whole row
            return find8(&self.keys[base..base + 8], key);
        }
        on_row(&self.keys, base, self.stride(), |r| find(r, key))
    }

    /// Way `w` of `row` was used (`fresh`: just filled).
    #[inline(always)]
    fn touch(&mut self, row: usize, w: usize, next_use: u64, fresh: bool) {
        let (stride, ways) = (self.stride(), self.ways());
        let base = row * stride;
        let i = base + w;
        match self.policy() {
            Policy::Lru => on_row_mut(&mut self.age, base, stride, |a| age_touch(a, w)),
            Policy::Oracle => self.rank[i] = !next_use,
            Policy::Lfu => {
                let c = if fresh { 1 } else { self.count[i] as u64 + 1 };
                self.count[i] = c.min(self.lfu_max) as u8;
                if c >= self.lfu_max {
                    for r in &mut self.count[base..base + ways] {
                        *r /= 2;
                    }
                }
            }
        }
    }

    /// Put `key` into way `w` of `row` (just filled); the key it replaced.
    #[inline(always)]
    fn fill(&mut self, row: usize, w: usize, key: u32, next_use: u64) -> u32 {
        Self::check(key);
        let i = row * self.stride() + w;
        let old = std::mem::replace(&mut self.keys[i], key);
        self.touch(row, w, next_use, true);
        if old == EMPTY {
            self.filled[row] += 1;
        } else {
            self.stats.evictions += 1;
        }
        old
    }

    /// Fill `key` (after a miss). Returns the evicted key, if any.
    #[inline(always)]
    pub fn insert(&mut self, key: u32, index: u64, tag: u64, next_use: u64) -> Option<u32> {
        let row = self.row(index, tag);
        if self.full_match() && self.ptag[row] != tag {
            self.ptag[row] = tag;
            let (base, ways) = (row * self.stride(), self.ways());
            self.keys[base..base + ways].fill(EMPTY);
            match self.policy() {
                Policy::Lru => self.age[base..base + ways].fill((ways - 1) as u8),
                Policy::Oracle => self.rank[base..base + ways].fill(0),
                Policy::Lfu => self.count[base..base + ways].fill(0),
            }
            self.filled[row] = 0;
        }
        if let Some(hit) = self.find_row(row, key) {
            // Filled twice (two completions of the same translation): refresh only.
            self.touch(row, hit, next_use, false);
            return None;
        }
        let v = self.victim(row);
        Some(self.fill(row, v, key, next_use)).filter(|&old| old != EMPTY)
    }

    /// Look up and, on a miss, fill at once (caches the IOMMU fills during the walk that
    /// missed): one pass to find, one to pick the victim. Returns whether it hit.
    #[inline(always)]
    pub fn access(&mut self, key: u32, index: u64, tag: u64, next_use: u64) -> bool {
        let row = self.row(index, tag);
        if self.full_match() && self.ptag[row] != tag {
            self.stats.misses += 1;
            self.insert(key, index, tag, next_use);
            return false;
        }
        if self.probe(row, key, next_use) {
            return true;
        }
        let v = self.victim(row);
        self.fill(row, v, key, next_use);
        false
    }

    /// The way of `row` to evict: an empty way if any, else the least recently used (LRU), the
    /// furthest next use (oracle), or a random way among the lowest counts (LFU).
    #[inline(always)]
    fn victim(&mut self, row: usize) -> usize {
        let f = self.filled[row] as usize;
        let (base, stride) = (row * self.stride(), self.stride());
        match self.policy() {
            // a row not yet full: its first empty way (rows fill in way order)
            Policy::Lru | Policy::Lfu if f < self.ways() => f,
            Policy::Lru => on_row(&self.age, base, stride, |a| oldest(a, self.ways())),
            Policy::Lfu => self.lfu_victim(row),
            // empty ways rank 0, below every used way; padding ranks u64::MAX and sits after
            // the real ways, so the first minimum is a real way
            Policy::Oracle => first_min_of(&self.rank[base..base + stride]),
        }
    }

    /// A full row's victim: a random way among those with the lowest count.
    #[inline(always)]
    fn lfu_victim(&mut self, row: usize) -> usize {
        let cb = row * self.stride();
        let ties = on_row(&self.count, cb, self.stride(), |c| lowest(c, self.ways()));
        let n = ties.count_ones() as u64;
        if n > 1 {
            // xorshift64* (deterministic, so a run is reproducible), scaled to 0..n
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            let pick = ((self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) * n) >> 32;
            // rows of at most 8 ways: the pick's bit straight from the table
            return if self.ways() <= 8 { SEL[ties as u8 as usize][pick as usize] as usize } else { select_bit(ties, pick, self.ways().div_ceil(8)) };
        }
        ties.trailing_zeros() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_least_recent_and_lfu_keeps_the_frequent_entry() {
        let mut c = Cache::new("t", 2, 2, 1, Policy::Lru, false, 4).unwrap();
        c.insert(1, 0, 0, 0);
        c.insert(2, 0, 0, 0);
        assert!(c.lookup(1, 0, 0, 0));
        assert_eq!(c.insert(3, 0, 0, 0), Some(2));
        let mut f = Cache::new("t", 2, 2, 1, Policy::Lfu, false, 4).unwrap();
        f.insert(1, 0, 0, 0);
        for _ in 0..5 {
            assert!(f.lookup(1, 0, 0, 0));
        }
        f.insert(2, 0, 0, 0);
        assert_eq!(f.insert(3, 0, 0, 0), Some(2), "LFU evicts the rarely used entry, not the older frequent one");
    }

    #[test]
    fn lru_by_age_matches_a_last_use_clock() {
        // a reference LRU (last-use clock, first empty way first) against the age bytes
        for ways in [1, 3, 8, 16, 24, 64] {
            let mut c = Cache::new("t", ways, ways, 1, Policy::Lru, false, 4).unwrap();
            let mut refk: Vec<Option<u32>> = vec![None; ways];
            let mut used = vec![0u64; ways];
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            for clock in 1..5000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = (x % (2 * ways as u64 + 1)) as u32;
                let w = refk.iter().position(|&k| k == Some(key));
                let hit = w.is_some();
                let w = w.unwrap_or_else(|| refk.iter().position(|k| k.is_none()).unwrap_or_else(|| (0..ways).min_by_key(|&i| used[i]).unwrap()));
                let evicted = if hit { None } else { refk[w].replace(key) };
                used[w] = clock;
                assert_eq!(c.lookup(key, 0, 0, 0), hit, "{ways} ways, step {clock}");
                if !hit {
                    assert_eq!(c.insert(key, 0, 0, 0), evicted, "{ways} ways, step {clock}");
                }
            }
        }
    }

    /// A stream of look-ups, accesses and inserts on a cache of type `S`: each answer, each
    /// evicted key, and the statistics.
    fn stream<S: Shape>(entries: usize, ways: usize, partitions: usize, policy: Policy) -> (Vec<(bool, bool, Option<u32>)>, CacheStats) {
        let mut c = Cache::<S>::shaped("t", entries, ways, partitions, policy, false, 4).unwrap();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let out = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (key, index, tag) = ((x % (3 * entries as u64)) as u32, x >> 20 & 0xff, x >> 40 & 0x3f);
                (c.lookup(key, index, tag, 0), c.access(key ^ 1, index, tag, 0), c.insert(key, index, tag, 0))
            })
            .collect();
        (out, c.stats)
    }

    #[test]
    fn table_iv_shapes_answer_as_the_run_time_cache_does() {
        assert_eq!(stream::<Lfu<8>>(64, 8, 8, Policy::Lfu), stream::<Dynamic>(64, 8, 8, Policy::Lfu));
        assert_eq!(stream::<Lru<8>>(64, 8, 1, Policy::Lru), stream::<Dynamic>(64, 8, 1, Policy::Lru));
        assert_eq!(stream::<Lfu<16>>(512, 16, 32, Policy::Lfu), stream::<Dynamic>(512, 16, 32, Policy::Lfu));
        assert_eq!(stream::<Lru<4>>(16, 4, 2, Policy::Lru), stream::<Dynamic>(16, 4, 2, Policy::Lru));
        let e = Cache::<Lfu<8>>::shaped("DevTLB", 64, 16, 1, Policy::Lfu, false, 4).err().unwrap();
        assert!(matches!(&e, crate::HtError::Geometry { structure, .. } if structure == "DevTLB"), "{e}");
        assert!(Cache::<Lfu<8>>::shaped("DevTLB", 64, 8, 1, Policy::Lru, false, 4).is_err());
        assert!(Cache::<Lfu<8>>::shaped("DevTLB", 64, 8, 1, Policy::Lfu, true, 4).is_err());
    }

    #[test]
    fn lfu_counters_halve_on_saturation() {
        let mut f = Cache::new("t", 2, 2, 1, Policy::Lfu, false, 4).unwrap();
        f.insert(1, 0, 0, 0); // count 1
        f.insert(2, 0, 0, 0);
        for _ in 0..3 {
            f.lookup(2, 0, 0, 0); // 2 -> 4
        }
        for _ in 0..14 {
            f.lookup(1, 0, 0, 0); // 1 -> 15: saturates, row halved
        }
        assert_eq!((f.count_of(1), f.count_of(2)), (Some(7), Some(2)));
    }

    #[test]
    fn access_is_lookup_then_fill() {
        let mut a = Cache::new("t", 4, 2, 1, Policy::Lfu, false, 4).unwrap();
        let mut b = Cache::new("t", 4, 2, 1, Policy::Lfu, false, 4).unwrap();
        for k in [1u32, 2, 1, 3, 1, 4, 2, 5, 3, 1] {
            let h = b.lookup(k, k as u64, 0, 0);
            if !h {
                b.insert(k, k as u64, 0, 0);
            }
            assert_eq!(a.access(k, k as u64, 0, 0), h);
        }
        assert_eq!(a.stats, b.stats);
    }

    #[test]
    fn lowest_marks_every_way_with_the_minimum_count() {
        let mut x = 7u64;
        for n in [1usize, 3, 8, 12, 16, 64] {
            for _ in 0..200 {
                let c: Vec<u8> = (0..n)
                    .map(|_| {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        ((x >> 60) as u8) % 4 + if n == 64 { 250 } else { 0 }
                    })
                    .collect();
                let low = *c.iter().min().unwrap();
                let want = c.iter().enumerate().fold(0u64, |t, (i, &v)| t | (((v == low) as u64) << i));
                let mut padded = c.clone();
                padded.resize(n.next_multiple_of(16), 0xff);
                assert_eq!(super::lowest(&padded, n), want, "{c:?}");
            }
        }
    }

    #[test]
    fn first_min_takes_the_first_of_equal_minima() {
        let mut x = 11u64;
        for _ in 0..500 {
            let r: [u64; GROUP] = std::array::from_fn(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                x >> 61
            });
            let m = *r.iter().min().unwrap();
            assert_eq!(super::first_min(&r), (m, r.iter().position(|&y| y == m).unwrap()), "{r:?}");
        }
    }

    #[test]
    fn age_touch_is_the_byte_wise_rule_on_every_way() {
        // rows of 64 padded bytes: every way, in every 16-byte chunk
        let mut x = 5u64;
        for i in 0..64 {
            let row: Vec<u8> = (0..64)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (x >> 58) as u8
                })
                .collect();
            let (mut got, mut want) = (row.clone(), row.clone());
            super::age_touch(&mut got, i);
            let a = row[i];
            want.iter_mut().for_each(|v| *v += (*v < a) as u8);
            want[i] = 0;
            assert_eq!(got, want, "age_touch, way {i}");
        }
    }

    #[test]
    fn select_bit_finds_the_kth_set_bit() {
        for mask in [1u64, 0b1011, 0xf0f0, 0x8000_0000_0000_0001, u64::MAX, 0x0123_4567_89ab_cdef] {
            let bits: Vec<usize> = (0..64).filter(|&i| mask >> i & 1 == 1).collect();
            for (k, &b) in bits.iter().enumerate() {
                assert_eq!(super::select_bit(mask, k as u64, 8), b, "{mask:x} {k}");
            }
        }
    }

    #[test]
    fn select_table_is_select_bit_for_one_byte() {
        // the LFU victim of a row of at most 8 ways reads SEL directly
        for mask in 1u64..256 {
            for k in 0..mask.count_ones() as u64 {
                assert_eq!(super::SEL[mask as usize][k as usize] as usize, super::select_bit(mask, k, 1), "{mask:b} {k}");
            }
        }
    }

    #[test]
    fn oracle_evicts_furthest_next_use() {
        let mut c = Cache::new("t", 2, 2, 1, Policy::Oracle, false, 4).unwrap();
        c.insert(1, 0, 0, 10);
        c.insert(2, 0, 0, 5);
        assert_eq!(c.insert(3, 0, 0, 7), Some(1));
        assert!(c.lookup(2, 0, 0, NEVER));
        assert_eq!(c.insert(4, 0, 0, 8), Some(2), "an entry never used again goes first");
    }

    #[test]
    fn partitions_isolate_tags_and_bad_geometry_is_an_error() {
        let mut c = Cache::new("DevTLB", 64, 8, 8, Policy::Lru, false, 4).unwrap();
        for k in 0..8 {
            c.insert(k, 0, 0, 0); // tenant 0 fills its row
        }
        c.insert(100, 0, 1, 0); // tenant 1 has its own row
        assert!((0..8).all(|k| c.contains(k, 0, 0)));
        assert!(c.contains(100, 5, 9), "SID 9 shares SID 1's partition (low-bit match)");
        let mut full = Cache::new("DevTLB", 16, 8, 2, Policy::Lru, true, 4).unwrap();
        full.insert(1, 0, 1, 0);
        assert!(!full.lookup(1, 0, 3, 0), "full tag match: SID 3 does not see SID 1's row");
        full.insert(7, 0, 3, 0);
        assert!(!full.contains(1, 0, 1), "re-tagging drops the row");
        let e = Cache::new("L3TLB", 1024, 16, 128, Policy::Lfu, false, 4).err().unwrap();
        assert!(matches!(&e, crate::HtError::Geometry { structure, .. } if structure == "L3TLB"));
        let e = e.to_string();
        assert!(e.contains("L3TLB") && e.contains("128 partitions"), "{e}");
    }
}

/// A fully associative LRU cache over a dense key space (the context cache: keys are SIDs), in
/// O(1) per access: an intrusive doubly linked recency list.
pub struct LruSet {
    cap: usize,
    len: usize,
    prev: Vec<u32>,
    next: Vec<u32>,
    resident: Vec<bool>,
    head: u32,
    tail: u32,
    pub stats: CacheStats,
}

const NIL: u32 = u32::MAX;

impl LruSet {
    pub fn new(what: &str, cap: usize, keys: usize) -> HtResult<LruSet> {
        if cap == 0 {
            return Err(HtError::Geometry { structure: what.into(), problem: "needs at least one entry".into() });
        }
        Ok(LruSet {
            cap,
            len: 0,
            prev: vec![NIL; keys],
            next: vec![NIL; keys],
            resident: vec![false; keys],
            head: NIL,
            tail: NIL,
            stats: CacheStats::default(),
        })
    }

    fn unlink(&mut self, k: u32) {
        let (p, n) = (self.prev[k as usize], self.next[k as usize]);
        if p != NIL {
            self.next[p as usize] = n
        } else {
            self.head = n
        }
        if n != NIL {
            self.prev[n as usize] = p
        } else {
            self.tail = p
        }
    }

    fn push_front(&mut self, k: u32) {
        self.prev[k as usize] = NIL;
        self.next[k as usize] = self.head;
        if self.head != NIL {
            self.prev[self.head as usize] = k
        } else {
            self.tail = k
        }
        self.head = k;
    }

    /// Access `k`: true on a hit; a miss fills it (evicting the least recent).
    #[inline(always)]
    pub fn access(&mut self, k: u32) -> bool {
        if self.resident[k as usize] {
            self.stats.hits += 1;
            // When every key fits, nothing is ever evicted and the recency order goes unused.
            if self.head != k && self.cap < self.resident.len() {
                self.unlink(k);
                self.push_front(k);
            }
            return true;
        }
        self.stats.misses += 1;
        if self.len == self.cap {
            let t = self.tail;
            self.unlink(t);
            self.resident[t as usize] = false;
            self.stats.evictions += 1;
        } else {
            self.len += 1;
        }
        self.resident[k as usize] = true;
        self.push_front(k);
        false
    }
}

#[cfg(test)]
mod lru_tests {
    #[test]
    fn lru_set_evicts_least_recent() {
        let mut c = super::LruSet::new("cc", 2, 4).unwrap();
        assert!(!c.access(0) && !c.access(1) && c.access(0));
        assert!(!c.access(2)); // evicts 1
        assert!(c.access(0) && !c.access(1));
    }
}
