"""Limits refused before work starts: special files given as input files are refused by what they
are, without being opened (a FIFO would hang the reader); a GPU copy larger than the GPU's memory
or devlend's per-copy budget is refused with the limit named, before memory is taken."""

import os
import threading

import pytest

import devlend
from devlend.errors import DevlendError

from test_cli import cli
from conftest import topo_path


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "input.fifo"
    os.mkfifo(p)
    yield str(p)
    # Unblock anything that did open it for reading (a failing test), so the suite does not hang.
    def poke():
        try:
            fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
    threading.Thread(target=poke, daemon=True).start()


@pytest.mark.parametrize("args", [
    ["topo", "{f}"],
    ["run", "{f}"],
    ["import-lspci", "--tree", "{f}", "--verbose", "{f}"],
    ["trace", "info", "{f}"],
    ["trace", "build", "{f}", "-o", "{tmp}/t.dlt"],
])
def test_a_fifo_given_as_an_input_file_is_refused_without_hanging(fifo, tmp_path, args):
    argv = [a.format(f=fifo, tmp=tmp_path) for a in args]
    import subprocess
    import sys
    from conftest import ROOT
    try:
        res = subprocess.run([sys.executable, "-m", "devlend.cli", *argv], capture_output=True, text=True, cwd=ROOT, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"devlend {' '.join(argv)} hung on a FIFO")
    assert res.returncode != 0 and "FIFO" in res.stderr and "Traceback" not in res.stderr, res.stderr


@pytest.mark.parametrize("path", ["/dev/zero", "{tmp}"])
def test_devices_and_directories_are_refused_as_topologies(tmp_path, path):
    with pytest.raises(DevlendError, match="a device|a directory"):
        devlend.load(path.format(tmp=tmp_path))


def test_a_gpu_copy_larger_than_the_gpus_memory_is_refused_naming_it():
    s = devlend.Scenario(topo_path("three-host-cluster.yaml"))
    with pytest.raises(devlend.WorkloadError, match="the GPU holds 1 to"):
        s.gpu_copy("big", "borrower", "gpu0", "htod", 1 << 40)


def test_a_gpu_copy_over_the_per_copy_budget_is_refused_before_memory_is_taken():
    s = devlend.Scenario(topo_path("four-server-cluster.yaml"))  # Tesla K40c: 12 GiB
    with pytest.raises(devlend.WorkloadError, match="budget of 1073741824 bytes"):
        s.gpu_copy("big", "server1", "gpu2", "htod", 8 << 30)
