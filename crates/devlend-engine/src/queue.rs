//! The event queue: a hand-written monotone priority queue on (time, phase, sequence). Within one
//! picosecond, events pushed with [`EventQueue::push`] come first and those pushed with
//! [`EventQueue::push_late`] (the engine's transmit decisions) after them; within a phase, the
//! sequence number makes the order the order they were scheduled in, so runs are bit-identical.
//! What is scheduled for the very (time, phase) being run joins it after what is pending there
//! (the queue never goes back): an early event scheduled once the late phase has begun is late.
//! Issue 3 measured a hand-written heap 3-6x faster than general Rust DES frameworks, which also
//! tick in nanoseconds, too coarse for one byte at Gen5 x16 (~16 ps).

pub type Ps = u64;

/// What the queue holds: an event whose value fits in 48 bits, so that an entry of the ring is
/// one `u64`.
pub trait Packed: Copy {
    /// The event as a number below 2^48.
    fn pack(self) -> u64;
    fn unpack(bits: u64) -> Self;
}

/// An event in the ring, the current bucket or the FIFOs of the picosecond being run: the offset
/// of its key (`time << 1 | phase`, phase 1: late) in its bucket (`SHIFT` bits) above the packed
/// event (48 bits), 8 bytes; the bucket's number gives the rest of the key. Kept in the order
/// scheduled (or sorted stably from it), so it needs no sequence number.
type Entry = u64;
const EV_BITS: u32 = 48;
const EV_MASK: u64 = (1 << EV_BITS) - 1;

/// The entry of `ev` due at key `key`.
#[inline(always)]
fn entry<E: Packed>(key: u64, ev: E) -> Entry {
    let bits = ev.pack();
    debug_assert!(bits <= EV_MASK, "an event packs into 48 bits");
    (key & ((1 << SHIFT) - 1)) << EV_BITS | bits
}

/// An entry's offset in its bucket: entries of one bucket order by it.
#[inline(always)]
fn offset(e: Entry) -> u64 {
    e >> EV_BITS
}

/// An event beyond the ring's reach, in the binary heap `far`: ordered by (time, seq).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Far<E> {
    time: u64,
    seq: u64,
    ev: E,
}

impl<E> Far<E> {
    #[inline]
    fn key(&self) -> (Ps, u64) {
        (self.time, self.seq)
    }
}

/// log2 of a bucket's width in keys (`time << 1 | phase`): 256 ps, a few events per bucket even
/// with 512 streams.
const SHIFT: u32 = 9;
/// Buckets in the ring: events up to about a microsecond ahead of the current bucket; later ones
/// wait in the far heap.
const SLOTS: usize = 4096;
const WORDS: usize = SLOTS / 64;
const NONE: u32 = u32::MAX;

/// A calendar queue (timing wheel) of 256 ps buckets. The engine schedules nearly every event
/// within a microsecond of now (a TLP's serialisation, a component's latency, an UpdateFC), so
/// scheduling one is an append to its bucket's vector, and popping is taking the last entry of the
/// current bucket, which is sorted by (time, seq) when it becomes current (the bucket's vector is
/// swapped in whole: no per-entry copy, no list to chase through memory). A bitmap of the ring's
/// non-empty buckets finds the next one. An event scheduled into the current bucket is inserted
/// in order; one beyond the ring's reach waits in a binary heap (`far`) until its bucket comes up.
/// Buckets are disjoint time ranges taken in order and each is taken in (time, seq) order, so the
/// pop order is exactly (key, seq): the engine never schedules before the last popped time.
pub struct EventQueue<E> {
    /// The current bucket's entries, sorted by (time, order scheduled) *descending*: the next one is last.
    now: Vec<Entry>,
    /// Early entries scheduled at the key of the last event popped (while its early phase runs),
    /// in the order scheduled (from `same_head` on): they come after those of `now` at that key
    /// (scheduled earlier, before that time was reached) and before any later one. Appended, not
    /// inserted.
    same: Vec<Entry>,
    same_head: usize,
    /// Entries of the late phase of the picosecond being run that are scheduled while it runs
    /// (key `last | 1`: late ones, and early ones once that phase has begun), in the order
    /// scheduled (from `late_head` on): after every early entry of that picosecond and after its
    /// late ones in `now` (scheduled before it). Appended, not inserted ahead of the early entries
    /// still pending.
    late: Vec<Entry>,
    late_head: usize,
    /// The current bucket's number (time >> SHIFT).
    cur: u64,
    /// Slot `b % SLOTS` names the buffer (in `bufs`) holding the entries of bucket `b`, unsorted,
    /// for `cur < b < cur + SLOTS`; `NONE` when the bucket is empty. Four bytes a slot, so the
    /// ring's index stays small in cache.
    slots: Vec<u32>,
    bufs: Vec<Vec<Entry>>,
    /// Buffers not in a slot (empty, with capacity), last freed first: the buffers in use stay as
    /// few as the non-empty buckets, and warm in cache.
    spare: Vec<u32>,
    /// Bit `s` of word `s / 64`: slot `s` is non-empty; bit `w` of `summary`: word `w` is non-zero.
    bits: [u64; WORDS],
    summary: u64,
    /// Entries at or beyond `cur + SLOTS` when scheduled: a binary heap, smallest (time, seq) first.
    far: Vec<Far<E>>,
    /// The key of the last event popped: nothing may be scheduled before it.
    last: u64,
    len: usize,
    /// Sequence numbers of the entries sent to `far`.
    seq: u64,
    _events: std::marker::PhantomData<E>,
}

impl<E: Packed> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            now: Vec::new(),
            same: Vec::new(),
            same_head: 0,
            late: Vec::new(),
            late_head: 0,
            cur: 0,
            slots: vec![NONE; SLOTS],
            bufs: Vec::new(),
            spare: Vec::new(),
            bits: [0; WORDS],
            summary: 0,
            far: Vec::new(),
            last: 0,
            len: 0,
            seq: 0,
            _events: std::marker::PhantomData,
        }
    }
}

impl<E: Packed> EventQueue<E> {
    /// Schedule `ev` at `time`, which must not be before the time of the last event popped: before
    /// the late events of that picosecond, unless they have begun (then after those scheduled).
    #[inline]
    pub fn push(&mut self, time: Ps, ev: E) {
        assert!(time >= self.last >> 1, "event scheduled at {time} ps, before the last one popped ({} ps)", self.last >> 1);
        self.put((time << 1).max(self.last), ev);
    }

    /// Schedule `ev` at `time` (not before the last event popped), after every event of that
    /// picosecond scheduled with [`EventQueue::push`].
    #[inline]
    pub fn push_late(&mut self, time: Ps, ev: E) {
        assert!(time >= self.last >> 1, "event scheduled at {time} ps, before the last one popped ({} ps)", self.last >> 1);
        self.put(time << 1 | 1, ev);
    }

    #[inline(always)]
    fn put(&mut self, time: u64, ev: E) {
        let e = entry(time, ev);
        self.len += 1;
        let ahead = (time >> SHIFT) - self.cur;
        if ahead != 0 {
            if ahead < SLOTS as u64 {
                self.file(time, e);
            } else {
                self.far_push(Far { time, seq: self.seq, ev });
                self.seq += 1;
            }
        } else if time == self.last && time & 1 == 0 {
            self.same.push(e);
        } else if time == self.last | 1 {
            self.late.push(e);
        } else {
            self.insert_now(e);
        }
    }

    /// Into the current bucket: after every entry due later, before those due at the same time
    /// or earlier (scheduled before it).
    #[inline(never)]
    fn insert_now(&mut self, e: Entry) {
        let at = self.now.partition_point(|&x| offset(x) > offset(e));
        self.now.insert(at, e);
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Ps, E)> {
        // The two FIFOs of the picosecond being run are emptied (cleared) whenever drained.
        if (self.late.len() | self.same.len()) != 0 {
            if let Some(e) = self.pop_fifo() {
                self.len -= 1;
                return Some((self.key(e) >> 1, E::unpack(e & EV_MASK)));
            }
        }
        let e = match self.now.pop() {
            Some(e) => e,
            None => {
                if !self.advance() {
                    return None;
                }
                self.now.pop().expect("a bucket taken holds an entry")
            }
        };
        self.last = self.key(e);
        self.len -= 1;
        Some((self.last >> 1, E::unpack(e & EV_MASK)))
    }

    /// The key of an entry of the current bucket.
    #[inline(always)]
    fn key(&self, e: Entry) -> u64 {
        self.cur << SHIFT | offset(e)
    }

    /// The next entry if it is in `late` or `same`: the late entries scheduled during this
    /// picosecond once no early entry of it is left (`same` holds only early ones) and `now` has
    /// none of its late ones (scheduled before); the early ones scheduled during it once `now` has
    /// none of that time.
    #[inline]
    fn pop_fifo(&mut self) -> Option<Entry> {
        if self.late_head < self.late.len() && self.same_head == self.same.len() && self.now.last().is_none_or(|&n| self.key(n) > self.last | 1) {
            let e = self.late[self.late_head];
            self.late_head += 1;
            if self.late_head == self.late.len() {
                self.late.clear();
                self.late_head = 0;
            }
            self.last = self.key(e);
            return Some(e);
        }
        if self.same_head < self.same.len() && self.now.last().is_none_or(|&n| self.key(n) != self.last) {
            let e = self.same[self.same_head];
            self.same_head += 1;
            if self.same_head == self.same.len() {
                self.same.clear();
                self.same_head = 0;
            }
            return Some(e);
        }
        None
    }

    /// The time of the next event, without taking it (None when nothing is pending): what an
    /// outside party synchronised to the clock (a real guest's kernel) may run freely up to.
    pub fn peek_time(&self) -> Option<Ps> {
        if self.late_head < self.late.len() || self.same_head < self.same.len() {
            return Some(self.last >> 1);
        }
        if let Some(&e) = self.now.last() {
            return Some(self.key(e) >> 1);
        }
        let from = ((self.cur + 1) as usize) & (SLOTS - 1);
        let ring = self.next_slot(from).map(|s| {
            let b = self.cur + 1 + ((s + SLOTS - from) & (SLOTS - 1)) as u64;
            let min = self.bufs[self.slots[s] as usize].iter().map(|&e| offset(e)).min().unwrap_or(0);
            (b << SHIFT | min) >> 1
        });
        let far = self.far.first().map(|e| e.time >> 1);
        match (ring, far) {
            (Some(r), Some(f)) => Some(r.min(f)),
            (r, f) => r.or(f),
        }
    }

    /// Take a pending event out (the first one found whose packed value is `ev`'s: a caller
    /// removes an event that is pending once, such as a timer that is no longer wanted); false
    /// when none is pending. The others keep their order. Linear in the pending events: for a
    /// rare cancellation, never on the hot path.
    pub fn remove(&mut self, ev: E) -> bool {
        let bits = ev.pack();
        let is = |e: &Entry| e & EV_MASK == bits;
        if let Some(i) = self.late[self.late_head..].iter().position(is) {
            self.late.remove(self.late_head + i);
        } else if let Some(i) = self.same[self.same_head..].iter().position(is) {
            self.same.remove(self.same_head + i);
        } else if let Some(i) = self.now.iter().position(is) {
            self.now.remove(i);
        } else if let Some((slot, i)) =
            (0..SLOTS).filter(|&s| self.slots[s] != NONE).find_map(|s| self.bufs[self.slots[s] as usize].iter().position(is).map(|i| (s, i)))
        {
            let b = self.slots[slot];
            let buf = &mut self.bufs[b as usize];
            buf.remove(i);
            if buf.is_empty() {
                self.slots[slot] = NONE;
                self.free_slot(slot, b);
            }
        } else if let Some(i) = self.far.iter().position(|e| e.ev.pack() == bits) {
            // Rebuilt from the rest: each keeps its (time, seq), so the order is unchanged.
            let mut rest = std::mem::take(&mut self.far);
            rest.swap_remove(i);
            for e in rest {
                self.far_push(e);
            }
        } else {
            return false;
        }
        self.len -= 1;
        true
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Append `e`, due at key `time`, to its bucket in the ring.
    #[inline]
    fn file(&mut self, time: u64, e: Entry) {
        let slot = ((time >> SHIFT) as usize) & (SLOTS - 1);
        let mut b = self.slots[slot];
        if b == NONE {
            b = self.spare.pop().unwrap_or_else(|| {
                self.bufs.push(Vec::new());
                self.bufs.len() as u32 - 1
            });
            self.slots[slot] = b;
            self.bits[slot / 64] |= 1 << (slot % 64);
            self.summary |= 1 << (slot / 64);
        }
        self.bufs[b as usize].push(e);
    }

    /// The current bucket is used up: make the next non-empty one current (its ring list and its
    /// entries in the far heap, sorted). False when nothing is pending.
    fn advance(&mut self) -> bool {
        let from = ((self.cur + 1) as usize) & (SLOTS - 1);
        let ring = self.next_slot(from).map(|s| self.cur + 1 + ((s + SLOTS - from) & (SLOTS - 1)) as u64);
        let far = self.far.first().map(|e| e.time >> SHIFT);
        let b = match (ring, far) {
            (Some(r), Some(f)) => r.min(f),
            (Some(r), None) => r,
            (None, Some(f)) => f,
            (None, None) => return false,
        };
        self.cur = b;
        // The bucket's entries, in an order that keeps those of one time in the order scheduled:
        // first those from the far heap (by time, then as scheduled), then the ring's (as
        // scheduled). Every far entry of a bucket was scheduled before every ring entry of it: an
        // event went far only while its bucket was out of the ring's reach, and the ring reaches
        // further as time goes on.
        if self.far.first().is_some_and(|e| e.time >> SHIFT == b) {
            while self.far.first().is_some_and(|e| e.time >> SHIFT == b) {
                let e = self.far_pop();
                self.now.push(entry(e.time, e.ev));
            }
            if ring == Some(b) {
                self.append_slot((b as usize) & (SLOTS - 1));
            }
        } else if ring == Some(b) {
            self.take_slot((b as usize) & (SLOTS - 1));
        }
        match self.now.len() {
            0 | 1 => {}
            // Two: the later-scheduled one goes first unless it is due later.
            2 => {
                if offset(self.now[0]) <= offset(self.now[1]) {
                    self.now.swap(0, 1);
                }
            }
            _ => self.sort_now(),
        }
        true
    }

    /// Sort the bucket just made current by (time, order scheduled) descending: its entries of one
    /// time are in the order scheduled, so reversed, a stable sort on their offset alone does it.
    #[inline(never)]
    fn sort_now(&mut self) {
        self.now.reverse();
        self.now.sort_by_key(|&e| std::cmp::Reverse(offset(e)));
    }

    /// Make slot `slot`'s entries the current bucket (unsorted); `now` is empty, and its vector
    /// becomes a spare.
    #[inline]
    fn take_slot(&mut self, slot: usize) {
        debug_assert!(self.now.is_empty());
        let b = std::mem::replace(&mut self.slots[slot], NONE);
        std::mem::swap(&mut self.now, &mut self.bufs[b as usize]);
        self.free_slot(slot, b);
    }

    /// Append slot `slot`'s entries to the current bucket; its vector becomes a spare.
    fn append_slot(&mut self, slot: usize) {
        let b = std::mem::replace(&mut self.slots[slot], NONE);
        let buf = &mut self.bufs[b as usize];
        self.now.extend_from_slice(buf);
        buf.clear();
        self.free_slot(slot, b);
    }

    /// Slot `slot` is empty again; its vector `b` (empty) becomes a spare.
    #[inline]
    fn free_slot(&mut self, slot: usize, b: u32) {
        self.spare.push(b);
        let w = slot / 64;
        self.bits[w] &= !(1 << (slot % 64));
        if self.bits[w] == 0 {
            self.summary &= !(1 << w);
        }
    }

    /// The first non-empty slot at or after `from`, or else the first one from slot 0 (the ring
    /// wraps: those are later buckets).
    fn next_slot(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        let m = self.bits[w] & (!0u64 << (from % 64));
        if m != 0 {
            return Some(w * 64 + m.trailing_zeros() as usize);
        }
        let above = if w + 1 < WORDS { self.summary & (!0u64 << (w + 1)) } else { 0 };
        let word = if above != 0 { above } else { self.summary };
        if word == 0 {
            return None;
        }
        let w = word.trailing_zeros() as usize;
        Some(w * 64 + self.bits[w].trailing_zeros() as usize)
    }

    fn far_push(&mut self, e: Far<E>) {
        self.far.push(e);
        let mut i = self.far.len() - 1;
        while i > 0 {
            let p = (i - 1) / 2;
            if self.far[i].key() >= self.far[p].key() {
                break;
            }
            self.far.swap(i, p);
            i = p;
        }
    }

    fn far_pop(&mut self) -> Far<E> {
        let top = self.far.swap_remove(0);
        let n = self.far.len();
        let mut i = 0;
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let c = if l + 1 < n && self.far[l + 1].key() < self.far[l].key() { l + 1 } else { l };
            if self.far[i].key() <= self.far[c].key() {
                break;
            }
            self.far.swap(i, c);
            i = c;
        }
        top
    }
}

/// A FIFO whose entries live in a slice of an arena shared by many FIFOs (the engine's ports): a
/// power-of-two ring, its slice aligned to its size, that moves to the arena's end (rounded up to
/// a multiple of the new size), twice as large, when full (the slices it leaves stay unused: old
/// slices and padding add up to less than three times its current slice). 12 bytes, where a `VecDeque` header
/// is 32 and its buffer a separate allocation: a port's six FIFOs sit in its own cache lines, and
/// their entries in a few shared ones. The aligned slice is what makes 12 bytes enough (issue
/// 33): the first entry's arena index locates the slice too, so no offset is kept, and the first
/// entry is read without arithmetic.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ring {
    /// Arena index of the first entry (inside the slice, which starts at a multiple of `cap`).
    head: u32,
    len: u32,
    /// The slice's size, a power of two (0 before the first push).
    cap: u32,
}

impl Ring {
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The arena index `k` entries after the first (wrapping inside the slice).
    #[inline]
    fn at(&self, k: u32) -> usize {
        let m = self.cap.wrapping_sub(1);
        ((self.head & !m) | (self.head.wrapping_add(k) & m)) as usize
    }

    #[inline]
    pub(crate) fn front<T: Copy>(&self, arena: &[T]) -> Option<T> {
        if self.is_empty() {
            None
        } else {
            Some(arena[self.head as usize])
        }
    }

    /// Remove the first entry (there is one).
    #[inline]
    pub(crate) fn drop_front(&mut self) {
        debug_assert!(!self.is_empty());
        self.head = self.at(1) as u32;
        self.len -= 1;
    }

    #[inline]
    pub(crate) fn pop<T: Copy>(&mut self, arena: &[T]) -> Option<T> {
        let e = self.front(arena)?;
        self.drop_front();
        Some(e)
    }

    #[inline]
    pub(crate) fn push<T: Copy + Default>(&mut self, arena: &mut Vec<T>, e: T) {
        if self.len == self.cap {
            self.grow(arena);
        }
        let i = self.at(self.len);
        arena[i] = e;
        self.len += 1;
    }

    #[cold]
    fn grow<T: Copy + Default>(&mut self, arena: &mut Vec<T>) {
        let cap = (self.cap * 2).max(4);
        let off = arena.len().next_multiple_of(cap as usize);
        let end = u32::try_from(off + cap as usize).expect("a FIFO arena holds fewer than 2^32 entries");
        arena.resize(end as usize, T::default());
        for k in 0..self.len {
            arena[off + k as usize] = arena[self.at(k)];
        }
        *self = Ring { head: off as u32, len: self.len, cap };
    }
}

/// An entry of a FIFO of TLPs waiting at a port ([`Waiting`]): the TLP, and its ready time as
/// the difference from the entry ahead of it, 8 bytes where (ready time, TLP) took 16: eight to
/// a cache line (issue 33: at 8192 streams a FIFO's line is a likely last-level miss at each
/// push and pop, so half the bytes is about half the misses).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Queued {
    id: u32,
    /// Ready time minus that of the entry ahead, or `FAR` (kept in `Waiting::far`).
    delta: i32,
}

/// The difference does not fit 32 bits (or the entry heads an empty FIFO, the 0 then unused).
const FAR: i32 = i32::MIN;

/// The entries of every port's FIFOs of waiting TLPs, each a [`Ring`] of [`Queued`], with the
/// ready time of a FIFO's first and last entries kept by its owner (the port's `heads` and
/// `tails`): a push stores the difference from the last, a pop turns the next one's difference
/// into its ready time. A difference beyond 32 bits (±2.1 ms: a TLP held back that long behind
/// the one ahead) keeps the ready time in `far`, by TLP, so every time is exact. A TLP waits in
/// one FIFO at a time.
#[derive(Default)]
pub(crate) struct Waiting {
    entries: Vec<Queued>,
    far: std::collections::HashMap<u32, Ps>,
}

impl Waiting {
    /// Put TLP `id`, ready at `at`, at the end of `ring`, whose last entry is ready at `*tail`
    /// (unused when the ring is empty); `*tail` becomes `at`.
    #[inline]
    pub(crate) fn push(&mut self, ring: &mut Ring, tail: &mut Ps, id: u32, at: Ps) {
        let d = at.wrapping_sub(*tail) as i64;
        let delta = if ring.is_empty() {
            0
        } else if d > FAR as i64 && d <= i32::MAX as i64 {
            d as i32
        } else {
            self.far_push(id, at)
        };
        ring.push(&mut self.entries, Queued { id, delta });
        *tail = at;
    }

    #[cold]
    fn far_push(&mut self, id: u32, at: Ps) -> i32 {
        self.far.insert(id, at);
        FAR
    }

    /// Take the first TLP of `ring` (not empty), ready at `head`: the TLP, and the next one's
    /// ready time if there is one.
    #[inline]
    pub(crate) fn pop(&mut self, ring: &mut Ring, head: Ps) -> (u32, Option<Ps>) {
        let first = ring.pop(&self.entries).expect("a FIFO with a head");
        let next = match ring.front(&self.entries) {
            None => None,
            Some(q) if q.delta == FAR => Some(self.far_pop(q.id)),
            Some(q) => Some(head.wrapping_add(q.delta as i64 as u64)),
        };
        (first.id, next)
    }

    #[cold]
    fn far_pop(&mut self, id: u32) -> Ps {
        self.far.remove(&id).expect("a far ready time")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Packed for char {
        fn pack(self) -> u64 {
            self as u64
        }
        fn unpack(bits: u64) -> char {
            char::from_u32(bits as u32).expect("a char packed")
        }
    }

    impl Packed for u64 {
        fn pack(self) -> u64 {
            self
        }
        fn unpack(bits: u64) -> u64 {
            bits
        }
    }

    #[test]
    fn peek_names_the_time_the_next_pop_returns() {
        // Near (current bucket, ring) and far (heap) events, some pushed while a time is run.
        let mut q = EventQueue::<u64>::default();
        let mut x = 11u64;
        let mut t = 0u64;
        for i in 0..4000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let ahead = match (x >> 60) % 4 {
                0 => 0,
                1 => (x >> 20) % 300,
                2 => (x >> 20) % 2_000_000,
                _ => (x >> 20) % 5_000,
            };
            if (x >> 33).is_multiple_of(3) {
                q.push_late(t + ahead, i);
            } else {
                q.push(t + ahead, i);
            }
            if (x >> 40).is_multiple_of(2) {
                let peeked = q.peek_time();
                let popped = q.pop().map(|(at, _)| at);
                assert_eq!(peeked, popped);
                t = popped.unwrap_or(t);
            }
        }
        while let Some(p) = q.peek_time() {
            assert_eq!(q.pop().map(|(at, _)| at), Some(p));
        }
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn a_removed_event_is_gone_and_the_rest_pop_in_their_order() {
        // The same random schedule into two queues, `all` and `q`; `q` loses every seventh
        // event some time after it was pushed (from the current bucket, a same-time FIFO, the
        // ring or the far heap). Each of `all`'s pops that is not a removed event must be `q`'s.
        let (mut q, mut all) = (EventQueue::<u64>::default(), EventQueue::<u64>::default());
        let (mut x, mut t) = (5u64, 0u64);
        let (mut removed, mut popped) = (std::collections::HashSet::new(), std::collections::HashSet::new());
        // Whether the last pop was a removed event: `all` has then run a key `q` has not, and a
        // push at that very time would join a different phase in each (the queue never goes back).
        let mut apart = false;
        for i in 0..6000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let ahead = match (x >> 60) % 4 {
                0 => u64::from(apart),
                1 => (x >> 20) % 300 + 1,
                2 => (x >> 20) % 2_000_000 + 1,
                _ => (x >> 20) % 5_000 + 1,
            };
            for q in [&mut q, &mut all] {
                if (x >> 33).is_multiple_of(3) {
                    q.push_late(t + ahead, i);
                } else {
                    q.push(t + ahead, i);
                }
            }
            if i >= 20 && (i - 20).is_multiple_of(7) {
                let victim = i - 20;
                assert_eq!(q.remove(victim), !popped.contains(&victim), "event {victim} is removed only while pending");
                removed.insert(victim);
            }
            if (x >> 40).is_multiple_of(2) {
                if let Some((at, e)) = all.pop() {
                    t = at;
                    popped.insert(e);
                    apart = removed.contains(&e);
                    if !apart {
                        assert_eq!(q.pop(), Some((at, e)));
                    }
                }
            }
        }
        while let Some((at, e)) = all.pop() {
            if !removed.contains(&e) {
                assert_eq!(q.pop(), Some((at, e)));
            }
        }
        assert_eq!((q.pop(), q.len()), (None, 0));
        assert!(!q.remove(1) && removed.len() > 800);
    }

    #[test]
    fn rings_sharing_an_arena_keep_their_order_as_they_grow() {
        // Two FIFOs in one arena, pushed and popped in turns, against `VecDeque`s.
        let (mut arena, mut rings, mut model) = (Vec::new(), [Ring::default(); 2], [std::collections::VecDeque::new(), std::collections::VecDeque::new()]);
        let mut x = 7u64;
        for i in 0..5000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let k = (x >> 63) as usize;
            if (x >> 40) % 5 < 3 {
                rings[k].push(&mut arena, i);
                model[k].push_back(i);
            } else {
                assert_eq!(rings[k].pop(&arena), model[k].pop_front());
            }
            assert_eq!(rings[k].front(&arena), model[k].front().copied());
            assert_eq!(rings[k].is_empty(), model[k].is_empty());
        }
        // Each ring's slices: 4, 8, .. up to twice its largest length, each after at most its
        // size of alignment padding.
        assert!(arena.len() <= 2 * 2 * 2 * 5000, "a grown ring leaves at most its old slices and their padding behind");
    }

    #[test]
    fn waiting_tlps_come_out_in_order_with_their_exact_ready_times() {
        // Three FIFOs in one arena against `VecDeque`s of (ready, id): ready times near and far
        // (beyond 2^31 ps, either way) from the entry ahead.
        let mut w = Waiting::default();
        let (mut rings, mut heads, mut tails) = ([Ring::default(); 3], [0 as Ps; 3], [0 as Ps; 3]);
        let mut model: [std::collections::VecDeque<(Ps, u32)>; 3] = Default::default();
        let (mut x, mut far) = (3u64, 0);
        for id in 0..20_000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let k = (x >> 62) as usize % 3;
            if (x >> 40) % 5 < 3 {
                let at = match (x >> 20) % 8 {
                    0 => (1 << 40) + (x >> 33),
                    1 => x >> 42,
                    _ => tails[k].saturating_add(x >> 50).saturating_sub(x >> 49 & 0xffff),
                };
                if !rings[k].is_empty() && at.abs_diff(tails[k]) >= 1 << 31 {
                    far += 1;
                }
                if rings[k].is_empty() {
                    heads[k] = at;
                }
                w.push(&mut rings[k], &mut tails[k], id, at);
                model[k].push_back((at, id));
            } else if let Some((at, id)) = model[k].pop_front() {
                assert_eq!(heads[k], at);
                let (got, next) = w.pop(&mut rings[k], heads[k]);
                assert_eq!((got, next), (id, model[k].front().map(|e| e.0)));
                heads[k] = next.unwrap_or(0);
            }
        }
        assert!(far > 100, "the test stores ready times far from the one ahead ({far})");
        assert!(w.far.len() <= model.iter().map(|m| m.len()).sum::<usize>());
    }

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
    fn late_events_of_a_picosecond_come_after_its_other_events() {
        let mut q = EventQueue::default();
        q.push_late(5, 'a');
        q.push(5, 'b');
        q.push_late(4, 'c');
        q.push(5, 'd');
        assert_eq!(q.pop(), Some((4, 'c')));
        assert_eq!(q.pop(), Some((5, 'b')));
        // Scheduled for 5 ps while 5 ps's early phase runs: still before the late ones.
        q.push(5, 'e');
        q.push_late(5, 'f');
        assert_eq!(q.pop(), Some((5, 'd')));
        assert_eq!(q.pop(), Some((5, 'e')));
        assert_eq!(q.pop(), Some((5, 'a')));
        // Once 5 ps's late phase has begun, what is scheduled for 5 ps joins it, in order.
        q.push(5, 'g');
        q.push_late(5, 'h');
        let order: String = std::iter::from_fn(|| q.pop().map(|x| x.1)).collect();
        assert_eq!(order, "fgh");
    }

    #[test]
    fn interleaved_pushes_and_pops_come_out_as_a_sort_would() {
        // A model: every entry with its time, phase and sequence number, popped in that order; an
        // early entry scheduled at the time being run once its late phase has begun is late.
        // Times are never before the last one popped (the queue is monotone); ties are frequent,
        // and some times land in the current bucket, some in the ring, some beyond it (far).
        let (mut q, mut model, mut seq, mut x, mut floor) = (EventQueue::default(), Vec::new(), 0u64, 12345u64, (0u64, 0u64));
        let span = (SLOTS as u64) << (SHIFT - 1);
        let mut reached = [false; 3];
        for round in 0..3000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = if round % 500 == 3 { 2000 } else { (x >> 61) + 1 };
            for _ in 0..n {
                let t = match (x >> 40) % 8 {
                    0 => floor.0,
                    1..=3 => floor.0 + (x >> 20) % 97,
                    4..=6 => floor.0 + (x >> 11) % span,
                    _ => floor.0 + (x >> 11) % (span * 5),
                };
                let ahead = ((t << 1) >> SHIFT) - q.cur;
                reached[if ahead == 0 {
                    0
                } else if ahead < SLOTS as u64 {
                    1
                } else {
                    2
                }] = true;
                let late = (x >> 30) % 3 == 0;
                if late {
                    q.push_late(t, seq);
                } else {
                    q.push(t, seq);
                }
                model.push(((t, (late as u64).max(if t == floor.0 { floor.1 } else { 0 })), seq));
                seq += 1;
                x = x.rotate_left(7) ^ seq;
            }
            let pops = if round % 500 > 250 { (x >> 62) + 40 } else { x >> 62 };
            for _ in 0..pops {
                model.sort_unstable();
                let want = if model.is_empty() { None } else { Some(model.remove(0)) };
                assert_eq!(q.pop(), want.map(|(k, s)| (k.0, s)));
                if let Some((k, _)) = want {
                    floor = k;
                }
            }
            assert_eq!(q.len(), model.len());
        }
        assert_eq!(reached, [true; 3], "the test schedules into the current bucket, the ring and the far heap");
        model.sort_unstable();
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, model.into_iter().map(|(k, s)| (k.0, s)).collect::<Vec<_>>());
        assert!(q.is_empty());
    }
}
