"""Shared by H1/H2 (002, HyperTRIO): calls into the Rust model (crates/devlend-hypertrio) and
the quick-mode packet budget."""

from __future__ import annotations

import json

from ._plot import Figure, axes, points
from .. import _core
from ..errors import HyperTrioError

LINK_GBPS = 200.0
# Quick mode: each tenant's log cut to this many packets, from the steady state (set-up packets
# skipped), with at least QUICK_TOTAL packets per point so that cold misses do not dominate.
QUICK_MIN_PACKETS = 100
QUICK_TOTAL = 40_000


def quick_packets(tenants: int) -> int:
    return max(QUICK_MIN_PACKETS, QUICK_TOTAL // max(1, tenants))


def call(fn, *args, **kw):
    """A Rust HyperTRIO call, its failure raised as devlend's HyperTrioError (message, kind)."""
    try:
        return fn(*args, **kw)
    except _core.HyperTrioError as e:
        kind, message = e.args
        raise HyperTrioError(message, kind) from None


def simulate(config: str, workload: str, tenants: int, order: str, packets_per_tenant: int | None = None,
             overrides: dict | None = None, seed: int = 1) -> dict:
    """One point: the statistics dict (gbps, hit rates per structure, PTB occupancy, drops,
    prefetch accuracy and coverage, ...)."""
    return json.loads(call(_core.hypertrio_simulate, config, workload, tenants, order, packets_per_tenant,
                           json.dumps(overrides) if overrides else None, seed))


def h1(connections: list[int], packets_per_tenant: int | None) -> list[dict]:
    return json.loads(call(_core.hypertrio_h1, connections, packets_per_tenant))


def h2(tenants: list[int], orders: list[str], workloads: list[str], configs: list[str],
       packets_per_tenant: int | None) -> list[dict]:
    return json.loads(call(_core.hypertrio_h2, tenants, orders, workloads, configs, packets_per_tenant))


def grid(points: list[dict]) -> list[dict]:
    """Run points {label, config, overrides, workload, tenants, order, packets_per_tenant} on all
    cores; returns them with `config` = label and `stats`."""
    return json.loads(call(_core.hypertrio_grid, json.dumps(points)))


def plot_three_panels(rows: list[dict], workloads, path: str, title: str, paper=()) -> None:
    """The layout of 002 Figs 11 and 12: panels (a), (b), (c), one line per workload and variant
    ("a:...", "b:...", "c:..."), link bandwidth against tenants; a variant keeps its colour. Each of
    ``paper`` (panel index, xs, ys, label) is a paper value drawn beside ours (Figure.paper)."""
    rows = sorted(rows, key=lambda r: r["tenants"])
    with Figure(path, ncols=3, size=(14, 4), sharey=True, title=title) as f:
        for ax, part in zip(f.axes, "abc"):
            for w, ls in zip(workloads, ("-", "--", ":")):
                for v in dict.fromkeys(r["variant"] for r in rows if r["variant"].startswith(part + ":")):
                    f.line(ax, *points(rows, "tenants", "gbps", workload=w, variant=v), f"{w} {v[3:]}", ls, key=v,
                           marker="o", markersize=3)
        for panel, xs, ys, label in paper:
            f.paper(f.axes[panel], xs, ys, label)
        for ax, part in zip(f.axes, "abc"):
            axes(ax, xlabel="tenants", title=f"({part})", logx=True, ylim=(0, LINK_GBPS * 1.05), legend=6)
        axes(f.axes[0], ylabel="I/O link bandwidth (Gb/s)", grid=False, legend=6)
