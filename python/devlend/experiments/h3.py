"""H3: the Base design's sensitivity to the DevTLB (002 §V-C, Fig 11a-c).

(a) DevTLB size: 64 vs 1024 entries, 8-way (Base otherwise, Table IV); (b) replacement: LRU, LFU
(4-bit counters halved on saturation) and Belady's oracle on the 64-entry 8-way DevTLB; (c) fully
associative DevTLBs with the oracle, and the active translation set of each workload: the
fewest fully associative entries with which one tenant keeps the link (>= 97%) on the Base
design (002: 8 iperf3, 32 mediastream, 36 websearch). The oracle reads the trace through a
lookahead window (crates/devlend-hypertrio/src/sim.rs).

Paper: 1024 entries help up to 64 tenants only; LFU up to 2x LRU (iperf3, 16 tenants), the
oracle slightly above LFU; with fully associative oracle DevTLBs more than 8 tenants give low
bandwidth. Module name: `devlend.experiments.h3` (experiment "h3").
"""

from __future__ import annotations

from typing import Callable, Optional

from . import ExperimentResult, register
from ._hypertrio import LINK_GBPS, grid, quick_packets, plot_three_panels

WORKLOADS = ["iperf3", "mediastream", "websearch"]
TENANTS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024]
QUICK_TENANTS = [1, 4, 16, 64, 256]
FA_SIZES = [4, 6, 8, 12, 16, 24, 32, 36, 40, 48, 64]
PAPER_ACTIVE = {"iperf3": 8, "mediastream": 32, "websearch": 36}


def _points(quick: bool) -> list[dict]:
    tenants = QUICK_TENANTS if quick else TENANTS
    ppt = (lambda n: quick_packets(n)) if quick else (lambda n: None)
    pts = []
    for w in WORKLOADS:
        for n in tenants:
            for label, ov in (("a: 64 entries 8-way", None), ("a: 1024 entries 8-way", {"devtlb_entries": 1024}),
                              ("b: LRU", {"devtlb_policy": "lru"}), ("b: LFU", {"devtlb_policy": "lfu"}),
                              ("b: oracle", {"devtlb_policy": "oracle"}),
                              ("c: 64 fully assoc. oracle", {"devtlb_ways": 64, "devtlb_policy": "oracle"})):
                pts.append({"label": label, "config": "base", "overrides": ov, "workload": w, "tenants": n,
                            "order": "RR1", "packets_per_tenant": ppt(n)})
        for size in FA_SIZES:
            pts.append({"label": f"active set: {size} fully assoc. oracle", "config": "base",
                        "overrides": {"devtlb_entries": size, "devtlb_ways": size, "devtlb_policy": "oracle"},
                        "workload": w, "tenants": 1, "order": "RR1", "packets_per_tenant": 100_000 if quick else None})
    return pts


@register("h3", "Base DevTLB size, replacement policy, full associativity (002 §V-C, Fig 11)")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    res = grid(_points(quick))
    rows = [{"workload": p["workload"], "variant": p["config"], "tenants": p["tenants"], "gbps": round(p["stats"]["gbps"], 1),
             "devtlb_hit_rate": round(p["stats"]["devtlb_hit_rate"], 3)} for p in res]
    active = {}
    for w in WORKLOADS:
        ok = [int(r["variant"].split()[2]) for r in rows if r["workload"] == w and r["variant"].startswith("active set")
              and r["gbps"] >= 0.97 * LINK_GBPS]
        active[w] = min(ok) if ok else None
    g = {(r["workload"], r["variant"], r["tenants"]): r["gbps"] for r in rows}
    n16 = 16
    notes = [f"active translation set: " + ", ".join(f"{w} {active[w]} (paper {PAPER_ACTIVE[w]})" for w in WORKLOADS),
             f"iperf3, {n16} tenants: LRU {g.get(('iperf3', 'b: LRU', n16))}, LFU {g.get(('iperf3', 'b: LFU', n16))}, "
             f"oracle {g.get(('iperf3', 'b: oracle', n16))} Gb/s (paper: LFU up to 2x LRU, oracle slightly above LFU)"]
    if quick:
        notes.append("quick mode: logs cut to max(100, 40000/tenants) steady-state packets per tenant (100000 for the active-set search)")
    for w in WORKLOADS:
        rows.append({"workload": w, "variant": "active set (ours / paper)", "tenants": 1, "gbps": f"{active[w]} / {PAPER_ACTIVE[w]}", "devtlb_hit_rate": ""})
    return ExperimentResult(name="h3", title="Base design: DevTLB size, policy and associativity, Gb/s",
                            source="002 §V-C, Fig 11", columns=["workload", "variant", "tenants", "gbps", "devtlb_hit_rate"],
                            rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Fig 11's layout: (a) sizes, (b) policies, (c) fully associative oracle, bandwidth vs tenants, per workload."""
    rows = [r for r in res.rows if isinstance(r["gbps"], float) and not r["variant"].startswith("active")]
    # 002 §V-C: LFU up to 2x LRU (iperf3, 16 tenants): drawn at twice our LRU there.
    lru = [r["gbps"] for r in rows if (r["workload"], r["variant"], r["tenants"]) == ("iperf3", "b: LRU", 16)]
    paper = [(1, [16], [2 * lru[0]], "LFU up to 2x LRU (iperf3, 16 tenants)")] if lru else []
    plot_three_panels(rows, WORKLOADS, path, "devlend: Base DevTLB sensitivity (cf. 002 Fig 11)", paper)
