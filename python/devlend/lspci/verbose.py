"""The ``lspci -vvv`` parser, and parse_lspci joining it with the tree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional
import re

from .common import ImportResult, Key, Loc, _Bar, _Fn, _Link, _Sriov, _UNITS, _bdf, _check_size, _lines, _use_slots
from .tree import _Tree, _TreeParser
from .assemble import _Assembler, _check_host


# ---------------------------------------------------------------------------------------------
# lspci -vvv

_HEADER_RE = re.compile(r"^(?:(?P<dom>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\."
                        r"(?P<fn>[0-7]) (?P<rest>.*)$")
_CLASS_RE = re.compile(r"^(?P<text>.*?)(?: \[(?P<code>[0-9a-fA-F]{4})\])?$")
_NAME_TAIL_RE = re.compile(r"^(?P<name>.*?)(?: \[(?P<v>[0-9a-fA-F]{4}):(?P<d>[0-9a-fA-F]{4})\])?"
                           r"(?: \(rev (?P<rev>[0-9a-fA-F]{2})\))?(?: \(prog-if [0-9a-fA-F]{2}(?: \[[^\]]{0,80}\])?\))?$")
_REGION_RE = re.compile(r"^Region (?P<idx>\d+): (?:\[(?:virtual|enhanced)\] )?(?P<space>Memory at|I/O ports at) "
                        r"(?P<addr>\S+)(?: \((?P<type>32-bit|64-bit|low-1M|type 3), (?P<np>non-)?prefetchable\))?"
                        r"(?P<flags>(?: \[[^\]]*\])*)$")
_IOV_REGION_RE = re.compile(r"^Region (?P<idx>\d+): Memory at (?P<addr>\S+) \((?P<bits>32|64)-bit, "
                            r"(?P<np>non-)?prefetchable\)(?P<flags>(?: \[[^\]]*\])*)$")
_SIZE_RE = re.compile(r"\[size=(\d+)([KMGT]?)\]")
_BUS_RE = re.compile(r"^Bus: primary=([0-9a-fA-F]{2}), secondary=([0-9a-fA-F]{2}), subordinate=([0-9a-fA-F]{2})")
_CAP_RE = re.compile(r"^Capabilities: (?:\[(?P<off>[0-9a-fA-F]{2,3})(?: v\d+)?\] (?P<text>.*)|"
                     r"(?P<denied><access denied>|<available only to root>))$")
_LNK_RE = re.compile(r"^Lnk(?P<which>Sta|Cap):\s*(?:Port #\d+, )?Speed (?P<speed>[0-9.]+GT/s|unknown)"
                     r"(?: \([a-z]+\))?, Width x(?P<w>\d+)")
_MSIX_RE = re.compile(r"^MSI-X: Enable[+-] Count=(\d+)")
_IOV_COUNTS_RE = re.compile(r"^Initial VFs: (\d+), Total VFs: (\d+), Number of VFs: (\d+)")
_IOV_OFFSET_RE = re.compile(r"^VF offset: (\d+), stride: (\d+)")
_VERBOSE_WHAT = "'lspci -vvv'"


@dataclass
class _Cap:
    kind: str  # express, sriov, other
    loc: Loc


class _VerboseParser:
    def __init__(self, text: str, file: str):
        self.file = file
        self.lines = _lines(text, file, _VERBOSE_WHAT)
        self.fns: dict[Key, _Fn] = {}
        self.ignored: list[int] = []
        self.used: dict[Key, set] = {}

    def parse(self) -> dict[Key, _Fn]:
        cur: Optional[_Fn] = None
        cap: Optional[_Cap] = None
        for n, line in enumerate(self.lines, 1):
            loc = Loc(self.file, n)
            if not line.strip():
                self.end_cap(cur, cap)
                cur, cap = None, None
                continue
            if line[0] == "\t":
                if cur is None:
                    raise loc.error("a tab-indented detail line outside any device: expected a device line such as "
                                    "'04:00.0 VGA compatible controller: ...' first")
                tabs = len(line) - len(line.lstrip("\t"))
                body = line[tabs:]
                if tabs == 1:
                    self.end_cap(cur, cap)
                    cap = self.top(cur, body, loc)
                elif cap is not None and tabs == 2:
                    self.cap_detail(cur, cap, body, loc)
                continue
            if line[0] == " ":
                raise loc.error("the line starts with spaces: lspci indents device details with tabs "
                                "(were tabs converted to spaces?)")
            if line.startswith(("pcilib: ", "lspci: ")):
                self.ignored.append(n)
                continue
            m = _HEADER_RE.match(line)
            if not m:
                raise loc.error("expected a device line such as '04:00.0 VGA compatible controller: NVIDIA "
                                "Corporation ...' (is this 'lspci -vvv' output?)")
            self.end_cap(cur, cap)
            cap = None
            cur = self.header(m, loc)
        self.end_cap(cur, cap)
        if not self.fns:
            raise Loc(self.file, 1).error("no devices: expected the output of 'lspci -vvv'")
        return self.fns

    def header(self, m: re.Match, loc: Loc) -> _Fn:
        dev = int(m.group("dev"), 16)
        if dev > 0x1f:
            raise loc.error(f"device number {dev:02x}: expected 00-1f")
        key = (int(m.group("dom") or "0", 16), int(m.group("bus"), 16), dev, int(m.group("fn")))
        if key in self.fns:
            raise loc.error(f"a second record for {_bdf(key)} (the first is at line {self.fns[key].loc.line})")
        rest = m.group("rest")
        if ": " not in rest:
            raise loc.error("expected 'CLASS: VENDOR DEVICE' after the address")
        cls, name = rest.split(": ", 1)
        c = _CLASS_RE.match(cls)
        t = _NAME_TAIL_RE.match(name)
        fn = _Fn(key, loc, class_text=c.group("text"), class_code=int(c.group("code"), 16) if c.group("code") else None,
                 name=t.group("name"),
                 ids=(int(t.group("v"), 16), int(t.group("d"), 16)) if t.group("v") else None)
        self.fns[key] = fn
        self.used[key] = set()
        return fn

    def top(self, fn: _Fn, body: str, loc: Loc) -> Optional[_Cap]:
        if body.startswith("Region "):
            self.region(fn, body, loc)
        elif body.startswith(("Memory at ", "I/O ports at ", "[virtual] Memory at ")):
            raise loc.error("a region without its 'Region N:' prefix: this looks like 'lspci -v'; capture with "
                            "'lspci -vvv' so the BAR numbers are shown")
        elif body.startswith("Bus:"):
            m = _BUS_RE.match(body)
            if not m:
                raise loc.error("expected 'Bus: primary=00, secondary=02, subordinate=07, sec-latency=0'")
            if fn.bus_numbers is not None:
                raise loc.error(f"a second 'Bus:' line for {fn.bdf}")
            p, s, u = (int(g, 16) for g in m.groups())
            fn.is_bridge, fn.bus_numbers, fn.bus_loc = True, (p, s, u), loc
        elif body.startswith("Capabilities:"):
            return self.cap(fn, body, loc)
        elif body.startswith("Subsystem: "):
            fn.subsystem = body[len("Subsystem: "):]
        elif body.startswith("IOMMU group:"):
            fn.iommu = True
        return None

    def region(self, fn: _Fn, body: str, loc: Loc) -> None:
        m = _REGION_RE.match(body)
        if not m:
            raise loc.error("expected 'Region N: Memory at ADDRESS (64-bit, prefetchable) [size=16M]' "
                            "or 'Region N: I/O ports at ADDRESS [size=128]'")
        idx = int(m.group("idx"))
        if idx > 5:
            raise loc.error(f"Region {idx}: expected Region 0-5")
        if m.group("space") == "I/O ports at":
            _use_slots(self.used[fn.key], _Bar(idx, 32, False, None, loc), "Region")
            return
        if m.group("type") is None:
            raise loc.error(f"Region {idx}: expected '(32-bit, ...)' or '(64-bit, ...)' after the address")
        if m.group("type") == "type 3":
            raise loc.error(f"Region {idx} has the reserved memory type 3: not a usable BAR")
        if m.group("addr").startswith(("<invalid", "<broken")):
            raise loc.error(f"Region {idx}: a 64-bit BAR in the last register ({m.group('addr')})")
        bits = 64 if m.group("type") == "64-bit" else 32
        size = _flag_size(m.group("flags"), loc)
        bar = _Bar(idx, bits, m.group("np") is None, size, loc)
        _use_slots(self.used[fn.key], bar, "Region")
        if size is not None:
            _check_size(loc, f"Region {idx}", size, bits)
        fn.bars.append(bar)

    def cap(self, fn: _Fn, body: str, loc: Loc) -> _Cap:
        m = _CAP_RE.match(body)
        if not m:
            raise loc.error("expected 'Capabilities: [60] NAME' or 'Capabilities: [100 v1] NAME'")
        if m.group("denied"):
            fn.caps_hidden = True
            return _Cap("other", loc)
        text = m.group("text")
        if text.startswith("Express "):
            t = re.sub(r"^\(v\d+\) ", "", text[len("Express "):]).split(",")[0]
            t = re.sub(r" \(Slot[+-]\)$", "", t).strip()
            if fn.express is None:
                fn.express = t
            return _Cap("express", loc)
        if text.startswith("MSI-X:"):
            mm = _MSIX_RE.match(text)
            if not mm:
                raise loc.error("expected 'MSI-X: Enable+ Count=N Masked-'")
            count = int(mm.group(1))
            if not 1 <= count <= 2048:
                raise loc.error(f"MSI-X Count={count}: expected 1 to 2048 vectors")
            fn.msix = count
            return _Cap("other", loc)
        if text.startswith("Single Root I/O Virtualization"):
            if fn.sriov is not None:
                raise loc.error(f"a second SR-IOV capability on {fn.bdf}")
            fn.sriov = _Sriov(loc)
            return _Cap("sriov", loc)
        return _Cap("other", loc)

    def cap_detail(self, fn: _Fn, cap: _Cap, body: str, loc: Loc) -> None:
        if cap.kind == "express" and body.startswith(("LnkSta:", "LnkCap:")):
            m = _LNK_RE.match(body)
            if not m:
                raise loc.error(f"expected '{body[:7]} ...Speed 8GT/s, Width x16'")
            width = int(m.group("w"))
            if width > 32:
                raise loc.error(f"link width x{width}: PCIe links are at most x32")
            speed = None if m.group("speed") == "unknown" else _float(m.group("speed")[:-4], loc)
            link = _Link(speed, width, loc)
            if m.group("which") == "Sta":
                fn.lnksta = link
            else:
                fn.lnkcap = link
        elif cap.kind == "sriov":
            sr = fn.sriov
            if body.startswith("Initial VFs"):
                m = _IOV_COUNTS_RE.match(body)
                if not m:
                    raise loc.error("expected 'Initial VFs: N, Total VFs: N, Number of VFs: N, ...'")
                sr.initial, sr.total, sr.num = (int(g) for g in m.groups())
                sr.counts_loc = loc
                if sr.total > 65535:
                    raise loc.error(f"Total VFs: {sr.total}: the register holds at most 65535")
                if sr.num > sr.total:
                    raise loc.error(f"Number of VFs: {sr.num} is more than Total VFs: {sr.total}")
                if sr.num > 255:
                    raise loc.error(f"Number of VFs: {sr.num}: devlend models at most 255 VFs per function")
            elif body.startswith("VF offset"):
                m = _IOV_OFFSET_RE.match(body)
                if not m:
                    raise loc.error("expected 'VF offset: N, stride: N, Device ID: XXXX'")
                sr.offset, sr.stride = int(m.group(1)), int(m.group(2))
            elif body.startswith("Region "):
                m = _IOV_REGION_RE.match(body)
                if not m:
                    raise loc.error("expected 'Region N: Memory at ADDRESS (64-bit, prefetchable)' in the SR-IOV capability")
                idx = int(m.group("idx"))
                if idx > 5:
                    raise loc.error(f"VF Region {idx}: expected Region 0-5")
                bits = int(m.group("bits"))
                bar = _Bar(idx, bits, m.group("np") is None, _flag_size(m.group("flags"), loc), loc)
                _use_slots({i for b in sr.slots for i in ((b.index, b.index + 1) if b.bits == 64 else (b.index,))},
                           bar, "VF Region")
                if bar.size is not None:
                    _check_size(loc, f"VF Region {idx}", bar.size, bits)
                sr.slots.append(bar)

    def end_cap(self, fn: Optional[_Fn], cap: Optional[_Cap]) -> None:
        if fn is not None and cap is not None and cap.kind == "sriov" and fn.sriov.num is None:
            raise cap.loc.error("the SR-IOV capability lacks its 'Initial VFs: N, Total VFs: N, Number of VFs: N' "
                                "line (truncated, or captured with fewer than -vv?)")


def _float(s: str, loc: Loc) -> float:
    try:
        return float(s)
    except ValueError:
        raise loc.error(f"'{s}' is not a number") from None


def _flag_size(flags: str, loc: Loc) -> Optional[int]:
    m = _SIZE_RE.search(flags or "")
    if not m:
        return None
    return int(m.group(1)) * _UNITS[m.group(2)]


def _norm_name(name: str) -> str:
    name = re.sub(r"\s*\[[0-9a-fA-F]{4}:[0-9a-fA-F]{4}\]$", "", name.strip())
    return re.sub(r"\bDevice(?: [0-9a-fA-F]{4}(?::[0-9a-fA-F]{4})?)?$", "Device", name)


def _merge(tree: _Tree, fns: dict[Key, _Fn], tree_file: str, verbose_file: str) -> None:
    """Check that the tree and the verbose output describe the same machine; take parents from the tree."""
    for key in sorted(tree.devs):
        if key not in fns:
            raise tree.devs[key].loc.error(f"{_bdf(key)} is in the tree but {verbose_file} has no record for it "
                                           "(captured on another machine or at another time, or truncated?)")
    for key in sorted(fns):
        fn = fns[key]
        td = tree.devs.get(key)
        if td is None:
            raise fn.loc.error(f"{_bdf(key)} has a record here but is not in the tree {tree_file} "
                               "(captured on another machine or at another time?)")
        if td.bridge and fn.bus_numbers is None:
            raise fn.loc.error(f"the tree {tree_file} shows {_bdf(key)} as a bridge to buses "
                               f"[{td.bridge[0]:02x}-{td.bridge[1]:02x}] (line {td.loc.line}), but this record has "
                               "no 'Bus: primary=.., secondary=.., subordinate=..' line")
        if fn.bus_numbers is not None:
            p, s, u = fn.bus_numbers
            if td.bridge is None:
                raise fn.bus_loc.error(f"{_bdf(key)} is a bridge to buses [{s:02x}-{u:02x}] here, but the tree "
                                       f"{tree_file} shows it without a bus range (line {td.loc.line})")
            if (s, u) != td.bridge:
                raise fn.bus_loc.error(f"{_bdf(key)} bridges buses [{s:02x}-{u:02x}] here but "
                                       f"[{td.bridge[0]:02x}-{td.bridge[1]:02x}] in the tree {tree_file} "
                                       f"(line {td.loc.line})")
            if p != key[1]:
                raise fn.bus_loc.error(f"primary={p:02x}, but {_bdf(key)} sits on bus {key[1]:02x}")
        if td.ids and fn.ids and td.ids != fn.ids:
            raise fn.loc.error(f"{_bdf(key)} is [{fn.ids[0]:04x}:{fn.ids[1]:04x}] here but "
                               f"[{td.ids[0]:04x}:{td.ids[1]:04x}] in the tree {tree_file} (line {td.loc.line})")
        if td.name and fn.name and _norm_name(td.name) != _norm_name(fn.name):
            raise fn.loc.error(f"{_bdf(key)} is '{fn.name}' here but '{td.name}' in the tree {tree_file} "
                               f"(line {td.loc.line}): the captures disagree")
        if fn.ids is None:
            fn.ids = td.ids
        fn.parent, fn.stray = td.parent, td.stray


def parse_lspci(tree_text: str, verbose_text: str, *, host_name: str = "imported", cpu: str = "intel-xeon-e5",
                ram: Optional[int] = None, tree_file: str = "<tree>", verbose_file: str = "<verbose>") -> ImportResult:
    """Turn ``lspci -tvnn`` and ``lspci -vvv`` output into a topology description (see the module doc)."""
    _check_host(host_name, cpu, ram)
    tree = _TreeParser(tree_text, tree_file).parse()
    vp = _VerboseParser(verbose_text, verbose_file)
    fns = vp.parse()
    _merge(tree, fns, tree_file, verbose_file)
    notes = []
    if vp.ignored:
        notes.append(f"ignored {len(vp.ignored)} pcilib/lspci message line(s) in {verbose_file} "
                     f"(first at line {vp.ignored[0]})")
    sources = [f"tree:    {tree_file}", f"verbose: {verbose_file}"]
    return _Assembler(fns, host_name=host_name, cpu=cpu, ram=ram, first=tree.first, sources=sources,
                      notes=notes).run()


