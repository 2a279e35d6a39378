"""Issue 30: nothing leaks between borrowers. The pool's hygiene policy: "scrub" (the default)
clears a returned device before its next borrower, timed as the device does it; "none" does not,
and says so (devlend-host's `hygiene` module; the byte-level checks are its Rust tests)."""

import os
import warnings

import pytest

from devlend import Pool, Scenario, scenario_file
from devlend.pool import HYGIENE_POLICIES, HygieneWarning, PoolError
from devlend.scenario_file import ScenarioFileError

from conftest import ROOT

TOPO = os.path.join(ROOT, "python", "devlend", "topologies", "four-server-cluster.yaml")
HANDOVER = """name: h
topology: {topo}
{hygiene}timeline:
  - {{at: 0, action: borrow, borrower: server1, device: gpu2}}
  - {{at: 1 ms, action: return, device: gpu2}}
  - {{at: 5 ms, action: borrow, borrower: server3, device: gpu2}}
"""


def test_the_default_policy_scrubs_a_returned_gpu_by_a_fill_of_its_memory():
    assert set(HYGIENE_POLICIES) == {"scrub", "none"}
    pool = Pool(TOPO)
    assert pool.hygiene == "scrub" and pool._p.hygiene() == "scrub"
    pool.connect("server2", "server1").add("gpu2").available("gpu2").borrow("server1", "gpu2")
    assert pool.scrub("gpu2") == {"last": None, "pending": False}
    pool.return_device("gpu2")
    last = pool.scrub("gpu2")["last"]
    # The K40c's 12 GB of GDDR5 filled by its copy engine at 288 GB/s.
    assert last["how"] == "fill" and last["bytes"] == 12 << 30 and last["ns"] == pytest.approx((12 << 30) / 288, rel=1e-6)


def test_policy_none_is_said_where_it_is_chosen_and_a_bad_policy_names_the_field():
    with pytest.warns(HygieneWarning, match="not cleared"):
        pool = Pool(TOPO, hygiene="none")
    assert pool._p.hygiene() == "none"
    for bad in ("bleach", 3, None):
        with pytest.raises(PoolError, match="hygiene: expected one of scrub, none"):
            Pool(TOPO, hygiene=bad)
        with pytest.raises(PoolError, match="hygiene"):
            Scenario(TOPO, hygiene=bad)


def test_a_scenario_borrow_during_the_scrub_is_refused_with_its_end(tmp_path):
    topo = os.path.relpath(TOPO, tmp_path)
    p = tmp_path / "h.yaml"
    p.write_text(HANDOVER.format(topo=topo, hygiene=""))
    with pytest.raises(ScenarioFileError) as e:
        scenario_file.load(str(p)).run()
    assert e.value.field == "timeline[2].at" and e.value.line == 6, str(e.value)
    assert "scrubbing it after its last lend until 45739242.666 ns" in e.value.message, e.value.message
    p.write_text(HANDOVER.format(topo=topo, hygiene="hygiene: none\n"))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        run = scenario_file.load(str(p)).run()
    assert any(issubclass(x.category, HygieneWarning) for x in w)
    assert run.scenario.lends()[0]["borrower"] == "server3"


def test_the_cli_says_so_where_policy_none_is_chosen():
    from test_cli import cli
    r = cli("pool", TOPO, "--hygiene", "none", "connect", "server2", "server1", "add", "gpu2", "available", "gpu2")
    assert "hygiene policy 'none': returned devices are not cleared" in r.stdout, r.stdout
    r = cli("pool", TOPO, "--hygiene", "bleach", check=False)
    assert r.returncode != 0 and "hygiene: expected one of scrub, none" in r.stdout + r.stderr, r.stdout + r.stderr
