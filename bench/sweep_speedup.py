"""Sweep speed-up on local workers (issue 33): a HyperTRIO grid whose points differ ~64x in cost,
run on 1 worker, on 2 workers in grid order (a constant cost: ties keep grid order) and on 2
workers longest-expected-first (hypertrio_point's own cost), each into a fresh store. Prints each
run's wall seconds as JSON lines, and checks that every run's results are bit-identical.

    python bench/sweep_speedup.py [--reps 3] [--packets 4000]
"""

import argparse
import json
import tempfile
import time

from devlend.sweep import hypertrio_point, sweep

GRID = {"config": ["base", "hypertrio"], "workload": ["iperf3"], "tenants": [16, 64, 256, 1024], "order": ["RR1", "RAND1"]}


def one(workers: int, cost, packets: int):
    grid = {**GRID, "packets_per_tenant": [packets]}
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        df = sweep(hypertrio_point, grid, f"{d}/store.jsonl", workers=workers, progress=False, cost=cost)
        return time.perf_counter() - t, df


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--packets", type=int, default=4000)
    a = ap.parse_args()
    ways = {"1-worker": (1, None), "2-workers-grid-order": (2, lambda **_: 0.0), "2-workers-longest-first": (2, None)}
    first = None
    for rep in range(a.reps):
        for name, (workers, cost) in ways.items():
            s, df = one(workers, cost, a.packets)
            same = first is None or df.equals(first)
            first = df if first is None else first
            print(json.dumps({"rep": rep, "way": name, "wall_s": round(s, 3), "identical": same}), flush=True)
            assert same, f"{name}: results differ from the first run"


if __name__ == "__main__":
    main()
