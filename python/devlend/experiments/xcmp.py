"""XCMP (beyond 004): one kernel RDMA-write benchmark, server A's HCA reached four ways.

004 compares its two Xen drivers with native Linux asks for the comparison no paper made:
the same round-trip and throughput tests (X1's, 004 §4.2) with the HCA reached through
- Xen's basic split driver (every verb through the device channel, 004 §3.1-3.2),
- Xen's device-domain bypass (post and poll from the guest, 004 §3.3),
- VFIO pass-through to a KVM guest (000 §5; devlend-vm ``Vmm::assign_vfio``): the native driver in
  the guest, DMA at guest-physical addresses translated by server A's IOMMU,
- Device Lending (000 §4; devlend-host ``Cluster::borrow``): the HCA sits in another host, server A
  borrows it through PXH830 NTBs; doorbells cross the NTB one way, the HCA's reads of WQEs and
  payload cross it twice, its writes once, then server A's IOMMU,
beside native Linux. Server B is native Linux throughout. The HCA is a device model on the
engine's machine: its doorbells, reads and writes travel the routes each set-up really uses (the
table's notes give what the engine measures along them), from the same Gen1 x8 slot for all, so
this compares access paths, not 004's PCI-X bus: the absolute values differ from X1's. Throughput keeps 100 writes outstanding (perftest's tx depth), plus one
outstanding for contrast.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, register
from ._xenib import ACCESS_LABELS, ACCESSES, KiB, MiB, cmp_bw_mbps, cmp_costs, cmp_rtt_us, size_label, size_of

LAT_SIZES = [1, 64, 1 * KiB, 4 * KiB, 64 * KiB]
BW_SIZES = [1 * KiB, 4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB]
QUICK_LAT = [1, 64 * KiB]
QUICK_BW = [4 * KiB, 256 * KiB]


def measure(quick: bool = False) -> dict:
    lat, bw = (QUICK_LAT, QUICK_BW) if quick else (LAT_SIZES, BW_SIZES)
    it = 5 if quick else 10
    return {"lat_sizes": lat, "bw_sizes": bw,
            "lat": {a: cmp_rtt_us(a, lat, it) for a in ACCESSES},
            "bw": {a: cmp_bw_mbps(a, bw, 2 * it, depth=100) for a in ACCESSES},
            "bw1": {a: cmp_bw_mbps(a, [4 * KiB], it, depth=1) for a in ACCESSES},
            "costs": {a: cmp_costs(a) for a in ACCESSES}}


@register("xcmp", "Beyond 004: RDMA write with the HCA via Xen split, Xen bypass, VFIO and Device Lending")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    m = measure(quick)
    if progress:
        progress("measured")
    cols = ["size"] + [f"rtt_us {ACCESS_LABELS[a]}" for a in ACCESSES] + [f"MBps {ACCESS_LABELS[a]}" for a in ACCESSES]
    rows = []
    for s in sorted(set(m["lat_sizes"]) | set(m["bw_sizes"])):
        r = {"size": size_label(s)}
        for a in ACCESSES:
            r[f"rtt_us {ACCESS_LABELS[a]}"] = m["lat"][a].get(s, "")
            r[f"MBps {ACCESS_LABELS[a]}"] = m["bw"][a].get(s, "")
        rows.append(r)
    r = {"size": "4K, 1 outstanding"}
    for a in ACCESSES:
        r[f"MBps {ACCESS_LABELS[a]}"] = m["bw1"][a][4 * KiB]
    rows.append(r)
    c = m["costs"]
    notes = [f"engine, server A's routes ({ACCESS_LABELS[a]}): doorbell {c[a]['doorbell_ps'] / 1e3:.0f} ns, DMA read round trip "
             f"{c[a]['read_rtt_ps'] / 1e3:.0f} ns, DMA write {c[a]['write_ps'] / 1e3:.0f} ns, streams "
             f"{1e9 / max(c[a]['read_fs_per_byte'], 1):.0f} / {1e9 / max(c[a]['write_fs_per_byte'], 1):.0f} MB/s read / write"
             for a in ("native", "vfio", "lending")]
    small, big = min(m["lat_sizes"]), max(m["bw_sizes"])
    lat = {a: m["lat"][a][small] for a in ACCESSES}
    notes.append(f"{size_label(small)} B round trip: " + ", ".join(f"{ACCESS_LABELS[a]} {lat[a]}" for a in ACCESSES) + " us; "
                 f"lending adds {lat['lending'] - lat['native']:.2f} us: its doorbell, the WQE and payload reads (NTB both ways) "
                 "and server B's data written back through the NTB")
    notes.append(f"at {size_label(big)}: " + ", ".join(f"{ACCESS_LABELS[a]} {m['bw'][a][big]}" for a in ACCESSES) +
                 " MB/s: with 100 outstanding the 4X link limits every path; VFIO's IOMMU (IOTLB warm) and the NTB only add latency")
    k4 = 4 * KiB
    if k4 in m["bw"]["lending"]:
        notes.append(f"at 4K with 100 outstanding lending gives {m['bw']['lending'][k4]} MB/s against native {m['bw']['native'][k4]}: "
                     "the HCA's send engine reads one WQE's payload at a time, so each message waits one read round trip, "
                     "through the NTB for a borrowed HCA")
    notes.append("basic split is worst at small messages: each post and poll is a device-channel round trip (>= 2 x 10 us, 004 Fig 9)")
    return ExperimentResult(name="xcmp", title="RDMA write, server A's HCA by access path: round trip (us) and throughput (MB/s)",
                            source="beyond 004: 004 §3-4 with 000 §4-5", columns=cols, rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Round trip and throughput against message size, one line per access path."""
    rows = [dict(r, bytes=size_of(r["size"])) for r in res.rows if r["size"][0].isdigit() and "," not in r["size"]]
    styles = {"native": "-o", "basic": "-s", "bypass": "--^", "vfio": ":v", "lending": "-D"}
    with Figure(path, ncols=2, size=(11, 4), dpi=100) as f:
        ax1, ax2 = f.axes
        for a in ACCESSES:
            for ax, col in ((ax1, f"rtt_us {ACCESS_LABELS[a]}"), (ax2, f"MBps {ACCESS_LABELS[a]}")):
                f.line(ax, *points(rows, "bytes", col), ACCESS_LABELS[a], styles[a])
        axes(ax1, xlabel="message size (bytes)", ylabel="round-trip time (us)", logx=True, logy=True, legend=7,
             title="devlend: RDMA write round trip")
        axes(ax2, xlabel="message size (bytes)", ylabel="throughput (MB/s), 100 outstanding", logx=True, legend=7,
             title="devlend: RDMA write throughput")
