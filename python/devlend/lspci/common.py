"""Shared types of the importers: locations, results, the per-function intermediate form, text helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional
import re
import yaml

from ..errors import TopologyError
from ..sizes import fmt_size

_DUMPER = yaml.CSafeDumper if yaml.__with_libyaml__ else yaml.SafeDumper  # libyaml: the same text, faster


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
    # What a user should see on the terminal too (also among the notes): a default profile used.
    warnings: list[str] = field(default_factory=list)
    components: dict[str, list[str]] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    origins: dict[str, Loc] = field(default_factory=dict, repr=False)

    def topology(self):
        from ..topology import from_dict
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
        body = yaml.dump(_humanize(self.description), Dumper=_DUMPER, sort_keys=False, default_flow_style=None,
                         width=120, allow_unicode=True)
        return "\n".join(head) + "\n" + body


def _printable(s: str) -> str:
    return s if s.isprintable() else "".join(c if c.isprintable() else "?" for c in s)


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

