"""The ``lspci -tv`` tree parser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional
import re

from ..errors import TopologyError
from .common import Key, Loc, _bdf, _lines


# ---------------------------------------------------------------------------------------------
# lspci -tv

@dataclass
class _TreeDev:
    key: Key
    loc: Loc
    name: Optional[str]
    ids: Optional[tuple[int, int]]
    bridge: Optional[tuple[int, int]]  # secondary, subordinate
    parent: Optional[Key]
    stray: bool


@dataclass
class _Bus:
    domain: int
    number: int
    parent: Optional[Key]
    stray: bool


@dataclass
class _Tree:
    devs: dict[Key, _TreeDev]
    first: Loc


_T_DEV = re.compile(r"([0-9a-fA-F]{2})\.([0-7])")
_T_BRIDGE = re.compile(r"-\[([0-9a-fA-F]{2})(?:-([0-9a-fA-F]{2}))?\]-")
_T_BUS = re.compile(r"\[([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2})\]-")
_IDS_TAIL = re.compile(r"^(?P<name>.*?) ?\[(?P<v>[0-9a-fA-F]{4}):(?P<d>[0-9a-fA-F]{4})\]$")
_TREE_WHAT = "'lspci -tvnn'"


class _TreeParser:
    """Parses ``lspci -t[v[nn]]`` by replaying how pciutils' ls-tree.c draws it: every list of
    devices (or of buses) opened with '+-' stays open at its column until an entry drawn with
    '\\-' closes it, and the lines in between carry '|' exactly at the open columns."""

    def __init__(self, text: str, file: str):
        self.file = file
        self.lines = _lines(text, file, _TREE_WHAT)
        self.devs: dict[Key, _TreeDev] = {}
        self.roots: dict[tuple[int, int], Loc] = {}
        self.secondaries: dict[tuple[int, int], Key] = {}
        self.open: dict[int, tuple[str, Any, Loc]] = {}  # column -> ("devs", _Bus) | ("buses", parent key)

    def err(self, n: int, col: int, msg: str) -> TopologyError:
        return TopologyError(msg, file=self.file, line=n, column=col + 1)

    def parse(self) -> _Tree:
        started = seen_blank = False
        for n, line in enumerate(self.lines, 1):
            if not line.strip():
                seen_blank = started
                continue
            if seen_blank:
                raise self.err(n, 0, "the tree continues after a blank line: expected one 'lspci -tvnn' tree")
            if not started:
                started = True
                self.first_line(n, line)
            else:
                self.continuation(n, line)
        if self.open:
            col, (kind, _, loc) = min(self.open.items())
            raise self.err(len(self.lines), len(self.lines[-1]),
                           f"the tree ends inside the list opened at line {loc.line}, column {col + 1} "
                           "(its last entry would start with '\\-'): truncated?")
        if not self.devs:
            raise self.err(1, 0, "no devices in the tree")
        return _Tree(self.devs, Loc(self.file, 1))

    def first_line(self, n: int, line: str) -> None:
        if not line.startswith("-"):
            raise self.err(n, 0, "expected the tree to start with '-[0000:00]-' or '-+-[0000:00]-' "
                                 "(is this 'lspci -tvnn' output?)")
        if line.startswith("-["):
            self.chain(n, line, 1, ("buslist", None))
        elif line[1:3] in ("+-", "\\-") and line[3:4] == "[":
            if line[1] == "+":
                self.open[1] = ("buses", None, Loc(self.file, n))
            self.chain(n, line, 3, ("buslist", None))
        else:
            raise self.err(n, 1, "expected '[0000:00]-' or '+-[0000:00]-' after the leading '-'")

    def continuation(self, n: int, line: str) -> None:
        pos = 0
        while pos < len(line) and line[pos] in " |":
            pos += 1
        for c in range(pos):
            want = "|" if c in self.open else " "
            if line[c] != want:
                if want == "|":
                    raise self.err(n, c, f"expected '|' here, continuing the list opened at line {self.open[c][2].line}")
                raise self.err(n, c, "expected a space here: no open list of the tree above has this column")
        conn = line[pos:pos + 2]
        if conn not in ("+-", "\\-"):
            raise self.err(n, pos, f"expected '+-' or '\\-' (a further entry of an open list), found {line[pos:pos + 8]!r}")
        if pos not in self.open:
            raise self.err(n, pos, "this entry lines up with no open list of the tree above")
        deeper = [c for c in self.open if c > pos]
        if deeper:
            c = min(deeper)
            raise self.err(n, pos, f"the list opened at line {self.open[c][2].line}, column {c + 1} was never closed "
                                   "(its last entry would start with '\\-')")
        kind, ctx, _ = self.open[pos]
        if conn == "\\-":
            del self.open[pos]
        if kind == "devs":
            self.chain(n, line, pos + 2, ("dev", ctx))
        else:
            self.chain(n, line, pos + 2, ("buslist", ctx))

    def chain(self, n: int, line: str, pos: int, state: tuple) -> None:
        """Follow one line left to right; a line is a chain of bus markers, devices and bridges."""
        while True:
            kind, ctx = state
            if kind == "buslist":  # ctx: parent bridge key or None (the host)
                m = _T_BUS.match(line, pos)
                if not m:
                    raise self.err(n, pos, "expected a bus such as '[0000:00]-'")
                bus = self.new_bus(n, pos, ctx, int(m.group(1), 16), int(m.group(2), 16))
                pos = m.end()
                state = ("content", bus)
            elif kind == "content":  # ctx: _Bus
                rest = line[pos:pos + 2]
                if pos >= len(line):
                    return  # an empty bus
                if rest == "--":
                    pos += 2
                elif rest == "+-":
                    self.open[pos] = ("devs", ctx, Loc(self.file, n, pos + 1))
                    pos += 2
                else:
                    raise self.err(n, pos, f"expected '--' or '+-' before the first device of bus {ctx.number:02x}, "
                                           "or the end of the line for an empty bus")
                state = ("dev", ctx)
            else:  # "dev", ctx: _Bus
                m = _T_DEV.match(line, pos)
                if not m:
                    raise self.err(n, pos, f"expected a device and function such as '00.0', found {line[pos:pos + 6]!r}")
                dev, fn = int(m.group(1), 16), int(m.group(2))
                if dev > 0x1f:
                    raise self.err(n, pos, f"device number {dev:02x}: expected 00-1f")
                key = (ctx.domain, ctx.number, dev, fn)
                loc = Loc(self.file, n, pos + 1)
                if key in self.devs:
                    raise self.err(n, pos, f"{_bdf(key)} appears twice (first at line {self.devs[key].loc.line})")
                pos = m.end()
                b = _T_BRIDGE.match(line, pos)
                if b:
                    sec = int(b.group(1), 16)
                    sub = int(b.group(2), 16) if b.group(2) else sec
                    self.check_bridge(n, pos, key, ctx, sec, sub)
                    self.devs[key] = _TreeDev(key, loc, None, None, (sec, sub), ctx.parent, ctx.stray)
                    pos = b.end()
                    if line[pos:pos + 1] != "-":
                        raise self.err(n, pos, "expected '-' after the bridge's bus range")
                    pos += 1
                    if line[pos:pos + 2] in ("+-", "\\-") and line[pos + 2:pos + 3] == "[":
                        if line[pos] != "+":
                            raise self.err(n, pos, "expected '+-' before the first of several buses")
                        self.open[pos] = ("buses", key, Loc(self.file, n, pos + 1))
                        pos += 2
                        state = ("buslist", key)
                    else:
                        self.secondaries[(ctx.domain, sec)] = key
                        state = ("content", _Bus(ctx.domain, sec, key, False))
                    continue
                rest = line[pos:]
                name = ids = None
                if rest:
                    if not rest.startswith("  ") or not rest[2:].strip():
                        raise self.err(n, pos, f"expected two spaces and the device's name after {m.group()}, "
                                               f"or a bridge's bus range such as '-[04]-', found {rest[:12]!r}")
                    name = rest[2:].strip()
                    t = _IDS_TAIL.match(name)
                    if t:
                        name, ids = t.group("name"), (int(t.group("v"), 16), int(t.group("d"), 16))
                self.devs[key] = _TreeDev(key, loc, name, ids, None, ctx.parent, ctx.stray)
                return

    def check_bridge(self, n: int, pos: int, key: Key, bus: _Bus, sec: int, sub: int) -> None:
        where = f"bridge {_bdf(key)}"
        if sub < sec:
            raise self.err(n, pos, f"{where}: bus range [{sec:02x}-{sub:02x}] ends before it starts")
        if sec <= bus.number:
            raise self.err(n, pos, f"{where} sits on bus {bus.number:02x} but its secondary bus is {sec:02x}: "
                                   "a bridge's buses come after its own")
        if bus.parent is not None:
            psec, psub = self.devs[bus.parent].bridge
            if not psec < sec <= sub <= psub:
                raise self.err(n, pos, f"{where}: bus range [{sec:02x}-{sub:02x}] is not inside its parent bridge's "
                                       f"[{psec:02x}-{psub:02x}]")
        if (key[0], sec) in self.secondaries:
            other = self.secondaries[(key[0], sec)]
            raise self.err(n, pos, f"{where}: bus {sec:02x} already belongs to bridge {_bdf(other)} "
                                   f"(line {self.devs[other].loc.line})")

    def new_bus(self, n: int, pos: int, parent: Optional[Key], domain: int, number: int) -> _Bus:
        if parent is None:
            if (domain, number) in self.roots:
                raise self.err(n, pos, f"root bus [{domain:04x}:{number:02x}] appears twice "
                                       f"(first at line {self.roots[(domain, number)].line})")
            self.roots[(domain, number)] = Loc(self.file, n, pos + 1)
            return _Bus(domain, number, None, False)
        br = self.devs[parent]
        sec, sub = br.bridge
        if domain != parent[0] or not sec <= number <= sub:
            raise self.err(n, pos, f"bus [{domain:04x}:{number:02x}] is not within bridge {_bdf(parent)}'s "
                                   f"range [{sec:02x}-{sub:02x}]")
        if number == sec:
            self.secondaries[(domain, sec)] = parent
        return _Bus(domain, number, parent, number != sec)


