"""`devlend validate --plot DIR`: the model against the measurements, one figure per corpus host
(latency against size, bandwidth against size), calibration hosts marked as such."""

from __future__ import annotations

import os

from .validate import Verdict

PANELS = (("dma_read_latency", "DMA read latency", "ns"), ("dma_read_bw", "DMA read bandwidth", "Gb/s"),
          ("dma_write_bw", "DMA write bandwidth", "Gb/s"))


def plot_hosts(verdicts: list[Verdict], out_dir: str) -> list[str]:
    """One PNG per corpus host in `out_dir`; returns their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(out_dir, exist_ok=True)
    hosts: dict[str, list[Verdict]] = {}
    for v in verdicts:
        if v.m.host:
            hosts.setdefault(v.m.host, []).append(v)
    paths = []
    for host, vs in sorted(hosts.items()):
        fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 3.8))
        for ax, (q, title, unit) in zip(axes, PANELS):
            pts = sorted((v.m.args["size"], v.m.value, v.ours) for v in vs if v.m.quantity == q)
            if pts:
                sizes, theirs, ours = zip(*pts)
                ax.plot(sizes, theirs, "o", ms=4, label="measured (pcie-bench)")
                ax.plot(sizes, ours, "-", label="devlend")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("transfer size (bytes)")
            ax.set_ylabel(unit)
            ax.set_title(title)
            ax.grid(alpha=0.3)
        axes[0].legend(loc="upper left", fontsize=8)
        fig.suptitle(f"{host} ({vs[0].m.set} host): {vs[0].m.quote.split('(', 1)[1].rstrip(')')}", fontsize=9)
        fig.tight_layout()
        path = os.path.join(out_dir, f"{host}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
