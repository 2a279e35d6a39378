//! A deterministic first-fit range allocator: the physical page allocator of a host's RAM, the
//! IOVA allocators of IOMMU domains, the sub-allocator of a DMA window, and the LUT segments of an
//! NTB memory window all use it. It always returns the lowest address that fits, so the same
//! calls give the same addresses on every run.

use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub struct RangeAlloc {
    /// Free ranges: start -> end (half-open), never adjacent (coalesced).
    free: BTreeMap<u64, u64>,
    /// Allocations: start -> size.
    used: BTreeMap<u64, u64>,
}

pub fn align_up(v: u64, a: u64) -> Option<u64> {
    let a = a.max(1);
    v.checked_add(a - 1).map(|x| x / a * a)
}

impl RangeAlloc {
    /// An allocator over the given half-open ranges (start, end); empty ranges are ignored.
    pub fn new(ranges: &[(u64, u64)]) -> RangeAlloc {
        let mut r = RangeAlloc::default();
        for &(s, e) in ranges {
            if s < e {
                r.insert_free(s, e);
            }
        }
        r
    }

    /// The lowest `align`-aligned range of `size` units that is free.
    pub fn alloc(&mut self, size: u64, align: u64) -> Option<u64> {
        if size == 0 {
            return None;
        }
        let (start, end, a) = self.free.iter().find_map(|(&s, &e)| {
            let a = align_up(s, align)?;
            (a.checked_add(size)? <= e).then_some((s, e, a))
        })?;
        self.free.remove(&start);
        if start < a {
            self.free.insert(start, a);
        }
        if a + size < end {
            self.free.insert(a + size, end);
        }
        self.used.insert(a, size);
        Some(a)
    }

    /// Free the allocation that starts at `start`; returns its size, or None if there is none.
    pub fn free(&mut self, start: u64) -> Option<u64> {
        let size = self.used.remove(&start)?;
        self.insert_free(start, start + size);
        Some(size)
    }

    /// The allocation containing `addr`, as (start, size).
    pub fn find(&self, addr: u64) -> Option<(u64, u64)> {
        let (&s, &n) = self.used.range(..=addr).next_back()?;
        (addr < s + n).then_some((s, n))
    }

    /// Units allocated in all.
    pub fn in_use(&self) -> u64 {
        self.used.values().sum()
    }

    /// Units free in all.
    pub fn available(&self) -> u64 {
        self.free.iter().map(|(s, e)| e - s).sum()
    }

    pub fn allocations(&self) -> usize {
        self.used.len()
    }

    fn insert_free(&mut self, mut start: u64, mut end: u64) {
        if let Some((&ps, &pe)) = self.free.range(..start).next_back() {
            if pe == start {
                self.free.remove(&ps);
                start = ps;
            }
        }
        if let Some(&ne) = self.free.get(&end) {
            self.free.remove(&end);
            end = ne;
        }
        self.free.insert(start, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_alignment_free_and_coalescing() {
        let mut a = RangeAlloc::new(&[(0x1000, 0x10000), (0x20000, 0x40000)]);
        assert_eq!(a.alloc(0x1000, 0x1000), Some(0x1000));
        assert_eq!(a.alloc(0x2000, 0x4000), Some(0x4000));
        assert_eq!(a.alloc(0x1000, 0x1000), Some(0x2000));
        assert_eq!(a.alloc(0x10000, 0x1000), Some(0x20000), "too big for the first range, fits the second");
        assert_eq!(a.find(0x5fff), Some((0x4000, 0x2000)));
        assert_eq!(a.find(0x6000), None);
        assert_eq!(a.free(0x4000), Some(0x2000));
        assert_eq!(a.free(0x4000), None, "double free is refused");
        assert_eq!(a.free(0x1000), Some(0x1000));
        assert_eq!(a.free(0x2000), Some(0x1000));
        assert_eq!(a.free(0x20000), Some(0x10000));
        assert_eq!(a.in_use(), 0);
        assert_eq!(a.available(), 0xf000 + 0x20000);
        assert_eq!(a.alloc(0xf000, 1), Some(0x1000), "freed neighbours coalesce back into one range");
    }

    #[test]
    fn exhaustion_and_zero_size_give_none() {
        let mut a = RangeAlloc::new(&[(0, 4)]);
        assert_eq!(a.alloc(0, 1), None);
        assert_eq!(a.alloc(2, 2), Some(0));
        assert_eq!(a.alloc(2, 4), None, "the only free pair is not 4-aligned");
        assert_eq!(a.alloc(2, 2), Some(2));
        assert_eq!(a.alloc(1, 1), None);
        assert_eq!(a.allocations(), 2);
    }
}
