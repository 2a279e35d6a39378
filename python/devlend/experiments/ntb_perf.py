"""ntb-perf: the Linux ntb_perf tool (drivers/ntb/test) on the 003 testbed, or between
the two ends of any NTB (`--topology`, with `--opt runner=HOST --opt peer=HOST`).

Host B writes into host A's 1 MB memory window through the PEX8749 NT port, as Linux's ntb_perf
does: each thread copies 2^total_order bytes in 2^chunk_order-byte pieces into its part of the
window, wrapping around, with CPU copies (`memcpy_toio` into a write-combining mapping) or with DMA
(one DMA channel per thread; 003's testbed used one). Rate = bytes copied / elapsed microseconds.
Every chunk runs on one machine: the workers' stores or channels share the links there. Options
(`--opt`), named as Linux's: use_dma (0, 1 or both), threads_count, chunk_order, total_order,
max_mw_size; runner and peer (hosts).
Beside it: the rate at which the busiest link direction serialised the CPU copies' TLPs (its busy
time on the machine). Nothing here is typed in: WC copies are bound by the fill buffers and
64-byte TLPs, a DMA channel by its read round trip.
"""

from __future__ import annotations

from typing import Callable, Optional

from .. import _core
from ..errors import DevlendError
from ._plot import Figure, axes, points
from . import ExperimentResult, Stand, register, stand_in_active
from ._rdma import KiB, MiB, ntb_perf

TOTAL_ORDER, QUICK_TOTAL_ORDER = 24, 22          # 16 MiB (4 MiB quick) per thread: every chunk runs on the machine
CHUNK_ORDERS = [12, 14, 16, 18, 19]              # 4 KiB .. 512 KiB (Linux's default chunk_order is 19)
QUICK_CHUNK_ORDERS = [12, 16, 19]
DMA_THREADS = [1, 2, 4]
OPTIONS = {"runner": "host-b", "peer": "host-a", "use_dma": "both", "threads_count": 0, "chunk_order": 0,
           "total_order": 0, "max_mw_size": 0}


def modes(use_dma: str, threads_count: int) -> list:
    """(name, use_dma, threads) of each column: CPU copies and DMA with 1, 2, 4 channels, or as asked."""
    want = use_dma.lower()
    if want not in ("both", "0", "1", "true", "false", "yes", "no"):
        raise DevlendError(f"option use_dma={use_dma!r}: expected 0, 1 or both")
    cpu = [("cpu", False, threads_count or 1)] if want in ("both", "0", "false", "no") else []
    dma = [(f"dma x{n}", True, n) for n in ([threads_count] if threads_count else DMA_THREADS)] if want in ("both", "1", "true", "yes") else []
    return cpu + dma


@register("ntb-perf", "Linux ntb_perf over an NTB: CPU (WC) vs DMA with 1, 2, 4 channels (any topology with an NTB)",
          stand=Stand("pex8749-rdma.yaml", ()), options=OPTIONS)
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None, runner: str = "host-b", peer: str = "host-a",
        use_dma: str = "both", threads_count: int = 0, chunk_order: int = 0, total_order: int = 0,
        max_mw_size: int = 0) -> ExperimentResult:
    cols = modes(use_dma, threads_count)
    total = total_order or (QUICK_TOTAL_ORDER if quick else TOTAL_ORDER)
    orders = [chunk_order] if chunk_order else (QUICK_CHUNK_ORDERS if quick else CHUNK_ORDERS)
    rows, missing = [], []
    for order in orders:
        row = {"chunk": 1 << order}
        for name, dma, threads in cols:
            try:
                r = ntb_perf(order, total, dma, threads, channels=threads if dma else None, runner=runner, peer=peer,
                             max_mw_size=max_mw_size or None)
            except _core.FabricError as e:
                if dma and "profile" in str(e) and use_dma == "both":
                    row[f"{name}_MBps"] = None           # no DMA engine in the runner's host: CPU copies only
                    missing.append(str(e))
                    continue
                if "expected 1 to" in str(e) and "chunk" in str(e):
                    row[f"{name}_MBps"] = None           # the window split among the threads is smaller than a chunk
                    continue
                raise DevlendError(str(e)) from None
            row[f"{name}_MBps"] = r["MBps"]
            if not dma:
                row["link_MBps"] = r["link_MBps"]
        rows.append(row)
        if progress:
            progress(f"chunk {1 << order}")
    notes = [f"{runner} writes into {peer}'s window; total_order {total}: {(1 << total) >> 20} MiB per thread, every chunk "
             "on the machine; DMA threads each hold their own channel, as ntb_perf requests one per thread"]
    notes += [f"no DMA: {missing[0]}"] if missing else []
    notes += standard_notes(rows, cols) if not stand_in_active() and not missing else []
    return ExperimentResult(name="ntb-perf", title=f"ntb_perf from {runner} into {peer}'s window, MB/s",
                            source="Linux drivers/ntb/test/ntb_perf semantics; 003 testbed (§3, Fig 7)",
                            columns=["chunk"] + [f"{m}_MBps" for m, _, _ in cols] + ["link_MBps"],
                            rows=rows, notes=notes, plot=plot)


def standard_notes(rows: list, cols: list) -> list:
    """The 003 testbed's notes, when every default column is there."""
    if [c[0] for c in cols] != ["cpu", "dma x1", "dma x2", "dma x4"]:
        return []
    big = rows[-1]
    return [f"at {big['chunk'] // KiB} KiB: CPU copies {big['cpu_MBps']} MB/s against the link's {big['link_MBps']} "
            f"(write-combined 64-byte TLPs on Gen2 x8), one DMA channel {big['dma x1_MBps']} MB/s (its one 512-byte read "
            "in flight; 003 Fig 8's ~500)",
            channels_note(rows),
            "CPU copies are write-combined, as ntb_perf maps the window with ioremap_wc; 003's memcpy went through an "
            "uncached mapping (see r1), one 16-byte TLP per store",
            "link_MBps: the busiest link direction for the CPU copies' 64-byte TLPs"]


def channels_note(rows: list) -> str:
    r = next(r for r in rows if r["dma x4_MBps"] is not None)
    x = r["dma x4_MBps"] / r["dma x1_MBps"]
    where = "below" if r["dma x4_MBps"] < r["link_MBps"] else "at"
    return (f"at {r['chunk'] // KiB} KiB four channels move {x:.2f}x one channel's rate, {where} the link's "
            f"{r['link_MBps']} MB/s: each channel is bound by its own read round trip, not by the link")


def plot(res: ExperimentResult, path: str) -> None:
    """MB/s against chunk size, one line per mode, the link limit dotted."""
    with Figure(path) as f:
        ax = f.axes[0]
        names = [c[:-len("_MBps")] for c in res.columns if c.endswith("_MBps") and c != "link_MBps"]
        for name, style in zip(names, ("-o", "-s", "-^", "-v", "-d", "-x")):
            f.line(ax, *points(res.rows, "chunk", f"{name}_MBps"), name, style)
        f.line(ax, *points(res.rows, "chunk", "link_MBps"), "link limit (CPU TLPs)", ":", color="grey")
        axes(ax, xlabel="chunk size (bytes)", ylabel="MB/s", logx=True, legend=10,
             title=f"devlend: {res.title}")
