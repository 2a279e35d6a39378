"""A pytest plugin for the test suite's peak memory: after each test, if the process's peak RSS
(``ru_maxrss``, which only rises) rose, the test and the new peak are recorded; at the end the
tests that raised it are printed, largest rise first. Memory, not time: safe on a loaded machine.

    PYTHONPATH=bench python -m pytest -p pytest_rss tests/     # from the repository root
"""

from __future__ import annotations

import resource

_rises: list[tuple[float, float, str]] = []
_last = [0.0]


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def pytest_runtest_logfinish(nodeid, location):
    now = _peak_mib()
    if now > _last[0]:
        _rises.append((now - _last[0], now, nodeid))
        _last[0] = now


def pytest_terminal_summary(terminalreporter):
    w = terminalreporter.write_line
    w(f"peak RSS of the test process: {_peak_mib():.0f} MiB; tests that raised it (rise, peak after):")
    for rise, peak, node in sorted(_rises, reverse=True)[:15]:
        w(f"  +{rise:7.0f} MiB -> {peak:7.0f} MiB  {node}")
