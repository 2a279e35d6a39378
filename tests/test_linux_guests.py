"""Several real Linux guests on one clock (issue 32, step 1): one UML process per named host of a
topology, devlend-uml's controller their only clock, simulated time moving only when every guest
waits. Each guest's clock reads are simulated time, so two runs give the very same readings."""

import pytest

import devlend
from conftest import topo_path
from devlend.linux.guest import LinuxGuestError, run_guests

# /proc/uptime before and after a sleep; each guest sleeps its own time so their timers interleave.
GUESTS = {
    "borrower": ["cat /proc/uptime", "sleep 0.3; cat /proc/uptime", "date +%s.%N"],
    "lender": ["cat /proc/uptime", "sleep 0.7; cat /proc/uptime", "date +%s.%N"],
}


def _uptime(out: str) -> float:
    return float(out.split()[0])


@pytest.fixture(scope="module")
def topo():
    return devlend.load(topo_path("nvme-back-to-back.yaml"))


@pytest.fixture(scope="module")
def runs(topo, tmp_path_factory):
    return [run_guests(topo, GUESTS, outdir=tmp_path_factory.mktemp(f"guests{i}"), timeout_s=240) for i in range(2)]


def test_two_guests_on_one_clock_both_finish(runs):
    for host, r in runs[0].items():
        assert r.returncodes == [0, 0, 0], (host, r.outputs)
        assert r.device["waits"] > 0 and r.device["guest_ns"] > 0, r.device


def test_each_guest_sleeps_its_own_simulated_time(runs):
    r = runs[0]
    for host, slept in (("borrower", 0.3), ("lender", 0.7)):
        before, after = _uptime(r[host].outputs[0]), _uptime(r[host].outputs[1])
        assert slept <= after - before < slept + 0.1, (host, before, after)
    # The one clock ends past the longer sleeper's wake-up.
    assert r["lender"].device["guest_ns"] >= 700_000_000
    assert r["lender"].device["simulated_ps"] == r["borrower"].device["simulated_ps"]


def test_two_runs_give_the_same_simulated_readings(runs):
    a, b = runs
    for host in GUESTS:
        assert a[host].outputs == b[host].outputs, host
        assert a[host].device["guest_ns"] == b[host].device["guest_ns"], host


def test_a_host_not_in_the_topology_is_refused(topo, tmp_path):
    with pytest.raises(LinuxGuestError, match="'nowhere': not a host") as e:
        run_guests(topo, {"borrower": ["true"], "nowhere": ["true"]}, outdir=tmp_path, kernel="/nonexistent")
    assert e.value.kind == "topology"
