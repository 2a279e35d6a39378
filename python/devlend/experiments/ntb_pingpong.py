"""ntb-pingpong: the Linux ntb_pingpong tool (drivers/ntb/test) on the 003 testbed, or
between the two ends of any NTB (`--topology`, with `--opt a=HOST --opt b=HOST`).

The two hosts bounce a doorbell through the PEX8749 NT port: each side reads its first
scratchpad, writes the value plus one into the peer's, and rings the peer's doorbell with a bit
mask shifted by one each ping (back to `init_db` once shifted out of the 16 valid bits); the
receiver's interrupt handler reads and clears its doorbell and, after `delay`, pings back. The two
sides are threads on one machine: register reads are round trips to the NT port's BAR, stores are
UC and act when they land in the NT registers, the doorbell's MSI wakes the peer's thread, which
pays the interrupt entry of `[rdma_sw]`. On the Gen2 x8 testbed and on the same testbed re-rated to
Gen3 x8 and Gen4 x16 (a topology standing in runs as it is). Options (`--opt`), named as Linux's:
count (pings), init_db, delay_ms; a and b (hosts, a rings first).
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes
from . import ExperimentResult, Stand, register, stand_in_active
from ._rdma import ntb_pingpong

LINKS = [(2, 8), (3, 8), (4, 16)]
PINGS = 1000


@register("ntb-pingpong", "Linux ntb_pingpong over an NTB: doorbell + scratchpad round trip (any topology with an NTB)",
          stand=Stand("pex8749-rdma.yaml", ()), options={"a": "host-a", "b": "host-b", "count": 0, "init_db": 1, "delay_ms": 0.0})
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None, a: str = "host-a", b: str = "host-b",
        count: int = 0, init_db: int = 1, delay_ms: float = 0.0) -> ExperimentResult:
    pings = count or (100 if quick else PINGS)
    rows = []
    for gen, width in [(None, None)] if stand_in_active() else LINKS:
        r = ntb_pingpong(pings, init_db, round(delay_ms * 1e6), gen=gen, width=width, a=a, b=b)
        steps = {name: ps / 1e3 for name, ps in r["steps"]}
        rows.append({"link": f"Gen{gen} x{width}" if gen else "as given", "pings": pings, "counter": r["counter"],
                     "round_trip_ns": round(r["round_trip_ns"], 1), "one_way_ns": round(r["round_trip_ns"] / 2, 1),
                     "spad_ns": round(steps["read own scratchpad"] + steps["write peer scratchpad (UC store)"], 1),
                     "doorbell_ns": round(steps["doorbell store, MSI, interrupt entry"], 1),
                     "handler_ns": round(steps["handler reads doorbell"] + steps["handler clears doorbell (UC store)"], 1)})
        if progress:
            progress(f"Gen{gen} x{width}" if gen else "done")
    base = rows[0]
    notes = [f"{a} and {b}, {pings} pings; the counter arrives as {base['counter']} (one increment per ping), doorbell bits "
             f"{init_db:#x} shifted by one each ping, back to it when shifted out",
             f"{base['link']} round trip {base['round_trip_ns']:.0f} ns, of which the receiver's interrupt entry ([rdma_sw] irq_entry, assumed) "
             "is most: faster links shorten only the register and MSI hops",
             "003 gives no doorbell latency; the Linux tool only counts pings, devlend also times them"]
    return ExperimentResult(name="ntb-pingpong", title=f"ntb_pingpong between {a} and {b}, ns",
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
             title=f"devlend: {res.title}, one way")
