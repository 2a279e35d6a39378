import copy
import functools
import os

import pytest
from hypothesis import settings

import devlend

# CI runs the fuzz-style property tests derandomized, so a red run can be reproduced exactly.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPOS = os.path.join(ROOT, "python", "devlend", "topologies")


def topo_path(name: str) -> str:
    return os.path.join(TOPOS, name)


def connect_unix(path: str, timeout_s: float = 30.0):
    """A client socket connected to the server listening on `path` once it listens: the path
    appears at bind(2), before listen(2), so a connect in between is refused (seen on a loaded
    machine); a server that never listens is an error after `timeout_s`."""
    import socket
    import time
    deadline = time.monotonic() + timeout_s
    while True:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            c.connect(path)
            return c
        except (FileNotFoundError, ConnectionRefusedError):
            c.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def quick(name: str):
    """`devlend experiment NAME --quick`'s result, a copy of the one this process computed first
    (readme_figures.quick_result, which the README-figures tests read too): a pytest-xdist worker
    runs each quick experiment once, whichever of its modules asks, and a test that changes its
    copy changes no other test's. The same result as a fresh `run(quick=True)`: a quick run is
    deterministic (the README quotes its figures and tests/test_docs.py checks them against a run now).
    Under pytest-xdist the workers share it too (`_once_per_run_folder`)."""
    from devlend import readme_figures
    return copy.deepcopy(readme_figures.quick_result(name))


# This test run's folder for results computed once per run (`once_per_run`): under pytest-xdist
# one folder for all workers, beside their temporary folders and named by the run's id.
_RUN = {"folder": None, "values": {}}


def once_per_run(key: str, compute):
    """`compute(folder)`'s value (pickled), computed once per test run, not once per pytest-xdist
    worker: the first worker to ask computes it, in `folder` (this key's own, in the run's shared
    folder, for any files it writes) and leaves it in a pickle there; a worker asking later, or
    while it computes, reads that (waiting on the key's lock). Only for values that are the same
    wherever they are computed (deterministic runs); a compute that raised leaves no pickle, and
    the next asker computes it."""
    import fcntl
    import pickle
    if key in _RUN["values"]:
        return _RUN["values"][key]
    base = _RUN["folder"]
    path = base / f"{key}.pickle"
    with open(base / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            value = pickle.loads(path.read_bytes())
        else:
            (base / key).mkdir(exist_ok=True)
            value = compute(base / key)
            (base / f"{key}.part").write_bytes(pickle.dumps(value))
            (base / f"{key}.part").rename(path)
    _RUN["values"][key] = value
    return value


@pytest.fixture(scope="session", autouse=True)
def _once_per_run_folder(tmp_path_factory):
    """Sets `once_per_run`'s folder, and under pytest-xdist makes `quick` run each quick
    experiment once per test run: readme_figures.quick_result (which the README-figures tests call
    too) asks `once_per_run`. A pickled quick result has the same rows, notes and plot function."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run_id:
        _RUN["folder"] = tmp_path_factory.mktemp("once-per-run")
        yield
        return
    from devlend import readme_figures
    _RUN["folder"] = tmp_path_factory.getbasetemp().parent / f"once-per-run-{run_id}"
    _RUN["folder"].mkdir(exist_ok=True)
    own = readme_figures.quick_result
    readme_figures.quick_result = functools.cache(lambda name: once_per_run(f"quick-{name}", lambda _: own.__wrapped__(name)))
    yield
    readme_figures.quick_result = own


MXS824_SCENARIO = os.path.join(ROOT, "python", "devlend", "scenarios", "four-servers-mxs824-gpu-and-nvme.yaml")


def mxs824_scenario_run() -> tuple[str, str]:
    """`devlend run` of the shipped four-servers-mxs824 scenario with `--out`, once per test run
    (tests/test_link_stats.py and tests/test_cluster_switch.py read the same run; a run is
    deterministic): its stdout and the folder it wrote its CSVs and plot in."""
    import clirun

    def compute(folder):
        res = clirun.run("run", MXS824_SCENARIO, "--out", str(folder), cwd=ROOT)
        if res.returncode != 0:
            raise AssertionError(f"devlend run {MXS824_SCENARIO} exited {res.returncode}: {res.stderr}")
        return res.stdout, str(folder)
    return once_per_run("mxs824-scenario-run", compute)


@pytest.fixture
def two_host():
    return devlend.load(topo_path("pxh830-two-host.yaml")).build()


@pytest.fixture
def three_host():
    return devlend.load(topo_path("three-host-cluster.yaml")).build()


@pytest.fixture(autouse=True)
def _own_pool_state(tmp_path, monkeypatch):
    """`devlend pool` keeps its state under XDG_STATE_HOME: one per test, never the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("DEVLEND_POOL_STATE", raising=False)
    # devlend's tables fit COLUMNS where it is set; pytest's process environment can hold one that
    # os.environ does not show (set at C level), so set and delete it to unset it for the children:
    # commands run by tests print at the piped default unless a test sets COLUMNS itself.
    monkeypatch.setenv("COLUMNS", "")
    monkeypatch.delenv("COLUMNS")


# Scheduling only: scripts/test runs pytest-xdist with `--dist loadscope --no-loadscope-reorder`,
# which hands whole modules to whichever worker is idle, in collection order. The longest modules
# go first (their seconds in BENCHMARKS.md, "the test command"), so that no long module starts
# last and the two workers finish together; every other module follows in file order.
LONGEST_FIRST = ("test_corpus.py", "test_linux_fio.py", "test_linux_guest.py", "test_linux_guest_faults.py", "test_plots.py",
                 "test_linux_ntb.py", "test_experiments.py", "test_progress.py", "test_linux_guests.py", "test_faults.py",
                 "test_scenario_files.py", "test_docs.py", "test_provenance.py", "test_sweep.py", "test_cli.py", "test_hardware.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: a module's tests keep their order
