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
