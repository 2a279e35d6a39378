"""The device pool: Device Lending as Dolphin's ``smartio_tool`` presents it, on any topology.

    pool = devlend.Pool("topologies/three-host-cluster.yaml")
    pool.connect("lender-a", "borrower")         # lender-a lets borrower see its devices
    pool.add("gpu0"); pool.available("gpu0")     # into the pool, then available for borrowing
    pool.borrow("borrower", "gpu0", dma_window="64 MiB")   # by name or fabric device ID ("80000")
    pool.list(); pool.show("gpu0")               # the pool; one device's lend (NTBs, window, BARs)
    pool.return_device("gpu0")

The pool keeps its state between calls: one fabric, one kernel per host, the lending agents
(devlend-host's ``Pool`` over a ``Cluster``). ``borrow`` is Device Lending's borrow (000 §4): the
device is hot-added on the borrower, its BARs mapped through the borrower's NTB, a DMA window
opened through the lender's NTB onto the borrower's IOMMU, MSI-X through the NTB when its driver
asks; ``return_device`` undoes all of it. A failed borrow leaves nothing mapped (``idle``).

Fabric device IDs are ``NODE << 16 | k`` in hex: NODE = 4 x (host index + 1) and k the device's place
among its host's lendable functions in the topology (NTB adapters have none).

A topology's ``setup`` may end with ``{op: borrow, borrower: HOST, device: NAME, dma_window: SIZE}``
and ``{op: return, device: NAME}`` operations: the pool applies them in order when it opens the
topology (a borrow does the lender's connect, add and available first where needed).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Optional, Union

from . import _core
from .errors import U64_END, DevlendError, TopologyError
from .sizes import parse_size
from .topology import Borrow, Topology, load

if TYPE_CHECKING:
    import pandas as pd

# Fault kinds and what each names as its target (devlend-host's `fault` module).
FAULT_KINDS: dict[str, str] = dict(_core.fault_kinds())

# What the lender does with a device between two borrowers (devlend-host's `hygiene` module).
HYGIENE_POLICIES: dict[str, str] = dict(_core.hygiene_policies())

NO_SCRUB_NOTE = ("hygiene policy 'none': returned devices are not cleared, so each borrower reads what the last one "
                 "left in the device's memory and registers (as real Device Lending may leak)")


class HygieneWarning(UserWarning):
    """Hygiene policy "none" was chosen: data leaks between borrowers (on purpose, for studies)."""


def check_hygiene(hygiene, where: str = "hygiene") -> str:
    """`hygiene` as a policy name, or a PoolError naming the field; warns when it is "none"."""
    if not isinstance(hygiene, str) or hygiene not in HYGIENE_POLICIES:
        make = PoolValueError if isinstance(hygiene, str) else PoolTypeError
        raise make(f"{where}: expected one of {', '.join(HYGIENE_POLICIES)}, got {hygiene!r}", where)
    if hygiene == "none":
        import warnings
        warnings.warn(NO_SCRUB_NOTE, HygieneWarning, stacklevel=3)
    return hygiene

LIST_COLUMNS = ["fdid", "device", "lender", "bdf", "profile", "state", "borrower", "visible_to"]

# The field of a borrow/return operation each kind of refusal concerns.
_FIELD = {"no-such-host": "borrower", "not-connected": "borrower", "unreachable": "borrower", "window-too-large": "dma_window",
          "not-borrowed": "device"}


class PoolError(DevlendError):
    """A pool verb that cannot be carried out. ``kind``: no-such-host, no-such-device, not-lendable,
    already-in-pool, not-in-pool, unavailable, not-connected, unreachable, borrowed, not-borrowed,
    window-too-large, in-use, ..."""

    def __init__(self, message: str, kind: str):
        self.kind = kind
        super().__init__(message)


class PoolValueError(PoolError, ValueError):
    """A pool verb's argument outside its range (a DMA window past 2^64-1 bytes, negative): ``field`` names it."""

    def __init__(self, message: str, field: "str | None"):
        self.field = field
        super().__init__(message, "invalid")


class PoolTypeError(PoolError, TypeError):
    """A pool verb's argument of the wrong type (a number where a name goes): ``field`` names it."""

    def __init__(self, message: str, field: "str | None"):
        self.field = field
        super().__init__(message, "invalid")


def _call(fn, *a):
    try:
        return fn(*a)
    except _core.PoolError as e:
        kind, message = e.args
        raise PoolError(message, kind) from None
    except TypeError as e:  # an argument the core cannot take; PyO3's message names it ("argument 'device': ...")
        raise PoolTypeError(str(e), None) from None
    except (OverflowError, ValueError) as e:
        raise PoolValueError(str(e), None) from None


def _window(dma_window) -> "Optional[int]":
    """A borrow's DMA window size (bytes or a size string), checked: else a PoolError naming the field."""
    if dma_window is None:
        return None
    if isinstance(dma_window, bool) or not isinstance(dma_window, (int, str)):
        raise PoolTypeError(f"dma_window={dma_window!r}: expected a size such as 4096 or '64 MiB'", "dma_window")
    try:
        win = parse_size(dma_window)
    except ValueError as e:
        raise PoolValueError(f"dma_window: {e}", "dma_window") from None
    if win >= U64_END:
        raise PoolValueError(f"dma_window={dma_window!r}: expected a size below 2^64 bytes", "dma_window")
    return win


def fdid_hex(fdid: int) -> str:
    return f"{fdid:x}"


class Pool:
    """Lenders, borrowers and a pool of devices on one topology, kept between calls."""

    def __init__(self, topology: "Union[str, os.PathLike, Topology]", hygiene: str = "scrub"):
        """`hygiene`: "scrub" (default: every byte and register of a returned device cleared, timed
        as the device does it, before its next borrower) or "none" (nothing cleared; warns)."""
        self.hygiene = check_hygiene(hygiene)
        topo = topology if isinstance(topology, Topology) else load(topology)
        self.topology = topo
        self.unreached: list[dict] = []
        try:
            self._p = _call(_core.Pool, topo.fabric_json(), hygiene)
        except _core.SpecError as e:
            pointer, message = e.args
            from .yamlpos import pointer_to_path
            raise topo._error(pointer_to_path(pointer), message) from None
        for i, op in topo.lending_ops():
            try:
                if isinstance(op, Borrow):
                    _call(self._p.offer_and_borrow, op.borrower, op.device, op.dma_window)
                else:
                    _call(self._p.return_device, op.device, op.borrower)
            except PoolError as e:
                field = _FIELD.get(e.kind, "device")
                if field == "dma_window" and getattr(op, "dma_window", None) is None:
                    field = "device"
                raise topo._error(("setup", i, field), str(e)) from None

    # ----- lending side -----
    def connect(self, lender: str, borrower: str) -> "Pool":
        """Let `borrower` see and borrow `lender`'s devices (an NTB must join the two hosts)."""
        _call(self._p.connect, lender, borrower)
        return self

    def add(self, device: str) -> "Pool":
        """Add a device to the pool (unavailable until `available`)."""
        _call(self._p.add, device)
        return self

    def remove(self, device: str) -> "Pool":
        _call(self._p.remove, device)
        return self

    def available(self, device: str) -> "Pool":
        _call(self._p.available, device)
        return self

    def unavailable(self, device: str) -> "Pool":
        _call(self._p.unavailable, device)
        return self

    # ----- borrow side -----
    def borrow(self, borrower: str, device: str, dma_window: "Union[int, str, None]" = None) -> "Pool":
        """Borrow an available device (name or fabric device ID) onto `borrower`; `dma_window`: the
        size of the DMA window the lender opens (default: a whole NTB memory window)."""
        _call(self._p.borrow, borrower, device, _window(dma_window))
        return self

    def return_device(self, device: str, borrower: Optional[str] = None) -> "Pool":
        """Return a borrowed device; refused while the borrower's driver still holds it. The return
        completes on each side whatever the NTB link does; ``unreached`` then lists the lends whose
        link was down (dicts: device, lender, borrower, ntb), empty after an orderly return."""
        self.unreached = [dict(zip(("device", "lender", "borrower", "ntb"), u)) for u in _call(self._p.return_device, device, borrower)]
        return self

    # ----- inspection -----
    def scrub(self, device: str) -> dict:
        """`device`'s last scrub ({"how": "fill" or "reset", "bytes", "ns"}, or None under "last") and
        whether one is still "pending" (its lender could not reach it when its lend ended)."""
        last, pending = _call(self._p.scrub, device)
        return {"last": None if last is None else dict(zip(("how", "bytes", "ns"), (last[0], last[1], last[2] / 1000))), "pending": pending}

    def list(self) -> "pd.DataFrame":
        """Every lendable device: fabric device ID, lender, state, borrower, hosts it is visible to."""
        import pandas as pd
        rows = [dict(zip(LIST_COLUMNS, (fdid_hex(e[0]), *e[1:7], ", ".join(e[7])))) for e in self._p.entries()]
        return pd.DataFrame(rows, columns=LIST_COLUMNS)

    def show(self, device: str) -> dict:
        """One device: its pool entry and, when borrowed, its lend (NTBs, DMA window, BARs as the
        borrower sees them, the driver's DMA mappings and interrupt vectors)."""
        e = _call(self._p.entry, device)
        out = dict(zip(LIST_COLUMNS, (fdid_hex(e[0]), *e[1:8])))
        lend = _call(self._p.lend, device)
        if lend:
            ln, bn, waddr, wsize, wiova, bars, maps, irqs = lend
            out["lend"] = {"lender_ntb": ln, "borrower_ntb": bn, "dma_window": {"lender_addr": waddr, "size": wsize, "borrower_iova": wiova},
                           "bars": [{"index": i, "size": s, "cpu_addr": a} for i, s, a in bars], "dma_maps": maps, "irq_vectors": irqs}
        return out

    @property
    def idle(self) -> bool:
        """Whether Device Lending holds nothing: no lend, window, LUT entry or IOMMU mapping."""
        return self._p.idle()

    def leftovers(self) -> list[str]:
        """What is programmed that no live lend owns (devlend-host's leftover checker): NTB
        translations, LUT entries, IOMMU context entries and mapped bytes, one message each."""
        return self._p.leftovers()

    def anomalies(self) -> list[str]:
        """Undo steps the fabric refused (empty unless devlend has a bug)."""
        return self._p.anomalies()

    # ----- faults and drivers (for tests and fault studies) -----
    def fault(self, kind: str, target: str) -> list[dict]:
        """Inject a fault now (kinds: ``FAULT_KINDS``): a cable pulled, a host crashed or rebooted,
        a device surprise-removed, a port down, a hung or poisoned device. Returns the lends it
        ended (dicts: device, lender, borrower, why); a device it touched is reset (FLR) before its
        next borrower, and refused with the reason if it cannot be."""
        return [dict(zip(("device", "lender", "borrower", "why"), e)) for e in _call(self._p.inject, kind, target)]

    def needs_reset(self) -> list[str]:
        """Devices a fault touched that have not been reset yet (they will be before their next borrow)."""
        return self._p.needs_reset()

    def link_down(self, ntb: str) -> "Pool":
        """Take an NTB's link (both ends) down: nothing crosses; returns still complete locally."""
        _call(self._p.link, ntb, False)
        return self

    def link_up(self, ntb: str) -> "Pool":
        _call(self._p.link, ntb, True)
        return self

    def dma_map(self, device: str, size: int) -> int:
        """The borrower's driver maps a new buffer of `size` bytes for a borrowed device; the bus address."""
        return _call(self._p.dma_map, device, size)

    def dma_unmap(self, device: str, dma: int, size: int) -> "Pool":
        _call(self._p.dma_unmap, device, dma, size)
        return self

    def programmed(self) -> dict:
        """What is programmed: per NTB the translations set and LUT entries, per host the IOMMU
        context entries and bytes mapped per domain."""
        ntbs, hosts = self._p.programmed()
        return {"ntbs": {n: {"translations": t, "lut": l} for n, t, l in ntbs},
                "iommus": [{"contexts": c, "mapped": dict(m)} for c, m in hosts]}

    def inventory(self) -> dict:
        """The fabric as it is programmed now (NTB translations, LUTs, IOMMU domains)."""
        return json.loads(self._p.inventory())


__all__ = ["FAULT_KINDS", "Pool", "PoolError", "TopologyError"]
