"""The saved ``/sys/bus/pci/devices`` importer (format in the package docs)."""

from __future__ import annotations

from typing import Optional
import os
import re
import stat

from ..errors import TopologyError
from .common import IORESOURCE_MEM, IORESOURCE_MEM_64, IORESOURCE_PREFETCH, ImportResult, Key, Loc, _Bar, _CONFIG_SPEEDS, _CONTROL_RE, _Fn, _Link, _PCIE_TYPES, _Sriov, _bdf, _check_size, _use_slots, decode_text
from .tree import _TreeParser
from .verbose import _float
from .assemble import _Assembler, _check_host


# ---------------------------------------------------------------------------------------------
# sysfs

_FULL_BDF = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_SPEED_RE = re.compile(r"^([0-9.]+) ?GT/s")


def _key_of(text: str) -> Optional[Key]:
    m = _FULL_BDF.match(text)
    if not m or int(m.group(3), 16) > 0x1f:
        return None
    return (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4)))


class _Dir:
    """One device directory, listed once: an attribute that is not there costs no system call, and one
    that is costs an open, a read and a close (no stat: the listing's file types say what each entry is)."""

    __slots__ = ("path", "entries", "_prefix")

    def __init__(self, path: str):
        self.path = path
        self._prefix = path if path.endswith(os.sep) else path + os.sep
        try:
            with os.scandir(path) as it:
                self.entries = {e.name: e for e in it}
        except OSError as e:
            raise TopologyError(f"cannot read: {e.strerror or e}", file=path) from None

    def join(self, name: str) -> str:
        return self._prefix + name  # os.path.join for the plain attribute names used here, without its cost

    def regular(self, name: str) -> bool:
        """Whether ``name`` is a regular file; raises for anything else that exists (a directory, a FIFO,
        a device node: sysfs attributes are regular files, and opening a FIFO would wait forever)."""
        e = self.entries.get(name)
        if e is None:
            return False
        try:
            if e.is_file():  # follows a symlink (one stat); a plain entry is answered by its listed type
                return True
            mode = e.stat().st_mode
        except FileNotFoundError:  # a dangling symlink, or removed since the listing
            return False
        except OSError as err:
            raise TopologyError(f"cannot read: {err.strerror or err}", file=self.join(name)) from None
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        raise TopologyError(f"{kind}: expected a sysfs attribute (a regular file)", file=self.join(name))

    def read(self, name: str, limit: int) -> bytes:
        """Up to ``limit`` bytes of a file that `regular` accepted, in one read: a regular file (and a live
        sysfs attribute) returns all it has up to the count asked for, so a short read is its end.
        O_NONBLOCK: never waits on a FIFO that replaced the file since the listing."""
        p = self.join(name)
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                return os.read(fd, limit)
            finally:
                os.close(fd)
        except OSError as e:
            raise TopologyError(f"cannot read: {e.strerror or e}", file=p) from None


def _read_attr(d: _Dir, name: str, required: bool = False) -> Optional[str]:
    if not d.regular(name):
        if required:
            raise TopologyError(f"missing: every device directory needs '{name}'", file=d.join(name)) from None
        return None
    p = d.join(name)
    text = decode_text(d.read(name, 1 << 20), p)
    m = _CONTROL_RE.search(text)
    if m:
        raise TopologyError(f"unexpected control character U+{ord(m.group()):04X}: expected text", file=p,
                            line=text.count("\n", 0, m.start()) + 1)
    return text


_HEX_RE = re.compile(r"0x[0-9a-fA-F]{1,8}")
_DEC_RE = re.compile(r"\d{1,6}")


def _int_attr(d: _Dir, name: str, required: bool = False, hexa: bool = False) -> Optional[int]:
    text = _read_attr(d, name, required)
    if text is None:
        return None
    lines = text.strip().split("\n")
    m = (_HEX_RE if hexa else _DEC_RE).fullmatch(lines[0].strip()) if len(lines) == 1 else None
    if not m:
        raise TopologyError(f"expected {'a hex number such as 0x10de' if hexa else 'a decimal number'}",
                            file=d.join(name), line=1)
    return int(m.group(), 16 if hexa else 10)


def _parse_config(data: bytes, fn: _Fn, has_sysfs_link: bool) -> None:
    """The parts of config space we use: PCIe port type, link capability and status, MSI-X size."""
    def u16(o: int) -> int:
        return data[o] | data[o + 1] << 8

    if len(data) < 64:
        return
    if data[0x0e] & 0x7f == 1:  # type 1 header: primary, secondary, subordinate bus at 0x18-0x1a
        fn.is_bridge = True
        fn.bus_numbers = (data[0x18], data[0x19], data[0x1a])
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


def _sysfs_link(d: _Dir, speed_name: str, width_name: str) -> Optional[_Link]:
    speed_text = _read_attr(d, speed_name)
    width = _int_attr(d, width_name)
    if speed_text is None and width is None:
        return None
    speed = None
    if speed_text is not None:
        s = speed_text.strip()
        m = _SPEED_RE.match(s)
        if m:
            speed = _float(m.group(1), Loc(d.join(speed_name), 1))
        elif not s.lower().startswith("unknown"):
            raise TopologyError("expected a link speed such as '8.0 GT/s PCIe'", file=d.join(speed_name), line=1)
    if width is not None and width > 32:
        raise TopologyError(f"link width {width}: PCIe links are at most x32", file=d.join(width_name), line=1)
    return _Link(speed, width or None, Loc(d.join(speed_name if speed_text is not None else width_name), 1))


_UNUSED_RESOURCE = "0x0000000000000000 0x0000000000000000 0x0000000000000000"
_RESOURCE_LINE = re.compile(r"\s*(0[xX][0-9a-fA-F]+)\s+(0[xX][0-9a-fA-F]+)\s+(0[xX][0-9a-fA-F]+)\s*")


def _parse_resource(d: _Dir, fn: _Fn, total_vfs: Optional[int]) -> list[_Bar]:
    """BARs from the resource file; returns the SR-IOV VF BAR slots (total sizes divided by Total VFs)."""
    rpath = d.join("resource")
    text = _read_attr(d, "resource", required=True)
    used, vf_used, slots = set(), set(), []
    for i, line in enumerate(text.split("\n")):
        if line == _UNUSED_RESOURCE:  # most lines: an unused slot, skipped below anyway
            continue
        m = _RESOURCE_LINE.fullmatch(line)
        if m is None:
            if not line.strip():
                continue
            raise Loc(rpath, i + 1).error("expected three hex numbers 'START END FLAGS' such as "
                                          "'0x00000000fa000000 0x00000000faffffff 0x0000000000040200'")
        start, end, flags = int(m[1], 16), int(m[2], 16), int(m[3], 16)
        if i == 6 or i >= 13 or not flags & IORESOURCE_MEM or start == end == 0:
            continue
        loc = Loc(rpath, i + 1)
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


def _check_bus(key: Key, pkey: Key, parent: _Fn, loc: Loc) -> None:
    """A function sits in its parent bridge's domain, on a bus in the bridge's secondary-subordinate range."""
    if pkey[0] != key[0]:
        raise loc.error(f"parent {_bdf(pkey)} is in another PCI domain than {_bdf(key)}: "
                        "a bridge forwards only within its domain")
    buses = parent.bus_numbers
    if buses is not None and not buses[1] <= key[1] <= buses[2]:
        raise loc.error(f"{_bdf(key)} is on bus {key[1]:02x}, outside bridge {_bdf(pkey)}'s bus range "
                        f"{buses[1]:02x}-{buses[2]:02x} (secondary-subordinate in its config space)")


def _read_function(d: _Dir, key: Key, link_target: Optional[str], tree, parent_src: dict, physfn: dict) -> _Fn:
    """One function's directory: IDs, links, config space, SR-IOV counts, BARs, parent and PF."""
    fn = _Fn(key, Loc(d.path))
    cls = _int_attr(d, "class", required=True, hexa=True)
    fn.class_code = cls >> 8
    fn.class_text = f"class {cls >> 8:04x}"
    vendor = _int_attr(d, "vendor", required=True, hexa=True)
    device = _int_attr(d, "device", required=True, hexa=True)
    fn.ids = (vendor, device)
    fn.name = f"[{vendor:04x}:{device:04x}]"
    fn.is_bridge = fn.class_code in (0x0604, 0x0609)
    fn.lnksta = _sysfs_link(d, "current_link_speed", "current_link_width")
    fn.lnkcap = _sysfs_link(d, "max_link_speed", "max_link_width")
    if d.regular("config"):
        _parse_config(d.read("config", 4096), fn, fn.lnksta is not None)
        if fn.bus_numbers is not None:
            fn.bus_loc = Loc(d.join("config"))
    total = _int_attr(d, "sriov_totalvfs")
    if total is not None:
        num = _int_attr(d, "sriov_numvfs") or 0
        sloc = Loc(d.join("sriov_numvfs"), 1)
        if num > total:
            raise sloc.error(f"sriov_numvfs={num} is more than sriov_totalvfs={total}")
        if num > 255:
            raise sloc.error(f"sriov_numvfs={num}: devlend models at most 255 VFs per function")
        fn.sriov = _Sriov(Loc(d.join("sriov_totalvfs"), 1), total=total, num=num, counts_loc=sloc,
                          offset=_int_attr(d, "sriov_offset"), stride=_int_attr(d, "sriov_stride"))
    slots = _parse_resource(d, fn, total)
    if fn.sriov is not None:
        fn.sriov.slots = slots
    fn.iommu = "iommu_group" in d.entries
    ptext = _read_attr(d, "parent")
    if ptext is not None:
        t = ptext.strip()
        pkey = None if t.lower() in ("", "none", "root") else _key_of(t)
        if t.lower() not in ("", "none", "root") and pkey is None:
            raise TopologyError("expected the parent bridge's full address such as 0000:00:02.0, "
                                "or 'none' for a function on a root bus", file=d.join("parent"), line=1)
        parent_src[key] = (pkey, Loc(d.join("parent"), 1))
    elif link_target is not None:
        comps = [c for c in link_target.replace("\\", "/").split("/") if c]
        pkey = _key_of(comps[-2]) if len(comps) >= 2 else None
        parent_src[key] = (pkey, Loc(d.path))
    elif tree is not None and key in tree.devs:
        parent_src[key] = (tree.devs[key].parent, tree.devs[key].loc)
        fn.stray = tree.devs[key].stray
    else:
        parent_src[key] = (None, Loc(d.path))
    pf = d.entries.get("physfn")
    if pf is not None and pf.is_symlink():
        pk = _key_of(os.path.basename(os.readlink(pf.path).rstrip("/")))
        if pk is not None:
            physfn[key] = (pk, Loc(pf.path))
    else:
        ftext = _read_attr(d, "physfn")
        if ftext is not None:
            pk = _key_of(ftext.strip())
            if pk is None:
                raise TopologyError("expected the PF's full address such as 0000:06:00.0", file=d.join("physfn"), line=1)
            physfn[key] = (pk, Loc(d.join("physfn"), 1))
    return fn


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
    named: dict[Key, str] = {}
    for entry in sorted(_Dir(root).entries.values(), key=lambda e: e.name):
        key = _key_of(entry.name)
        if key is None:
            ignored.append(entry.name)
            continue
        if key in named:
            raise TopologyError(f"the same PCI address as '{named[key]}' ({_bdf(key)}): every function appears once",
                                file=entry.path)
        named[key] = entry.name
        link_target = os.readlink(entry.path) if entry.is_symlink() else None
        if not entry.is_dir():
            if link_target is not None:
                raise TopologyError(f"a symlink to '{link_target}', which does not resolve here: save sysfs as "
                                    "directories with a 'parent' file each (see devlend.lspci)", file=entry.path)
            ignored.append(entry.name)
            continue
        fns[key] = _read_function(_Dir(entry.path), key, link_target, tree, parent_src, physfn)
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
    for key, (pkey, loc) in parent_src.items():
        if pkey is not None:
            _check_bus(key, pkey, fns[pkey], loc)
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


