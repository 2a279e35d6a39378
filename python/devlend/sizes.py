"""Sizes and addresses as people write them: 4096, 0x1000, "4 KiB", "256MiB", "16 GiB", "2M"."""

from __future__ import annotations

import re

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
          "tib": 1 << 40}
_SIZE = re.compile(r"^\s*(0x[0-9a-fA-F_]+|[0-9][0-9_]*)\s*([a-zA-Z]*)\s*$")


def parse_size(value: int | str) -> int:
    """Parse a size; units are binary (KiB = KB = K = 1024), as PCI sizes always are."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 4096, 0x1000 or '256 MiB', not a boolean")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size {value} is negative")
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected a size such as 4096, 0x1000 or '256 MiB', got {type(value).__name__}")
    m = _SIZE.match(value)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"'{value}' is not a size: expected a number with an optional unit (B, KiB, MiB, GiB, TiB)")
    num = int(m.group(1).replace("_", ""), 0)
    return num * _UNITS[m.group(2).lower()]


def fmt_size(n: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def parse_addr(value: int | str) -> int | str:
    """A number stays a number; anything else is an address expression the core resolves."""
    if isinstance(value, bool):
        raise ValueError("expected an address, not a boolean")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"address {value} is negative")
        return value
    if isinstance(value, str):
        s = value.strip().replace("_", "")
        try:
            return int(s, 0)
        except ValueError:
            return value.strip()
    raise ValueError(f"expected an address (number or expression such as 'gpu0.bar1+0x1000'), got {type(value).__name__}")
