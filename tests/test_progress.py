"""Progress with a percentage for run commands: the core runs in slices of events and says how far
the workloads are between them (no Python on its hot path); the bar shows on a terminal only, never
when piped or with --quiet, and the results are those of an uninterrupted run."""

import io
import sys

import pytest

import devlend
from devlend.scenario import Scenario

from conftest import topo_path

PXH = topo_path("pxh830-two-host.yaml")


def _scenario():
    sc = Scenario(devlend.load(PXH))
    sc.gpu_copy("copy", "lender", "gpu0", "htod", 4 << 20)
    sc.stream("stream", "gpu0", "ntb-l.mw1", 256 << 10, write=True, at_ns=1000)
    return sc


def test_a_run_in_slices_reports_rising_progress_and_the_same_results(monkeypatch):
    from devlend import scenario
    monkeypatch.setattr(scenario, "PROGRESS_SLICE_EVENTS", 20)  # this short run, in many slices
    seen = []
    sliced = _scenario().run(progress=seen.append)
    whole = _scenario().run()
    assert seen[-1] == 1.0 and seen == sorted(seen)
    assert any(0 < f < 1 for f in seen), seen  # it moved through the run, not only at its end
    assert sliced.results().equals(whole.results()) and sliced.now_ns == whole.now_ns
    assert sliced.link_stats().equals(whole.link_stats())


def _run_workloads(*extra):
    """`devlend run-workloads` with its stderr on a pseudo-terminal: what it drew there."""
    import os
    import pty
    import subprocess
    import threading
    master, slave = pty.openpty()
    drawn = []

    def drain():
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            drawn.append(chunk)
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    env = {**os.environ, "DEVLEND_PROGRESS_SLICE_EVENTS": "20"}
    r = subprocess.run([sys.executable, "-m", "devlend.cli", "run-workloads", PXH, "--stream", "a:gpu0:ntb-l.mw1:8MiB",
                        "--format", "json", *extra], stdout=subprocess.PIPE, stderr=slave, env=env, timeout=120)
    os.close(slave)
    reader.join(10)
    os.close(master)
    assert r.returncode == 0
    return b"".join(drawn).decode(errors="replace")


def test_on_a_terminal_run_workloads_draws_a_percentage():
    drawn = _run_workloads()
    assert "%" in drawn and "run-workloads: a" in drawn, drawn


@pytest.mark.parametrize("extra", [["--quiet"], ["-q"]])
def test_quiet_draws_nothing_on_a_terminal(extra):
    assert "%" not in _run_workloads(*extra)


def test_piped_draws_nothing(monkeypatch):
    from devlend import progress
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress.bar("x") as step:
        assert step is None
    assert sys.stderr.getvalue() == ""
