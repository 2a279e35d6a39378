"""ntb-perf: the Linux ntb_perf tool (drivers/ntb/test) on the 003 testbed (issue 6).

Host B writes into host A's 1 MB memory window through the PEX8749 NT port, as Linux's ntb_perf
does: each thread copies `total` bytes in `chunk`-byte pieces into its part of the window,
wrapping around, with CPU copies (`memcpy_toio` into a write-combining mapping) or with DMA (one
DMA channel per thread; 003's testbed used one). Rate = bytes copied / elapsed microseconds. Each
pass over the window runs on one machine: the workers' stores or channels share the links there.
Beside it: the rate at which the busiest link direction serialised the CPU copies' TLPs (its busy
time on the machine). Nothing here is typed in: WC copies are bound by the fill buffers and
64-byte TLPs, a DMA channel by its read round trip.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, register
from ._rdma import KiB, MiB, ntb_perf

TOTAL = 1 << 30                                  # ntb_perf's default total_order 30
CHUNKS = [4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 512 * KiB]
QUICK_CHUNKS = [4 * KiB, 64 * KiB, 512 * KiB]
MODES = [("cpu", False, 1), ("dma x1", True, 1), ("dma x2", True, 2), ("dma x4", True, 4)]


@register("ntb-perf", "Linux ntb_perf on the PEX8749 NTB: CPU (WC) vs DMA with 1, 2, 4 channels (issue 6)")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    rows = []
    for chunk in QUICK_CHUNKS if quick else CHUNKS:
        row = {"chunk": chunk}
        for name, dma, threads in MODES:
            if chunk * threads > MiB:
                row[f"{name}_MBps"] = None
                continue
            r = ntb_perf(chunk, TOTAL, dma, threads, channels=threads if dma else None)
            row[f"{name}_MBps"] = r["MBps"]
            row["link_MBps"] = r["link_MBps"] if name == "cpu" else row.get("link_MBps")
        rows.append(row)
        if progress:
            progress(f"chunk {chunk}")
    big = rows[-1]
    notes = [f"total {TOTAL >> 20} MiB per thread; threads >1 each hold their own DMA channel, as ntb_perf requests one per thread",
             f"at {big['chunk'] // KiB} KiB: CPU copies {big['cpu_MBps']} MB/s against the link's {big['link_MBps']} "
             f"(write-combined 64-byte TLPs on Gen2 x8), one DMA channel {big['dma x1_MBps']} MB/s (its one 512-byte read "
             "in flight; 003 Fig 8's ~500)",
             channels_note(rows),
             "CPU copies are write-combined, as ntb_perf maps the window with ioremap_wc; 003's memcpy went through an "
             "uncached mapping (see r1), one 16-byte TLP per store",
             "link_MBps: the busiest link direction for the CPU copies' 64-byte TLPs"]
    return ExperimentResult(name="ntb-perf", title="ntb_perf from host B into host A's window, MB/s",
                            source="Linux drivers/ntb/test/ntb_perf semantics; 003 testbed (§3, Fig 7)",
                            columns=["chunk"] + [f"{m}_MBps" for m, _, _ in MODES] + ["link_MBps"],
                            rows=rows, notes=notes, plot=plot)


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
        for (name, _, _), style in zip(MODES, ("-o", "-s", "-^", "-v")):
            f.line(ax, *points(res.rows, "chunk", f"{name}_MBps"), name, style)
        f.line(ax, *points(res.rows, "chunk", "link_MBps"), "link limit (CPU TLPs)", ":", color="grey")
        axes(ax, xlabel="chunk size (bytes)", ylabel="MB/s", logx=True, legend=10,
             title="devlend: ntb_perf through a PEX8749 NTB (Gen2 x8)")
