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
    Under pytest-xdist the workers share it too (`_shared_quick_results`)."""
    from devlend import readme_figures
    return copy.deepcopy(readme_figures.quick_result(name))


@pytest.fixture(scope="session", autouse=True)
def _shared_quick_results(tmp_path_factory):
    """Under pytest-xdist, each quick experiment runs once per test run, not once per worker: the
    first worker to ask runs it and leaves its result in a pickle in a folder of this run's own
    (beside the workers' temporary folders, named by the run's id), and a worker asking later, or
    while it runs, reads that (waiting on the file's lock). The result is the same either way (a
    quick run is deterministic); a run that raised leaves no file, and the next asker runs it."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run_id:
        yield
        return
    import fcntl
    import pickle
    from devlend import readme_figures
    folder = tmp_path_factory.getbasetemp().parent / f"quick-{run_id}"
    folder.mkdir(exist_ok=True)
    own = readme_figures.quick_result

    def shared(name: str):
        path = folder / f"{name}.pickle"
        with open(folder / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if path.exists():
                return pickle.loads(path.read_bytes())
            res = own.__wrapped__(name)
            (folder / f"{name}.part").write_bytes(pickle.dumps(res))
            (folder / f"{name}.part").rename(path)
            return res
    readme_figures.quick_result = functools.cache(shared)
    yield
    readme_figures.quick_result = own


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
