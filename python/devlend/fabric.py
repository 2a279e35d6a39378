"""The live fabric from Python: routes, functional memory and the Linux-named programming
interfaces (NTB, IOMMU, PCI config space). A thin layer over ``devlend._core.Fabric``: every
call goes straight to Rust; results come back as plain values or small dataclasses."""

from __future__ import annotations

import functools
import inspect
import json
from dataclasses import dataclass
from typing import Any, Optional, Union

from . import _core
from .errors import DmaFault, FabricError, FabricTypeError, argument_error

Addr = Union[int, str]


def _wrap(fn):
    @functools.wraps(fn)
    def inner(*a, **k):
        try:
            return fn(*a, **k)
        except _core.FabricError as e:
            raise FabricError(str(e)) from None
        except (OverflowError, TypeError) as e:
            try:
                bound = inspect.signature(fn).bind(*a, **k).arguments
            except TypeError:
                raise e from None  # a call with missing or extra arguments: Python's own error
            bound.pop("self", None)
            raise argument_error(inner.__name__, bound, e) from None
    return inner


@dataclass(frozen=True)
class Hop:
    kind: str          # start, link, forward, root, iommu, ntb, deliver
    component: str
    port: str
    host: str
    addr: int
    rid: str
    counts: bool       # whether it counts as a hop under devlend's rule (link, root entry, NTB crossing)

    def describe(self) -> str:
        what = {"start": "start at", "link": "link to", "forward": "forward to", "root": "enter root complex",
                "iommu": "IOMMU translates at", "ntb": "NTB crossing into", "deliver": "deliver at"}[self.kind]
        return f"{what} {self.component}.{self.port}"


@dataclass(frozen=True)
class Route:
    """A request's way through the fabric and, for reads, its completion's way back."""
    access: str
    hops: tuple[Hop, ...]
    outcome: dict
    completion: Optional["Route"]

    @classmethod
    def from_json(cls, d: dict) -> "Route":
        hops = tuple(Hop(h["kind"], h["component"], h["port"], h["host"], h["addr"], h["rid"], h["counts"]) for h in d["hops"])
        comp = cls.from_json(d["completion"]) if d.get("completion") else None
        return cls(d["access"], hops, d["outcome"], comp)

    @property
    def delivered(self) -> bool:
        return bool(self.outcome["delivered"])

    @property
    def target(self) -> Optional[dict]:
        return self.outcome.get("target")

    @property
    def failure(self) -> Optional[dict]:
        return self.outcome.get("failure")

    @property
    def hop_count(self) -> int:
        return sum(h.counts for h in self.hops)

    @property
    def roots(self) -> int:
        return sum(h.kind == "root" for h in self.hops)

    @property
    def ntb_crossings(self) -> int:
        return sum(h.kind == "ntb" for h in self.hops)

    @property
    def final(self) -> Hop:
        return self.hops[-1]

    def text(self) -> str:
        from .show import route_text
        return route_text(self)


@dataclass(frozen=True)
class Transfer:
    """A timed transfer: bytes, simulated picoseconds, and what the engine did."""
    nbytes: int
    time_ps: int
    tlp_hops: int
    events: int
    iotlb_misses: int
    resplit_requests: int

    @property
    def seconds(self) -> float:
        return self.time_ps * 1e-12

    @property
    def bandwidth(self) -> float:
        """Bytes per second."""
        return self.nbytes / self.seconds


class Fabric:
    """A built, enumerated fabric. Requesters are ``HOST:cpu`` or a function name (``gpu0``,
    ``gpu0.f1``, ``nic0.vf3``, optionally ``HOST:gpu0``). Addresses are integers or expressions
    (``gpu0.bar1+0x1000``, ``borrower.ram+0x100000``, ``ntb-a.mw0``)."""

    def __init__(self, core: "_core.Fabric", topology: Any = None):
        self._core = core
        self.topology = topology

    # ----- inspection -----
    def inventory(self) -> dict:
        return json.loads(self._core.inventory())

    @_wrap
    def resolve(self, addr: Addr) -> int:
        return self._core.resolve(addr)

    @_wrap
    def bdf(self, device: str) -> str:
        return self._core.bdf(device)

    # ----- routes and memory -----
    @_wrap
    def route(self, requester: str, addr: Addr, *, write: bool = True) -> Route:
        return Route.from_json(json.loads(self._core.route(requester, addr, write)))

    @_wrap
    def write(self, requester: str, addr: Addr, data: bytes) -> int:
        """Write as the requester would (CPU store or device DMA). Raises DmaFault if any TLP fails."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise FabricTypeError(f"write: data={data!r}: expected bytes", "data")
        n, fail = self._core.write(requester, addr, bytes(data))
        if fail is not None:
            raise DmaFault(json.loads(fail), n)
        return n

    @_wrap
    def read(self, requester: str, addr: Addr, length: int) -> bytes:
        data, fail = self._core.read(requester, addr, length)
        if fail is not None:
            raise DmaFault(json.loads(fail))
        return data

    @_wrap
    def dma(self, requester: str, addr: Addr, nbytes: int, *, write: bool = True, warm: bool = False,
            transfer: int = 0) -> "Transfer":
        """Time a DMA stream (posted writes of max payload, or reads of max read request size) on
        an idle fabric with the discrete-event engine; `warm` runs it once untimed first (steady
        state: warm IOTLB). Every page of the transfer must route (checked per IOMMU page, NTB
        window or segment, and target); otherwise raises DmaFault at the first that does not, with
        ``failure["transfer_addr"]`` the address there and ``delivered`` the bytes before it.
        `transfer`: the stream is back-to-back transfers of this many bytes (a device's DMA
        descriptors, pcie-bench's SZ), no TLP crossing a transfer's end; 0: one transfer."""
        timing, fail = self._core.dma(requester, addr, nbytes, write, warm, transfer)
        if fail is not None:
            failure = json.loads(fail)
            raise DmaFault(failure, failure["delivered"])
        return Transfer(nbytes, *timing)

    @_wrap
    def engine_ps(self, device: str, read_bytes: int = 0) -> tuple[int, int]:
        """`device`'s DMA engine times (issue before a request, completion after a read's data), in
        ps, as its profile and the topology's params make them: what its actor adds to `dma`'s path;
        with `read_bytes`, the completion time of a read of that size (the engine's intake of
        each 64-byte line after the first, `dma_read_line_ps`)."""
        return tuple(self._core.engine_ps(device, read_bytes))

    def machine(self) -> "Run":
        """A run of several workloads at once on one clock (see devlend.machine.Run), on a copy
        of this fabric as it is now."""
        from .machine import Run
        return Run(self)

    def events(self) -> list[dict]:
        """The most recent events (a ring of ``event_counts()["cap"]`` entries), oldest first."""
        return json.loads(self._core.events())

    def event_counts(self) -> dict:
        """Every event ever recorded, counted: ``total``, ``by_kind``, and how many the ring
        keeps (``kept``, at most ``cap``)."""
        return json.loads(self._core.event_counts())

    def memory_digest(self) -> int:
        """A digest of every byte in every RAM and BAR: equal digests mean no memory changed."""
        return self._core.memory_digest()

    def cache_stats(self) -> dict:
        hits, misses, size = self._core.cache_stats()
        return {"hits": hits, "misses": misses, "cached_routes": size}

    @property
    def trained_down(self) -> list[dict]:
        """Links the description asks faster than both ends support, trained down to what they
        do (the engine uses the trained speed): link, asked and trained (gen, width), message."""
        return [{"link": self._link_name(p), "asked": a, "trained": t, "message": m} for p, a, t, m in self._core.trained_down()]

    def _link_name(self, pointer: str) -> str:
        i = int(pointer.rsplit("/", 1)[1])
        link = self.topology.links[i] if self.topology is not None else None
        return f"{link.a} - {link.b}" if link is not None else pointer

    # ----- Linux NTB API (pidx: the peer index of an adapter with several peers, see peers()) -----
    peers = _wrap(lambda self, ntb: self._core.peers(ntb))
    mw_count = _wrap(lambda self, ntb, pidx=0: self._core.mw_count(ntb, pidx))
    peer_mw_count = _wrap(lambda self, ntb: self._core.peer_mw_count(ntb))
    mw_get_align = _wrap(lambda self, ntb, widx, pidx=0: self._core.mw_get_align(ntb, widx, pidx))
    mw_set_trans = _wrap(lambda self, ntb, widx, addr, size, pidx=0: self._core.mw_set_trans(ntb, widx, addr, size, pidx))
    lut_set_trans = _wrap(lambda self, ntb, widx, segment, addr, pidx=0: self._core.lut_set_trans(ntb, widx, segment, addr, pidx))
    mw_clear_trans = _wrap(lambda self, ntb, widx, pidx=0: self._core.mw_clear_trans(ntb, widx, pidx))
    peer_mw_get_addr = _wrap(lambda self, ntb, widx: self._core.peer_mw_get_addr(ntb, widx))
    rid_lut_add = _wrap(lambda self, ntb, requester: self._core.rid_lut_add(ntb, requester))
    peer_db_set = _wrap(lambda self, ntb, bits: self._core.peer_db_set(ntb, bits))
    db_read = _wrap(lambda self, ntb: self._core.db_read(ntb))
    db_clear = _wrap(lambda self, ntb, bits: self._core.db_clear(ntb, bits))
    db_set_mask = _wrap(lambda self, ntb, mask: self._core.db_set_mask(ntb, mask))
    db_irqs = _wrap(lambda self, ntb: self._core.db_irqs(ntb))
    spad_read = _wrap(lambda self, ntb, idx: self._core.spad_read(ntb, idx))
    spad_write = _wrap(lambda self, ntb, idx, val: self._core.spad_write(ntb, idx, val))
    peer_spad_read = _wrap(lambda self, ntb, idx: self._core.peer_spad_read(ntb, idx))
    peer_spad_write = _wrap(lambda self, ntb, idx, val: self._core.peer_spad_write(ntb, idx, val))
    peer_msg_write = _wrap(lambda self, ntb, idx, msg: self._core.peer_msg_write(ntb, idx, msg))
    msg_read = _wrap(lambda self, ntb, idx: self._core.msg_read(ntb, idx))

    # ----- IOMMU API -----
    iommu_domain_alloc = _wrap(lambda self, host, name: self._core.iommu_domain_alloc(host, name))
    iommu_attach = _wrap(lambda self, host, domain, device: self._core.iommu_attach(host, domain, device))
    iommu_detach = _wrap(lambda self, host, device: self._core.iommu_detach(host, device))
    iommu_unmap = _wrap(lambda self, host, domain, iova, size: self._core.iommu_unmap(host, domain, iova, size))

    @_wrap
    def iommu_map(self, host: str, domain: str, iova: Addr, addr: Addr, size: int, *, write: bool = True) -> None:
        self._core.iommu_map(host, domain, iova, addr, size, write)

    def iommu_faults(self, host: str) -> list[dict]:
        return json.loads(_wrap(self._core.iommu_faults)(host))

    # ----- interrupt remapping (VT-d ch. 5): on wherever the IOMMU is unless the host says
    # interrupt_remapping: false; a blocked MSI is an event of kind "failed" naming why -----
    interrupt_remapping = _wrap(lambda self, host: self._core.interrupt_remapping(host))
    interrupt_remapping_enable = _wrap(lambda self, host: self._core.interrupt_remapping_enable(host))

    # ----- PCI config space -----
    @_wrap
    def config_read(self, device: str, offset: int, size: int = 4) -> int:
        return self._core.config_read(device, offset, size)

    @_wrap
    def config_write(self, device: str, offset: int, value: int, size: int = 4) -> None:
        self._core.config_write(device, offset, value, size)

    set_bus_master = _wrap(lambda self, device, enable=True: self._core.set_bus_master(device, enable))


for _name, _attr in list(vars(Fabric).items()):  # the one-line API wrappers: errors name the method
    if getattr(_attr, "__name__", None) == "<lambda>":
        for _fn in (_attr, getattr(_attr, "__wrapped__", _attr)):
            _fn.__name__, _fn.__qualname__ = _name, f"Fabric.{_name}"
