"""Limits refused before work starts: special files given as input files are refused by what they
are, without being opened (a FIFO would hang the reader); a GPU copy larger than the GPU's memory,
than a borrowed GPU's DMA window or than the run's simulated-memory budget (limits.memory_bytes),
and an fio region past the drive's capacity, are refused with the limit named, before work starts."""

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


def test_a_gpu_copy_over_the_simulated_memory_budget_is_refused_before_memory_is_taken():
    s = devlend.Scenario(topo_path("four-server-cluster.yaml"))  # Tesla K40c: 12 GiB
    with pytest.raises(devlend.WorkloadError, match=r"needs 17179869184 bytes of simulated memory: over the budget of "
                                                    r"2147483648 bytes \(limits.memory_bytes"):
        s.gpu_copy("big", "server2", "gpu2", "htod", 8 << 30)    # its own GPU: no DMA window in the way


def test_the_budget_counts_every_copy_of_the_run_and_is_settable():
    topo = devlend.load(topo_path("four-server-cluster.yaml")).with_params({"limits.memory_bytes": "96 MiB"}, "--set")
    s = devlend.Scenario(topo)
    s.gpu_copy("first", "server2", "gpu2", "htod", 32 << 20)          # holds 64 MiB
    with pytest.raises(devlend.WorkloadError, match=r"second.*needs 67108864 bytes of simulated memory beside the 67108864 "
                                                    r"the run's earlier workloads hold: over the budget of 100663296"):
        s.gpu_copy("second", "server2", "gpu3", "dtoh", 32 << 20)


def test_a_copy_larger_than_the_borrowed_gpus_dma_window_is_refused_naming_the_window():
    s = devlend.Scenario(topo_path("four-server-cluster.yaml"))
    s.borrow("server1", "gpu2", dma_window=16 << 20)
    with pytest.raises(devlend.WorkloadError, match=r"a copy of 33554432 bytes: borrowed gpu2's DMA window holds 16777216 bytes"):
        s.gpu_copy("big", "server1", "gpu2", "htod", 32 << 20)
    s.gpu_copy("fits", "server1", "gpu2", "htod", 8 << 20)
    assert s.run().results().set_index("name").loc["fits", "bytes"] == 8 << 20


def test_an_fio_region_past_the_drives_capacity_is_refused_naming_it():
    b2b = topo_path("nvme-back-to-back.yaml")
    s = devlend.Scenario(devlend.load(b2b).with_params({"devices.nvme0.capacity": "1 GiB"}, "--set"))
    from devlend.fio.jobfile import FioJobError, job_from_options
    with pytest.raises(FioJobError, match=r"offset 1073741824 is past the end of the drive, which holds 1073741824 bytes"):
        job_from_options("f", [("offset", "1g"), ("number_ios", "10")], 1 << 30, "here")
    job = job_from_options("f", [("size", "1g"), ("number_ios", "10")], 1 << 30, "here")
    job.offset = 4096        # past the drive only by the up-front check in the core
    with pytest.raises(devlend.WorkloadError, match=r"offset 4096 plus size 1073741824 bytes runs past the end of the drive, "
                                                    r"which holds 1073741824 bytes"):
        s.fio_job("f", "borrower", "nvme0", job)
