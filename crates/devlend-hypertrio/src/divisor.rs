//! Division by a constant of the run (the packet slot, the tenant count): a multiply by the
//! reciprocal and two branch-free corrections, exact for every u64. A hardware divide per
//! request or packet costs several times more, and whether a correction is needed is
//! data-dependent (a branch there mispredicts).

#[derive(Clone, Copy, Debug)]
pub(crate) struct Divisor {
    pub(crate) d: u64,
    inv: u64,
}

impl Divisor {
    pub(crate) fn new(d: u64) -> Divisor {
        assert!(d >= 1, "division by {d}");
        Divisor { d, inv: u64::MAX / d }
    }
    /// floor(t / d): the estimate from the reciprocal is low by at most two.
    #[inline(always)]
    pub(crate) fn div(self, t: u64) -> u64 {
        let mut q = ((t as u128 * self.inv as u128) >> 64) as u64;
        for _ in 0..2 {
            q += (t - q * self.d >= self.d) as u64;
        }
        q
    }
    /// ceil(t / d), for t <= u64::MAX - d + 1.
    #[inline(always)]
    pub(crate) fn div_ceil(self, t: u64) -> u64 {
        self.div(t + (self.d - 1))
    }
    #[inline(always)]
    pub(crate) fn rem(self, t: u64) -> u64 {
        t - self.div(t) * self.d
    }
}

#[cfg(test)]
mod tests {
    use super::Divisor;

    #[test]
    fn division_is_exact() {
        for d in [1, 2, 3, 7, 1024, 61_680, 1 << 31, u32::MAX as u64] {
            let v = Divisor::new(d);
            let edges = (0..64).flat_map(|b| {
                let x = 1u64 << b;
                [x - 1, x, x + 1, x / d * d, (x / d) * d + d - 1]
            });
            for t in edges.chain([u64::MAX, u64::MAX - 1, u64::MAX / d * d]) {
                assert_eq!(v.div(t), t / d, "{t} / {d}");
                assert_eq!(v.rem(t), t % d, "{t} % {d}");
                if t <= u64::MAX - d + 1 {
                    assert_eq!(v.div_ceil(t), t.div_ceil(d), "{t} / {d} rounded up");
                }
            }
        }
    }
}
