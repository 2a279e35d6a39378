"""Scenarios and run-workloads take fio's rw modes: sequential, random and mixed."""


import pytest

import devlend

import clirun
from conftest import ROOT


@pytest.mark.parametrize("rw", ["read", "write", "randrw", "readwrite"])
def test_a_scenario_fio_job_runs_each_rw_mode(rw):
    s = devlend.Scenario(devlend.load(f"{ROOT}/topologies/nvme-back-to-back.yaml"))
    s.fio("f", "borrower", "nvme0", rw, iodepth=4, ios=64)
    r = s.run().results().set_index("name").loc["f"]
    assert r["ios"] == 64 and r["iops"] > 0 and r["bytes"] == 64 * 4096


def test_run_workloads_takes_a_mixed_fio_job():
    r = clirun.run("run-workloads", "topologies/nvme-back-to-back.yaml", "--fio", "f:borrower:nvme0:randrw:4:1:64", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    bad = clirun.run("run-workloads", "topologies/nvme-back-to-back.yaml", "--fio", "f:borrower:nvme0:trim:4:1:64", cwd=ROOT)
    assert bad.returncode == 2 and "must be one of fio's read, write" in bad.stderr
