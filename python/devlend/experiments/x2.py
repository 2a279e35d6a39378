"""X2: user-level round trip and throughput, RDMA write and send/receive, with the device-domain
bypass driver in a guest beside the native driver in the device domain and on native Linux
(004 §4.3, Figs 10-11).

Round trip: A writes (or sends) 1 B .. 4 KB to B, B answers with the same size, both polling
(memory for RDMA, the receive CQ for send/receive). Throughput: A posts back to back with 100
outstanding (perftest's tx depth) to B. With bypass the guest writes its WQE into its own QP buffer,
rings its own mapped UAR page and polls its own CQ buffer: the HCA reaches those buffers through the
keys the back-end validated at creation, so the critical path has no domain crossing. 004: 7.8 us
round trip for 1 byte, 830 MB/s at 256 KB, equal to native.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, register
from ._xenib import KiB, LABELS, MiB, bw_mbps, rtt_us, size_label, size_of

CONFIGS = ["xenib-bypass", "gen2-idd", "gen2-native"]
PAPER = {"rtt_1B_us": 7.8, "bw_256K_MBps": 830}
LAT_SIZES = [1, 4, 16, 64, 256, 1 * KiB, 4 * KiB]
BW_SIZES = [1 * KiB, 4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB]


def measure(quick: bool = False) -> dict:
    lat, bw = ([1, 4 * KiB], [4 * KiB, 256 * KiB]) if quick else (LAT_SIZES, BW_SIZES)
    it = 10 if quick else 20
    return {"lat_sizes": lat, "bw_sizes": bw,
            "lat": {(c, m): rtt_us(c, m, lat, it) for c in CONFIGS for m in ("rdma", "sr")},
            "bw": {(c, m): bw_mbps(c, m, bw, it, depth=100) for c in CONFIGS for m in ("rdma", "sr")}}


@register("x2", "Xen-IB user-level latency and throughput with device-domain bypass (004 §4.3, Figs 10-11)")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    m = measure(quick)
    cols = ["size"] + [f"rtt_us {m_} {LABELS[c]}" for m_ in ("rdma", "sr") for c in CONFIGS] + [f"MBps {m_} {LABELS[c]}" for m_ in ("rdma", "sr") for c in CONFIGS]
    rows = []
    for s in sorted(set(m["lat_sizes"]) | set(m["bw_sizes"])):
        r = {"size": size_label(s)}
        for mode in ("rdma", "sr"):
            for c in CONFIGS:
                r[f"rtt_us {mode} {LABELS[c]}"] = m["lat"][c, mode].get(s, "")
                r[f"MBps {mode} {LABELS[c]}"] = m["bw"][c, mode].get(s, "")
        rows.append(r)
    paper = {"size": "paper", f"rtt_us rdma {LABELS['xenib-bypass']}": "7.8 (1 B)", f"MBps rdma {LABELS['xenib-bypass']}": "830 (256 KB)"}
    rows.append(paper)
    if progress:
        progress("measured")
    notes = [f"1 B RDMA round trip with bypass: {m['lat']['xenib-bypass', 'rdma'][1]} us (004: 7.8 us)"]
    if 256 * KiB in m["bw_sizes"]:
        notes.append(f"RDMA write throughput at 256 KB with bypass: {m['bw']['xenib-bypass', 'rdma'][256 * KiB]} MB/s (004: 830)")
    same = all(m["lat"]["xenib-bypass", md] == m["lat"]["gen2-native", md] and m["bw"]["xenib-bypass", md] == m["bw"]["gen2-native", md] for md in ("rdma", "sr"))
    notes.append(f"bypass equal to native on every size: {same} (004: 'nearly the same performance')")
    return ExperimentResult(name="x2", title="Xen-IB user-level round trip (us) and throughput (MB/s)",
                            source="004 §4.3, Figs 10-11", columns=cols, rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Figs 10 and 11: round trip and throughput, rdma and sr, for each configuration."""
    rows = [dict(r, bytes=size_of(r["size"])) for r in res.rows if r["size"] != "paper"]
    with Figure(path, ncols=2, size=(11, 4), dpi=100) as f:
        ax1, ax2 = f.axes
        for mode, style in (("rdma", "-o"), ("sr", "--s")):
            for c in CONFIGS:
                for ax, key in ((ax1, f"rtt_us {mode} {LABELS[c]}"), (ax2, f"MBps {mode} {LABELS[c]}")):
                    f.line(ax, *points(rows, "bytes", key), f"{mode} {LABELS[c]}", style, key=LABELS[c], markersize=3)
        ax1.axhline(7.8, color="grey", ls=":", lw=1, label="paper 7.8 us (1 B)")
        ax2.axhline(830, color="grey", ls=":", lw=1, label="paper 830 MB/s")
        for ax, yl, t in ((ax1, "round-trip time (us)", "Fig 10"), (ax2, "throughput (MB/s)", "Fig 11")):
            axes(ax, xlabel="message size (bytes)", ylabel=yl, title=f"devlend (cf. 004 {t})", logx=True, legend=6)
