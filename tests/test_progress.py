"""Progress: shown on a terminal with what is running, never when piped or with --quiet; for run
commands a percentage: the core runs in slices of events and says how far the workloads are
between them (no Python on its hot path), and the results are those of an uninterrupted run.
A terminal is a real process with its stderr on a pseudo-terminal; a pipe is the command run in
this process (tests/clirun.py: its stderr is not a terminal, as a pipe's is not)."""

import io
import os
import pty
import subprocess
import sys

import pytest

import devlend
from devlend.scenario import Scenario

import clirun
from conftest import ROOT, topo_path

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


JOB = "[j]\nioengine=libaio\ndirect=1\nrw=randread\nsize=1m\niodepth=4\nruntime=2ms\ntime_based\n"
ARGS = ["--topology", "topologies/nvme-back-to-back.yaml", "--host", "borrower", "--device", "nvme0", "--output-format=json"]


def _on_a_terminal(args):
    """Run with stderr on a pseudo-terminal; returns what the terminal showed. The terminal is
    wide enough for the job's line with a pytest-xdist worker's longer temporary path in it."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "devlend.cli", *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=slave,
                         env={**os.environ, "TERM": "xterm", "COLUMNS": "160"})
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    p.wait()
    os.close(master)
    return shown.decode(errors="replace")


def test_a_terminal_sees_what_is_running_and_quiet_or_a_pipe_sees_nothing(tmp_path):
    job = tmp_path / "j.fio"
    job.write_text(JOB)
    shown = _on_a_terminal(["fio", str(job), *ARGS])
    assert "fio " in shown and "job(s) on nvme0" in shown, shown
    assert "job(s) on nvme0" not in _on_a_terminal(["fio", str(job), *ARGS, "--quiet"])
    piped = clirun.run("fio", str(job), *ARGS, cwd=ROOT)
    assert piped.returncode == 0 and "job(s) on nvme0" not in piped.stderr


def test_run_commands_show_what_is_running_on_a_terminal_only():
    args = ["run-workloads", "topologies/pxh830-two-host.yaml", "--stream", "copy-a:gpu0:ntb-l.mw1:256KiB"]
    assert "run-workloads: copy-a" in _on_a_terminal(args)
    assert "run-workloads: copy-a" not in _on_a_terminal([*args, "--quiet"])
    piped = clirun.run(*args, cwd=ROOT)
    assert piped.returncode == 0 and "run-workloads: copy-a" not in piped.stderr + piped.stdout


RUN = ["run-workloads", "topologies/pxh830-two-host.yaml", "--stream", "a:gpu0:ntb-l.mw1:8MiB", "--format", "json"]


@pytest.fixture
def slices(monkeypatch):
    """Slices of 20 events: the bar is drawn between slices even for this short run."""
    monkeypatch.setenv("DEVLEND_PROGRESS_SLICE_EVENTS", "20")


def test_on_a_terminal_run_workloads_draws_a_percentage(slices):
    drawn = _on_a_terminal(RUN)
    assert "%" in drawn and "run-workloads: a" in drawn, drawn


@pytest.mark.parametrize("quiet", ["--quiet", "-q"])
def test_quiet_draws_no_percentage_on_a_terminal(quiet, slices):
    assert "%" not in _on_a_terminal([*RUN, quiet])


def test_piped_draws_nothing(monkeypatch):
    from devlend import progress
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress.bar("x") as step:
        assert step is None
    assert sys.stderr.getvalue() == ""
