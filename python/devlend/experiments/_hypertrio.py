"""Shared by H1/H2 (002, HyperTRIO): calls into the Rust model (crates/devlend-hypertrio) and
the quick-mode packet budget."""

from __future__ import annotations

import json

from .. import _core

LINK_GBPS = 200.0
# Quick mode: each tenant's log cut to this many packets, from the steady state (set-up packets
# skipped), with at least QUICK_TOTAL packets per point so that cold misses do not dominate.
QUICK_MIN_PACKETS = 100
QUICK_TOTAL = 40_000


def quick_packets(tenants: int) -> int:
    return max(QUICK_MIN_PACKETS, QUICK_TOTAL // max(1, tenants))


def simulate(config: str, workload: str, tenants: int, order: str, packets_per_tenant: int | None = None,
             overrides: dict | None = None, seed: int = 1) -> dict:
    """One point: the statistics dict (gbps, hit rates per structure, PTB occupancy, drops,
    prefetch accuracy and coverage, ...)."""
    return json.loads(_core.hypertrio_simulate(config, workload, tenants, order, packets_per_tenant,
                                               json.dumps(overrides) if overrides else None, seed))


def h1(connections: list[int], packets_per_tenant: int | None) -> list[dict]:
    return json.loads(_core.hypertrio_h1(connections, packets_per_tenant))


def h2(tenants: list[int], orders: list[str], workloads: list[str], configs: list[str],
       packets_per_tenant: int | None) -> list[dict]:
    return json.loads(_core.hypertrio_h2(tenants, orders, workloads, configs, packets_per_tenant))


def grid(points: list[dict]) -> list[dict]:
    """Run points {label, config, overrides, workload, tenants, order, packets_per_tenant} on all
    cores; returns them with `config` = label and `stats`."""
    return json.loads(_core.hypertrio_grid(json.dumps(points)))


def plot_three_panels(rows: list[dict], workloads, path: str, title: str) -> None:
    """The layout of 002 Figs 11 and 12: panels (a), (b), (c), one line per workload and variant
    ("a:...", "b:...", "c:..."), link bandwidth against tenants."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), sharey=True)
    for ax, part in zip(axes, "abc"):
        for w, ls in zip(workloads, ("-", "--", ":")):
            for v in dict.fromkeys(r["variant"] for r in rows if r["variant"].startswith(part + ":")):
                pts = sorted((r["tenants"], r["gbps"]) for r in rows if r["workload"] == w and r["variant"] == v)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], ls, marker="o", markersize=3, label=f"{w} {v[3:]}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tenants")
        ax.set_title(f"({part})")
        ax.set_ylim(0, LINK_GBPS * 1.05)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    axes[0].set_ylabel("I/O link bandwidth (Gb/s)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
