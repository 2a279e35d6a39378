"""D2: GPU-to-GPU bandwidth on the three-host cluster, all eleven scenarios of 000 Table 1
(000 §7.2, Figs 11-13; 001 §7.3.1).

Each scenario programs the fabric as its software would (local CUDA on lender A, or Device
Lending to the borrower with the lenders' IOMMUs off or on), then times a transfer of N bytes from
one GPU to the other: peer-to-peer (the source GPU's copy engine writes into the target's BAR1) or
bounced through a RAM buffer (the source writes it, then the target reads it), each transfer
preceded by the driver's doorbell and followed by a completion semaphore, as in D1. The paper
records 1000 transfers per size; the model is deterministic, so one transfer gives the mean.

GPUs (see three-host-cluster.yaml): gpu0 and gpu1 share a switch in lender A; gpu2 sits behind
lender A's other switch with its NTBs; gpu3 behind lender B's switch with its NTBs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from .. import load
from ..fabric import Fabric
from . import ExperimentResult, register, topology_path
from ._lend import Lending

KiB, MiB = 1 << 10, 1 << 20
SIZES = [KiB << i for i in range(0, 16, 1)]          # 1 KiB .. 32 MiB
QUICK_SIZES = [64 * KiB, 4 * MiB]


@dataclass
class Setup:
    f: Fabric
    cpu: str
    src: str
    dst: str
    write_addr: int            # where src writes (dst's BAR1, or the RAM buffer)
    read_addr: Optional[int]   # where dst reads the RAM buffer (None for peer-to-peer)
    doorbell: int              # the CPU's address of src's BAR0
    sem: int                   # src's DMA address of the completion semaphore
    back: Optional[int] = None  # where dst writes src's BAR1 (peer-to-peer ping-pong)


SCENARIOS = ["Loc-P2P-SW", "Loc-P2P-Root", "Loc-RAM-Root", "1L-P2P-SW", "1L-P2P-IOMMU", "1L-RAM-SW", "1L-RAM-IOMMU",
             "2L-P2P-SW", "2L-P2P-IOMMU", "2L-RAM-SW", "2L-RAM-IOMMU"]


def _fabric(iommu_a: bool, iommu_b: bool) -> Fabric:
    topo = load(topology_path("three-host-cluster.yaml"))
    topo.hosts[1].iommu = iommu_a
    topo.hosts[2].iommu = iommu_b
    f = topo.build()
    for g in ("gpu0", "gpu1", "gpu2", "gpu3"):
        f.set_bus_master(g, True)
    return f


def setup(name: str) -> Setup:
    where, kind, path = name.split("-")
    iommu = path == "IOMMU"
    if where == "Loc":
        f = _fabric(False, False)
        src, dst = "gpu0", ("gpu2" if path == "Root" and kind == "P2P" else "gpu1")
        buf = f.resolve("lender-a.ram+0x40000000")
        write = f.resolve(f"{dst}.bar1") if kind == "P2P" else buf
        back = f.resolve(f"{src}.bar1") if kind == "P2P" else None
        return Setup(f, "lender-a:cpu", src, dst, write, None if kind == "P2P" else buf, f.resolve(f"{src}.bar0"), buf + 0x100000, back)
    two = where == "2L"
    f = _fabric(iommu, iommu and two)
    L = Lending(f)
    src, dst = ("gpu2", "gpu3") if two else ("gpu0", "gpu1")
    dst_host, dst_ntb = ("lender-b", "ntb-c-b") if two else ("lender-a", "ntb-a-b")
    b_dst = "ntb-b-b" if two else "ntb-b-a"
    buf = f.resolve("borrower.ram+0x40000000")
    sem_buf = f.resolve("borrower.ram+0x48000000")
    sem = L.dma_window("borrower", "ntb-b-a", "lender-a", "ntb-a-b", src, sem_buf, 2 * MiB, iommu)
    doorbell = L.bar_for_borrower("ntb-b-a", "lender-a", "ntb-a-b", src, 0, 16 * MiB, iommu)
    if kind == "RAM":
        write = L.dma_window("borrower", "ntb-b-a", "lender-a", "ntb-a-b", src, buf, 32 * MiB, iommu)
        read = L.dma_window("borrower", b_dst, dst_host, dst_ntb, dst, buf, 32 * MiB, iommu)
        return Setup(f, "borrower:cpu", src, dst, write, read, doorbell, sem)
    write = peer_address(f, L, src, dst, iommu, two)
    return Setup(f, "borrower:cpu", src, dst, write, None, doorbell, sem, back=peer_address(f, L, dst, src, iommu, two))


# The NTB in each lender that leads to the other lender, and the host each GPU sits in.
_PEER_NTB = {"lender-a": "ntb-a-c", "lender-b": "ntb-c-a"}
_HOST = {"gpu0": "lender-a", "gpu1": "lender-a", "gpu2": "lender-a", "gpu3": "lender-b"}


def peer_address(f: Fabric, L: Lending, src: str, dst: str, iommu: bool, two: bool) -> int:
    """000 §6: the address src's lender hands out for dst's BAR1 (same lender: its own address,
    through its IOMMU when on; different lenders: a window through the NTB between them)."""
    bar1 = f.resolve(f"{dst}.bar1")
    if not two:
        return L.lender_map(_HOST[src], src, bar1, 32 * MiB) if iommu else bar1
    s_host, d_host = _HOST[src], _HOST[dst]
    target = L.lender_map(d_host, _PEER_NTB[d_host], bar1, 32 * MiB) if iommu else bar1
    f.mw_set_trans(_PEER_NTB[d_host], 0, target, 32 * MiB)
    f.rid_lut_add(_PEER_NTB[s_host], src)
    nt = f.resolve(f"{_PEER_NTB[s_host]}.mw0")
    return L.lender_map(s_host, src, nt, 32 * MiB) if iommu else nt


def transfer_ps(s: Setup, size: int) -> int:
    """One cudaMemcpy-like transfer of `size` bytes, driver handshake included."""
    f = s.f
    def handshake(gpu: str) -> int:
        return f.dma(s.cpu, s.doorbell, 4).time_ps + f.dma(gpu, s.sem, 4).time_ps
    t = handshake(s.src) + f.dma(s.src, s.write_addr, size, write=True).time_ps
    if s.read_addr is not None:
        t += handshake(s.src) + f.dma(s.dst, s.read_addr, size, write=False).time_ps
    return t


@register("d2", "GPU-to-GPU bandwidth, eleven scenarios of 000 Table 1 (000 §7.2, Figs 11-12)")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    sizes = QUICK_SIZES if quick else SIZES
    rows = []
    for name in SCENARIOS:
        s = setup(name)
        for size in sizes:
            ps = transfer_ps(s, size)
            rows.append({"scenario": name, "size": size, "GBps": round(size / (ps * 1e-12) / 1e9, 3)})
            if progress:
                progress(f"{name} {size // KiB} KiB")
    notes = ["paper: 1L-P2P-SW ~ Loc-P2P-SW and 1L-P2P-IOMMU ~ Loc-P2P-Root, negligible difference from 4 MB",
             "paper: 2L-P2P lower, most with IOMMU; 2L-RAM-SW ~ Loc-RAM-Root; 1L-RAM-IOMMU and 2L-RAM-IOMMU drop drastically; "
             "1L-RAM-SW ~ 1L-RAM-IOMMU (both cross the root)"]
    return ExperimentResult(name="d2", title="GPU-to-GPU transfer bandwidth, GB/s", source="000 §7.2, Table 1, Figs 11-12",
                            columns=["scenario", "size", "GBps"], rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Fig 12's layout: top row peer-to-peer, bottom row via RAM; columns Loc, 1L, 2L."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 3, figsize=(13, 7), sharey=True)
    groups = {("P2P", "Loc"): ["Loc-P2P-SW", "Loc-P2P-Root"], ("P2P", "1L"): ["1L-P2P-SW", "1L-P2P-IOMMU", "Loc-P2P-SW", "Loc-P2P-Root"],
              ("P2P", "2L"): ["2L-P2P-SW", "2L-P2P-IOMMU", "Loc-P2P-SW"], ("RAM", "Loc"): ["Loc-RAM-Root"],
              ("RAM", "1L"): ["1L-RAM-SW", "1L-RAM-IOMMU", "Loc-RAM-Root"], ("RAM", "2L"): ["2L-RAM-SW", "2L-RAM-IOMMU", "Loc-RAM-Root"]}
    for i, kind in enumerate(("P2P", "RAM")):
        for j, where in enumerate(("Loc", "1L", "2L")):
            ax = axes[i][j]
            for name in groups[kind, where]:
                pts = [(r["size"], r["GBps"]) for r in res.rows if r["scenario"] == name]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "--" if name.startswith("Loc") and where != "Loc" else "-",
                        marker="o", markersize=3, label=name)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{where}-{kind}")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
            if i == 1:
                ax.set_xlabel("transfer size (bytes)")
        axes[i][0].set_ylabel("bandwidth (GB/s)")
    fig.suptitle("devlend: GPU-to-GPU bandwidth (cf. 000 Fig 12)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
