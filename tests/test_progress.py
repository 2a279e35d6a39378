"""Progress: shown on a terminal with what is running, never when piped or with --quiet."""

import os
import pty
import subprocess
import sys

from conftest import ROOT

JOB = "[j]\nioengine=libaio\ndirect=1\nrw=randread\nsize=1m\niodepth=4\nruntime=2ms\ntime_based\n"
ARGS = ["--topology", "topologies/nvme-back-to-back.yaml", "--host", "borrower", "--device", "nvme0", "--output-format=json"]


def _on_a_terminal(args):
    """Run with stderr on a pseudo-terminal; returns what the terminal showed."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "devlend.cli", *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=slave,
                         env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
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
    assert "fio " in _on_a_terminal(["fio", str(job), *ARGS]) and "job(s) on nvme0" in _on_a_terminal(["fio", str(job), *ARGS])
    assert "job(s) on nvme0" not in _on_a_terminal(["fio", str(job), *ARGS, "--quiet"])
    piped = subprocess.run([sys.executable, "-m", "devlend.cli", "fio", str(job), *ARGS], cwd=ROOT, capture_output=True, text=True)
    assert piped.returncode == 0 and "job(s) on nvme0" not in piped.stderr


def test_run_commands_show_what_is_running_on_a_terminal_only():
    args = ["run-workloads", "topologies/pxh830-two-host.yaml", "--stream", "copy-a:gpu0:ntb-l.mw1:256KiB"]
    assert "run-workloads: copy-a" in _on_a_terminal(args)
    assert "run-workloads: copy-a" not in _on_a_terminal([*args, "--quiet"])
    piped = subprocess.run([sys.executable, "-m", "devlend.cli", *args], cwd=ROOT, capture_output=True, text=True)
    assert piped.returncode == 0 and "run-workloads: copy-a" not in piped.stderr + piped.stdout
