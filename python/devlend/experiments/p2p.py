"""D2: GPU-to-GPU bandwidth on the three-host cluster, all eleven scenarios of 000 Table 1
(000 §7.2, Figs 11-13; 001 §7.3.1).

Each scenario runs the GPU driver on the simulated hosts: locally on lender A (Loc-*), or on the
borrower after Device Lending has lent it both GPUs (1L: both from lender A; 2L: one from each
lender), with the lenders' IOMMUs off (-SW) or on (-IOMMU). A transfer is peer-to-peer (the source
GPU's copy engine writes the target's BAR 1 at the address `dma_map_resource` returns, which
Device Lending resolves as 000 §6 describes) or bounced through a buffer in the runner's RAM (the
source writes it, the target reads it). Driver handshakes (MMIO stores, semaphores) included. The
paper records 1000 transfers per size; the model is deterministic, so one transfer gives the mean.

GPUs (see three-host-cluster.yaml): gpu0 and gpu1 share a switch in lender A; gpu2 sits behind
lender A's other switch with its NTBs; gpu3 behind lender B's switch with its NTBs.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, register
from ._gpu import gpu_to_gpu_ps, topology_json

KiB, MiB = 1 << 10, 1 << 20
SIZES = [KiB << i for i in range(0, 16, 1)]          # 1 KiB .. 32 MiB
QUICK_SIZES = [64 * KiB, 4 * MiB]

SCENARIOS = ["Loc-P2P-SW", "Loc-P2P-Root", "Loc-RAM-Root", "1L-P2P-SW", "1L-P2P-IOMMU", "1L-RAM-SW", "1L-RAM-IOMMU",
             "2L-P2P-SW", "2L-P2P-IOMMU", "2L-RAM-SW", "2L-RAM-IOMMU"]


def scenario(name: str) -> tuple[str, str, str, str, bool]:
    """(topology JSON, runner, source GPU, target GPU, peer-to-peer?) of a Table 1 scenario."""
    where, kind, path = name.split("-")
    peer = kind == "P2P"
    if where == "Loc":
        dst = "gpu2" if path == "Root" and peer else "gpu1"
        return topology_json("three-host-cluster.yaml"), "lender-a", "gpu0", dst, peer
    iommu = path == "IOMMU"
    two = where == "2L"
    js = topology_json("three-host-cluster.yaml", (("lender-a", iommu), ("lender-b", iommu and two)))
    src, dst = ("gpu2", "gpu3") if two else ("gpu0", "gpu1")
    return js, "borrower", src, dst, peer


@register("d2", "GPU-to-GPU bandwidth, eleven scenarios of 000 Table 1 (000 §7.2, Figs 11-12)", params=True)
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    sizes = QUICK_SIZES if quick else SIZES
    rows = []
    for name in SCENARIOS:
        js, runner, src, dst, peer = scenario(name)
        for size in sizes:
            ps = gpu_to_gpu_ps(js, runner, src, dst, peer, size)
            rows.append({"scenario": name, "size": size, "GBps": round(size / (ps * 1e-12) / 1e9, 3)})
            if progress:
                progress(f"{name} {size // KiB} KiB")
    notes = ["paper: 1L-P2P-SW ~ Loc-P2P-SW and 1L-P2P-IOMMU ~ Loc-P2P-Root, negligible difference from 4 MB",
             "paper: 2L-P2P lower, most with IOMMU; 2L-RAM-SW ~ Loc-RAM-Root; 1L-RAM-IOMMU and 2L-RAM-IOMMU drop drastically; "
             "1L-RAM-SW ~ 1L-RAM-IOMMU (both cross the root)"]
    return ExperimentResult(name="d2", title="GPU-to-GPU transfer bandwidth, GB/s", source="000 §7.2, Table 1, Figs 11-12",
                            columns=["scenario", "size", "GBps"], rows=rows, notes=notes, plot=plot)


# 001 §7.3.1 (targets.md, D2): reads that do not cross a root reach "a little under 6 GB/s" (a paper
# value, drawn beside ours on the peer-to-peer panels).
PAPER_NO_ROOT_GBPS = (6.0, "paper (001 §7.3.1): not crossing a root, a little under 6 GB/s")


def plot(res: ExperimentResult, path: str) -> None:
    """Fig 12's layout: top row peer-to-peer, bottom row via RAM; columns Loc, 1L, 2L."""
    groups = {("P2P", "Loc"): ["Loc-P2P-SW", "Loc-P2P-Root"], ("P2P", "1L"): ["1L-P2P-SW", "1L-P2P-IOMMU", "Loc-P2P-SW", "Loc-P2P-Root"],
              ("P2P", "2L"): ["2L-P2P-SW", "2L-P2P-IOMMU", "Loc-P2P-SW"], ("RAM", "Loc"): ["Loc-RAM-Root"],
              ("RAM", "1L"): ["1L-RAM-SW", "1L-RAM-IOMMU", "Loc-RAM-Root"], ("RAM", "2L"): ["2L-RAM-SW", "2L-RAM-IOMMU", "Loc-RAM-Root"]}
    with Figure(path, nrows=2, ncols=3, size=(13, 7), sharey=True, dpi=110, title="devlend: GPU-to-GPU bandwidth (cf. 000 Fig 12)") as f:
        for i, kind in enumerate(("P2P", "RAM")):
            for j, where in enumerate(("Loc", "1L", "2L")):
                ax = f.axes[3 * i + j]
                for name in groups[kind, where]:
                    f.line(ax, *points(res.rows, "size", "GBps", scenario=name), name,
                           "--" if name.startswith("Loc") and where != "Loc" else "-", marker="o", markersize=3)
                if kind == "P2P":
                    ax.axhline(PAPER_NO_ROOT_GBPS[0], color="grey", ls=":", lw=1, label=PAPER_NO_ROOT_GBPS[1])
                axes(ax, xlabel="transfer size (bytes)" if i == 1 else None, ylabel="bandwidth (GB/s)" if j == 0 else None,
                     title=f"{where}-{kind}", logx=True, legend=7)
