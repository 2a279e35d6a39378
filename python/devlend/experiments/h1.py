"""H1: modelled I/O bandwidth against the number of iperf3 connections for DevTLB configurations
(002 §IV-D, Fig 9).

Each connection is one tenant (a VF of the shared NIC) running the iperf3 profile (Table III,
§IV-D), interleaved round robin one packet at a time, on Table IV's Base design (PTB of one
packet, no partitioning, no prefetching). Three DevTLBs: 64 entries 8-way LFU (Base, the size of
Intel's IOTLB, §IV-D), the same 64 entries fully associative, and 1024 entries 8-way. All tenants
use the same gIOVAs, so their ring pages and data pages fall into the same DevTLB rows (a packet
translates the ring page twice, descriptor read and write-back, and one data page: see
crates/devlend-hypertrio/src/workload.rs); 002 reports that with the 64-entry 8-way DevTLB more
than four connections start evicting each other's entries and bandwidth collapses. Nothing here is typed in: the bandwidth is
accepted packets x 1542 B over the time the model needed to translate them.

Module name for the registry: `devlend.experiments.h1` (experiment "h1").
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, register
from ._hypertrio import LINK_GBPS, h1 as run_h1, quick_packets

CONNECTIONS = [1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 64]
QUICK_CONNECTIONS = [1, 2, 4, 5, 8, 16, 64]
PAPER = "64-entry 8-way DevTLB: full bandwidth up to 4 connections; more than 4 thrash and utilisation falls"


@register("h1", "HyperTRIO: I/O bandwidth vs iperf3 connections by DevTLB configuration (002 §IV-D, Fig 9)")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    conns = QUICK_CONNECTIONS if quick else CONNECTIONS
    points = []
    for c in conns:
        # quick: fewer packets per tenant (see _hypertrio.quick_packets); full: Table III's length
        points += run_h1([c], quick_packets(c) if quick else None)
        if progress:
            progress(f"{c} connections done")
    rows = [{"config": p["config"], "connections": p["tenants"], "gbps": round(p["stats"]["gbps"], 1),
             "utilisation": round(p["stats"]["utilisation"], 3), "devtlb_hit_rate": round(p["stats"]["devtlb_hit_rate"], 3),
             "drops": p["stats"]["drops"]} for p in points]
    base = {r["connections"]: r["gbps"] for r in rows if r["config"] == "64-entry 8-way"}
    up_to_4 = min(v for c, v in base.items() if c <= 4)
    beyond = {c: v for c, v in base.items() if c > 4}
    notes = [
        f"64-entry 8-way: at least {up_to_4} Gb/s up to 4 connections; "
        + ", ".join(f"{c}: {v}" for c, v in sorted(beyond.items())) + " Gb/s beyond (paper: more than 4 connections thrash)",
        f"link {LINK_GBPS:.0f} Gb/s, 1542 B packets, 3 translations per packet (002 Table II)",
    ]
    if quick:
        notes.append("quick mode: each tenant's log cut to max(100, 40000/connections) steady-state packets")
    rows.append({"config": "paper", "connections": "—", "gbps": PAPER, "utilisation": "", "devtlb_hit_rate": "", "drops": ""})
    return ExperimentResult(name="h1", title="Modelled I/O bandwidth vs iperf3 connections, Gb/s",
                            source="002 §IV-D, Fig 9", columns=["config", "connections", "gbps", "utilisation", "devtlb_hit_rate", "drops"],
                            rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Fig 9's layout: aggregated bandwidth (Gb/s) against connections, one line per DevTLB."""
    rows = [r for r in res.rows if isinstance(r["connections"], int)]
    with Figure(path) as f:
        ax = f.axes[0]
        for cfg in dict.fromkeys(r["config"] for r in rows):
            f.line(ax, *points(rows, "connections", "gbps", config=cfg), cfg)
        ax.axvline(4, color="grey", ls=":", lw=1, label="paper: thrashing beyond 4 (8-way)")
        axes(ax, xlabel="concurrent connections (tenants)", ylabel="I/O bandwidth (Gb/s)", logx=True,
             ylim=(0, LINK_GBPS * 1.05), title="devlend: DevTLB configuration vs connections (cf. 002 Fig 9)")
