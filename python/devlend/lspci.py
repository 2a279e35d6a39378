"""Import a real machine's PCIe hierarchy as a topology description (``devlend import-lspci``).

Two sources, one result:

* the output of ``lspci -tvnn`` (the tree) and ``lspci -vvv`` (or ``-vvvnn``) captured on Linux, as
  root so that capabilities are shown: :func:`parse_lspci`;
* a saved copy of ``/sys/bus/pci/devices`` (format below): :func:`parse_sysfs`.

Public API
----------
``parse_lspci(tree_text, verbose_text, *, host_name="imported", cpu="intel-xeon-e5", ram=None,
tree_file="<tree>", verbose_file="<verbose>") -> ImportResult``
    ``tree_text``/``verbose_text`` are the two captures as text; ``ram`` is bytes (``None``: 16 GiB,
    noted); ``*_file`` name the captures in error messages.

``parse_sysfs(root, *, host_name="imported", cpu="intel-xeon-e5", ram=None, tree_text=None,
tree_file="<tree>") -> ImportResult``
    ``root`` is the directory; ``tree_text`` optionally supplies parents (see below).

``main_import(tree, verbose, sysfs, host, cpu, ram, output) -> str``
    The CLI entry point. ``tree``: path of the ``lspci -tvnn`` capture; ``verbose``: path of the
    ``lspci -vvv`` capture, or ``None``; ``sysfs``: path of a saved sysfs directory, or ``None``
    (with ``sysfs`` the tree is optional, ``""``/``None`` to leave it out, and only supplies
    parents; one of ``verbose`` and ``sysfs`` is required); ``host``: host name; ``cpu``: CPU
    profile; ``ram``: size text such as ``"64 GiB"`` or ``None``; ``output``: path to write, or
    ``None``. Returns the YAML text (also when it writes it): a header comment naming the source
    files, which PCI function each component came from, what was skipped and why, and notes;
    then the description (``yaml.safe_dump``, ``sort_keys=False``).

``decode_text(data: bytes, file: str) -> str``
    UTF-8 decoding that reports undecodable input as a :class:`TopologyError` with its line.

``ImportResult``
    ``description`` (a dict :func:`devlend.topology.from_dict` accepts), ``skipped`` (a list of
    :class:`Skipped`: ``bdf``, ``what``, ``reason``, ``file``, ``line``), ``notes`` (assumptions
    and choices worth reading), ``components`` (component name -> the PCI function(s) it came
    from); ``topology()``, ``build()`` (maps a build error back to the capture line it came from)
    and ``to_yaml()``.

Every problem with the input -- empty, truncated, binary, malformed, or tree and verbose output
that disagree -- raises :class:`devlend.errors.TopologyError` naming the file, the 1-based line
(and for the tree, the column) and what was expected.

How the hierarchy maps to the schema
------------------------------------
* One host. Its root ports are the bridges on a root bus (``[0000:00]``; also ``[0000:80]`` and
  the like on multi-socket machines) that have devices behind them or a PCIe Root Port
  capability, in address order: the first is ``HOST.rp0``.
* A bridge below a port with the PCIe "Upstream Port" capability (or, when capabilities are not
  visible, any bridge below a port) is a switch; the bridges on its internal bus ("Downstream
  Port") are its ports ``d0``, ``d1``, ... in address order, empty ones included.
* The endpoint functions behind a port form one device (several functions: a multi-function
  device; with ARI, functions past 7 sit at device numbers above 0). ``kind`` comes from the class:
  VGA/3D/display controller -> ``gpu``, Non-Volatile memory controller -> ``nvme``,
  Ethernet/Network -> ``nic``, anything else ``generic``. An endpoint of class "Bridge" (0680, the
  class of PLX/IDT/Dolphin NT functions) becomes an ``ntbs`` entry whose windows are its BAR2/BAR4.
* BARs come from the ``Region N: Memory at ...`` lines (I/O regions and expansion ROMs are left
  out; a disabled or unassigned region still has its size). MSI-X vectors from
  ``MSI-X: Enable+ Count=N``. SR-IOV from the SR-IOV capability (``Number of VFs``, ``Total VFs``);
  the VF BAR sizes from the first VF's own ``Region`` lines (lspci prints no sizes inside the
  capability; a ``[size=]`` there is used when present). VFs are not listed as devices.
* Links take generation and width from the device's ``LnkSta`` (else the port's): 2.5 GT/s -> 1,
  5 -> 2, 8 -> 3, 16 -> 4, 32 -> 5; widths round down to x1/2/4/8/12/16.
* Names are derived from kind and address: ``gpu-04-00``, ``nvme-05-00``, ``nic-06-00``,
  ``ntb-08-00``, ``dev-..`` (generic), ``sw-02-00``; a non-zero PCI domain is included
  (``gpu-10000-04-00``).
* What the schema cannot hold is skipped and listed in ``skipped``: functions on a root bus that
  are not root ports (host bridge, chipset devices, uncore devices), bridges on a root bus with
  nothing behind them, conventional PCI bridges and what is behind them, endpoints on a switch's
  internal bus, more than one device behind one port.
* The host's ``iommu`` is true when the capture shows IOMMU groups. Addresses in the capture are
  not used: devlend enumerates and assigns resources itself.

Saved sysfs format (:func:`parse_sysfs`)
----------------------------------------
``root`` holds one entry per PCI function named by its full address, e.g. ``0000:3b:00.0``
(other entries are ignored and noted). Each entry is a directory (or, on a live system, the
kernel's symlink) with these text files:

* ``class`` (``0x030000``), ``vendor`` (``0x10de``), ``device`` (``0x1bb1``): required.
* ``resource``: required; the kernel's lines ``START END FLAGS`` (hex). Lines 0-5 are the BARs,
  line 6 the ROM, lines 7-12 the SR-IOV VF BARs (each spanning all Total VFs), later lines bridge
  windows. A line is a memory BAR when ``FLAGS & 0x200`` (IORESOURCE_MEM); ``& 0x2000``
  (IORESOURCE_PREFETCH) marks it prefetchable and ``& 0x100000`` (IORESOURCE_MEM_64) 64-bit.
* ``current_link_speed`` (``8.0 GT/s PCIe``), ``current_link_width`` (``16``),
  ``max_link_speed``, ``max_link_width``: optional.
* ``sriov_totalvfs``, ``sriov_numvfs``, ``sriov_offset``, ``sriov_stride``: optional (a PF).
* ``config``: optional, the binary config space; gives the PCIe port type, MSI-X table size and
  link status.
* ``parent``: optional, one line with the full address of the bridge above (``0000:00:02.0``), or
  empty / ``none`` for a function on a root bus. A plain ``cp -r`` of sysfs loses the symlinks that
  encode the hierarchy, so save it with
  ``for d in /sys/bus/pci/devices/*; do n=$(basename $d); mkdir -p out/$n;
  cp $d/{class,vendor,device,resource} out/$n/; p=$(basename $(dirname $(readlink -f $d)));
  case $p in pci*) : > out/$n/parent;; *) echo $p > out/$n/parent;; esac; done``.
  Without a ``parent`` file the parent comes from the entry's symlink target (live sysfs), else
  from ``tree_text`` (an ``lspci -tvnn`` capture of the same machine), else the function is taken
  to sit on a root bus.
* ``physfn``: optional, the PF's full address (or the kernel's symlink): this function is a VF.
* ``iommu_group``: optional; its presence on any function turns the host's IOMMU on.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

import yaml

from .errors import TopologyError
from .sizes import fmt_size, parse_size

__all__ = ["ImportResult", "Skipped", "decode_text", "main_import", "parse_lspci", "parse_sysfs"]

Key = tuple[int, int, int, int]  # (domain, bus, device, function)

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_DEFAULT_RAM = 16 << 30
_DEFAULT_LINK = (3, 16)
_GEN_OF_SPEED = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5}
_WIDTHS = (1, 2, 4, 8, 12, 16)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_PCIE_TYPES = {0: "Endpoint", 1: "Legacy Endpoint", 4: "Root Port", 5: "Upstream Port", 6: "Downstream Port",
               7: "PCI-Express to PCI/PCI-X Bridge", 8: "PCI/PCI-X to PCI-Express Bridge",
               9: "Root Complex Integrated Endpoint", 10: "Root Complex Event Collector"}
_CONFIG_SPEEDS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
IORESOURCE_IO = 0x100
IORESOURCE_MEM = 0x200
IORESOURCE_PREFETCH = 0x2000
IORESOURCE_MEM_64 = 0x100000


def _bdf(key: Key) -> str:
    d, b, dv, f = key
    return f"{d:04x}:{b:02x}:{dv:02x}.{f}"


# ---------------------------------------------------------------------------------------------
# Result types

@dataclass(frozen=True)
class Loc:
    """Where something came from: file, 1-based line, optional 1-based column."""
    file: Optional[str]
    line: Optional[int] = None
    column: Optional[int] = None

    def error(self, message: str) -> TopologyError:
        return TopologyError(message, file=self.file, line=self.line, column=self.column)


@dataclass(frozen=True)
class Skipped:
    """A PCI function the schema cannot represent."""
    bdf: str
    what: str
    reason: str
    file: Optional[str] = None
    line: Optional[int] = None

    def __str__(self) -> str:
        return f"{self.bdf} {self.what}: {self.reason}"


@dataclass
class ImportResult:
    """What an import produced. ``description`` is what :func:`devlend.topology.from_dict` takes."""
    description: dict
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    components: dict[str, list[str]] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    origins: dict[str, Loc] = field(default_factory=dict, repr=False)

    def topology(self):
        from .topology import from_dict
        return from_dict(self.description)

    def build(self):
        """Build the fabric; a build error names the capture line its component came from."""
        try:
            return self.topology().build()
        except TopologyError as e:
            loc = self._origin(e.field or "")
            if loc is None:
                raise
            raise TopologyError(e.message, file=loc.file, line=loc.line, field=e.field) from None

    def _origin(self, dotted: str) -> Optional[Loc]:
        while dotted:
            if dotted in self.origins:
                return self.origins[dotted]
            cut = max(dotted.rfind("."), dotted.rfind("["))
            dotted = dotted[:cut] if cut > 0 else ""
        return None

    def to_yaml(self) -> str:
        head = ["# Imported by devlend import-lspci from:"]
        head += [f"#   {_printable(s)}" for s in self.sources]
        if self.components:
            head.append("# Components and the PCI functions they come from:")
            width = max(len(n) for n in self.components)
            for n, whats in self.components.items():
                head += [f"#   {n if i == 0 else '':<{width}}  {_printable(w)}" for i, w in enumerate(whats)]
        if self.skipped:
            head.append("# Skipped (the schema cannot represent them):")
            head += [f"#   {_printable(str(s))}" for s in self.skipped]
        if self.notes:
            head.append("# Notes:")
            head += [f"#   - {_printable(n)}" for n in self.notes]
        body = yaml.safe_dump(_humanize(self.description), sort_keys=False, default_flow_style=None,
                              width=120, allow_unicode=True)
        return "\n".join(head) + "\n" + body


def _printable(s: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in s)


def _humanize(desc: dict) -> dict:
    """Sizes as '16 MiB' strings, which the schema accepts and people read."""
    def size(v: Any) -> Any:
        return fmt_size(v) if isinstance(v, int) else v

    def bars(bs: list) -> list:
        return [{**b, "size": size(b["size"])} for b in bs]

    out = dict(desc)
    out["hosts"] = [{**h, "ram": size(h["ram"])} for h in desc["hosts"]]
    if "devices" in desc:
        devs = []
        for d in desc["devices"]:
            d = dict(d)
            if "functions" in d:
                fns = []
                for f in d["functions"]:
                    f = dict(f)
                    f["bars"] = bars(f.get("bars", []))
                    if "sriov" in f and "vf_bars" in f["sriov"]:
                        f["sriov"] = {**f["sriov"], "vf_bars": bars(f["sriov"]["vf_bars"])}
                    fns.append(f)
                d["functions"] = fns
            devs.append(d)
        out["devices"] = devs
    if "ntbs" in desc:
        out["ntbs"] = [{**n, "windows": [{**w, "size": size(w["size"])} for w in n["windows"]]} if "windows" in n else n
                       for n in desc["ntbs"]]
    return out


# ---------------------------------------------------------------------------------------------
# The common intermediate form: one record per PCI function

@dataclass
class _Link:
    speed: Optional[float]  # GT/s; None when unknown
    width: Optional[int]
    loc: Loc


@dataclass
class _Bar:
    index: int
    bits: int
    pref: bool
    size: Optional[int]
    loc: Loc


@dataclass
class _Sriov:
    loc: Loc
    initial: Optional[int] = None
    total: Optional[int] = None
    num: Optional[int] = None
    counts_loc: Optional[Loc] = None
    offset: Optional[int] = None
    stride: Optional[int] = None
    slots: list[_Bar] = field(default_factory=list)


@dataclass
class _Fn:
    key: Key
    loc: Loc
    class_text: str = ""
    class_code: Optional[int] = None
    name: str = ""
    ids: Optional[tuple[int, int]] = None
    subsystem: str = ""
    is_bridge: bool = False
    bus_numbers: Optional[tuple[int, int, int]] = None  # primary, secondary, subordinate
    bus_loc: Optional[Loc] = None
    express: Optional[str] = None
    lnksta: Optional[_Link] = None
    lnkcap: Optional[_Link] = None
    bars: list[_Bar] = field(default_factory=list)
    msix: int = 0
    sriov: Optional[_Sriov] = None
    physfn: Optional[Key] = None
    iommu: bool = False
    caps_hidden: bool = False
    parent: Optional[Key] = None
    stray: bool = False

    @property
    def bdf(self) -> str:
        return _bdf(self.key)

    @property
    def what(self) -> str:
        if self.class_text and self.name:
            return f"{self.class_text}: {self.name}"
        return self.class_text or self.name or "PCI function"

    def looks_vf(self) -> bool:
        return "virtual function" in self.name.lower()


def _check_size(loc: Loc, what: str, size: int, bits: int, minimum: int = 16) -> None:
    if size < minimum or size & (size - 1):
        raise loc.error(f"{what} size {size:#x}: expected a power of two of at least {fmt_size(minimum)}")
    if size >= 1 << 63:
        raise loc.error(f"{what} size {size:#x} is beyond any 64-bit address space")
    if bits == 32 and size > 1 << 31:
        raise loc.error(f"{what} is 32-bit but {fmt_size(size)}: a 32-bit BAR is at most 2 GiB")


def _use_slots(used: set, bar: _Bar, what: str) -> None:
    slots = {bar.index, bar.index + 1} if bar.bits == 64 else {bar.index}
    if bar.bits == 64 and bar.index >= 5:
        raise bar.loc.error(f"{what} {bar.index} is 64-bit, so it needs the next BAR register too: expected index 0-4")
    if used & slots:
        raise bar.loc.error(f"{what} {bar.index} overlaps a BAR listed before it")
    used |= slots


def _lines(text: str, file: str, what: str) -> list[str]:
    if not isinstance(text, str):
        raise TopologyError(f"expected text, got {type(text).__name__}", file=file)
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    out = []
    for n, line in enumerate(lines, 1):
        if line.endswith("\r"):
            line = line[:-1]
        m = _CONTROL_RE.search(line)
        if m:
            raise TopologyError(f"unexpected control character U+{ord(m.group()):04X}: expected the text output of {what} "
                                "(is this a binary file?)", file=file, line=n, column=m.start() + 1)
        out.append(line.rstrip())
    while out and not out[-1].strip():
        out.pop()
    if not out:
        raise TopologyError(f"empty: expected the output of {what}", file=file, line=1)
    return out


def decode_text(data: bytes, file: str) -> str:
    """Decode a capture as UTF-8; undecodable bytes are a TopologyError naming line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise TopologyError(f"not UTF-8 text ({e.reason} at byte {e.start}): expected lspci output, not a binary file",
                            file=file, line=line, column=col) from None


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


# ---------------------------------------------------------------------------------------------
# sysfs

_FULL_BDF = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_SPEED_RE = re.compile(r"^([0-9.]+) ?GT/s")


def _key_of(text: str) -> Optional[Key]:
    m = _FULL_BDF.match(text)
    if not m or int(m.group(3), 16) > 0x1f:
        return None
    return (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4)))


def _read_attr(path: str, name: str, required: bool = False) -> Optional[str]:
    p = os.path.join(path, name)
    if os.path.isdir(p):
        return None
    try:
        with open(p, "rb") as fh:
            data = fh.read(1 << 20)
    except FileNotFoundError:
        if required:
            raise TopologyError(f"missing: every device directory needs '{name}'", file=p) from None
        return None
    except OSError as e:
        raise TopologyError(f"cannot read: {e.strerror}", file=p) from None
    text = decode_text(data, p)
    m = _CONTROL_RE.search(text)
    if m:
        raise TopologyError(f"unexpected control character U+{ord(m.group()):04X}: expected text", file=p,
                            line=text.count("\n", 0, m.start()) + 1)
    return text


def _one_line(path: str, name: str, text: str, pattern: str, expected: str) -> re.Match:
    lines = text.strip().split("\n")
    m = re.fullmatch(pattern, lines[0].strip()) if len(lines) == 1 else None
    if not m:
        raise TopologyError(f"expected {expected}", file=os.path.join(path, name), line=1)
    return m


def _int_attr(path: str, name: str, required: bool = False, hexa: bool = False) -> Optional[int]:
    text = _read_attr(path, name, required)
    if text is None:
        return None
    pat = r"0x[0-9a-fA-F]{1,8}" if hexa else r"\d{1,6}"
    m = _one_line(path, name, text, pat, "a hex number such as 0x10de" if hexa else "a decimal number")
    return int(m.group(), 16 if hexa else 10)


def _parse_config(data: bytes, fn: _Fn, has_sysfs_link: bool) -> None:
    """The parts of config space we use: PCIe port type, link capability and status, MSI-X size."""
    def u16(o: int) -> int:
        return data[o] | data[o + 1] << 8

    if len(data) < 64:
        return
    if data[0x0e] & 0x7f == 1:
        fn.is_bridge = True
    if not u16(6) & 0x10:
        return
    ptr, seen = data[0x34] & 0xfc, set()
    while ptr and ptr not in seen and ptr + 4 <= len(data) and len(seen) < 48:
        seen.add(ptr)
        cid, nxt = data[ptr], data[ptr + 1] & 0xfc
        if cid == 0x10 and ptr + 0x14 <= len(data):
            typ = (u16(ptr + 2) >> 4) & 0xf
            fn.express = _PCIE_TYPES.get(typ, f"Unknown type {typ}")
            if typ not in (9, 10):
                cap, sta = u16(ptr + 0x0c), u16(ptr + 0x12)
                fn.lnkcap = _Link(_CONFIG_SPEEDS.get(cap & 0xf), (cap >> 4) & 0x3f or None, fn.loc)
                if not has_sysfs_link:
                    fn.lnksta = _Link(_CONFIG_SPEEDS.get(sta & 0xf), (sta >> 4) & 0x3f or None, fn.loc)
        elif cid == 0x11:
            fn.msix = (u16(ptr + 2) & 0x7ff) + 1
        ptr = nxt


def _sysfs_link(path: str, speed_name: str, width_name: str) -> Optional[_Link]:
    speed_text = _read_attr(path, speed_name)
    width = _int_attr(path, width_name)
    if speed_text is None and width is None:
        return None
    speed = None
    if speed_text is not None:
        s = speed_text.strip()
        m = _SPEED_RE.match(s)
        if m:
            speed = _float(m.group(1), Loc(os.path.join(path, speed_name), 1))
        elif not s.lower().startswith("unknown"):
            raise TopologyError("expected a link speed such as '8.0 GT/s PCIe'", file=os.path.join(path, speed_name),
                                line=1)
    if width is not None and width > 32:
        raise TopologyError(f"link width {width}: PCIe links are at most x32", file=os.path.join(path, width_name), line=1)
    return _Link(speed, width or None, Loc(os.path.join(path, speed_name if speed_text is not None else width_name), 1))


def _parse_resource(path: str, fn: _Fn, total_vfs: Optional[int]) -> list[_Bar]:
    """BARs from the resource file; returns the SR-IOV VF BAR slots (total sizes divided by Total VFs)."""
    rpath = os.path.join(path, "resource")
    text = _read_attr(path, "resource", required=True)
    used, vf_used, slots = set(), set(), []
    for i, line in enumerate(text.split("\n")):
        if not line.strip():
            continue
        loc = Loc(rpath, i + 1)
        parts = line.split()
        try:
            if len(parts) != 3 or not all(p.lower().startswith("0x") for p in parts):
                raise ValueError
            start, end, flags = (int(p, 16) for p in parts)
        except ValueError:
            raise loc.error("expected three hex numbers 'START END FLAGS' such as "
                            "'0x00000000fa000000 0x00000000faffffff 0x0000000000040200'") from None
        if i == 6 or i >= 13 or not flags & IORESOURCE_MEM or start == end == 0:
            continue
        if end < start:
            raise loc.error(f"resource ends ({end:#x}) before it starts ({start:#x})")
        size = end - start + 1
        bits = 64 if flags & IORESOURCE_MEM_64 else 32
        pref = bool(flags & IORESOURCE_PREFETCH)
        if i < 6:
            bar = _Bar(i, bits, pref, size, loc)
            _use_slots(used, bar, "BAR")
            _check_size(loc, f"BAR {i}", size, bits)
            fn.bars.append(bar)
        else:
            idx = i - 7
            if not total_vfs:
                raise loc.error(f"an SR-IOV VF BAR (line {i + 1}) but no sriov_totalvfs file beside it")
            if size % total_vfs:
                raise loc.error(f"VF BAR {idx} spans {size:#x} bytes, not a multiple of sriov_totalvfs={total_vfs}")
            bar = _Bar(idx, bits, pref, size // total_vfs, loc)
            _use_slots(vf_used, bar, "VF BAR")
            _check_size(loc, f"VF BAR {idx}", bar.size, bits)
            slots.append(bar)
    return slots


def parse_sysfs(root: str, *, host_name: str = "imported", cpu: str = "intel-xeon-e5", ram: Optional[int] = None,
                tree_text: Optional[str] = None, tree_file: str = "<tree>") -> ImportResult:
    """Turn a saved ``/sys/bus/pci/devices`` (format in the module doc) into a topology description."""
    _check_host(host_name, cpu, ram)
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise TopologyError("not a directory: expected a saved copy of /sys/bus/pci/devices", file=root)
    tree = _TreeParser(tree_text, tree_file).parse() if tree_text is not None else None
    fns: dict[Key, _Fn] = {}
    parent_src: dict[Key, tuple[Optional[Key], Loc]] = {}
    physfn: dict[Key, tuple[Key, Loc]] = {}
    ignored = []
    for entry in sorted(os.listdir(root)):
        key = _key_of(entry)
        path = os.path.join(root, entry)
        if key is None:
            ignored.append(entry)
            continue
        link_target = os.readlink(path) if os.path.islink(path) else None
        if not os.path.isdir(path):
            if link_target is not None:
                raise TopologyError(f"a symlink to '{link_target}', which does not resolve here: save sysfs as "
                                    "directories with a 'parent' file each (see devlend.lspci)", file=path)
            ignored.append(entry)
            continue
        fn = _Fn(key, Loc(path))
        cls = _int_attr(path, "class", required=True, hexa=True)
        fn.class_code = cls >> 8
        fn.class_text = f"class {cls >> 8:04x}"
        vendor = _int_attr(path, "vendor", required=True, hexa=True)
        device = _int_attr(path, "device", required=True, hexa=True)
        fn.ids = (vendor, device)
        fn.name = f"[{vendor:04x}:{device:04x}]"
        fn.is_bridge = fn.class_code in (0x0604, 0x0609)
        fn.lnksta = _sysfs_link(path, "current_link_speed", "current_link_width")
        fn.lnkcap = _sysfs_link(path, "max_link_speed", "max_link_width")
        cfg = os.path.join(path, "config")
        if os.path.isfile(cfg):
            with open(cfg, "rb") as fh:
                _parse_config(fh.read(4096), fn, fn.lnksta is not None)
        total = _int_attr(path, "sriov_totalvfs")
        if total is not None:
            num = _int_attr(path, "sriov_numvfs") or 0
            sloc = Loc(os.path.join(path, "sriov_numvfs"), 1)
            if num > total:
                raise sloc.error(f"sriov_numvfs={num} is more than sriov_totalvfs={total}")
            if num > 255:
                raise sloc.error(f"sriov_numvfs={num}: devlend models at most 255 VFs per function")
            fn.sriov = _Sriov(Loc(os.path.join(path, "sriov_totalvfs"), 1), total=total, num=num, counts_loc=sloc,
                              offset=_int_attr(path, "sriov_offset"), stride=_int_attr(path, "sriov_stride"))
        slots = _parse_resource(path, fn, total)
        if fn.sriov is not None:
            fn.sriov.slots = slots
        fn.iommu = os.path.lexists(os.path.join(path, "iommu_group"))
        ppath = os.path.join(path, "parent")
        ptext = _read_attr(path, "parent")
        if ptext is not None:
            t = ptext.strip()
            pkey = None if t.lower() in ("", "none", "root") else _key_of(t)
            if t.lower() not in ("", "none", "root") and pkey is None:
                raise TopologyError("expected the parent bridge's full address such as 0000:00:02.0, "
                                    "or 'none' for a function on a root bus", file=ppath, line=1)
            parent_src[key] = (pkey, Loc(ppath, 1))
        elif link_target is not None:
            comps = [c for c in link_target.replace("\\", "/").split("/") if c]
            pkey = _key_of(comps[-2]) if len(comps) >= 2 else None
            parent_src[key] = (pkey, Loc(path))
        elif tree is not None and key in tree.devs:
            parent_src[key] = (tree.devs[key].parent, tree.devs[key].loc)
            fn.stray = tree.devs[key].stray
        else:
            parent_src[key] = (None, Loc(path))
        pf = os.path.join(path, "physfn")
        if os.path.islink(pf):
            pk = _key_of(os.path.basename(os.readlink(pf).rstrip("/")))
            if pk is not None:
                physfn[key] = (pk, Loc(pf))
        else:
            ftext = _read_attr(path, "physfn")
            if ftext is not None:
                pk = _key_of(ftext.strip())
                if pk is None:
                    raise TopologyError("expected the PF's full address such as 0000:06:00.0", file=pf, line=1)
                physfn[key] = (pk, Loc(pf, 1))
        fns[key] = fn
    if not fns:
        raise TopologyError("no PCI functions: expected directories named by address, such as 0000:3b:00.0", file=root)
    for key, (pkey, loc) in parent_src.items():
        if pkey is not None:
            if pkey not in fns:
                raise loc.error(f"parent {_bdf(pkey)} is not in {root}")
            if not fns[pkey].is_bridge:
                raise loc.error(f"parent {_bdf(pkey)} is not a bridge (class {fns[pkey].class_code:04x})")
        fns[key].parent = pkey
    for key in fns:  # a parent chain must end on a root bus
        seen, k = set(), key
        while k is not None:
            if k in seen:
                raise parent_src[key][1].error(f"the parents of {_bdf(key)} form a cycle: PCI is a tree")
            seen.add(k)
            k = fns[k].parent
    for key, (pk, loc) in physfn.items():
        if pk not in fns:
            raise loc.error(f"PF {_bdf(pk)} is not in {root}")
        fns[key].physfn = pk
    notes = []
    if ignored:
        notes.append(f"ignored {len(ignored)} entr{'y' if len(ignored) == 1 else 'ies'} of {root} not named like "
                     f"0000:3b:00.0: {', '.join(ignored[:5])}{' ...' if len(ignored) > 5 else ''}")
    sources = [f"sysfs:   {root}"] + ([f"tree:    {tree_file}"] if tree is not None else [])
    return _Assembler(fns, host_name=host_name, cpu=cpu, ram=ram, first=Loc(root), sources=sources, notes=notes,
                      sysfs=True).run()


# ---------------------------------------------------------------------------------------------
# From functions to the schema

def _check_host(host_name: str, cpu: str, ram: Optional[int]) -> None:
    if not isinstance(host_name, str) or not _NAME_RE.match(host_name):
        raise TopologyError(f"host name {host_name!r} is not a valid name: expected a letter followed by letters, "
                            "digits, '-' or '_'", field="hosts[0].name")
    cpus = _params().get("cpu")
    if cpus and cpu not in cpus:
        raise TopologyError(f"unknown CPU profile '{cpu}': expected one of {', '.join(cpus)}", field="hosts[0].cpu")
    if ram is not None and (not isinstance(ram, int) or isinstance(ram, bool) or ram <= 0 or ram % 4096):
        raise TopologyError(f"RAM size {ram!r}: expected a positive multiple of 4 KiB", field="hosts[0].ram")


_PARAMS: Optional[dict] = None


def _params() -> dict:
    """The hardware parameter file, when the core and tomllib are available (profile checks are a bonus)."""
    global _PARAMS
    if _PARAMS is None:
        try:
            import tomllib

            from . import _core
            _PARAMS = tomllib.loads(_core.params_toml())
        except (ImportError, AttributeError, ValueError):
            _PARAMS = {}
    return _PARAMS


def _kind(fn: _Fn) -> str:
    cc = fn.class_code
    if cc is not None:
        if cc >> 8 == 0x03:
            return "gpu"
        if cc == 0x0108:
            return "nvme"
        if cc >> 8 == 0x02:
            return "nic"
        if cc == 0x0680 and not fn.is_bridge:
            return "ntb"
        return "ntb" if "non-transparent" in fn.name.lower() else "generic"
    t = fn.class_text.lower()
    if t in ("vga compatible controller", "3d controller", "display controller"):
        return "gpu"
    if t == "non-volatile memory controller":
        return "nvme"
    if t in ("ethernet controller", "network controller", "infiniband controller"):
        return "nic"
    if (t == "bridge" and not fn.is_bridge) or "non-transparent" in fn.name.lower():
        return "ntb"
    return "generic"


_PREFIX = {"gpu": "gpu", "nvme": "nvme", "nic": "nic", "ntb": "ntb", "generic": "dev", "switch": "sw"}


def _gen(speed: Optional[float]) -> Optional[int]:
    if speed is None:
        return None
    if speed > 32:
        return 5
    return _GEN_OF_SPEED.get(speed)


def _width(w: Optional[int]) -> Optional[int]:
    if not w:
        return None
    return max(a for a in _WIDTHS if a <= w)


class _Assembler:
    def __init__(self, fns: dict[Key, _Fn], *, host_name: str, cpu: str, ram: Optional[int], first: Loc,
                 sources: list[str], notes: list[str], sysfs: bool = False):
        self.fns, self.host, self.cpu, self.ram, self.first = fns, host_name, cpu, ram, first
        self.sysfs = sysfs
        self.result = ImportResult(description={}, sources=sources, notes=list(notes))
        self.placed: set[Key] = set()
        self.skipped: dict[Key, Skipped] = {}
        self.switches: list[dict] = []
        self.devices: list[dict] = []
        self.ntbs: list[dict] = []
        self.links: list[dict] = []
        self.children: dict[Optional[Key], list[_Fn]] = {}
        for key in sorted(fns):
            fn = fns[key]
            if not fn.stray:
                self.children.setdefault(fn.parent, []).append(fn)
        self.vf_of: dict[Key, Key] = {}
        self.vfs: dict[Key, list[_Fn]] = {}
        self.orphan_vfs: set[Key] = set()

    def note(self, text: str) -> None:
        self.result.notes.append(text)

    # -- VFs ----------------------------------------------------------------------------------
    def find_vfs(self) -> None:
        for pf in sorted(self.fns.values(), key=lambda f: f.key):
            sr = pf.sriov
            if sr is None or not sr.num or sr.offset is None or sr.stride is None:
                continue
            dom, bus, dev, fno = pf.key
            rid0 = bus << 8 | dev << 3 | fno
            for i in range(sr.num):
                rid = rid0 + sr.offset + i * sr.stride
                if rid > 0xffff:
                    break
                k = (dom, rid >> 8, (rid >> 3) & 0x1f, rid & 7)
                f = self.fns.get(k)
                if f is not None and k != pf.key and not f.is_bridge and f.sriov is None and k not in self.vf_of:
                    self.vf_of[k] = pf.key
        for fn in self.fns.values():
            if fn.key in self.vf_of:
                continue
            if fn.physfn is not None and fn.physfn != fn.key and not fn.is_bridge:
                self.vf_of[fn.key] = fn.physfn
            elif fn.looks_vf() and not fn.is_bridge:
                self.orphan_vfs.add(fn.key)
        for k, pf in sorted(self.vf_of.items()):
            self.vfs.setdefault(pf, []).append(self.fns[k])

    def kids(self, key: Optional[Key]) -> list[_Fn]:
        return [f for f in self.children.get(key, []) if f.key not in self.vf_of and f.key not in self.orphan_vfs]

    # -- skipping -----------------------------------------------------------------------------
    def skip(self, fn: _Fn, reason: str) -> None:
        if fn.key not in self.skipped and fn.key not in self.placed:
            self.skipped[fn.key] = Skipped(fn.bdf, fn.what, reason, fn.loc.file, fn.loc.line)

    def skip_tree(self, fn: _Fn, reason: str) -> None:
        self.skip(fn, reason)
        stack = [fn]
        while stack:
            f = stack.pop()
            for c in self.children.get(f.key, []):
                if c.key not in self.skipped:
                    self.skip(c, f"behind {fn.bdf}, which is skipped")
                    stack.append(c)

    # -- naming, links ------------------------------------------------------------------------
    def name(self, kind: str, key: Key) -> str:
        d, b, dv, _ = key
        n = f"{_PREFIX[kind]}-{b:02x}-{dv:02x}" if d == 0 else f"{_PREFIX[kind]}-{d:04x}-{b:02x}-{dv:02x}"
        if n == self.host:
            raise TopologyError(f"host name '{self.host}' is also the name of the imported {_bdf(key)}: choose "
                                "another host name", field="hosts[0].name")
        return n

    def link(self, a: str, b: str, child: _Fn, port: _Fn, cname: str) -> None:
        gen = width = None
        src = None
        for cand in (child.lnksta, port.lnksta):
            if cand is not None and _gen(cand.speed) and _width(cand.width):
                gen, width, src = _gen(cand.speed), _width(cand.width), cand
                break
        if gen is None:
            caps = [c for c in (child.lnkcap, port.lnkcap) if c is not None and _gen(c.speed) and _width(c.width)]
            if caps:
                gen = min(_gen(c.speed) for c in caps)
                width = min(_width(c.width) for c in caps)
                self.note(f"{cname}: no current link status for {child.bdf}; used the link capability, Gen{gen} x{width}")
            else:
                gen, width = _DEFAULT_LINK
                self.note(f"{cname}: no link speed or width for {child.bdf} or its port (capabilities are shown only "
                          f"to root); assumed Gen{gen} x{width}")
        else:
            if src.speed is not None and src.speed > 32:
                self.note(f"{cname}: link at {src.speed:g} GT/s; devlend models up to Gen5, so Gen5")
            if src.width and src.width > 16:
                self.note(f"{cname}: link width x{src.width}; devlend models up to x16")
            caps = [c for c in (child.lnkcap, port.lnkcap) if c is not None and _gen(c.speed) and _width(c.width)]
            if caps:
                cg, cw = min(_gen(c.speed) for c in caps), min(_width(c.width) for c in caps)
                if gen < cg or width < cw:
                    self.note(f"{cname}: the link ran at Gen{gen} x{width} when captured, below what both ends "
                              f"support (Gen{cg} x{cw}; idle power saving?); imported as captured")
        idx = len(self.links)
        self.links.append({"a": a, "b": b, "gen": gen, "width": width})
        self.result.origins[f"links[{idx}]"] = (src.loc if src is not None and not self.sysfs else child.loc)

    # -- the walk -----------------------------------------------------------------------------
    def is_root_port(self, fn: _Fn) -> bool:
        if not fn.is_bridge:
            return False
        if fn.express == "Root Port":
            return True
        return fn.express is None and bool(self.kids(fn.key))

    def run(self) -> ImportResult:
        self.find_vfs()
        roots = [f for f in self.kids(None)]
        rps = [f for f in roots if self.is_root_port(f)]
        if not rps:
            raise self.first.error("no root port found: no bridge on a root bus has devices behind it or a PCIe Root "
                                   "Port capability, so there is nothing devlend can attach")
        if len(rps) > 31:
            empty = [f for f in rps if not self.kids(f.key)]
            for f in empty[:len(rps) - 31]:
                self.skip(f, "an empty root port left out: devlend models at most 31 root ports")
            rps = [f for f in rps if f.key not in self.skipped]
            if len(rps) > 31:
                raise rps[31].loc.error("more than 31 root ports with devices behind them: devlend models at most 31")
        self.placed.update(f.key for f in rps)
        self.root_ports = len(rps)
        work = [(f"{self.host}.rp{i}", rp) for i, rp in enumerate(rps)]
        for i, rp in enumerate(rps):
            self.result.components[f"{self.host}.rp{i}"] = [f"{rp.bdf}  {rp.what}"]
        work.reverse()
        while work:
            port_ref, port = work.pop()
            work.extend(reversed(self.attach(port_ref, port)))
        self.leftovers()
        return self.finish()

    def attach(self, port_ref: str, port: _Fn) -> list[tuple[str, _Fn]]:
        kids = self.kids(port.key)
        if not kids:
            return []
        bridges = [k for k in kids if k.is_bridge]
        if bridges:
            first = bridges[0]
            for o in kids:
                if o is not first:
                    self.skip_tree(o, f"shares bus {first.key[1]:02x} with {first.bdf}: a port links to exactly one "
                                      "component")
            if first.express in ("Upstream Port", None):
                return self.switch(port_ref, port, first)
            self.skip_tree(first, f"a {first.express or 'bridge'} below {port.bdf}: devlend models PCIe switches, "
                                  "not conventional PCI buses")
            return []
        if port.express in ("Root Port", "Downstream Port"):
            group = kids  # ARI: functions past 7 show as further device numbers on the same bus
        else:
            group = [k for k in kids if k.key[2] == kids[0].key[2]]
            for k in kids:
                if k.key[2] != kids[0].key[2]:
                    self.skip_tree(k, f"a second device on bus {k.key[1]:02x} (a conventional PCI bus?): a port links "
                                      "to exactly one device")
        if len(group) > 8:
            for k in group[8:]:
                self.skip(k, "devlend models at most 8 functions per device")
            group = group[:8]
        self.endpoint(port_ref, port, group)
        return []

    def switch(self, port_ref: str, port: _Fn, up: _Fn) -> list[tuple[str, _Fn]]:
        inner = self.kids(up.key)
        downs = [d for d in inner if d.is_bridge and d.express in ("Downstream Port", None)]
        for d in inner:
            if d not in downs:
                self.skip_tree(d, f"on the internal bus of switch {up.bdf}, where only downstream ports can be "
                                  "represented")
        if not downs:
            self.skip_tree(up, "a switch without downstream ports")
            return []
        if len(downs) > 32:
            for d in downs[32:]:
                self.skip_tree(d, "devlend models at most 32 downstream ports per switch")
            downs = downs[:32]
        name = self.name("switch", up.key)
        idx = len(self.switches)
        self.switches.append({"name": name, "downstream_ports": len(downs)})
        self.result.origins[f"switches[{idx}]"] = up.loc
        self.placed.add(up.key)
        self.placed.update(d.key for d in downs)
        self.result.components[name] = [f"{up.bdf}  {up.what}"]
        for i, d in enumerate(downs):
            self.result.components[f"{name}.d{i}"] = [f"{d.bdf}  {d.what}"]
        self.link(port_ref, name, up, port, name)
        return [(f"{name}.d{i}", d) for i, d in enumerate(downs)]

    def endpoint(self, port_ref: str, port: _Fn, group: list[_Fn]) -> None:
        f0 = group[0]
        kind = _kind(f0)
        if kind == "ntb":
            if self.ntb(port_ref, port, group):
                return
            kind = "generic"
        name = self.name(kind, f0.key)
        idx = len(self.devices)
        path = f"devices[{idx}]"
        funcs = []
        for i, fn in enumerate(group):
            funcs.append(self.function(fn, f"{path}.functions[{i}]", name, i, group))
        dev = {"name": name, "kind": kind, "functions": funcs}
        self.devices.append(dev)
        self.result.origins[path] = f0.loc
        self.placed.update(f.key for f in group)
        self.result.components[name] = [f"{f.bdf}  {f.what}" for f in group]
        numbers = [f.key[2] * 8 + f.key[3] for f in group]
        if numbers != list(range(len(group))):
            self.note(f"{name}: PCI functions {', '.join(f.bdf for f in group)} imported as functions "
                      f"0-{len(group) - 1}")
        self.link(port_ref, name, f0, port, name)

    def function(self, fn: _Fn, path: str, name: str, index: int, group: list[_Fn]) -> dict:
        bars = []
        self.result.origins[path] = fn.loc
        for b in sorted(fn.bars, key=lambda b: b.index):
            if b.size is None:
                self.note(f"{name}: {fn.bdf} Region {b.index} shows no size (lspci on Linux prints sizes); left out")
                continue
            self.result.origins[f"{path}.bars[{len(bars)}]"] = b.loc
            bars.append({"index": b.index, "size": b.size, "bits": b.bits, "pref": b.pref})
        out: dict[str, Any] = {"bars": bars}
        if fn.msix:
            out["msix_vectors"] = fn.msix
        if fn.sriov is not None:
            out["sriov"] = self.sriov(fn, f"{path}.sriov", name, index, group)
        return out

    def sriov(self, fn: _Fn, path: str, name: str, index: int, group: list[_Fn]) -> dict:
        sr = fn.sriov
        num = sr.num or 0
        vfs = self.vfs.get(fn.key, [])
        self.result.origins[path] = sr.counts_loc or sr.loc
        first = vfs[0] if vfs else None
        # A PF without enabled VFs has the same VF BARs as a sibling PF of the same chip that has some.
        twin = next((self.vfs[g.key][0] for g in group if g is not fn and g.ids == fn.ids and g.ids is not None
                     and self.vfs.get(g.key)), None)
        vf_bars, unknown, borrowed = [], [], False
        slots = sr.slots or (first.bars if first is not None else [])
        for s in sorted(slots, key=lambda s: s.index):
            size, loc = s.size, s.loc
            for src in (first, twin):
                own = [b for b in src.bars if b.index == s.index and b.size is not None] if src is not None else []
                if own and size is None or own and src is first:
                    size, loc = own[0].size, own[0].loc
                    borrowed = borrowed or src is twin
                    break
            if size is None:
                if num:
                    raise s.loc.error(f"VF BAR {s.index}: its size is unknown (lspci prints none in the SR-IOV "
                                      f"capability) and none of the {num} VFs of {fn.bdf} is in the capture")
                unknown.append(str(s.index))
                continue
            _check_size(loc, f"VF BAR {s.index}", size, s.bits)
            self.result.origins[f"{path}.vf_bars[{len(vf_bars)}]"] = loc
            vf_bars.append({"index": s.index, "size": size, "bits": s.bits, "pref": s.pref})
        if unknown:
            self.note(f"{name}: VF BAR {', '.join(unknown)} of {fn.bdf} left out: no size known (no VFs enabled)")
        if borrowed:
            self.note(f"{name}: {fn.bdf} has no VFs enabled; its VF BAR sizes are those of its sibling PF's VFs")
        out: dict[str, Any] = {"num_vfs": num}
        if sr.total is not None:
            out["total_vfs"] = sr.total
        if vf_bars:
            out["vf_bars"] = vf_bars
        if vfs:
            self.placed.update(v.key for v in vfs)
            self.note(f"{name}: the {len(vfs)} SR-IOV VF(s) of {fn.bdf} ({vfs[0].bdf}"
                      f"{' .. ' + vfs[-1].bdf if len(vfs) > 1 else ''}) are functions[{index}].sriov, not devices")
        if num and len(vfs) != num:
            self.note(f"{name}: {fn.bdf} has {num} VFs enabled but {len(vfs)} are in the capture")
        return out

    def ntb(self, port_ref: str, port: _Fn, group: list[_Fn]) -> bool:
        f0 = group[0]
        wins = [b for b in sorted(f0.bars, key=lambda b: b.index) if b.index >= 1 and b.size is not None]
        if not wins or any(b.size < 0x1000 for b in wins[:2]):
            self.note(f"{f0.bdf} looks like an NTB function but has no memory-window BARs (BAR2/BAR4) of at least "
                      "4 KiB; imported as a generic device")
            return False
        name = self.name("ntb", f0.key)
        if len(wins) > 2:
            self.note(f"{name}: {len(wins)} window BARs; devlend models 2 (BAR2, BAR4), the first two are kept")
            wins = wins[:2]
        idx = len(self.ntbs)
        entry: dict[str, Any] = {"name": name}
        profile = None
        if "dolphin" in (f0.subsystem + " " + f0.name).lower():
            profile = "pxh830"
        prof = _params().get("ntb", {}).get(profile) if profile else None
        windows = []
        for i, b in enumerate(wins):
            w: dict[str, Any] = {"size": b.size}
            pw = (prof or {}).get("windows", [])
            if i < len(pw) and pw[i].get("size") == b.size and pw[i].get("lut_segments"):
                w["lut_segments"] = pw[i]["lut_segments"]
            windows.append(w)
            self.result.origins[f"ntbs[{idx}].windows[{i}]"] = b.loc
        if profile:
            entry["profile"] = profile
            entry["windows"] = windows
            self.note(f"{name}: a Dolphin adapter, so profile '{profile}' supplies what lspci does not show "
                      "(requester-ID LUT entries, doorbells, scratchpads, LUT segments); windows as captured")
        else:
            entry["windows"] = windows
            entry.update(rid_lut_entries=32, doorbells=16, scratchpads=8, message_registers=4)
            self.note(f"{name}: requester-ID LUT entries, doorbells, scratchpads and message registers are not in "
                      "the capture; assumed 32/16/8/4 (PLX NT-port conventions)")
        bar0 = [b for b in f0.bars if b.index == 0 and b.size]
        ctrl = (prof or {}).get("control_bar_size", 0x10000)
        if bar0 and bar0[0].size != ctrl:
            self.note(f"{name}: its BAR0 is {fmt_size(bar0[0].size)}; the model's NTB register BAR is "
                      f"{fmt_size(ctrl)}")
        for f in group[1:]:
            self.skip(f, f"a further function of NTB {f0.bdf}: devlend models an NTB as one function")
        self.note(f"{name}: no cable peer in this capture; add the other host and an NTB cable link to use it")
        self.ntbs.append(entry)
        self.result.origins[f"ntbs[{idx}]"] = f0.loc
        self.placed.add(f0.key)
        self.result.components[name] = [f"{f0.bdf}  {f0.what}"]
        self.link(port_ref, name, f0, port, name)
        return True

    def leftovers(self) -> None:
        for key in sorted(self.fns):
            fn = self.fns[key]
            if key in self.placed or key in self.skipped:
                continue
            if key in self.vf_of:
                pf = self.vf_of[key]
                self.skip(fn, f"an SR-IOV VF of {_bdf(pf)}, which is not imported")
            elif key in self.orphan_vfs:
                self.skip(fn, "an SR-IOV virtual function whose physical function is not in the capture")
            elif fn.stray:
                self.skip(fn, f"on bus {key[1]:02x}, behind {_bdf(fn.parent)} but not on its secondary bus "
                              "(a hidden or misconfigured bridge)")
            elif fn.parent is None:
                if fn.is_bridge:
                    self.skip(fn, f"a bridge on root bus {key[1]:02x} with nothing behind it and no PCIe Root Port "
                                  "capability")
                else:
                    self.skip(fn, f"integrated on root bus {key[1]:02x} (chipset or uncore), not below a root port; "
                                  "devlend attaches every endpoint below a root port")
            else:
                self.skip(fn, "not reachable from a root port")

    def finish(self) -> ImportResult:
        iommu = any(f.iommu for f in self.fns.values())
        if any(f.caps_hidden for f in self.fns.values()):
            self.note("some capabilities were not shown ('<access denied>'): run lspci as root for link speeds, "
                      "MSI-X and SR-IOV")
        ram = self.ram
        if ram is None:
            ram = _DEFAULT_RAM
            self.note(f"RAM size is not in the capture; assumed {fmt_size(ram)} (give --ram)")
        if iommu:
            self.note("the capture shows IOMMU groups, so the host's IOMMU is on")
        host = {"name": self.host, "cpu": self.cpu, "ram": ram, "iommu": iommu, "root_ports": self.root_ports}
        desc: dict[str, Any] = {"name": self.host,
                                "description": f"Imported from a capture of {self.host}'s PCIe hierarchy",
                                "hosts": [host]}
        for key, val in (("switches", self.switches), ("devices", self.devices), ("ntbs", self.ntbs),
                         ("links", self.links)):
            if val:
                desc[key] = val
        self.result.description = desc
        self.result.skipped = [self.skipped[k] for k in sorted(self.skipped)]
        return self.result


# ---------------------------------------------------------------------------------------------
# The CLI's entry point

def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise TopologyError("no such file", file=path) from None
    except IsADirectoryError:
        raise TopologyError("a directory: expected a file with lspci output", file=path) from None
    except OSError as e:
        raise TopologyError(f"cannot read: {e.strerror}", file=path) from None
    return decode_text(data, path)


def main_import(tree: Optional[str], verbose: Optional[str], sysfs: Optional[str], host: str, cpu: str,
                ram: Optional[str], output: Optional[str]) -> str:
    """Import and return the YAML text; write it to ``output`` too when given (see the module doc)."""
    ram_bytes = None
    if ram is not None:
        try:
            ram_bytes = parse_size(ram)
        except ValueError as e:
            raise TopologyError(str(e), field="hosts[0].ram") from None
    if sysfs:
        tree_text = _read_text(tree) if tree else None
        res = parse_sysfs(sysfs, host_name=host, cpu=cpu, ram=ram_bytes, tree_text=tree_text, tree_file=tree or "<tree>")
    else:
        if not tree:
            raise TopologyError("need the 'lspci -tvnn' output (the tree) and the 'lspci -vvv' output, "
                                "or a saved sysfs directory")
        if not verbose:
            raise TopologyError("need the 'lspci -vvv' output beside the tree (or a saved sysfs directory)", file=tree)
        res = parse_lspci(_read_text(tree), _read_text(verbose), host_name=host, cpu=cpu, ram=ram_bytes,
                          tree_file=tree, verbose_file=verbose)
    text = res.to_yaml()
    if output:
        try:
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as e:
            raise TopologyError(f"cannot write: {e.strerror}", file=output) from None
    return text
