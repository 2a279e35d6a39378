"""Write fitted values back into params/hardware.toml textually: only the value and the head of
its comment change on each fitted key's line; every other byte (comments, order, alignment) stays.
A TOML library would drop or reflow the comments that carry every constant's provenance."""

from __future__ import annotations

import re

from . import CalibrationError

_HEAD = re.compile(r"^fitted:[^;]*?\(\d{4}-\d{2}-\d{2}\)(;\s*)?")
_PROVENANCE = re.compile(r"^(sourced|assumed|fitted):\s*")


def write_fitted(text: str, values: dict[str, int | float], set_name: str, date: str) -> str:
    """`text` with each `TABLE.NAME` of `values` set to its value and its comment headed
    `fitted: <set_name> (<date>)`, the rest of the comment kept."""
    lines = text.split("\n")
    for key, value in values.items():
        i = _find(lines, key)
        lines[i] = _rewrite(lines[i], key, value, set_name, date)
    return "\n".join(lines)


def _find(lines: list[str], key: str) -> int:
    table, _, name = key.rpartition(".")
    current = None
    assign = re.compile(rf"^{re.escape(name)}\s*=")
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("[") and not s.startswith("[["):
            current = s.strip("[] ")
        elif current == table and assign.match(s):
            return i
    raise CalibrationError(f"{key}: no such key in params/hardware.toml (table [{table}], name {name})")


def _rewrite(line: str, key: str, value, set_name: str, date: str) -> str:
    code, hash_, comment = line.partition("#")
    name, eq, old = code.partition("=")
    if not eq or old.strip().startswith(("[", "{", '"')):
        raise CalibrationError(f"{key}: only a number can be fitted, the line holds {old.strip()!r}")
    text = f"{int(value):d}" if isinstance(value, int) or float(value).is_integer() else repr(float(value))
    new_code = f"{name.rstrip()} = {text}"
    new_code = new_code.ljust(max(len(code), len(new_code) + 1))   # keep the comment's column
    note = comment.strip()
    note = _HEAD.sub("", note) if _HEAD.match(note) else _PROVENANCE.sub("", note)
    head = f"fitted: {set_name} ({date})"
    return f"{new_code}# {head}; {note}" if note else f"{new_code}# {head}"
