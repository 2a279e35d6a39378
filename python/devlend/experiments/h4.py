"""H4: what each HyperTRIO mechanism contributes (002 §V-D, Fig 12a-c).

(a) partitioned DevTLB (8 partitions) and L2/L3 (32/64) only, PTB of one packet, no prefetching;
(b) the same with PTBs of 8 and 32 entries (pending translations, 002 §III: a packet enters
while one is free); (c) PTB 32 with and without the prefetch unit
(8-entry buffer, history 48, 2 pages per tenant). Table IV's HyperTRIO column otherwise.

Paper: PTB 8 reaches full bandwidth up to 16 tenants; PTB 32 gives 136 Gb/s at 1024 tenants;
prefetching adds up to 30% (websearch) and serves 45% of requests (websearch, 1024 tenants).
Module name: `devlend.experiments.h4` (experiment "h4").
"""

from __future__ import annotations

from typing import Callable, Optional

from . import ExperimentResult, register
from ._hypertrio import LINK_GBPS, grid, quick_packets, plot_three_panels

WORKLOADS = ["iperf3", "mediastream", "websearch"]
TENANTS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
QUICK_TENANTS = [4, 16, 64, 1024]
VARIANTS = [("a: partitioning, PTB 1", {"ptb_entries": 1, "prefetch": False}),
            ("b: PTB 8", {"ptb_entries": 8, "prefetch": False}),
            ("b: PTB 32", {"ptb_entries": 32, "prefetch": False}),
            ("c: PTB 32 + prefetching", None)]


@register("h4", "HyperTRIO mechanisms: partitioning, PTB size, prefetching (002 §V-D, Fig 12)")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    tenants = QUICK_TENANTS if quick else TENANTS
    pts = [{"label": label, "config": "hypertrio", "overrides": ov, "workload": w, "tenants": n, "order": "RR1",
            "packets_per_tenant": quick_packets(n) if quick else None}
           for w in WORKLOADS for n in tenants for label, ov in VARIANTS]
    res = grid(pts)
    rows = [{"workload": p["workload"], "variant": p["config"], "tenants": p["tenants"], "gbps": round(p["stats"]["gbps"], 1),
             "ptb_mean": round(p["stats"]["ptb_mean"], 1), "drops": p["stats"]["drops"],
             "prefetch_accuracy": round(p["stats"]["prefetch_accuracy"], 3), "prefetch_coverage": round(p["stats"]["prefetch_coverage"], 3)}
            for p in res]
    g = {(r["workload"], r["variant"], r["tenants"]): r for r in rows}
    big = max(tenants)
    ptb8_full = {w: max((n for n in tenants if g[w, "b: PTB 8", n]["gbps"] >= 0.97 * LINK_GBPS), default=None) for w in WORKLOADS}
    gain = {w: round(100 * (g[w, "c: PTB 32 + prefetching", big]["gbps"] / g[w, "b: PTB 32", big]["gbps"] - 1), 1) for w in WORKLOADS}
    notes = [
        "PTB 8 keeps >= 97% of the link up to " + ", ".join(f"{w} {ptb8_full[w]}" for w in WORKLOADS) + " tenants (paper: 16); "
        "at 16 tenants: " + ", ".join(f"{w} {g[w, 'b: PTB 8', 16]['gbps']}" for w in WORKLOADS) + " Gb/s",
        f"PTB 32 at {big} tenants: " + ", ".join(f"{w} {g[w, 'b: PTB 32', big]['gbps']}" for w in WORKLOADS) + " Gb/s (paper: 136)",
        f"prefetching at {big} tenants: +" + ", +".join(f"{gain[w]}% {w}" for w in WORKLOADS)
        + "; coverage " + ", ".join(f"{w} {g[w, 'c: PTB 32 + prefetching', big]['prefetch_coverage']}" for w in WORKLOADS)
        + " (paper: up to +30% websearch; 45% of requests served)",
    ]
    if quick:
        notes.append("quick mode: logs cut to max(100, 40000/tenants) steady-state packets per tenant")
    return ExperimentResult(name="h4", title="HyperTRIO mechanisms, Gb/s", source="002 §V-D, Fig 12",
                            columns=["workload", "variant", "tenants", "gbps", "ptb_mean", "drops", "prefetch_accuracy", "prefetch_coverage"],
                            rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Fig 12's layout: (a) partitioning, (b) PTB sizes, (c) prefetching; bandwidth vs tenants."""
    # 002 §V-D: a PTB of 8 reaches full bandwidth up to 16 tenants; a PTB of 32 gives 136 Gb/s at 1024.
    paper = [(1, [16], [LINK_GBPS], "PTB 8: full bandwidth up to 16 tenants"),
             (1, [1024], [PAPER_PTB32_1024_GBPS], f"PTB 32 at 1024 tenants: {PAPER_PTB32_1024_GBPS} Gb/s")]
    plot_three_panels(res.rows, WORKLOADS, path, "devlend: HyperTRIO mechanisms (cf. 002 Fig 12)", paper)


PAPER_PTB32_1024_GBPS = 136
