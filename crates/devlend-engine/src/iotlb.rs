//! A host IOMMU's translation caches as the engine times them: the IOTLB (leaf translations of
//! 4 KiB or 2 MiB pages) and the page-walk caches (non-leaf entries, VT-d 3.0 §6.5.2
//! "paging-structure caches"), each of a size and a replacement policy that are parameters
//! (`[timing] iotlb_entries`, `pwc_entries`, `iotlb_lru`), and the walker.
//!
//! A miss walks the second-level table from the deepest level a page-walk cache holds down to
//! the leaf, one DRAM access per level read: as many levels as the table really has (3 for a
//! 39-bit address width, 4 for 48 bits; one fewer for a 2 MiB leaf, VT-d §3.6), not a constant.

use crate::params::Timing;
use crate::queue::Ps;
use std::collections::{BTreeMap, HashMap};

/// A fully associative cache of keys, FIFO or LRU: a hash map for the lookup and an ordered
/// map of use stamps for the victim (no scan of the entries on a hit or a miss).
#[derive(Default)]
pub struct Cache {
    cap: usize,
    lru: bool,
    clock: u64,
    stamp: HashMap<u64, u64>,
    order: BTreeMap<u64, u64>,
}

impl Cache {
    pub fn new(cap: usize, lru: bool) -> Cache {
        Cache { cap, lru, ..Cache::default() }
    }

    /// Whether `key` is held; a hit refreshes it under LRU.
    pub fn hit(&mut self, key: u64) -> bool {
        let Some(s) = self.stamp.get_mut(&key) else { return false };
        if self.lru {
            self.order.remove(s);
            self.clock += 1;
            *s = self.clock;
            self.order.insert(self.clock, key);
        }
        true
    }

    /// Put `key` in (it is not held), evicting the oldest inserted (FIFO) or least recently used.
    pub fn fill(&mut self, key: u64) {
        if self.cap == 0 {
            return;
        }
        if self.stamp.len() == self.cap {
            let (_, victim) = self.order.pop_first().expect("a full cache has an oldest entry");
            self.stamp.remove(&victim);
        }
        self.clock += 1;
        self.stamp.insert(key, self.clock);
        self.order.insert(self.clock, key);
    }
}

/// One host's IOTLB, page-walk cache and walker.
pub struct HostIommu {
    iotlb: Cache,
    pwc: Cache,
    /// When the walker is free (walks are serialised per IOMMU).
    walker: Ps,
}

/// What a translation cost and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lookup {
    pub delay: Ps,
    pub hit: bool,
    /// Page-table entries read from DRAM.
    pub reads: u32,
}

impl HostIommu {
    pub fn new(t: &Timing) -> HostIommu {
        HostIommu { iotlb: Cache::new(t.iotlb_entries as usize, t.iotlb_lru), pwc: Cache::new(t.pwc_entries as usize, t.iotlb_lru), walker: 0 }
    }

    /// Translate `iova` in a page of 2^`shift` bytes whose leaf a cold walk reaches in `levels`
    /// reads, at `now`.
    pub fn lookup(&mut self, t: &Timing, now: Ps, iova: u64, shift: u32, levels: u32) -> Lookup {
        if self.iotlb.hit((iova >> shift) << 8 | shift as u64) {
            return Lookup { delay: t.iotlb_hit_ps, hit: true, reads: 0 };
        }
        self.iotlb.fill((iova >> shift) << 8 | shift as u64);
        // Non-leaf entries above the leaf, deepest first: the entry `up` levels above the leaf
        // maps the region of 2^(shift + 9 * up) bytes holding the page.
        let mut reads = levels;
        for up in 1..levels {
            if self.pwc.hit(Self::pwc_key(iova, shift, up)) {
                reads = up;
                break;
            }
        }
        for up in 1..reads {
            self.pwc.fill(Self::pwc_key(iova, shift, up));
        }
        let start = self.walker.max(now);
        self.walker = start + reads as Ps * t.dram_latency_ps;
        Lookup { delay: self.walker - now + t.iotlb_hit_ps, hit: false, reads }
    }

    fn pwc_key(iova: u64, shift: u32, up: u32) -> u64 {
        let span = shift + 9 * up;
        (iova >> span) << 8 | span as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::timing;

    fn t(entries: u32, pwc: u32, lru: bool) -> Timing {
        Timing { iotlb_entries: entries, pwc_entries: pwc, iotlb_lru: lru, ..timing().clone() }
    }

    #[test]
    fn a_miss_reads_the_levels_the_table_has() {
        let t = t(64, 0, true);
        let mut m = HostIommu::new(&t);
        // 48-bit table: 4 reads for a 4 KiB leaf, 3 for 2 MiB; 39-bit: 3 and 2.
        assert_eq!(m.lookup(&t, 0, 0x1000, 12, 4).reads, 4);
        assert_eq!(m.lookup(&t, 0, 0x4000_0000, 21, 3).reads, 3);
        assert_eq!(m.lookup(&t, 0, 0x8000_0000, 12, 3).reads, 3);
        let hit = m.lookup(&t, 0, 0x1000, 12, 4);
        assert!(hit.hit && hit.delay == t.iotlb_hit_ps);
    }

    #[test]
    fn the_page_walk_cache_skips_the_levels_it_holds() {
        let t = t(64, 16, true);
        let mut m = HostIommu::new(&t);
        assert_eq!(m.lookup(&t, 0, 0x10_0000, 12, 4).reads, 4, "cold");
        // The next 4 KiB page under the same 2 MiB region: its level-2 entry is cached.
        assert_eq!(m.lookup(&t, 0, 0x10_1000, 12, 4).reads, 1);
        // Another 2 MiB region under the same 1 GiB one: the level-3 entry is cached.
        assert_eq!(m.lookup(&t, 0, 0x80_0000, 12, 4).reads, 2);
    }

    #[test]
    fn size_and_replacement_are_parameters() {
        // Pages 0, 1, 2 into a 2-entry IOTLB, touching page 0 in between: LRU keeps it, FIFO not.
        for (lru, kept) in [(true, true), (false, false)] {
            let t = t(2, 0, lru);
            let mut m = HostIommu::new(&t);
            m.lookup(&t, 0, 0x0000, 12, 4);
            m.lookup(&t, 0, 0x1000, 12, 4);
            m.lookup(&t, 0, 0x0000, 12, 4);
            m.lookup(&t, 0, 0x2000, 12, 4);
            assert_eq!(m.lookup(&t, 0, 0x0000, 12, 4).hit, kept, "lru {lru}");
        }
    }

    #[test]
    fn walks_are_serialised_on_one_walker() {
        let t = t(64, 0, true);
        let mut m = HostIommu::new(&t);
        let a = m.lookup(&t, 0, 0x1000, 12, 4);
        let b = m.lookup(&t, 0, 0x2000, 12, 4);
        assert_eq!(b.delay - a.delay, 4 * t.dram_latency_ps);
    }
}
