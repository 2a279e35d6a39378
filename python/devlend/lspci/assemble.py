"""From PCI functions to the topology schema: hosts, switches, devices, NTBs, links."""

from __future__ import annotations

import functools
from dataclasses import field
from typing import Any, Optional

from ..errors import TopologyError
from ..sizes import fmt_size
from .paravirt import paravirtual
from .profiles import hardware, profile_of, unprofiled
from .common import ImportResult, Key, Loc, Skipped, _DEFAULT_LINK, _DEFAULT_RAM, _Fn, _GEN_OF_SPEED, _NAME_RE, _WIDTHS, _bdf, _check_size


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


def _params() -> dict:
    """The hardware parameter file, when the core and tomllib are available (profile checks are a bonus)."""
    try:
        return hardware()
    except (ImportError, AttributeError, ValueError):
        return {}


def _modelled() -> tuple[str, ...]:
    """The kinds with a device model: the core's device registry, less "generic"."""
    from .. import _core
    return tuple(k for k in _core.device_kinds() if k != "generic")


@functools.cache
def _kind_classes() -> list[tuple[str, list[str], list[str]]]:
    """(kind, class-code hex prefixes, lower-case class names) of each kind the import takes by
    class: params/hardware.toml's ``[device_kind.KIND]`` ``import_classes`` and ``import_class_names``."""
    return [(kind, k.get("import_classes", []), [n.lower() for n in k.get("import_class_names", [])])
            for kind, k in hardware()["device_kind"].items()]


def _kind(fn: _Fn) -> str:
    """The kind of a function by its class (code, or name where the capture shows no code): a
    device kind whose import classes hold it, else an NTB adapter or a generic device."""
    cc = fn.class_code
    if cc is not None:
        code = f"{cc:04x}"
        kind = next((kind for kind, codes, _ in _kind_classes() if any(code.startswith(c) for c in codes)), None)
        if kind is not None:
            return kind
        if cc == 0x0680 and not fn.is_bridge:
            return "ntb"
        return "ntb" if "non-transparent" in fn.name.lower() else "generic"
    t = fn.class_text.lower()
    kind = next((kind for kind, _, names in _kind_classes() if t in names), None)
    if kind is not None:
        return kind
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
        prefix = _PREFIX.get(kind, kind)
        n = f"{prefix}-{b:02x}-{dv:02x}" if d == 0 else f"{prefix}-{d:04x}-{b:02x}-{dv:02x}"
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

    def integrated(self, roots: list[_Fn]) -> list[list[_Fn]]:
        """Devices on a root bus whose first function is of a kind devlend models (GPU, NVMe, NIC):
        a VM's flat bus, or a server's integrated devices. Each (its functions, grouped by device
        number) gets a root port of its own."""
        groups: dict[tuple, list[_Fn]] = {}
        for f in roots:
            if not f.is_bridge and f.key not in self.vf_of and f.key not in self.orphan_vfs:
                groups.setdefault(f.key[:3], []).append(f)
        return [g for g in groups.values() if _kind(g[0]) in _modelled()]

    def run(self) -> ImportResult:
        self.find_vfs()
        roots = [f for f in self.kids(None)]
        rps = [f for f in roots if self.is_root_port(f)]
        flat = self.integrated(roots)
        if not rps and not flat:
            raise self.first.error("no root port found: no bridge on a root bus has devices behind it or a PCIe Root "
                                   "Port capability, and no GPU, NVMe drive or NIC sits on a root bus, so there is "
                                   "nothing devlend can attach")
        if len(rps) > 31:
            empty = [f for f in rps if not self.kids(f.key)]
            for f in empty[:len(rps) - 31]:
                self.skip(f, "an empty root port left out: devlend models at most 31 root ports")
            rps = [f for f in rps if f.key not in self.skipped]
            if len(rps) > 31:
                raise rps[31].loc.error("more than 31 root ports with devices behind them: devlend models at most 31")
        if len(rps) + len(flat) > 31:
            raise flat[31 - len(rps)][0].loc.error("more than 31 root ports and devices on root buses: devlend models at most 31 root ports")
        self.placed.update(f.key for f in rps)
        self.root_ports = len(rps) + len(flat)
        work = [(f"{self.host}.rp{i}", rp) for i, rp in enumerate(rps)]
        for i, rp in enumerate(rps):
            self.result.components[f"{self.host}.rp{i}"] = [f"{rp.bdf}  {rp.what}"]
        work.reverse()
        while work:
            port_ref, port = work.pop()
            work.extend(reversed(self.attach(port_ref, port)))
        for i, group in enumerate(flat, start=len(rps)):
            port_ref = f"{self.host}.rp{i}"
            self.result.components[port_ref] = [f"(root port modelled for {group[0].bdf}, which sits on the root bus)"]
            self.note(f"{group[0].bdf} sits on root bus {group[0].key[1]:02x} (a VM's flat bus, or an integrated "
                      f"device): devlend attaches endpoints below root ports, so it gets {port_ref} of its own")
            self.endpoint(port_ref, group[0], group)
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
        profile = profile_of(f0)
        if profile is None and (how := unprofiled(kind, name)) is not None:
            self.warn_unprofiled(f0, name, how)
        if profile is not None:
            self.profiled(port_ref, port, group, name, profile)
            return
        funcs = []
        for i, fn in enumerate(group):
            funcs.append(self.function(fn, f"{path}.functions[{i}]", name, i, group))
        if (pv := paravirtual(f0)) is not None:
            self.note(f"{name}: {f0.bdf} is a paravirtual function ({pv}): imported as a {kind} device with the "
                      "BARs the capture shows; devlend has no model of the hypervisor behind it")
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

    def warn_unprofiled(self, f0: _Fn, name: str, how: str) -> None:
        """A device of a modelled kind whose IDs devlend does not know: imported with the BARs the
        capture shows, and driven as its kind's table says (``how``: a drive with the default
        profile's media, a GPU with its BAR 1 as its memory), so that it can be borrowed and do
        DMA; said as a warning."""
        ids = f"[{f0.ids[0]:04x}:{f0.ids[1]:04x}] " if f0.ids else ""
        text = (f"{name}: {f0.bdf} {ids}{f0.what} has no known profile: imported with the BARs the capture shows; "
                f"it can be borrowed and do DMA, driven with {how}")
        self.result.warnings.append(text)
        self.note(text)

    def profiled(self, port_ref: str, port: _Fn, group: list[_Fn], name: str, profile: str) -> None:
        """A device whose vendor and device ID devlend knows: its profile (BARs, MSI-X, kind and
        the device model's parameters: an imported drive is driven by the NVMe driver)."""
        f0 = group[0]
        path = f"devices[{len(self.devices)}]"
        self.devices.append({"name": name, "profile": profile})
        self.result.origins[path] = f0.loc
        self.placed.update(f.key for f in group)
        self.result.components[name] = [f"{f.bdf}  {f.what}" for f in group]
        vendor, device = f0.ids or (0, 0)
        others = f" (function{'s' if len(group) > 2 else ''} {', '.join(f.bdf for f in group[1:])} of the same card not modelled)" if len(group) > 1 else ""
        self.note(f"{name}: [{vendor:04x}:{device:04x}] is profile {profile}: its BARs, MSI-X and device model come "
                  f"from params/hardware.toml, not from the capture{others}")
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
                elif (pv := paravirtual(fn)) is not None:
                    self.skip(fn, f"a paravirtual function ({pv}) on root bus {key[1]:02x}: the hypervisor's device, "
                                  "not PCIe hardware devlend models (GPUs, NVMe drives and NICs on a root bus are imported)")
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


