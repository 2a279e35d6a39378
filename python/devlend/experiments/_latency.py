"""RAM-to-RAM latency between two hosts: what 000 §7.2 and §7.4 measure as the one-way latency of
a CPU store into the other host's RAM through the NTB."""

from __future__ import annotations

from . import shipped


def ram_to_ram_ns(topology: str, near_ntb: str, far_ntb: str, far_ram: str, cpu: str) -> float:
    """One-way latency of a CPU store through `near_ntb`'s window 1 into the far host's RAM at
    `far_ram`, in steady state (caches warm)."""
    f = shipped(topology).build()
    f.mw_set_trans(far_ntb, 1, far_ram, 1 << 20)
    return f.dma(cpu, f"{near_ntb}.mw1", 4, warm=True).time_ps / 1000
