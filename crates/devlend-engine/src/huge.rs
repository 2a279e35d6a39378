//! Transparent huge pages for the engine's large arenas (issue 33). At 1024 hosts / 8192
//! streams the records a TLP-hop touches lie in ~100 MiB of arenas (TLP records, ports, their
//! FIFO and slot-return entries), reused in no order a 4 KiB page's TLB entry survives: besides
//! a cache miss, nearly every touch was a TLB miss and a page walk. Where the kernel makes huge
//! pages only for memory that asks (`transparent_hugepage` set to `madvise`, this machine's and
//! a common distribution default), an arena of 2 MiB or more asks (`madvise(MADV_HUGEPAGE)`)
//! as it is allocated, before it is touched, so that it is backed by 2 MiB pages: one TLB entry
//! per 2 MiB. Advice changes no result, only how the kernel backs the memory; where it is not
//! taken (another system, no huge page free) the arena is as before.

/// Below this many bytes an arena stays as the allocator gives it (a huge page is 2 MiB).
const HUGE: usize = 2 << 20;
const PAGE: usize = 4096;

/// A vector of `n` items from `items`, its buffer advised for huge pages if large.
pub(crate) fn collect<T>(n: usize, items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise(&v);
    v.extend(items);
    v
}

/// Make room for `more` items beyond `v.len()`: when `v` must grow, into a new buffer (at
/// least twice as large) advised for huge pages before the items are copied in.
#[inline]
pub(crate) fn reserve<T: Copy>(v: &mut Vec<T>, more: usize) {
    if v.capacity() - v.len() < more {
        grow(v, more);
    }
}

#[cold]
fn grow<T: Copy>(v: &mut Vec<T>, more: usize) {
    let mut n = Vec::with_capacity((v.len() + more).max(2 * v.capacity()));
    advise(&n);
    n.extend_from_slice(v);
    *v = n;
}

/// Ask the kernel to back `v`'s buffer (the whole pages inside it) with huge pages, if it spans
/// 2 MiB or more.
fn advise<T>(v: &Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes < HUGE {
        return;
    }
    let start = v.as_ptr() as usize;
    let (lo, hi) = (start.next_multiple_of(PAGE), (start + bytes) & !(PAGE - 1));
    #[cfg(target_os = "linux")]
    // SAFETY: [lo, hi) is whole pages inside `v`'s allocation, which `v` owns. MADV_HUGEPAGE
    // only allows the kernel to back them with huge pages: their contents, their mapping and
    // every other allocation are unchanged. A failure (no such advice on this kernel) is the
    // advice not taken, so its result is ignored.
    unsafe {
        libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (lo, hi);
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_grown_vector_keeps_its_items_in_order() {
        let mut v: Vec<u64> = super::collect(3, [7, 8, 9]);
        for i in 0..1_000_000u64 {
            super::reserve(&mut v, 1);
            v.push(i);
        }
        super::reserve(&mut v, 5_000_000);
        assert!(v.capacity() >= v.len() + 5_000_000);
        assert_eq!(&v[..4], &[7, 8, 9, 0]);
        assert!(v[3..].iter().copied().eq(0..1_000_000));
    }
}
