//! Software prefetch: a hint that a cache line will be read soon (issue 33). At 8192 streams the
//! records an event touches (its TLP, its port's lines, their FIFO entries) are likely
//! last-level misses, and the event queue knows which events come next, so the engine asks for
//! their lines while it handles the current one (`Sim::prefetch_ahead`). A hint changes no
//! result: it reads nothing the program sees and never faults, whatever the address. On a target
//! other than x86_64 it does nothing.

/// Ask for the `lines` cache lines from the start of `r` (a record aligned to its lines).
#[inline(always)]
pub(crate) fn lines<T>(r: &T, lines: usize) {
    let p = (r as *const T).cast::<u8>();
    for k in 0..lines {
        line(p.wrapping_add(64 * k));
    }
}

/// Ask for the cache line holding `r`.
#[inline(always)]
pub(crate) fn record<T>(r: &T) {
    line((r as *const T).cast::<u8>());
}

#[inline(always)]
fn line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint: it reads no memory architecturally, so it cannot fault or
    // observe anything whatever the address, and `_mm_prefetch` needs only SSE, which every
    // x86_64 processor has (it is in the target's baseline features).
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
