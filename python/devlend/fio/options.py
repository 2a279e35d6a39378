"""fio's option values as fio reads them (fio's HOWTO, "Parameter types"): sizes with fio's
suffixes (k/m/g/t/p and KiB/MiB/...; kb_base=1024, so ``4k`` and ``4KB`` are both 4096 bytes),
percentages of the drive (``size=50%``), times with fio's units (``us``/``usec``, ``ms``/``msec``,
``s``/``sec``, ``m``/``min``, ``h``, ``d``) and each option's default unit (seconds for
``runtime``, ``ramp_time`` and ``startdelay``, microseconds for ``thinktime``), booleans
(``time_based`` alone or ``=1``/``0``), ``bssplit`` and ``percentile_list``.

Each parser raises ``ValueError`` with what was expected; the job file reader adds file and line.
"""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_MULT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
# picoseconds per unit
_UNITS = {"ns": 1e3, "nsec": 1e3, "us": 1e6, "usec": 1e6, "ms": 1e9, "msec": 1e9, "s": 1e12, "sec": 1e12,
          "m": 60e12, "min": 60e12, "h": 3600e12, "d": 86400e12}


def size(text: str, whole: int | None = None) -> int:
    """Bytes from fio's size syntax; ``N%`` is a share of ``whole`` (the drive)."""
    t = text.strip()
    if t.endswith("%") and whole is not None:
        try:
            pct = float(t[:-1])
        except ValueError:
            raise ValueError(f"expected a size such as 4k, 1m, 2g or a percentage such as 50%, not {text!r}") from None
        if not 0 < pct <= 100:
            raise ValueError(f"a percentage of the drive must be above 0 and at most 100, not {text!r}")
        return int(whole * pct / 100) // 512 * 512
    m = _SIZE.match(t)
    if not m:
        raise ValueError(f"expected a size such as 4k, 64KiB, 1m or 2g, not {text!r}")
    return int(float(m.group(1)) * _MULT[m.group(2).lower()])


def duration_ps(text: str, default_unit: str = "s") -> int:
    """Picoseconds from fio's time syntax; a bare number is in the option's default unit."""
    m = _TIME.match(text)
    if not m or (m.group(2) and m.group(2).lower() not in _UNITS):
        raise ValueError(f"expected a time such as 10, 200ms, 2s or 500us, not {text!r}")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or default_unit).lower()])


def boolean(text: str | None) -> bool:
    """fio's boolean: the option alone, or =1/0 (also true/false, yes/no, on/off)."""
    if text is None:
        return True
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected 0 or 1, not {text!r}")


def integer(text: str, lo: int = 0, hi: int | None = None) -> int:
    """A whole number (fio accepts size suffixes on integers too: iodepth=1k is not useful but valid)."""
    try:
        v = size(text)
    except ValueError:
        raise ValueError(f"expected a whole number, not {text!r}") from None
    if v < lo or (hi is not None and v > hi):
        raise ValueError(f"expected a number from {lo}" + (f" to {hi}" if hi is not None else " up") + f", not {text!r}")
    return v


def bssplit(text: str) -> list[tuple[int, int]]:
    """``4k/10:64k/50:32k/40``: block sizes with percentages; entries without one share what is left."""
    if "," in text:
        raise ValueError("separate read and write splits (bssplit=R,W) are not modelled; give one split for both")
    out, open_ = [], []
    for part in text.split(":"):
        if not part.strip():
            continue
        bs, _, pct = part.partition("/")
        b = size(bs)
        if pct.strip():
            out.append([b, integer(pct, 0, 100)])
        else:
            open_.append(len(out))
            out.append([b, 0])
    if not out:
        raise ValueError(f"expected block size/percent pairs such as 4k/70:64k/30, not {text!r}")
    left = 100 - sum(p for _, p in out)
    if left < 0 or (left > 0 and not open_) or (open_ and left == 0):
        raise ValueError(f"the percentages must add up to 100 (they add up to {100 - left})")
    for n, i in enumerate(open_):
        out[i][1] = left // len(open_) + (1 if n < left % len(open_) else 0)
    return [(b, p) for b, p in out if p > 0]


def percentile_list(text: str) -> list[float]:
    """``99:99.9:99.99``: the clat percentiles to report."""
    try:
        vals = [float(p) for p in text.split(":") if p.strip()]
    except ValueError:
        raise ValueError(f"expected percentiles separated by ':' such as 50:99:99.9, not {text!r}") from None
    if not vals or any(not 0 <= v <= 100 for v in vals):
        raise ValueError(f"expected percentiles from 0 to 100 separated by ':', not {text!r}")
    return vals
