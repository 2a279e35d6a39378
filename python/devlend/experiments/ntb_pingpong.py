"""ntb-pingpong: the Linux ntb_pingpong tool (drivers/ntb/test) on the 003 testbed (issue 6).

The two hosts bounce a doorbell through the PEX8749 NT port: each side reads its first
scratchpad, writes the value plus one into the peer's, and rings the peer's doorbell with a bit
mask shifted by one each ping (back to `init_db` once shifted out of the 16 valid bits); the
receiver's interrupt handler reads and clears its doorbell and, after `delay`, pings back. devlend
times each step on the fabric (register reads are round trips to the NT port's BAR, stores are UC,
the doorbell is an MSI into the peer plus the interrupt entry of `[rdma_sw]`), on the Gen2 x8
testbed and on the same testbed re-rated to Gen3 x8 and Gen4 x16.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, register
from ._rdma import ntb_pingpong

LINKS = [(2, 8), (3, 8), (4, 16)]
PINGS = 1000


@register("ntb-pingpong", "Linux ntb_pingpong on the PEX8749 NTB: doorbell + scratchpad round trip (issue 6)")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    pings = 100 if quick else PINGS
    rows = []
    for gen, width in LINKS:
        r = ntb_pingpong(pings, gen=gen, width=width)
        steps = {name: ps / 1e3 for name, ps in r["steps"]}
        rows.append({"link": f"Gen{gen} x{width}", "pings": pings, "counter": r["counter"],
                     "round_trip_ns": round(r["round_trip_ns"], 1), "one_way_ns": round(r["round_trip_ns"] / 2, 1),
                     "spad_ns": round(steps["read own scratchpad"] + steps["write peer scratchpad (UC store)"], 1),
                     "doorbell_ns": round(steps["doorbell store, MSI, interrupt entry"], 1),
                     "handler_ns": round(steps["handler reads doorbell"] + steps["handler clears doorbell (UC store)"], 1)})
        if progress:
            progress(f"Gen{gen} x{width}")
    base = rows[0]
    notes = [f"{pings} pings; the counter arrives as {base['counter']} (one increment per ping), doorbell bits 1, 2, 4, ... 0x8000, 1, ...",
             f"Gen2 x8 round trip {base['round_trip_ns']:.0f} ns, of which the receiver's interrupt entry ([rdma_sw] irq_entry, assumed) "
             "is most: faster links shorten only the register and MSI hops",
             "003 gives no doorbell latency; the Linux tool only counts pings, devlend also times them"]
    return ExperimentResult(name="ntb-pingpong", title="ntb_pingpong between host A and host B, ns",
                            source="Linux drivers/ntb/test/ntb_pingpong semantics; 003 §2.2, Fig 6 (doorbells, scratchpads)",
                            columns=["link", "pings", "counter", "round_trip_ns", "one_way_ns", "spad_ns", "doorbell_ns", "handler_ns"],
                            rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Stacked bars of one ping's parts per link."""
    parts = [("spad_ns", "scratchpad read + peer store"), ("doorbell_ns", "doorbell, MSI, IRQ entry"), ("handler_ns", "handler")]
    with Figure(path, size=(6, 4)) as f:
        ax = f.axes[0]
        bottom = [0.0] * len(res.rows)
        for key, label in parts:
            vals = [r[key] for r in res.rows]
            ax.bar([r["link"] for r in res.rows], vals, bottom=bottom, label=label, color=f.colour(label))
            bottom = [b + v for b, v in zip(bottom, vals)]
        axes(ax, ylabel="one ping (ns)", grid=False, legend=10,
             title="devlend: ntb_pingpong one-way time through a PEX8749 NTB")
