"""D1: bandwidthTest from the borrower to a remote Quadro K420 (000 §7.1, Fig 10; 001 §7.1, Fig 6).

Setup (000 Fig 9): two Xeon hosts joined by PXH830 adapters; the lender's K420 and its PXH830 sit
below one switch. Scenarios:
- Loc: bandwidthTest runs on the lender itself; the GPU's copy engine moves data to and from the
  lender's RAM.
- Rem-SW: runs on the borrower with the device lent; the lender's IOMMU is off, so the GPU's DMA
  crosses the lender's switch straight into the NTB (the shortest path).
- Rem-IOMMU: the lender's IOMMU is on; the GPU's DMA turns at the lender's root, which re-issues
  each read request as requests of the CPU profile's `read_split_bytes` (000 §7.1's PCIe trace).

What is modelled: the copy engine's DMA stream (device-to-host = DMA write, host-to-device = DMA
read) timed TLP by TLP by the engine, plus the per-transfer driver handshake, whose cost emerges
from the same fabric: the CPU rings the GPU's doorbell (a posted write into BAR0, through the NTB
when borrowed), the GPU fetches its command from host memory (a 64-byte DMA read), and signals
completion with a semaphore write into host memory (a 4-byte DMA write). bandwidthTest's own
repetitions (10 transfers x 10 runs) are not repeated: the model is deterministic, so each
repetition would give the same number.
"""

from __future__ import annotations

from typing import Callable, Optional

from .. import load
from ..fabric import Fabric
from . import ExperimentResult, register, topology_path

KiB, MiB = 1 << 10, 1 << 20
SIZES = [KiB << i for i in range(16)]                  # 1 KiB .. 32 MiB, bandwidthTest's shmoo range
QUICK_SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 4 * MiB]
SCENARIOS = ("Loc", "Rem-SW", "Rem-IOMMU")
DMA_IOVA = 0x1000_0000                               # lender-side IOVA the driver is handed (Rem-IOMMU)
BORROWER_WINDOW = 0x8000_0000                        # borrower IOVA where the lender's window lands
SEGMENT = 8 * MiB                                    # PXH830 window 0 LUT segment (params/hardware.toml)


def setup(scenario: str) -> tuple[Fabric, str, int, int]:
    """Program the testbed as the scenario's software would. Returns the fabric, the CPU that runs
    bandwidthTest, the GPU's DMA address of the host buffer, and the CPU's address of GPU BAR0."""
    topo = load(topology_path("pxh830-two-host.yaml"))
    topo.setup = []
    topo.hosts[1].iommu = scenario == "Rem-IOMMU"
    f = topo.build()
    f.set_bus_master("gpu0", True)
    if scenario == "Loc":
        return f, "lender:cpu", f.resolve("lender.ram+0x40000000"), f.resolve("gpu0.bar0")
    # Device Lending (000 §4): the lender's window 1 lands in the borrower's IOMMU domain, which maps
    # the host buffer; the borrower reaches the GPU's BAR0 through LUT segments of its window 0.
    f.mw_set_trans("ntb-b", 1, BORROWER_WINDOW, 256 * MiB)
    f.iommu_domain_alloc("borrower", "lending")
    f.iommu_attach("borrower", "lending", "ntb-b")
    f.iommu_map("borrower", "lending", BORROWER_WINDOW, "borrower.ram+0x40000000", 64 * MiB)
    f.rid_lut_add("ntb-l", "gpu0")
    bar0 = f.resolve("gpu0.bar0")
    for seg in range(2):
        f.lut_set_trans("ntb-l", 0, seg, bar0 + seg * SEGMENT)
    dma_addr = f.resolve("ntb-l.mw1")
    if scenario == "Rem-IOMMU":
        f.iommu_domain_alloc("lender", "lend")
        f.iommu_attach("lender", "lend", "gpu0")
        f.iommu_map("lender", "lend", DMA_IOVA, dma_addr, 64 * MiB)
        dma_addr = DMA_IOVA
        # With ACS redirect the borrower's accesses to the BARs also turn at the lender's root, under
        # the NTB's requester IDs: the lender maps the GPU's BAR0 for them (identity).
        f.iommu_domain_alloc("lender", "ntb")
        f.iommu_attach("lender", "ntb", "ntb-l")
        f.iommu_map("lender", "ntb", bar0, bar0, 16 * MiB)
    return f, "borrower:cpu", dma_addr, f.resolve("ntb-b.mw0")


def handshake_ps(f: Fabric, cpu: str, dma_addr: int, doorbell: int) -> int:
    """Driver cost per transfer: doorbell write, command fetch, completion semaphore."""
    return (f.dma(cpu, doorbell, 4, write=True).time_ps
            + f.dma("gpu0", dma_addr, 64, write=False).time_ps
            + f.dma("gpu0", dma_addr, 4, write=True).time_ps)


def measure(sizes: list[int], progress: Optional[Callable[[str], None]] = None) -> list[dict]:
    rows = []
    for scenario in SCENARIOS:
        f, cpu, dma_addr, doorbell = setup(scenario)
        overhead = handshake_ps(f, cpu, dma_addr, doorbell)
        for size in sizes:
            row = {"scenario": scenario, "size": size, "handshake_ns": overhead / 1000}
            for name, write in (("write", True), ("read", False)):
                t = f.dma("gpu0", dma_addr, size, write=write)
                row[f"{name}_GBps"] = round(size / ((t.time_ps + overhead) * 1e-12) / 1e9, 3)
            rows.append(row)
            if progress:
                progress(f"{scenario} {size // KiB} KiB")
    return rows


@register("d1", "bandwidthTest to a remote K420: Loc vs Rem-SW vs Rem-IOMMU (000 §7.1, Fig 10)")
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
                            columns=["scenario", "size", "write_GBps", "read_GBps", "handshake_ns"], rows=rows, notes=notes,
                            plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Two panels as in Fig 10: DMA write and DMA read bandwidth against transfer size."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, key, title in ((axes[0], "write_GBps", "DMA write (device to host)"), (axes[1], "read_GBps", "DMA read (host to device)")):
        for scenario, style in zip(SCENARIOS, ("-o", "-s", "-^")):
            pts = [(r["size"], r[key]) for r in res.rows if r["scenario"] == scenario]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=scenario, markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("transfer size (bytes)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("bandwidth (GB/s)")
    axes[0].legend()
    fig.suptitle("devlend: bandwidthTest to a remote Quadro K420 (cf. 000 Fig 10)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
