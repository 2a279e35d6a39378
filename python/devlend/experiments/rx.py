"""R-ext (past the paper): the same put library on the 003 testbed re-rated to Gen3 x8
and Gen4 x16, with each link's analytic limit for posted writes (devlend_engine::analytic) beside
it, so one sees how far the 2016 testbed (Gen2 x8) was from what the link allows. Same host
software, DMA engine and CPU-store parameters; only the links change.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, register
from ._rdma import KiB, MiB, link_limit_mbps, sweep

LINKS = [(2, 8), (3, 8), (4, 16)]
METHODS = ["memcpy", "block", "sg8"]


@register("rx", "RDMA put library on Gen2 x8, Gen3 x8, Gen4 x16 NTBs vs the analytic link limit")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    sizes = [64 * KiB, 1 * MiB] if quick else [4 * KiB, 64 * KiB, 1 * MiB]
    rows = []
    for gen, width in LINKS:
        bw = sweep(METHODS, sizes, gen, width)
        wc = sweep(["memcpy"], sizes, gen, width, mapping="wc")
        limit = link_limit_mbps(gen, width)
        for s in sizes:
            rows.append({"link": f"Gen{gen} x{width}", "size": s, **{f"{m}_MBps": bw[m, s] for m in METHODS},
                         "memcpy_wc_MBps": wc["memcpy", s], "link_limit_MBps": limit})
        if progress:
            progress(f"Gen{gen} x{width}")
    notes = ["the DMA engine keeps one 512-byte read in flight, so its rate is set by the read round trip, not the link: "
             "a faster link barely helps it; UC memcpy is bound by the CPU's store issue; a write-combined mapping "
             "(memcpy_wc) is the only path that scales with the link",
             "link_limit: saturated posted writes of 256-byte payloads along the DMA's path (analytic model)"]
    return ExperimentResult(name="rx", title="The 003 put library on faster NTB links, MB/s", source="an extension of 003 §3",
                            columns=["link", "size"] + [f"{m}_MBps" for m in METHODS] + ["memcpy_wc_MBps", "link_limit_MBps"],
                            rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Bars per link at the largest size: each method beside the link's analytic limit."""
    big = max(r["size"] for r in res.rows)
    rows = [r for r in res.rows if r["size"] == big]
    keys = [f"{m}_MBps" for m in METHODS] + ["memcpy_wc_MBps", "link_limit_MBps"]
    with Figure(path, size=(8, 4)) as f:
        ax = f.axes[0]
        w = 0.8 / len(keys)
        for i, k in enumerate(keys):
            label = k.replace("_MBps", "")
            ax.bar([j + i * w for j in range(len(rows))], [r[k] for r in rows], w, label=label, color=f.colour(label))
        ax.set_xticks([j + 0.4 - w / 2 for j in range(len(rows))], [r["link"] for r in rows])
        axes(ax, ylabel=f"MB/s at {big // KiB} KiB", logy=True, grid=False,
             title="devlend: 003's put library on faster NTB links vs the link limit")
