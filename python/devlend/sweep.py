"""Sweeps: run any function over the cartesian product of a parameter grid, on all local cores or on
a Dask cluster, writing each finished point to a JSON-lines results store as it completes so that an
interrupted sweep resumes without recomputing; returns a pandas DataFrame in grid order.

    >>> from devlend.sweep import sweep, hypertrio_point
    >>> df = sweep(hypertrio_point, {"config": ["base", "hypertrio"], "workload": ["iperf3"],
    ...                              "tenants": [4, 64, 1024], "order": ["RR1", "RAND1"]},
    ...            "h2.jsonl")                                   # local, os.cpu_count() processes
    >>> df = sweep(hypertrio_point, grid, "h2.jsonl", scheduler="tcp://10.0.0.1:8786")   # Dask

The store holds one JSON object a line, appended (flushed and fsynced) as each point finishes:
``{"key", "params", "status": "ok" | "error", "result" | "error", "fn", "code", "seconds",
"devlend provenance"}`` (the last: devlend's version and parameters, as every result file devlend
writes carries; ``devlend provenance STORE`` prints the first line's). ``key``
is a stable hash of the point's parameters (sha256 of their canonical JSON), so the same point has
the same key in every run, process and Python version. ``code`` fingerprints what computed the
result: the point function's source (its compiled code where there is no source), devlend's version
and the compiled core (a digest of the extension module's file). A rerun skips points whose last
line is "ok" with the current ``code``; failed points, and points computed by an edited function or
another build of devlend, are run again (a warning says how many were stale). The fingerprint sees
the point function's own text, not the helpers it calls: edit a helper outside devlend and the
store must be cleared by hand. A torn last line (a crash mid-write) is ignored with a warning and cut
off before anything is appended; a malformed line anywhere else is an error naming the line.
Lines for points outside the current grid are kept and ignored, so a grid may grow between runs.

Points are started longest-expected-first, so that the slow points do not finish last on an
otherwise idle pool: by ``cost(**point)`` where given (``fn.expected_cost`` where ``fn`` has one,
as ``hypertrio_point`` does), else by the seconds the store recorded for the point in an earlier
run (points never run first, in grid order). Only the order of work changes: every point's result,
the store's records and the returned frame (in grid order) are the same.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import itertools
import json
import linecache
import marshal
import os
import pickle
import sys
import time
import traceback
import warnings
from typing import Any, Callable, Iterator

from .errors import DevlendError

# How long connecting to a Dask scheduler may take before the address is reported unreachable.
DASK_CONNECT_TIMEOUT_S = 10.0
# How many failed points a SweepError message lists by name (all are in .failures).
_MAX_LISTED = 20


class SweepError(DevlendError):
    """One or more points raised. ``failures`` is a list of (params, error text); ``results`` the
    DataFrame of the points that did finish (also kept in the store)."""

    def __init__(self, message: str, failures: list[tuple[dict, str]], results=None):
        super().__init__(message)
        self.failures, self.results = failures, results


# ---------------------------------------------------------------------------------------------
# The ready-made point function


def hypertrio_point(config: str, workload: str, tenants: int, order: str, packets_per_tenant: int | None = None,
                    seed: int = 1, overrides: dict | None = None) -> dict:
    """One HyperTRIO point (002): the statistics dict of ``devlend._core.hypertrio_simulate``
    (gbps, utilisation, hit rates per structure, PTB occupancy, drops, prefetch accuracy and
    coverage, ...). ``packets_per_tenant=None`` is Table III's full length."""
    from .experiments._hypertrio import simulate
    return simulate(config, workload, tenants, order, packets_per_tenant, overrides, seed)


def _hypertrio_cost(tenants: int, packets_per_tenant: int | None = None, **_) -> float:
    """The expected cost of a HyperTRIO point: its packets (tenants x packets per tenant; a
    point at Table III's full length counts its tenants alone, the same scale for every point of
    a grid that leaves the length out)."""
    return float(tenants) * (packets_per_tenant or 1)


hypertrio_point.expected_cost = _hypertrio_cost


# ---------------------------------------------------------------------------------------------
# Grid and keys


def point_key(params: dict) -> str:
    """The stable key of one point: sha256 of its canonical JSON (sorted keys), 16 hex digits."""
    text = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def grid_points(grid: dict[str, list]) -> list[dict]:
    """The cartesian product of ``grid`` in a deterministic order: keys in the dict's order, the
    last key varying fastest (as itertools.product). Checks the grid first."""
    if not isinstance(grid, dict):
        raise DevlendError(f"sweep grid: expected a dict of parameter name -> list of values, got {type(grid).__name__}")
    if not grid:
        raise DevlendError("sweep grid is empty: give at least one parameter with a list of values")
    for name, values in grid.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise DevlendError(f"sweep grid: parameter name {name!r} is not a valid Python identifier "
                               "(points are passed as keyword arguments)")
        if not isinstance(values, (list, tuple)):
            raise DevlendError(f"sweep grid[{name!r}]: expected a list of values, got {type(values).__name__} "
                               f"{values!r} (write [{values!r}] for a single value)")
        if not values:
            raise DevlendError(f"sweep grid[{name!r}] is an empty list: the sweep would have no points")
        seen = set()
        for v in values:
            try:
                canon = json.dumps(v, sort_keys=True, allow_nan=False)
            except (TypeError, ValueError) as e:
                raise DevlendError(f"sweep grid[{name!r}]: value {v!r} cannot be stored as JSON ({e}); "
                                   "use str, int, float, bool, None, or lists/dicts of them") from None
            if canon in seen:
                raise DevlendError(f"sweep grid[{name!r}]: value {v!r} appears more than once")
            seen.add(canon)
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


# ---------------------------------------------------------------------------------------------
# The results store


def _fn_name(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


@functools.cache
def _core_digest() -> str:
    from . import _core
    h = hashlib.sha256()
    with open(_core.__file__, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def code_fingerprint(fn: Callable) -> str:
    """What computed a point: ``fn``'s name and source (or compiled code), devlend's version and
    the digest of the compiled core; 16 hex digits."""
    from . import __version__
    h = hashlib.sha256(_fn_name(fn).encode())
    try:
        linecache.checkcache(inspect.getsourcefile(fn))
        h.update(inspect.getsource(fn).encode())
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        h.update(marshal.dumps(code) if code is not None else repr(fn).encode())
    h.update(__version__.encode())
    h.update(_core_digest().encode())
    return h.hexdigest()[:16]


def read_store(path: str | os.PathLike, *, repair: bool = False) -> dict[str, dict]:
    """The store's records by key (the last line for a key wins). A torn last line is ignored
    with a warning (and cut off the file when ``repair``); any other malformed line is an error."""
    path = os.fspath(path)
    records: dict[str, dict] = {}
    if not os.path.exists(path):
        return records
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    # data ending in "\n" leaves an empty last element; otherwise the last element is unterminated.
    good_end = 0
    offset = 0
    for i, raw in enumerate(lines):
        is_last = i == len(lines) - 1
        if is_last and raw == b"":
            break
        try:
            rec = json.loads(raw)
            if not isinstance(rec, dict) or "key" not in rec or "status" not in rec or "params" not in rec:
                raise ValueError("expected an object with key, params and status")
            if is_last:
                raise ValueError("line has no terminating newline")
        except ValueError as e:
            if is_last:
                warnings.warn(f"{path}:{i + 1}: ignoring a torn last line (an interrupted write?): {e}",
                              RuntimeWarning, stacklevel=3)
                if repair:
                    with open(path, "r+b") as f:
                        f.truncate(good_end)
                        f.flush()
                        os.fsync(f.fileno())
                break
            raise DevlendError(f"{path}:{i + 1}: malformed sweep store line ({e}); "
                               "only a torn last line is skipped automatically") from None
        records[rec["key"]] = rec
        offset += len(raw) + 1
        good_end = offset
    return records


class _Store:
    """Append-only JSON lines, one fsynced line per finished point, held by one sweep at a time:
    its lock file (``STORE.lock``) holds the owner's process id. A lock whose owner is gone (a
    sweep that was killed) is taken over; an flock would not do, because the killed sweep's forked
    workers inherit it and hold it until they exit."""

    def __init__(self, path: str):
        self.path, self.lock = path, path + ".lock"
        self._take_lock()
        self.f = open(path, "ab")

    def _take_lock(self) -> None:
        for _ in range(3):
            try:
                fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = _lock_owner(self.lock)
                if owner is not None and owner != os.getpid() and _alive(owner):
                    raise DevlendError(f"sweep store {self.path} is in use by another sweep (process {owner}, {self.lock})") from None
                try:
                    os.unlink(self.lock)  # its owner is gone: take it over
                except FileNotFoundError:
                    pass
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(f"{os.getpid()}\n")
            return
        raise DevlendError(f"sweep store {self.path}: could not take its lock {self.lock} (another sweep keeps taking it)")

    def append(self, rec: dict) -> None:
        line = json.dumps(rec, separators=(",", ":"), allow_nan=True) + "\n"
        self.f.write(line.encode())
        self.f.flush()
        os.fsync(self.f.fileno())

    def close(self) -> None:
        self.f.close()
        if _lock_owner(self.lock) == os.getpid():
            os.unlink(self.lock)


def _lock_owner(lock: str) -> "int | None":
    """The process id a lock file holds, or None when it holds none (being written, or garbage)."""
    try:
        with open(lock) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _check_store_path(store) -> str:
    try:
        path = os.fspath(store)
    except TypeError:
        raise DevlendError(f"sweep store: expected a file path, got {type(store).__name__}") from None
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise DevlendError(f"sweep store {path}: directory {d} does not exist")
    if os.path.isdir(path):
        raise DevlendError(f"sweep store {path} is a directory; give a file path (e.g. results.jsonl)")
    return path


# ---------------------------------------------------------------------------------------------
# Running points


def _run_point(fn: Callable, params: dict) -> tuple[bool, Any, float]:
    """Runs in the worker: (ok, result dict or error text, seconds). Never raises for fn's errors,
    so every failure is recorded the same way locally and on Dask."""
    t0 = time.perf_counter()
    try:
        result = fn(**params)
        if not isinstance(result, dict):
            raise TypeError(f"sweep function returned {type(result).__name__}, expected a dict")
        # the stored form: what a resumed sweep reads back, so fresh and resumed results are equal
        result = json.loads(json.dumps(result))
        return True, result, time.perf_counter() - t0
    except BaseException as e:  # noqa: BLE001 - recorded, re-raised at the end as a SweepError
        if isinstance(e, KeyboardInterrupt):
            raise
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        return False, f"{type(e).__name__}: {e}\n" + "".join(tb[-6:]), time.perf_counter() - t0


def _local(fn, todo: list[dict], workers: int) -> Iterator[tuple[dict, tuple]]:
    from concurrent.futures import ProcessPoolExecutor, as_completed
    ex = ProcessPoolExecutor(max_workers=max(1, min(workers, len(todo))))
    try:
        futs = {ex.submit(_run_point, fn, p): p for p in todo}
        for fut in as_completed(futs):
            try:
                out = fut.result()
            except Exception as e:  # a worker died (BrokenProcessPool) or the point failed to pickle
                out = (False, f"{type(e).__name__}: {e}", 0.0)
            yield futs[fut], out
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def _dask_client(scheduler: str):
    try:
        from distributed import Client
    except ImportError:
        raise DevlendError("sweeps on a Dask cluster need dask.distributed: pip install 'devlend[sweep]'") from None
    try:
        return Client(scheduler, timeout=DASK_CONNECT_TIMEOUT_S, set_as_default=False)
    except Exception as e:  # OSError / TimeoutError / ValueError for a malformed address
        raise DevlendError(f"cannot reach the Dask scheduler at {scheduler!r}: {type(e).__name__}: {e}") from None


def _dask(client, fn, todo: list[dict]) -> Iterator[tuple[dict, tuple]]:
    from distributed import as_completed
    futs = {}
    for rank, p in enumerate(todo):  # todo is in start order: the first point gets the highest priority
        futs[client.submit(_run_point, fn, p, pure=False, priority=len(todo) - rank)] = p
    try:
        for fut in as_completed(list(futs), loop=client.loop):
            try:
                out = fut.result()
            except Exception as e:  # KilledWorker, a deserialisation error on the worker, ...
                out = (False, f"{type(e).__name__}: {e}", 0.0)
            yield futs[fut], out
    finally:
        client.cancel([f for f in futs if not f.done()])


# ---------------------------------------------------------------------------------------------
# The sweep


def sweep(fn: Callable[..., dict], grid: dict[str, list], store: str | os.PathLike, *, scheduler: str | None = None,
          workers: int | None = None, progress=True, cost: Callable[..., float] | None = None):
    """Run ``fn(**point)`` for every point of ``grid``'s cartesian product that ``store`` does not
    already hold, and return a DataFrame of all points in grid order: one column per parameter,
    one per result field (``result.NAME`` where it would clash with a parameter) and ``sweep_key``.

    Locally on ``workers`` processes (default ``os.cpu_count()``); on a Dask cluster when
    ``scheduler`` is its address ("tcp://host:8786"). ``fn`` must be a picklable top-level function
    returning a JSON-serialisable dict. Points that raise are recorded in the store and raised at
    the end as one :class:`SweepError` (a DevlendError) listing them; the rest are kept.

    ``cost(**point)`` (default ``fn.expected_cost`` if it has one) estimates a point's run time in
    any unit; points start longest-expected-first (see the module's notes).
    """
    if not callable(fn):
        raise DevlendError(f"sweep: fn must be callable, got {type(fn).__name__}")
    try:
        pickle.dumps(fn)
    except Exception as e:
        raise DevlendError(f"sweep: fn {_fn_name(fn)} cannot be pickled to send to workers ({e}); "
                           "use a function defined at the top level of a module") from None
    points = grid_points(grid)
    path = _check_store_path(store)
    if workers is not None:
        if scheduler is not None:
            raise DevlendError("sweep: workers applies to local sweeps; a Dask cluster's size is set by its workers")
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise DevlendError(f"sweep: workers must be a positive integer, got {workers!r}")
    if cost is not None and not callable(cost):
        raise DevlendError(f"sweep: cost must be callable (point parameters -> expected run time), got {cost!r}")
    if scheduler is not None and not isinstance(scheduler, str):
        raise DevlendError(f"sweep: scheduler must be an address string such as 'tcp://host:8786', got {scheduler!r}")

    keys = [point_key(p) for p in points]
    name, code = _fn_name(fn), code_fingerprint(fn)
    failures: list[tuple[dict, str]] = []
    store_obj = _Store(path)  # locked before reading, so no other sweep appends while we decide what to run
    try:
        records = read_store(path, repair=True)
        ok = {k: r for k, r in records.items() if r.get("status") == "ok"}
        wanted = set(keys)
        others = sorted({r.get("fn") for k, r in ok.items() if k in wanted} - {name, None})
        if others:
            raise DevlendError(f"sweep store {path} holds results of {', '.join(others)} for points of this grid, "
                               f"not of {name}; use another store")
        stale = [k for k in wanted if k in ok and ok[k].get("code") != code]
        if stale:
            warnings.warn(f"{path}: {len(stale)} stored point(s) were computed by another version of {name} or of "
                          "devlend; computing them again", RuntimeWarning, stacklevel=2)
            for k in stale:
                del ok[k]
        todo = longest_first([p for p, k in zip(points, keys) if k not in ok], records,
                             cost if cost is not None else getattr(fn, "expected_cost", None))
        if todo:
            _execute(fn, (name, code), points, todo, ok, failures, store_obj, scheduler, workers, progress)
    finally:
        store_obj.close()

    df = _frame(points, keys, ok, list(grid))
    if failures:
        order = {k: i for i, k in enumerate(keys)}
        failures.sort(key=lambda f: order[point_key(f[0])])
        listed = "\n".join(f"  {p}: {err.splitlines()[0] if err else '?'}" for p, err in failures[:_MAX_LISTED])
        more = f"\n  ... and {len(failures) - _MAX_LISTED} more" if len(failures) > _MAX_LISTED else ""
        raise SweepError(f"{len(failures)} of {len(points)} sweep points failed (errors recorded in {path}; "
                         f"the other points are kept and a rerun retries only the failed ones):\n{listed}{more}",
                         failures, df)
    return df


def longest_first(todo: list[dict], records: dict[str, dict], cost: Callable[..., float] | None) -> list[dict]:
    """``todo`` in the order to start it: by ``cost(**point)``, longest first, where ``cost`` is
    given; else by the seconds ``records`` (the store) holds for a point, longest first, after the
    points it holds none for (in grid order). Ties keep grid order."""
    if cost is not None:
        expected = []
        for p in todo:
            try:
                c = float(cost(**p))
            except Exception as e:  # noqa: BLE001 - a bad estimator is the caller's input error
                raise DevlendError(f"sweep: cost estimate for point {p} failed: {type(e).__name__}: {e}") from None
            if c != c:
                raise DevlendError(f"sweep: cost estimate for point {p} is NaN; expected a number")
            expected.append(c)
    else:
        seen = [records.get(point_key(p), {}).get("seconds") for p in todo]
        expected = [float("inf") if s is None else float(s) for s in seen]
    order = sorted(range(len(todo)), key=lambda i: -expected[i])  # stable: ties in grid order
    return [todo[i] for i in order]


def _execute(fn, ident, points, todo, ok, failures, store_obj, scheduler, workers, progress) -> None:
    name, code = ident
    from .provenance import KEY, record
    prov = record(command=f"devlend.sweep.sweep({name})")
    client = _dask_client(scheduler) if scheduler is not None else None
    bar = None
    try:
        if progress and hasattr(sys.stderr, "isatty") and sys.stderr.isatty():
            from tqdm import tqdm
            bar = tqdm(total=len(points), initial=len(points) - len(todo), desc="sweep", unit="pt", file=sys.stderr)
        stream = _dask(client, fn, todo) if client is not None else _local(fn, todo, workers or os.cpu_count() or 1)
        for params, (good, out, secs) in stream:
            rec = {"key": point_key(params), "params": params, "status": "ok" if good else "error",
                   ("result" if good else "error"): out, "fn": name, "code": code, "seconds": round(secs, 6), KEY: prov}
            store_obj.append(rec)
            if good:
                ok[rec["key"]] = rec
            else:
                failures.append((params, out))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if client is not None:
            client.close()


def _frame(points: list[dict], keys: list[str], ok: dict[str, dict], names: list[str]):
    import pandas as pd
    rows = []
    for p, k in zip(points, keys):
        if k not in ok:
            continue
        row = dict(p)
        for rk, rv in ok[k]["result"].items():
            row[f"result.{rk}" if rk in p else rk] = rv
        row["sweep_key"] = k
        rows.append(row)
    if not rows:
        return pd.DataFrame(columns=names + ["sweep_key"])
    return pd.DataFrame(rows).reset_index(drop=True)
