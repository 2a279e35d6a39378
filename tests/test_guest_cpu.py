"""A guest and its controller on one CPU (devlend.linux.pin): the choice, the error for a CPU this
process may not use, and that a process started while pinned inherits the CPU while the caller
gets its own CPUs back."""

import json
import os
import subprocess
import sys

import pytest

from devlend.errors import DevlendError
from devlend.linux import pin

CPUS = sorted(os.sched_getaffinity(0))
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="one CPU: nothing to choose, guests run unpinned")


def child_cpus() -> set[int]:
    out = subprocess.run([sys.executable, "-c", "import json, os; print(json.dumps(sorted(os.sched_getaffinity(0))))"],
                         capture_output=True, text=True, check=True).stdout
    return set(json.loads(out))


@needs_two
def test_a_process_started_while_pinned_runs_on_that_cpu_and_the_caller_gets_its_cpus_back():
    cpu = CPUS[-1]
    with pin.pinned(cpu):
        assert os.sched_getaffinity(0) == {cpu}
        assert child_cpus() == {cpu}
    assert sorted(os.sched_getaffinity(0)) == CPUS
    assert child_cpus() == set(CPUS)


@needs_two
def test_the_environment_names_the_cpu_or_lets_the_scheduler_place_the_guest(monkeypatch):
    monkeypatch.setenv(pin.ENV, str(CPUS[0]))
    assert pin.guest_cpu() == CPUS[0]
    monkeypatch.setenv(pin.ENV, "any")
    assert pin.guest_cpu() is None
    monkeypatch.delenv(pin.ENV)
    assert pin.guest_cpu() in CPUS


@pytest.mark.parametrize("bad", ["-1", "two", str(max(CPUS) + 1), "0x1"])
def test_a_cpu_this_process_may_not_use_is_refused_with_the_ones_it_may(monkeypatch, bad):
    monkeypatch.setenv(pin.ENV, bad)
    with pytest.raises(DevlendError, match=rf"DEVLEND_GUEST_CPU='{bad}': expected 'any' or one of the CPUs this process may use \({', '.join(map(str, CPUS))}\)"):
        pin.guest_cpu()


def test_nothing_is_pinned_for_none():
    before = os.sched_getaffinity(0)
    with pin.pinned(None):
        assert os.sched_getaffinity(0) == before
    pin.pin_this_thread(None)
    assert os.sched_getaffinity(0) == before
