//! The event queue: a hand-written monotone priority queue on (time, sequence). The sequence number makes
//! the order of simultaneous events the order they were scheduled in, so runs are bit-identical.
//! Issue 3 measured a hand-written heap 3-6x faster than general Rust DES frameworks, which also
//! tick in nanoseconds, too coarse for one byte at Gen5 x16 (~16 ps).

pub type Ps = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry<E> {
    time: Ps,
    seq: u64,
    ev: E,
}

/// Above this many pending events the queue files them in a radix heap, below `TO_HEAP` again in
/// a binary heap (hysteresis, so a run near a threshold does not convert back and forth).
const TO_RADIX: usize = 256;
const TO_HEAP: usize = 64;

/// Two exact priority queues on (time, seq), the one that is faster for the number of events
/// pending. A binary heap while few are pending (a handful of streams: a few levels, in cache).
/// With many (the 512-stream contention run: thousands of events pending, 43,000 TLPs in flight)
/// a binary heap sifts through a dozen levels at random; there a radix heap (a monotone priority
/// queue) is used: the engine never schedules an event before the time of the last one popped,
/// so an entry can be filed by the highest bit in which its time differs from that time
/// (`last`). Bucket 0 holds the entries due exactly at `last`, in schedule order; when it runs
/// dry, the lowest non-empty bucket is scanned for its earliest time, which becomes `last`, and
/// its entries are filed again into lower buckets. Each entry moves a few times (once per bit of
/// distance to `last` it loses), sequentially in memory. The pop order is exactly (time, seq)
/// either way: the entries that join bucket 0 when `last` advances are put in seq order, and an
/// entry scheduled later at `last` itself has a larger seq than all of them.
pub struct EventQueue<E> {
    radix: bool,
    heap: Vec<Entry<E>>,
    /// `buckets[0]` is read from `head`; `buckets[i]`, i >= 1, holds times whose highest bit
    /// differing from `last` is bit i - 1.
    buckets: [Vec<Entry<E>>; 65],
    head: usize,
    /// Bit i set: `buckets[i]` may not be empty.
    nonempty: u128,
    /// The time of the last event popped: nothing may be scheduled before it.
    last: Ps,
    len: usize,
    seq: u64,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue { radix: false, heap: Vec::new(), buckets: std::array::from_fn(|_| Vec::new()), head: 0, nonempty: 0, last: 0, len: 0, seq: 0 }
    }
}

impl<E: Copy> EventQueue<E> {
    #[inline]
    fn less(a: &Entry<E>, b: &Entry<E>) -> bool {
        (a.time, a.seq) < (b.time, b.seq)
    }

    #[inline]
    fn bucket(last: Ps, time: Ps) -> usize {
        (64 - (time ^ last).leading_zeros()) as usize
    }

    /// Schedule `ev` at `time`, which must not be before the time of the last event popped.
    #[inline]
    pub fn push(&mut self, time: Ps, ev: E) {
        assert!(time >= self.last, "event scheduled at {time} ps, before the last one popped ({} ps)", self.last);
        let e = Entry { time, seq: self.seq, ev };
        self.seq += 1;
        self.len += 1;
        if self.radix {
            self.file(e);
        } else {
            self.heap_push(e);
            if self.len > TO_RADIX {
                self.to_radix();
            }
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Ps, E)> {
        let e = if self.radix {
            if self.head == self.buckets[0].len() && !self.refill() {
                return None;
            }
            let e = self.buckets[0][self.head];
            self.head += 1;
            if self.len <= TO_HEAP {
                self.len -= 1;
                self.to_heap();
                return Some((e.time, e.ev));
            }
            e
        } else {
            let e = self.heap_pop()?;
            self.last = e.time;
            e
        };
        self.len -= 1;
        Some((e.time, e.ev))
    }

    #[inline]
    fn file(&mut self, e: Entry<E>) {
        let b = Self::bucket(self.last, e.time);
        self.nonempty |= 1 << b;
        self.buckets[b].push(e);
    }

    fn heap_push(&mut self, e: Entry<E>) {
        self.heap.push(e);
        let mut i = self.heap.len() - 1;
        while i > 0 {
            let p = (i - 1) / 2;
            if Self::less(&self.heap[i], &self.heap[p]) {
                self.heap.swap(i, p);
                i = p;
            } else {
                break;
            }
        }
    }

    /// Bottom-up deletion: move the hole at the root down along the smaller children to a leaf
    /// (one comparison per level), put the last entry there and sift it up (usually a step or
    /// two). The order popped is the same as with any heap: (time, seq) is a total order.
    fn heap_pop(&mut self) -> Option<Entry<E>> {
        let last = self.heap.pop()?;
        let n = self.heap.len();
        if n == 0 {
            return Some(last);
        }
        let top = self.heap[0];
        let mut i = 0;
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && Self::less(&self.heap[r], &self.heap[l]) { r } else { l };
            self.heap[i] = self.heap[c];
            i = c;
        }
        while i > 0 {
            let p = (i - 1) / 2;
            if Self::less(&last, &self.heap[p]) {
                self.heap[i] = self.heap[p];
                i = p;
            } else {
                break;
            }
        }
        self.heap[i] = last;
        Some(top)
    }

    /// Many events pending: file the heap's entries in the radix heap.
    #[cold]
    fn to_radix(&mut self) {
        self.radix = true;
        self.head = 0;
        let mut heap = std::mem::take(&mut self.heap);
        for e in heap.drain(..) {
            self.file(e);
        }
        self.heap = heap;
        self.sort_bucket0();
    }

    /// Few events pending: back to the binary heap (a sorted array is a heap).
    #[cold]
    fn to_heap(&mut self) {
        self.radix = false;
        let head = self.head;
        self.heap.extend_from_slice(&self.buckets[0][head..]);
        self.buckets[0].clear();
        for b in self.buckets[1..].iter_mut() {
            self.heap.extend_from_slice(&b[..]);
            b.clear();
        }
        self.head = 0;
        self.nonempty = 0;
        self.heap.sort_unstable_by_key(|e| (e.time, e.seq));
    }

    fn sort_bucket0(&mut self) {
        // Entries from a higher bucket arrive in the order they were filed there, not necessarily seq order.
        let z = &mut self.buckets[0][self.head..];
        if z.len() > 1 && z.windows(2).any(|w| w[0].seq > w[1].seq) {
            z.sort_unstable_by_key(|e| e.seq);
        }
    }

    /// Bucket 0 is used up: advance `last` to the earliest time pending and file that bucket's
    /// entries again. False when nothing is pending.
    #[cold]
    fn refill(&mut self) -> bool {
        self.buckets[0].clear();
        self.head = 0;
        self.nonempty &= !1;
        if self.nonempty == 0 {
            return false;
        }
        let i = self.nonempty.trailing_zeros() as usize;
        self.nonempty &= !(1 << i);
        let (low, high) = self.buckets.split_at_mut(i);
        let b = &mut high[0];
        if b.len() == 1 {
            self.last = b[0].time;
            low[0].push(b[0]);
            b.clear();
            self.nonempty |= 1;
            return true;
        }
        let mut last = Ps::MAX;
        for e in b.iter() {
            last = last.min(e.time);
        }
        self.last = last;
        for e in b.iter() {
            // Every entry of bucket i is closer to the new `last` than bit i - 1: j < i.
            let j = Self::bucket(last, e.time);
            self.nonempty |= 1 << j;
            low[j].push(*e);
        }
        b.clear();
        self.sort_bucket0();
        true
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_schedule_order() {
        let mut q = EventQueue::default();
        for (t, e) in [(5, 'a'), (1, 'b'), (5, 'c'), (0, 'd'), (1, 'e'), (9, 'f'), (5, 'g')] {
            q.push(t, e);
        }
        let order: String = std::iter::from_fn(|| q.pop().map(|x| x.1)).collect();
        assert_eq!(order, "dbeacgf");
    }

    #[test]
    fn interleaved_pushes_and_pops_come_out_as_a_sort_would() {
        // A model: every entry with its sequence number, popped in (time, seq) order.
        // Times are never before the last one popped (the queue is monotone); ties are frequent.
        let (mut q, mut model, mut seq, mut x, mut floor) = (EventQueue::default(), Vec::new(), 0u64, 12345u64, 0u64);
        let mut switched = (false, false);
        for round in 0..2000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // Now and then a burst past the radix threshold, drained later past the heap one.
            let n = if round % 500 == 3 { TO_RADIX as u64 + 700 } else { (x >> 61) + 1 };
            for _ in 0..n {
                let t = floor + (x >> 20) % 97 + if round % 7 == 0 { (x >> 11) % 100_000 } else { 0 };
                q.push(t, seq);
                model.push((t, seq));
                seq += 1;
                x = x.rotate_left(7) ^ seq;
            }
            let pops = if round % 500 > 250 { (x >> 62) + 40 } else { x >> 62 };
            for _ in 0..pops {
                model.sort_unstable();
                let want = if model.is_empty() { None } else { Some(model.remove(0)) };
                assert_eq!(q.pop(), want);
                if let Some((t, _)) = want {
                    floor = t;
                }
                switched.0 |= q.radix;
                switched.1 |= switched.0 && !q.radix;
            }
        }
        assert_eq!(switched, (true, true), "the test crosses both thresholds");
        model.sort_unstable();
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, model);
    }
}
