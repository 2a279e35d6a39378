"""Issue 30: no input escapes devlend's errors. Seeded random calls of the Python API (Fabric,
Pool, Scenario, Run) with hostile arguments (NaN, infinities, 1e30, 2**70, negative numbers,
wrong types, unknown names) beside plausible ones: every exception must be a DevlendError
(those for bad values and types also subclass ValueError/TypeError). Bounded to 5,000 calls per
seed in CI (the same calls on any machine and load; each of the 88 methods is called 69 times or
more over the three seeds); ``fuzz/random_calls.py`` runs the same calls for as long as it is given."""

import os
import random
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "fuzz"))
from random_calls import hostile_calls  # noqa: E402

SEEDS = [1, 2, 3]
CALLS = 5000


@pytest.mark.parametrize("seed", SEEDS)
def test_random_api_calls_raise_only_devlend_errors(seed):
    calls, escaped = hostile_calls(random.Random(seed), limit=CALLS)
    assert calls == CALLS, calls
    assert escaped == [], "\n".join(escaped[:10])


def test_the_issues_hostile_numbers_are_devlend_errors_naming_the_field():
    import devlend
    from devlend.errors import FabricValueError, WorkloadTypeError, WorkloadValueError
    from devlend.pool import PoolValueError
    topo = os.path.join(ROOT, "python", "devlend", "topologies", "four-server-cluster.yaml")
    s = devlend.Scenario(topo)
    for at in (float("nan"), float("inf"), 1e30, -1):
        with pytest.raises(WorkloadValueError) as e:
            s.stream("s", "server1:cpu", 0x1000, 4096, at_ns=at)
        assert e.value.field == "at_ns" and isinstance(e.value, ValueError), e.value
    with pytest.raises(WorkloadTypeError) as e:
        s.stream("s", "server1:cpu", 0x1000, "4 KiB")
    assert e.value.field == "nbytes" and isinstance(e.value, TypeError)
    p = devlend.Pool(topo).connect("server2", "server1").add("gpu2").available("gpu2")
    with pytest.raises(PoolValueError) as e:
        p.borrow("server1", "gpu2", 2**70)
    assert e.value.field == "dma_window" and isinstance(e.value, ValueError)
    fab = devlend.load(os.path.join(ROOT, "topologies", "pxh830-two-host.yaml")).build()
    with pytest.raises(FabricValueError) as e:
        fab.write("borrower:cpu", 2**70, b"x")
    assert e.value.field == "addr" and isinstance(e.value, ValueError)


@pytest.mark.parametrize("at", ["1e30", ".nan", ".inf", "-.inf", "1e30 ms"])
def test_hostile_scenario_file_times_name_the_line_and_field(tmp_path, at):
    from devlend import scenario_file
    from devlend.scenario_file import ScenarioFileError
    topo = os.path.join(ROOT, "python", "devlend", "topologies", "four-server-cluster.yaml")
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\ntopology: {topo}\ntimeline:\n  - {{at: 0, action: borrow, borrower: server1, device: gpu2}}\n"
                 f"  - {{at: {at}, action: gpu_copy, name: c, runner: server1, gpu: gpu2, direction: htod, bytes: 1 MiB}}\n")
    with pytest.raises(ScenarioFileError) as e:
        scenario_file.load(str(p)).run()
    assert (e.value.line, e.value.field) == (5, "timeline[1].at"), str(e.value)
