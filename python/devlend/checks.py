"""Numbers crossing into devlend from a Python call, checked at the boundary for type, finiteness
and range before the Rust core sees them (issue 30: a NaN or 1e30 start time, a 2**70 byte count
or DMA window must be devlend's error naming the field, never an OverflowError from the
conversion). Each check raises ``make(message, field)``: a DevlendError subclass that is also
ValueError (a bad value) or TypeError (a bad type), as Python users expect."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, Callable

U64_END = 1 << 64

Make = Callable[[str, str], Exception]


def time_ps(at_ns: Any, field: str, what: str, value_error: Make, type_error: Make) -> int:
    """`at_ns` (ns, a real number) as integer ps: finite, not negative, below 2^64 ps."""
    if isinstance(at_ns, bool) or not isinstance(at_ns, Real):
        raise type_error(f"{what}: {field}={at_ns!r}: expected a time in ns (a number)", field)
    if not math.isfinite(at_ns) or at_ns < 0 or at_ns * 1000 >= U64_END:
        raise value_error(f"{what}: {field}={at_ns!r}: expected a finite time from 0 to {(U64_END - 1) / 1000:.4g} ns", field)
    return round(at_ns * 1000)


def count(v: Any, field: str, what: str, value_error: Make, type_error: Make, *, lo: int = 0, hi: int = U64_END) -> int:
    """`v` as an integer in [lo, hi)."""
    if isinstance(v, bool) or not isinstance(v, Integral):
        raise type_error(f"{what}: {field}={v!r}: expected an integer", field)
    if not lo <= v < hi:
        raise value_error(f"{what}: {field}={v}: expected an integer from {lo} to {hi - 1}", field)
    return int(v)
