"""Shared by R1/R2 and the Gen3/Gen4 extension: the 003 testbed as JSON (setup dropped, the
scratchpad handshake programs the windows), links optionally re-rated, and the Rust sweep."""

from __future__ import annotations

import functools
from typing import Optional

from .. import _core
from . import overrides_key, shipped

KiB, MiB = 1 << 10, 1 << 20
SIZES = [64 << i for i in range(15)]            # 64 B .. 1 MiB (003 §3: buffers up to the 1 MB BAR)
QUICK_SIZES = [512, 1 * KiB, 2 * KiB, 4 * KiB, 64 * KiB, 1 * MiB]


def testbed_json(gen: int = 2, width: int = 8) -> str:
    """The 003 testbed with its links at Gen `gen` x`width`, with the current hardware-constant
    overrides (experiments.overrides)."""
    return _testbed_json(gen, width, overrides_key())


@functools.lru_cache(maxsize=64)
def _testbed_json(gen: int, width: int, _params: str) -> str:
    topo = shipped("pex8749-rdma.yaml")
    topo.setup = []
    for link in topo.links:
        link.gen, link.width = gen, width
    return topo.to_json()


def mbps(size: int, ps: int) -> float:
    return round(size / (ps * 1e-12) / 1e6, 1)


def sweep(methods: list[str], sizes: list[int], gen: int = 2, width: int = 8, mapping: str | None = None) -> dict:
    """{(method, size): MB/s} for host B putting into host A's buffer."""
    rows = _core.rdma_sweep(testbed_json(gen, width), methods, sizes, mapping)
    return {(m, s): mbps(s, ps) for m, s, ps, _ in rows}


def link_limit_mbps(gen: int, width: int) -> float:
    return round(_core.rdma_link_limit(testbed_json(gen, width)) / 1e6, 1)


def ntb_json(gen: Optional[int] = None, width: Optional[int] = None) -> str:
    """The topology the Linux NTB tools run on: the 003 testbed or the user's topology standing in
    for it (`--topology`), setup dropped (the tools program the windows they use), its links
    re-rated to Gen `gen` x`width` when given."""
    return _ntb_json(gen, width, overrides_key())


@functools.lru_cache(maxsize=64)
def _ntb_json(gen: Optional[int], width: Optional[int], _params: str) -> str:
    topo = shipped("pex8749-rdma.yaml")
    topo.setup = []
    if gen is not None:
        for link in topo.links:
            link.gen, link.width = gen, width
    return topo.to_json()


def ntb_perf(chunk_order: int, total_order: int, use_dma: bool, threads_count: int = 1, channels: Optional[int] = None,
             runner: str = "host-b", peer: str = "host-a", max_mw_size: Optional[int] = None) -> dict:
    """Linux ntb_perf from host `runner` into host `peer`'s window: MB/s (bytes per microsecond)."""
    copied, ps, link_ps, per = _core.rdma_ntb_perf(ntb_json(), runner, peer, chunk_order, total_order, use_dma,
                                                   threads_count, max_mw_size, channels)
    return {"copied": copied, "usecs": ps / 1e6, "MBps": mbps(copied, ps), "link_MBps": mbps(copied, link_ps),
            "threads": [mbps(c, p) for c, p in per]}


def ntb_pingpong(pings: int, init_db: int = 1, delay_ns: int = 0, gen: Optional[int] = None, width: Optional[int] = None,
                 a: str = "host-a", b: str = "host-b") -> dict:
    """Linux ntb_pingpong between host `a` (it rings first) and host `b`: counter, doorbell bits, round trip."""
    counter, bits, rtt, total, steps = _core.rdma_ntb_pingpong(ntb_json(gen, width), a, b, pings, init_db, delay_ns)
    return {"counter": counter, "bits": bits, "round_trip_ns": rtt / 1e3, "total_us": total / 1e6, "steps": steps}
