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
/// Empty table cell or list end.
const NIL: u32 = u32::MAX;

/// A fully associative cache of keys, FIFO or LRU: the entries in slots kept on a list from the
/// most recently inserted (or, under LRU, used) to the victim, found through an open-addressing
/// table of slot numbers (linear probing, deletion by backward shift). A hit, a fill and an
/// eviction are each a few loads and stores: no scan, no allocation after the first fills.
#[derive(Default)]
pub struct Cache {
    cap: usize,
    lru: bool,
    /// The entries, by slot: a hit or a refresh touches one 16-byte record per slot it links.
    slots: Vec<Slot>,
    head: u32,
    tail: u32,
    /// Slot numbers by hash of their key; a power of two at least twice the capacity.
    table: Vec<u32>,
    shift: u32,
}

/// A cached key and its place on the recency list: towards the head (newer) and towards the
/// tail (older).
#[derive(Clone, Copy, Default)]
struct Slot {
    key: u64,
    newer: u32,
    older: u32,
}

impl Cache {
    pub fn new(cap: usize, lru: bool) -> Cache {
        let size = (2 * cap).next_power_of_two().max(2);
        Cache { cap, lru, head: NIL, tail: NIL, table: vec![NIL; size], shift: 64 - size.trailing_zeros(), ..Cache::default() }
    }

    /// Whether `key` is held; a hit refreshes it under LRU.
    pub fn hit(&mut self, key: u64) -> bool {
        // The most recent entry (a stream's next TLP in the same page) needs nothing more.
        if self.head != NIL && self.slots[self.head as usize].key == key {
            return true;
        }
        let Some(slot) = self.find(key).map(|i| self.table[i]) else { return false };
        if self.lru {
            self.unlink(slot);
            self.push_head(slot);
        }
        true
    }

    /// Put `key` in (it is not held), evicting the oldest inserted (FIFO) or least recently used.
    pub fn fill(&mut self, key: u64) {
        if self.cap == 0 {
            return;
        }
        let slot = if self.slots.len() == self.cap {
            let victim = self.tail;
            let cell = self.find(self.slots[victim as usize].key).expect("a held key is in the table");
            self.remove_cell(cell);
            self.unlink(victim);
            self.slots[victim as usize].key = key;
            victim
        } else {
            self.slots.push(Slot { key, newer: NIL, older: NIL });
            self.slots.len() as u32 - 1
        };
        self.push_head(slot);
        let mut i = self.home(key);
        while self.table[i] != NIL {
            i = (i + 1) & (self.table.len() - 1);
        }
        self.table[i] = slot;
    }

    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The table cell holding `key`'s slot.
    fn find(&self, key: u64) -> Option<usize> {
        let mut i = self.home(key);
        loop {
            let s = self.table[i];
            if s == NIL {
                return None;
            }
            if self.slots[s as usize].key == key {
                return Some(i);
            }
            i = (i + 1) & (self.table.len() - 1);
        }
    }

    /// Empty cell `hole`, moving later entries of its probe run back so every key stays
    /// reachable from its home cell.
    fn remove_cell(&mut self, mut hole: usize) {
        let mask = self.table.len() - 1;
        let mut i = hole;
        loop {
            i = (i + 1) & mask;
            let s = self.table[i];
            if s == NIL {
                break;
            }
            let home = self.home(self.slots[s as usize].key);
            // Move it back unless its home lies cyclically in (hole, i].
            if (i.wrapping_sub(home) & mask) >= (i.wrapping_sub(hole) & mask) {
                self.table[hole] = s;
                hole = i;
            }
        }
        self.table[hole] = NIL;
    }

    fn unlink(&mut self, slot: u32) {
        let Slot { newer: n, older: o, .. } = self.slots[slot as usize];
        if n == NIL {
            self.head = o
        } else {
            self.slots[n as usize].older = o
        }
        if o == NIL {
            self.tail = n
        } else {
            self.slots[o as usize].newer = n
        }
    }

    fn push_head(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.newer = NIL;
        s.older = self.head;
        if self.head == NIL {
            self.tail = slot
        } else {
            self.slots[self.head as usize].newer = slot
        }
        self.head = slot;
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
        self.walker = start + reads as Ps * t.walk_read_ps();
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
    fn the_cache_answers_as_a_list_in_recency_order_would() {
        // A model: keys newest first; a hit moves the key to the front under LRU, a fill at a
        // full capacity drops the last. Keys collide in the table (few distinct, many evictions).
        for (cap, lru) in [(1, true), (2, false), (5, true), (16, false), (64, true), (64, false)] {
            let (mut c, mut model, mut x) = (Cache::new(cap, lru), Vec::<u64>::new(), 99u64);
            for _ in 0..20_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let key = (x >> 33) % (3 * cap as u64 + 2) * 0x1000;
                let pos = model.iter().position(|&k| k == key);
                assert_eq!(c.hit(key), pos.is_some(), "cap {cap} lru {lru}");
                match pos {
                    Some(i) if lru => {
                        model.remove(i);
                        model.insert(0, key);
                    }
                    Some(_) => {}
                    None => {
                        c.fill(key);
                        model.truncate(cap - 1);
                        model.insert(0, key);
                    }
                }
            }
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
