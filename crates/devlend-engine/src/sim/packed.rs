//! The simulation's events ([`Ev`]) packed into the event queue's 8-byte entries
//! (`crate::queue::Packed`): the variant above the 32-bit number it carries.

use super::Ev;
use crate::queue::Packed;

impl Packed for Ev {
    /// The variant above the 32-bit number it carries.
    #[inline(always)]
    fn pack(self) -> u64 {
        let (kind, n) = match self {
            Ev::TryTx(n) => (0, n),
            Ev::Arrive(n) => (1, n),
            Ev::FlowIssue(n) => (2, n),
            Ev::Land(n) => (3, n),
            Ev::Serve(n) => (4, n),
            Ev::FlowEnd(n) => (5, n),
            Ev::FlowSent(n) => (6, n),
            Ev::Timer(n) => (7, n),
        };
        kind << 32 | n as u64
    }

    #[inline(always)]
    fn unpack(bits: u64) -> Ev {
        let n = bits as u32;
        match bits >> 32 {
            0 => Ev::TryTx(n),
            1 => Ev::Arrive(n),
            2 => Ev::FlowIssue(n),
            3 => Ev::Land(n),
            4 => Ev::Serve(n),
            5 => Ev::FlowEnd(n),
            6 => Ev::FlowSent(n),
            _ => Ev::Timer(n),
        }
    }
}
