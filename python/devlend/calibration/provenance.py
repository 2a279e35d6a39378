"""Every constant of params/hardware.toml says where it comes from: its trailing comment begins with
`sourced: <spec section, datasheet, paper>`, `assumed: <why no source exists>` or
`fitted: <calibration set> (<YYYY-MM-DD>)`. A multi-line array's elements each carry their own.
`description` and `source` lines are text about a table, not constants."""

from __future__ import annotations

import re
from dataclasses import dataclass

PROVENANCE = re.compile(r"^(sourced|assumed|fitted): \S")
FITTED = re.compile(r"^fitted: \S.*? \(\d{4}-\d{2}-\d{2}\)")
EXEMPT = ("description", "source")
_KEY = re.compile(r"^([A-Za-z0-9_-]+)\s*=\s*(.*)$")


@dataclass(frozen=True)
class Constant:
    key: str          # TABLE.NAME (an array element: TABLE.NAME[i])
    line: int         # 1-based
    comment: str      # the trailing comment, "" when none

    @property
    def kind(self) -> str:
        """sourced, assumed or fitted; "" when the comment does not begin with one."""
        m = PROVENANCE.match(self.comment)
        return m.group(1) if m else ""


def constants(text: str) -> list[Constant]:
    """Every constant of a hardware.toml text with its comment."""
    out: list[Constant] = []
    table, array, index = "", None, 0
    for n, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if array is not None:
            if s.startswith("]"):
                array = None
            elif s and not s.startswith("#"):
                out.append(Constant(f"{table}.{array}[{index}]", n, _comment(s)))
                index += 1
            continue
        if not s or s.startswith("#"):
            continue
        if s.startswith("["):
            table = s.strip("[] ")
            continue
        m = _KEY.match(s)
        if not m or m.group(1) in EXEMPT:
            continue
        value = m.group(2)
        if value.startswith("[") and "]" not in value.split("#")[0]:
            array, index = m.group(1), 0
            continue
        out.append(Constant(f"{table}.{m.group(1)}", n, _comment(value)))
    return out


def _comment(value: str) -> str:
    """The trailing comment of a value (a '#' inside a quoted string is not one)."""
    if value.startswith('"'):
        end = value.find('"', 1)
        value = value[end + 1:] if end > 0 else ""
    _, hash_, comment = value.partition("#")
    return comment.strip() if hash_ else ""


def problems(text: str) -> list[str]:
    """What a test reports: constants without provenance, fitted ones without set and date."""
    out = []
    for c in constants(text):
        if not c.kind:
            out.append(f"line {c.line}: {c.key}: the comment must begin with sourced:, assumed: or fitted: (has {c.comment[:40]!r})")
        elif c.kind == "fitted" and not FITTED.match(c.comment):
            out.append(f"line {c.line}: {c.key}: a fitted constant names its calibration set and date: 'fitted: <set> (YYYY-MM-DD)'")
    return out


def fitted_keys(text: str) -> set[str]:
    return {c.key for c in constants(text) if c.kind == "fitted"}
