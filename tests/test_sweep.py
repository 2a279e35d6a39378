"""devlend.sweep: local and Dask sweeps, the JSON-lines store, resume, torn lines, bad input."""

import json
import os
import warnings

import pytest

from devlend.errors import DevlendError
from devlend.sweep import SweepError, grid_points, hypertrio_point, longest_first, point_key, read_store, sweep

LOG = "DEVLEND_SWEEP_TEST_LOG"      # file that every call appends one line to (counts calls across processes)
FAIL = "DEVLEND_SWEEP_TEST_FAIL"    # "x=2" makes cheap() raise at x == 2


def cheap(x, y):
    log = os.environ.get(LOG)
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"x": x, "y": y}) + "\n")
    if os.environ.get(FAIL) == f"x={x}":
        raise ValueError(f"boom at x={x}")
    return {"sum": x + y, "prod": x * y, "label": f"{x}-{y}"}


def calls(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.fixture
def log(tmp_path, monkeypatch):
    p = tmp_path / "calls.log"
    monkeypatch.setenv(LOG, str(p))
    monkeypatch.delenv(FAIL, raising=False)
    return p


GRID = {"x": [1, 2, 3], "y": [10, 20]}


def test_grid_order_and_keys_are_deterministic():
    pts = grid_points(GRID)
    assert pts == [{"x": 1, "y": 10}, {"x": 1, "y": 20}, {"x": 2, "y": 10}, {"x": 2, "y": 20},
                   {"x": 3, "y": 10}, {"x": 3, "y": 20}]
    assert point_key({"x": 1, "y": 10}) == point_key({"y": 10, "x": 1})
    assert point_key({"x": 1}) != point_key({"x": 1.0}) != point_key({"x": True})
    assert len({point_key(p) for p in pts}) == len(pts)
    # pinned: the key must not change between releases, or old stores stop resuming
    assert point_key({"x": 1, "y": 10}) == "ffa45b959a53eef1"


def test_local_sweep(tmp_path, log):
    store = tmp_path / "s.jsonl"
    df = sweep(cheap, GRID, store, workers=2, progress=False)
    assert list(df.columns) == ["x", "y", "sum", "prod", "label", "sweep_key"]
    assert df[["x", "y"]].values.tolist() == [[p["x"], p["y"]] for p in grid_points(GRID)]
    assert df["sum"].tolist() == [11, 21, 12, 22, 13, 23]
    assert len(calls(log)) == 6
    recs = read_store(store)
    assert len(recs) == 6 and all(r["status"] == "ok" for r in recs.values())
    # rerun: nothing recomputed, identical frame
    df2 = sweep(cheap, GRID, str(store), progress=False)
    assert len(calls(log)) == 6
    assert df2.equals(df)


def test_hypertrio_point_sweep(tmp_path):
    grid = {"config": ["base", "hypertrio"], "workload": ["iperf3"], "tenants": [4, 8], "order": ["RR1"],
            "packets_per_tenant": [50]}
    df = sweep(hypertrio_point, grid, tmp_path / "h.jsonl", workers=2, progress=False)
    assert len(df) == 4
    assert df["config"].tolist() == ["base", "base", "hypertrio", "hypertrio"]
    assert (df["gbps"] > 0).all() and (df["tenants"] == df["result.tenants"]).all()
    direct = hypertrio_point("hypertrio", "iperf3", 8, "RR1", 50)
    assert df.iloc[3]["gbps"] == direct["gbps"]


def test_failed_point_recorded_then_resumed(tmp_path, log, monkeypatch):
    store = tmp_path / "s.jsonl"
    monkeypatch.setenv(FAIL, "x=2")
    with pytest.raises(SweepError) as ei:
        sweep(cheap, GRID, store, workers=3, progress=False)
    e = ei.value
    assert isinstance(e, DevlendError)
    assert "2 of 6 sweep points failed" in str(e) and "{'x': 2, 'y': 10}: ValueError: boom at x=2" in str(e)
    assert [p for p, _ in e.failures] == [{"x": 2, "y": 10}, {"x": 2, "y": 20}]
    assert len(e.results) == 4 and 2 not in e.results["x"].tolist()
    recs = read_store(store)
    assert sorted(r["status"] for r in recs.values()) == ["error"] * 2 + ["ok"] * 4
    assert "boom" in recs[point_key({"x": 2, "y": 10})]["error"]
    # the fix: only the two failed points run again
    monkeypatch.delenv(FAIL)
    os.remove(log)
    df = sweep(cheap, GRID, store, progress=False)
    assert sorted((c["x"], c["y"]) for c in calls(log)) == [(2, 10), (2, 20)]
    assert df["sum"].tolist() == [11, 21, 12, 22, 13, 23]


def test_interrupted_store_resumes_and_grid_can_grow(tmp_path, log):
    store = tmp_path / "s.jsonl"
    full = sweep(cheap, GRID, store, progress=False)
    lines = store.read_text().splitlines(keepends=True)
    store.write_text("".join(lines[:2]))          # as if killed after two points
    os.remove(log)
    df = sweep(cheap, {"x": [1, 2, 3, 4], "y": [10, 20]}, store, progress=False)
    assert len(calls(log)) == 4 + 2               # the four lost points and the two new ones
    assert df.iloc[:6].drop(columns="sweep_key").equals(full.drop(columns="sweep_key"))
    assert df["x"].tolist() == [1, 1, 2, 2, 3, 3, 4, 4]


def test_torn_last_line(tmp_path, log):
    store = tmp_path / "s.jsonl"
    sweep(cheap, GRID, store, progress=False)
    text = store.read_text()
    lines = text.splitlines(keepends=True)
    store.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])   # crash mid-write
    os.remove(log)
    with pytest.warns(RuntimeWarning, match=r"s\.jsonl:6: ignoring a torn last line"):
        df = sweep(cheap, GRID, store, progress=False)
    assert len(calls(log)) == 1 and len(df) == 6
    # the torn bytes were cut before appending: the store parses cleanly again
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_store(store)) == 6
    assert store.read_text().endswith("\n") and len(store.read_text().splitlines()) == 6


def test_corrupt_middle_line_is_an_error(tmp_path, log):
    store = tmp_path / "s.jsonl"
    sweep(cheap, GRID, store, progress=False)
    lines = store.read_text().splitlines(keepends=True)
    lines[2] = "{not json\n"
    store.write_text("".join(lines))
    with pytest.raises(DevlendError, match=r"s\.jsonl:3: malformed sweep store line"):
        sweep(cheap, GRID, store, progress=False)


def test_store_of_another_function_is_refused(tmp_path, log):
    store = tmp_path / "s.jsonl"
    sweep(cheap, GRID, store, progress=False)
    with pytest.raises(DevlendError, match="holds results of test_sweep.cheap"):
        sweep(other, GRID, store, progress=False)


def other(x, y):
    return {"d": x - y}


def test_dask_local_cluster(tmp_path, log):
    distributed = pytest.importorskip("distributed")
    store = tmp_path / "d.jsonl"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
        df = sweep(cheap, GRID, store, scheduler=cl.scheduler_address, progress=False)
        assert df["sum"].tolist() == [11, 21, 12, 22, 13, 23]
        assert len(calls(log)) == 6
        # the local runner reads the same store: nothing to recompute, same frame
        assert sweep(cheap, GRID, store, progress=False).equals(df)
        assert len(calls(log)) == 6
        # and errors are recorded the same way on the cluster
        with pytest.raises(SweepError, match="2 of 8 sweep points failed") as ei:
            sweep(fragile, {"x": [1, 2, 3, 4], "y": [10, 20]}, tmp_path / "e.jsonl", scheduler=cl.scheduler_address,
                  progress=False)
        assert [p for p, _ in ei.value.failures] == [{"x": 4, "y": 10}, {"x": 4, "y": 20}]
        assert ei.value.results["d"].tolist() == [1, 1, 2, 2, 3, 3]


def fragile(x, y):
    if x > 3:
        raise RuntimeError("too big")
    return {"d": x}


def test_dask_unreachable_scheduler(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    import devlend.sweep as sw
    monkeypatch.setattr(sw, "DASK_CONNECT_TIMEOUT_S", 0.3)
    with pytest.raises(DevlendError, match=r"cannot reach the Dask scheduler at 'tcp://127\.0\.0\.1:1'"):
        sweep(cheap, GRID, tmp_path / "s.jsonl", scheduler="tcp://127.0.0.1:1", progress=False)


@pytest.mark.parametrize("grid, msg", [
    ({}, "grid is empty"),
    ([("x", [1])], "expected a dict"),
    ({"x": 1}, r"grid\['x'\]: expected a list of values, got int 1 \(write \[1\]"),
    ({"x": "abc"}, r"grid\['x'\]: expected a list of values, got str"),
    ({"x": []}, r"grid\['x'\] is an empty list"),
    ({"x": [1, 1]}, r"value 1 appears more than once"),
    ({"x": [object()]}, r"cannot be stored as JSON"),
    ({"x y": [1]}, "not a valid Python identifier"),
])
def test_bad_grid(tmp_path, grid, msg):
    with pytest.raises(DevlendError, match=msg):
        sweep(cheap, grid, tmp_path / "s.jsonl", progress=False)


def test_bad_arguments(tmp_path):
    with pytest.raises(DevlendError, match=r"directory .*no-such-dir does not exist"):
        sweep(cheap, GRID, tmp_path / "no-such-dir" / "s.jsonl", progress=False)
    with pytest.raises(DevlendError, match="is a directory"):
        sweep(cheap, GRID, tmp_path, progress=False)
    with pytest.raises(DevlendError, match="cannot be pickled"):
        sweep(lambda x, y: {}, GRID, tmp_path / "s.jsonl", progress=False)
    with pytest.raises(DevlendError, match="workers must be a positive integer"):
        sweep(cheap, GRID, tmp_path / "s.jsonl", workers=0, progress=False)
    with pytest.raises(DevlendError, match="workers applies to local sweeps"):
        sweep(cheap, GRID, tmp_path / "s.jsonl", workers=2, scheduler="tcp://127.0.0.1:1", progress=False)


def test_non_dict_result_is_a_point_error(tmp_path):
    with pytest.raises(SweepError, match="returned int, expected a dict"):
        sweep(not_a_dict, {"x": [1]}, tmp_path / "s.jsonl", progress=False)


def not_a_dict(x):
    return x


def test_an_edited_point_function_never_returns_stale_rows(tmp_path, monkeypatch):
    """Issue 15: the cache covers the point function's code, not only its parameters."""
    import importlib
    mod = tmp_path / "edited_point.py"
    mod.write_text("def point(x):\n    return {'v': x + 1}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    m = importlib.import_module("edited_point")
    store = tmp_path / "e.jsonl"
    assert sweep(m.point, {"x": [1, 2]}, store, workers=1, progress=False)["v"].tolist() == [2, 3]
    # unchanged: served from the store, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sweep(m.point, {"x": [1, 2]}, store, workers=1, progress=False)["v"].tolist() == [2, 3]
    mod.write_text("def point(x):\n    return {'v': x * 100}\n")
    m = importlib.reload(m)
    with pytest.warns(RuntimeWarning, match="2 stored point"):
        df = sweep(m.point, {"x": [1, 2]}, store, workers=1, progress=False)
    assert df["v"].tolist() == [100, 200]
    codes = {r["code"] for r in read_store(store).values()}
    assert len(codes) == 1


def test_a_store_without_code_fingerprints_is_recomputed(tmp_path, log):
    store = tmp_path / "old.jsonl"
    sweep(cheap, GRID, store, workers=2, progress=False)
    lines = [json.loads(l) for l in store.read_text().splitlines()]
    store.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "code"}) + "\n" for r in lines))
    with pytest.warns(RuntimeWarning, match="6 stored point"):
        sweep(cheap, GRID, store, workers=2, progress=False)
    assert len(calls(log)) == 12


def test_points_start_longest_expected_first(tmp_path, log):
    # one worker runs the points in the order they start: the cost's, longest first, ties in grid order
    df = sweep(cheap, GRID, tmp_path / "c.jsonl", workers=1, progress=False, cost=lambda x, y: x)
    assert [(c["x"], c["y"]) for c in calls(log)] == [(3, 10), (3, 20), (2, 10), (2, 20), (1, 10), (1, 20)]
    # the order of work changes nothing else: the frame is in grid order, as a sweep without a cost
    plain = sweep(cheap, GRID, tmp_path / "p.jsonl", workers=2, progress=False)
    assert df.drop(columns="sweep_key").equals(plain.drop(columns="sweep_key")) and df["sweep_key"].equals(plain["sweep_key"])


def test_without_a_cost_the_stored_seconds_order_the_points():
    pts = grid_points(GRID)
    records = {point_key(p): {"seconds": s} for p, s in zip(pts, [0.5, 2.0, 1.0])}
    # never-run points first (grid order), then the recorded ones, slowest first
    assert longest_first(pts, records, None) == [pts[3], pts[4], pts[5], pts[1], pts[2], pts[0]]


def test_hypertrio_points_are_ordered_by_their_packets():
    grid = {"config": ["base"], "workload": ["iperf3"], "tenants": [16, 1024, 256], "order": ["RR1"],
            "packets_per_tenant": [100, 10]}
    order = longest_first(grid_points(grid), {}, hypertrio_point.expected_cost)
    assert [(p["tenants"], p["packets_per_tenant"]) for p in order] == [
        (1024, 100), (256, 100), (1024, 10), (256, 10), (16, 100), (16, 10)]


def test_bad_cost_is_a_clear_error(tmp_path):
    with pytest.raises(DevlendError, match="cost must be callable"):
        sweep(cheap, GRID, tmp_path / "b.jsonl", cost=3, progress=False)
    with pytest.raises(DevlendError, match=r"cost estimate for point \{'x': 1, 'y': 10\} failed: KeyError"):
        sweep(cheap, GRID, tmp_path / "b.jsonl", cost=lambda x, y: {}[x], progress=False)

def test_a_killed_sweeps_lock_is_taken_over_and_a_live_ones_refused(tmp_path, log):
    """A sweep killed mid-run leaves its lock file behind (and its forked workers may
    outlive it); the next sweep finds the owner's process gone and takes the store over at once,
    while a live owner's store is refused naming the process."""
    import subprocess
    import sys
    store = tmp_path / "s.jsonl"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "s.jsonl.lock").write_text(f"{dead.pid}\n")
    df = sweep(cheap, GRID, store, workers=1, progress=False)
    assert len(df) == 6 and not (tmp_path / "s.jsonl.lock").exists(), "taken over, then released"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "s.jsonl.lock").write_text(f"{live.pid}\n")
        with pytest.raises(DevlendError, match=f"in use by another sweep \\(process {live.pid}"):
            sweep(cheap, GRID, store, workers=1, progress=False)
    finally:
        live.kill()
        live.wait()
    assert len(sweep(cheap, GRID, store, workers=1, progress=False)) == 6, "its owner gone, the lock is taken over"


def test_a_sweep_store_carries_provenance_that_devlend_prints_back(tmp_path, log):
    import subprocess
    import sys
    store = tmp_path / "p.jsonl"
    sweep(cheap, GRID, store, workers=1, progress=False)
    recs = read_store(store)
    assert all(r["devlend provenance"]["devlend_version"] for r in recs.values())
    shown = subprocess.run([sys.executable, "-m", "devlend.cli", "provenance", str(store)], capture_output=True, text=True,
                           check=True).stdout
    assert "command: devlend.sweep.sweep(test_sweep.cheap)" in shown and "parameters: sha256:" in shown
