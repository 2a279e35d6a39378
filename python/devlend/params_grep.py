"""``devlend params --grep PATTERN``: the constants of params/hardware.toml whose line (name,
value or source comment) matches, each under its table's header, as `grep` with context would."""

from __future__ import annotations

import re

from .errors import DevlendError


def matching(text: str, pattern: str) -> list[str]:
    try:
        rx = re.compile(pattern, re.I)
    except re.error as e:
        raise DevlendError(f"--grep {pattern!r}: not a regular expression: {e}") from None
    out, table, shown = [], "", None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("[") and not s.startswith("[["):
            table = line
            continue
        if not s or s.startswith("#") or "=" not in s or not rx.search(line):
            continue
        if shown != table:
            out.append(table)
            shown = table
        out.append(line)
    return out
