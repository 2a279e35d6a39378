"""D1: bandwidthTest from the borrower to a remote Quadro K420 (000 §7.1, Fig 10; 001 §7.1, Fig 6).

Setup (000 Fig 9): two Xeon hosts joined by PXH830 adapters; the lender's K420 and its PXH830 sit
below one switch. The GPU model and its unmodified driver (devlend-devices, devlend-drivers) run on:
- Loc: the lender itself; the copy engine moves data to and from the lender's RAM.
- Rem-SW: the borrower, after Device Lending has lent it the GPU; the lender's IOMMU is off, so the
  GPU's DMA crosses the lender's switch straight into the NTB (the shortest path).
- Rem-IOMMU: the same with the lender's IOMMU on; the GPU's DMA turns at the lender's root, which
  re-issues each read request as requests of the CPU profile's `read_split_bytes` (000 §7.1's trace).

One cudaMemcpy is the driver programming the copy engine through BAR 0 (MMIO stores, through the
NTB when borrowed), the copy engine's DMA (device to host = DMA write, host to device = DMA read),
its completion semaphore, and the driver's poll, each access timed by the engine in program order.
bandwidthTest's repetitions (10 transfers x 10 runs) are not repeated: the model is deterministic.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, Stand, register
from ._gpu import memcpy_ps, topology_json

KiB, MiB = 1 << 10, 1 << 20
SIZES = [KiB << i for i in range(16)]                  # 1 KiB .. 32 MiB, bandwidthTest's shmoo range
QUICK_SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 4 * MiB]
SCENARIOS = {"Loc": ("lender", False), "Rem-SW": ("borrower", False), "Rem-IOMMU": ("borrower", True)}


def measure(sizes: list[int], progress: Optional[Callable[[str], None]] = None) -> list[dict]:
    rows = []
    for scenario, (runner, lender_iommu) in SCENARIOS.items():
        js = topology_json("pxh830-two-host.yaml", (("lender", lender_iommu),))
        for size in sizes:
            row = {"scenario": scenario, "size": size}
            for name, dtoh in (("write", True), ("read", False)):
                ps = memcpy_ps(js, runner, "gpu0", dtoh, size)
                row[f"{name}_GBps"] = round(size / (ps * 1e-12) / 1e9, 3)
            rows.append(row)
            if progress:
                progress(f"{scenario} {size // KiB} KiB")
    return rows


@register("d1", "bandwidthTest to a remote K420: Loc vs Rem-SW vs Rem-IOMMU (000 §7.1, Fig 10)", params=True,
          stand=Stand("pxh830-two-host.yaml", ("lender", "borrower", "gpu0")))
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    sizes = QUICK_SIZES if quick else SIZES
    rows = measure(sizes, progress)
    by = {(r["scenario"], r["size"]): r for r in rows}
    big = max(sizes)
    notes = [
        f"at {big // MiB} MiB: read Rem-IOMMU/Rem-SW = {by['Rem-IOMMU', big]['read_GBps'] / by['Rem-SW', big]['read_GBps']:.2f}, "
        f"write Rem-IOMMU/Rem-SW = {by['Rem-IOMMU', big]['write_GBps'] / by['Rem-SW', big]['write_GBps']:.2f} "
        "(paper: bandwidth reduced with the IOMMU, reads much more than writes)",
        "paper: Loc slightly faster than Rem for small transfers; curves converge from 1 MB",
        "001 §7.3.1: reads that do not cross a root reach 'a little under 6 GB/s'",
    ]
    return ExperimentResult(name="d1", title="bandwidthTest, DMA write (device to host) and read (host to device), GB/s",
                            source="000 §7.1, Fig 10; 001 §7.1, Fig 6",
                            columns=["scenario", "size", "write_GBps", "read_GBps"], rows=rows, notes=notes,
                            plot=plot)


# 001 §7.3.1: reads that do not cross a root reach "a little under 6 GB/s" (a paper value, drawn beside ours).
PAPER_READ_GBPS = (6.0, "paper (001 §7.3.1): reads a little under 6 GB/s")


def plot(res: ExperimentResult, path: str) -> None:
    """Two panels as in Fig 10: DMA write and DMA read bandwidth against transfer size, with the
    paper's read figure beside ours."""
    with Figure(path, ncols=2, size=(10, 4), sharey=True, title="devlend: bandwidthTest to a remote Quadro K420 (cf. 000 Fig 10)") as f:
        for ax, key, title in zip(f.axes, ("write_GBps", "read_GBps"), ("DMA write (device to host)", "DMA read (host to device)")):
            for scenario, style in zip(SCENARIOS, ("-o", "-s", "-^")):
                f.line(ax, *points(res.rows, "size", key, scenario=scenario), scenario, style)
            axes(ax, xlabel="transfer size (bytes)", title=title, logx=True, legend=None)
        f.axes[1].axhline(PAPER_READ_GBPS[0], color="grey", ls=":", lw=1, label=PAPER_READ_GBPS[1])
        axes(f.axes[1], grid=False, legend=8)
        axes(f.axes[0], ylabel="bandwidth (GB/s)", grid=False, legend=10)
