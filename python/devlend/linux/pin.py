"""A guest and its time-travel controller on one CPU.

Under time travel (UML's ``time-travel=ext:``) the guest and devlend's controller never run at
the same time: the guest runs until it asks the controller for its time and waits for the
answer, the controller computes while every guest waits. A guest's system calls and page faults
go the same way inside UML (ptrace mode: the guest's process stops, UML's kernel process handles
the call, the process goes on). Each of those hand-overs wakes the other side; left to the
scheduler the two sides sit on different CPUs, and every wake-up is a cross-CPU wake of an idle
CPU, which on a virtual machine is an inter-processor interrupt through the hypervisor. On one
CPU the same hand-over is a plain context switch. Measured on the 2-core development VM
(BENCHMARKS.md, "one CPU for a guest"): the shared guest of tests/test_linux_guest.py took
18.6 s of wall clock and 14.6 s of CPU spread over two CPUs, 6.5 s and 6.4 s on one, with the
same ~710,000 context switches and the same simulated results (they depend on the engine's
clock only).

``DEVLEND_GUEST_CPU`` chooses: a CPU number, or ``any`` to leave the placement to the
scheduler. Unset, a run takes the CPU its caller is on at the start (a busy caller's CPU is one
the scheduler keeps for it, so two runs started side by side usually take different CPUs;
nothing stops two from sharing one, and a pinned guest cannot move off a CPU that other work
holds: on a machine busy with other jobs, ``any`` can be the faster choice; BENCHMARKS.md).
"""

from __future__ import annotations

import contextlib
import os

from ..errors import DevlendError

ENV = "DEVLEND_GUEST_CPU"


class GuestCpuError(DevlendError):
    """``DEVLEND_GUEST_CPU`` names no CPU this process may run on."""


def _current_cpu() -> int | None:
    """The CPU the calling thread runs on (/proc/thread-self/stat, field 39 `processor`)."""
    try:
        with open("/proc/thread-self/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 2 (the command name) is in parentheses and may hold spaces: count after its end.
    rest = stat[stat.rindex(")") + 2:].split()
    return int(rest[39 - 3])


def guest_cpu() -> int | None:
    """The CPU for a run's guests and controller, or None to leave them to the scheduler."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    want = os.environ.get(ENV, "").strip()
    if want and want != "any" and not (want.isdigit() and int(want) in allowed):
        raise GuestCpuError(f"{ENV}={want!r}: expected 'any' or one of the CPUs this process may use ({', '.join(map(str, sorted(allowed)))})")
    if want == "any" or len(allowed) < 2:
        return None
    if want:
        return int(want)
    cpu = _current_cpu()
    return cpu if cpu in allowed else min(allowed)


def pin_this_thread(cpu: int | None) -> None:
    """Run the calling thread (a controller's) on `cpu` from now on; nothing for None."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


@contextlib.contextmanager
def pinned(cpu: int | None):
    """The calling thread on `cpu` while the block runs, as it was after: a process the block
    starts inherits the CPU (Linux copies the forking thread's affinity), so the guest and every
    process UML starts for it stay there."""
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
