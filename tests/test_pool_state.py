"""`devlend pool` remembers between calls (a state file, as smartio_tool users see the lending
daemon's state), and the pool's states after faults say what is true."""

import json

import pytest

from devlend import Pool

from test_cli import cli
from conftest import topo_path

FOUR = topo_path("four-server-cluster.yaml")
LEND = ["connect", "server2", "server1", "add", "gpu2", "available", "gpu2", "borrow", "server1", "gpu2"]


def test_successive_calls_see_the_borrowed_device_and_can_return_it(tmp_path):
    state = str(tmp_path / "pool.json")
    cli("pool", FOUR, "--state", state, *LEND)
    shown = cli("pool", FOUR, "--state", state, "--format", "json", "show", "gpu2").stdout
    assert '"state": "borrowed"' in shown and '"borrower": "server1"' in shown
    cli("pool", FOUR, "--state", state, "return", "gpu2")
    again = cli("pool", FOUR, "--state", state, "--format", "json", "show", "gpu2").stdout
    assert '"state": "available"' in again, again
    kept = json.loads(open(state).read())
    assert kept["version"] == 1 and len(kept["pools"]) == 1


def test_the_default_state_file_is_under_xdg_state_home(tmp_path):
    cli("pool", FOUR, *LEND)
    assert (tmp_path / "state" / "devlend" / "pool.json").is_file()
    res = cli("pool", FOUR, "borrow", "server1", "gpu2", check=False)
    assert res.returncode != 0 and "borrowed" in res.stderr


def test_a_verb_that_fails_keeps_those_before_it(tmp_path):
    state = str(tmp_path / "pool.json")
    res = cli("pool", FOUR, "--state", state, *LEND, "return", "gpu9", check=False)
    assert res.returncode != 0 and "gpu9" in res.stderr
    assert '"state": "borrowed"' in cli("pool", FOUR, "--state", state, "--format", "json", "show", "gpu2").stdout


def test_a_changed_topology_is_refused_until_reset(tmp_path):
    topo = tmp_path / "four.yaml"
    topo.write_text(open(FOUR).read())
    state = str(tmp_path / "pool.json")
    cli("pool", str(topo), "--state", state, *LEND)
    topo.write_text(open(FOUR).read() + "\n# changed\n")
    res = cli("pool", str(topo), "--state", state, "list", check=False)
    assert res.returncode != 0 and "pool.json" in res.stderr and "--reset" in res.stderr
    out = cli("pool", str(topo), "--state", state, "--reset", "--format", "json", "show", "gpu2").stdout
    assert '"state": "not added"' in out


@pytest.mark.parametrize("content", ["not json", '{"version": 9}', "[]"])
def test_a_bad_state_file_is_named(tmp_path, content):
    state = tmp_path / "pool.json"
    state.write_text(content)
    res = cli("pool", FOUR, "--state", str(state), "list", check=False)
    assert res.returncode == 2 and str(state) in res.stderr and "Traceback" not in res.stderr


def lent() -> Pool:
    return Pool(FOUR).connect("server2", "server1").add("gpu2").available("gpu2").borrow("server1", "gpu2")


def test_a_surprise_removed_device_is_not_available():
    pool = lent()
    pool.fault("surprise-removal", "gpu2")
    assert pool.show("gpu2")["state"] == "removed"
    pool.fault("port-up", "gpu2")
    assert pool.show("gpu2")["state"] == "available"


@pytest.mark.parametrize("down, up", [
    (("link-down", "ntb-2-1"), ("link-up", "ntb-2-1")),           # the cable
    (("port-down", "server2.rp3"), ("port-up", "server2.rp3")),   # the lender's root port above its adapter
    (("port-down", "gpu2"), ("port-up", "gpu2")),                 # the device's slot
    (("port-down", "server1.rp3"), ("port-up", "server1.rp3")),   # the borrower's root port above its adapter
])
def test_a_lend_whose_path_is_cut_is_not_borrowed_until_it_comes_back(down, up):
    pool = lent()
    pool.fault(*down)
    assert pool.show("gpu2")["state"] == "link down"
    pool.fault(*up)
    assert pool.show("gpu2")["state"] == "borrowed"


def test_fault_states_are_kept_between_calls(tmp_path):
    state = str(tmp_path / "pool.json")
    cli("pool", FOUR, "--state", state, *LEND, "fault", "link-down", "ntb-2-1")
    assert '"state": "link down"' in cli("pool", FOUR, "--state", state, "--format", "json", "show", "gpu2").stdout
