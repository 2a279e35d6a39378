"""The constants ``--set`` may set (and a topology's or scenario file's ``params`` section), as
the ``[settable]`` table ``devlend params`` prints after params/hardware.toml: each key as it is
written, its unit and where its default comes from. The list is the core's own
(``devlend_fabric::tuning::settable``), so it cannot drift from what the core accepts."""

from __future__ import annotations

HEADER = """
# ---------------------------------------------------------------------------------------------
# What --set (devlend experiment, run, run-workloads, fio) and a topology's or scenario file's
# params section may set: "KEY" = "unit; default". NAME is a host or device, PROFILE a CPU
# profile, END either end of a link as `links` writes it ('*' for every link). Values are whole
# numbers in the unit, or strings with a unit ('20 us', '4 KiB', '2 GiB'); each is checked for
# type and range, and a bad one is refused naming the key.
#   devlend run-workloads T.yaml --set links.server2.rp3.width=4 --set 'devices.nvme1.media_read_latency_ps=20 us' ...
[settable]
"""


def settable_toml() -> str:
    from . import _core
    rows = [f'"{key}" = "{unit}; default: {default}"' for key, unit, default in _core.settable()]
    return HEADER + "\n".join(rows) + "\n"
