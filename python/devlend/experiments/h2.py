"""H2: Base vs HyperTRIO, 4 to 1024 tenants, RR1/RR4/RAND1, three workloads (002 §V-B, Fig 10).

Configurations exactly as 002 Table IV (params/hardware.toml [hypertrio.config.*]); workloads
iperf3, mediastream and websearch from the synthetic tenant generator of §IV-D with Table III's
per-tenant lengths and §V-C's active translation sets; the trace stops when any tenant runs out
(§V-A). Bandwidth = accepted packets x 1542 B / translation time (§IV-C).

Paper: Base at more than 32 tenants 12-30 Gb/s (at most 15% of 200 Gb/s); HyperTRIO up to 100%
at 1024 tenants, RAND1 up to 80%; over 90% vs 6% for Base at 1024 tenants (§V-B, §VII).

Module name for the registry: `devlend.experiments.h2` (experiment "h2").
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, register
from ._hypertrio import LINK_GBPS, h2 as run_h2, quick_packets

TENANTS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
QUICK_TENANTS = [4, 16, 64, 1024]
ORDERS = ["RR1", "RR4", "RAND1"]
WORKLOADS = ["iperf3", "mediastream", "websearch"]
CONFIGS = ["base", "hypertrio"]
COLUMNS = ["workload", "order", "config", "tenants", "gbps", "utilisation", "devtlb_hit_rate", "pb_hit_rate",
           "iotlb_hit_rate", "l2_hit_rate", "l3_hit_rate", "context_hit_rate", "mean_walk_accesses", "ptb_mean", "drops",
           "prefetch_accuracy", "prefetch_coverage"]


@register("h2", "HyperTRIO vs Base: I/O bandwidth, 4-1024 tenants, RR1/RR4/RAND1 (002 §V-B, Fig 10)")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    tenants = QUICK_TENANTS if quick else TENANTS
    points = []
    for n in tenants:
        # quick: fewer packets per tenant (see _hypertrio.quick_packets); full: Table III's length
        points += run_h2([n], ORDERS, WORKLOADS, CONFIGS, quick_packets(n) if quick else None)
        if progress:
            progress(f"{n} tenants done")
    rows = []
    for p in points:
        s = p["stats"]
        row = {"workload": p["workload"], "order": p["order"], "config": p["config"], "tenants": p["tenants"]}
        row.update({k: (round(s[k], 3) if isinstance(s[k], float) else s[k]) for k in COLUMNS[4:]})
        row["gbps"] = round(s["gbps"], 1)
        rows.append(row)
    g = {(r["workload"], r["order"], r["config"], r["tenants"]): r["gbps"] for r in rows}
    big = max(tenants)
    base_hi = [v for (w, o, c, n), v in g.items() if c == "base" and n > 32]
    ht = {(w, o): g[w, o, "hypertrio", big] for w in WORKLOADS for o in ORDERS}
    notes = [
        f"Base, more than 32 tenants: {min(base_hi)}-{max(base_hi)} Gb/s (paper: 12-30 Gb/s, at most 15%)",
        f"HyperTRIO at {big} tenants: " + ", ".join(f"{w} {o} {v}" for (w, o), v in ht.items())
        + " Gb/s (paper: up to 100%, over 90%; RAND1 up to 80%)",
        f"Base at {big} tenants: {min(g[w, o, 'base', big] for w in WORKLOADS for o in ORDERS)}-"
        f"{max(g[w, o, 'base', big] for w in WORKLOADS for o in ORDERS)} Gb/s (paper: 6% = 12 Gb/s)",
    ]
    if quick:
        notes.append("quick mode: each tenant's log cut to max(100, 40000/tenants) steady-state packets")
    for w, o, c, s in (("paper", "", "base", ">32 tenants: 12-30 Gb/s"), ("paper", "", "hypertrio", "1024 tenants: >90% (RAND1 up to 80%)")):
        rows.append({"workload": w, "order": o, "config": c, "tenants": "—", "gbps": s})
    return ExperimentResult(name="h2", title=f"I/O link bandwidth, Base vs HyperTRIO (Table IV), Gb/s of {LINK_GBPS:.0f}",
                            source="002 §V-B, Fig 10, Table IV", columns=COLUMNS, rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Fig 10's layout: one panel per workload, bandwidth against tenants, Base and HyperTRIO for
    each interleaving."""
    rows = [r for r in res.rows if isinstance(r["tenants"], int)]
    styles = {"RR1": "-o", "RR4": "-s", "RAND1": "-^"}
    with Figure(path, ncols=3, size=(14, 4), sharey=True, title="devlend: Base vs HyperTRIO (cf. 002 Fig 10)") as f:
        f.colour("base"), f.colour("hypertrio")
        for ax, w in zip(f.axes, WORKLOADS):
            for c in ("base", "hypertrio"):
                for o in ORDERS:
                    xs, ys = points(sorted(rows, key=lambda r: r["tenants"]), "tenants", "gbps", workload=w, config=c, order=o)
                    if xs:
                        f.line(ax, xs, ys, f"{'HyperTRIO' if c == 'hypertrio' else 'Base'} {o}", styles[o], key=c, markersize=3)
            # 002 §V-B: Base beyond 32 tenants 12-30 Gb/s; HyperTRIO at 1024 over 90%, RAND1 up to 80%.
            f.paper_band(ax, 12, 30, "Base beyond 32 tenants: 12-30 Gb/s", xspan=(32, 1024))
            f.paper(ax, [1024], [0.95 * LINK_GBPS], "HyperTRIO at 1024: over 90%", yerr=([0.05 * LINK_GBPS], [0.05 * LINK_GBPS]))
            f.paper(ax, [1024], [0.8 * LINK_GBPS], "HyperTRIO RAND1 at 1024: up to 80%")
            axes(ax, xlabel="tenants", title=w, logx=True, ylim=(0, LINK_GBPS * 1.05), legend=None)
        axes(f.axes[0], ylabel="I/O link bandwidth (Gb/s)", grid=False, legend=7)
