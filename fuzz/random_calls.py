"""Random calls of devlend's Python API with hostile arguments (issue 30): every exception must be a
DevlendError. `tests/test_random_calls.py` runs a few seconds of it per seed in CI; run it longer
here (`python fuzz/random_calls.py SECONDS [SEED]`), which prints the calls made and every escape.

Each call picks a method of a Fabric, Pool, Scenario or Run and fills each parameter with either a
plausible value (a name the topology has, a small size, a time) or a hostile one (NaN, infinities,
1e30, 2**64, 2**70, negative numbers, None, bytes, lists, unknown names). Methods that run the
simulation for as long as their arguments ask (`dma`, `run`, the plots) are left out: a hostile
size there is a long run, not an error."""

from __future__ import annotations

import inspect
import math
import os
import random
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPO = os.path.join(ROOT, "python", "devlend", "topologies", "four-server-cluster.yaml")

NAMES = ["server1", "server2", "server3", "gpu0", "gpu2", "nvme1", "ntb-1-2", "ntb-2-1", "server1:cpu", "server2:gpu2",
         "gpu2.bar1+0x1000", "server1.ram+0x1000", "nope", "", "gpu2.bar9", "80000", "0x80001", "htod", "dtoh", "randread",
         "link-down", "host-crash", "poisoned", "scrub", "none", "peer", "ram", "hypertrio", "base", "1 MiB", "-1 MiB"]
HOSTILE = [float("nan"), float("inf"), float("-inf"), 1e30, -1e30, 2**64, 2**70, -(2**70), -1, -0.5, None, b"\x00\x01",
           [], {}, (), True, object()]
PLAUSIBLE = [0, 1, 64, 4096, 1 << 20, 0.0, 1000.0, 2.5e6]

# Methods that simulate for as long as their arguments ask, write files, or only format.
SKIP = {"dma", "run", "machine", "to_csv", "plot", "show", "header", "analytic", "sim_stats", "warm"}


def value(rng: random.Random, name: str):
    r = rng.random()
    if r < 0.3:
        return rng.choice(HOSTILE)
    if r < 0.6:
        return rng.choice(NAMES)
    if name in ("data",):
        return rng.choice([b"x", b"hello", bytes(8)])
    return rng.choice(PLAUSIBLE)


def _targets():
    import devlend
    fab = devlend.load(TOPO).build()
    pool = devlend.Pool(TOPO)
    sc = devlend.Scenario(TOPO)
    run = fab.machine()
    return [("Fabric", fab), ("Pool", pool), ("Scenario", sc), ("Run", run)]


def _methods(obj):
    out = []
    for name, fn in inspect.getmembers(obj, callable):
        if name.startswith("_") or name in SKIP:
            continue
        try:
            params = [p for p in inspect.signature(fn).parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        except (TypeError, ValueError):
            continue
        out.append((name, fn, params))
    return out


def hostile_calls(rng: random.Random, seconds: float = math.inf, limit: int | None = None) -> tuple[int, list[str]]:
    """Calls for about `seconds`, or `limit` calls (the same ones for one seed on any machine):
    (calls made, descriptions of exceptions that were not DevlendError)."""
    from devlend.errors import DevlendError
    targets = [(n, o, _methods(o)) for n, o in _targets()]
    end, calls, escaped = time.monotonic() + seconds, 0, []
    while time.monotonic() < end and (limit is None or calls < limit):
        tname, obj, methods = rng.choice(targets)
        name, fn, params = rng.choice(methods)
        args = {}
        for p in params:
            if p.default is not inspect.Parameter.empty and rng.random() < 0.4:
                continue
            args[p.name] = value(rng, p.name)
        calls += 1
        try:
            fn(**args)
        except DevlendError:
            pass
        except Exception as e:  # noqa: BLE001 - what escaped is the finding
            where = traceback.extract_tb(e.__traceback__)[-1]
            escaped.append(f"{tname}.{name}({', '.join(f'{k}={v!r}' for k, v in args.items())}): {type(e).__name__}: {e} "
                           f"[{os.path.basename(where.filename)}:{where.lineno}]")
    return calls, escaped


if __name__ == "__main__":
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    n, bad = hostile_calls(random.Random(seed), secs)
    for b in bad:
        print(b)
    print(f"{n} calls, {len(bad)} escaped (seed {seed}, {secs:.0f} s)")
    sys.exit(1 if bad else 0)
