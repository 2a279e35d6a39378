"""D3: GPU ping-pong latency with GPU-initiated stores (000 §7.2, Fig 14; 001 §7.3.2, Fig 11).

One GPU's kernel increments a counter and stores it into the other's memory (peer-to-peer) or into
a buffer in the runner's RAM; the other waits for the change and stores an acknowledgement back.
The GPUs run as in D2 (the same scenarios, lent by Device Lending; see p2p.scenario), and the round
trip is timed in steady state (each access timed after an untimed first one, so the IOTLB is warm
as after the paper's first round trips):
- peer-to-peer: write(A->B) + B notices in its own memory + write(B->A) + A notices;
- via RAM: write(A->RAM) + B notices by polling RAM + write(B->RAM) + A notices likewise.
Each kernel access goes through the GPU's memory system (devlend-devices gpu_kernel: a store leaves
the SM `sm_to_pcie_ps` before it is on PCIe; a GPU polling its own memory sees a store one BAR access
and one polling-load period, `sm_poll_ps`, after it lands). A GPU polling host RAM issues back-to-back
reads, each `sm_to_pcie_ps` each way between the SM and PCIe; a store lands at a uniformly random phase of the read
in flight, so on average it is seen one full read round trip later (half a round trip of phase,
then the completion's way back). The model is deterministic, so the paper's 100,000 round trips
have no spread here (000 reports < 25 ns between runs).

Also reported: the one-way RAM-to-RAM latency from the borrower's CPU into lender B's RAM, which
000 §7.2 measured at about 700 ns, the NTB adding 350-365 ns of it.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, register
from . import p2p
from ._gpu import pingpong_ps
from ._latency import ram_to_ram_ns

SCENARIOS = ["Loc-P2P-SW", "Loc-P2P-Root", "1L-P2P-SW", "1L-P2P-IOMMU", "2L-P2P-SW", "2L-P2P-IOMMU",
             "Loc-RAM-Root", "1L-RAM-SW", "1L-RAM-IOMMU", "2L-RAM-SW", "2L-RAM-IOMMU"]


def round_trip_ns(name: str) -> float:
    js, runner, a, b, peer = p2p.scenario(name)
    return pingpong_ps(js, runner, a, b, peer) / 1000


@register("d3", "GPU ping-pong latency, GPU-initiated stores (000 §7.2, Fig 14)", params=True)
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    rows = []
    for name in SCENARIOS:
        rows.append({"scenario": name, "round_trip_ns": round(round_trip_ns(name), 1)})
        if progress:
            progress(name)
    r2r = ram_to_ram_ns("three-host-cluster.yaml", "ntb-b-b", "ntb-c-b", "lender-b.ram+0x1000000", "borrower:cpu")
    rows.append({"scenario": "RAM-to-RAM one-way, borrower to lender B", "round_trip_ns": None,
                 "devlend_one_way_ns": round(r2r, 1), "paper_one_way_ns": "~700"})
    notes = ["paper: 1L-P2P-SW = Loc-P2P-SW; 1L-P2P-IOMMU = Loc-P2P-Root; 2L-P2P-SW ~ 1L-P2P-SW + 700 ns; "
             "counters in RAM much slower (the second GPU must read)",
             "the NTB pair's internal latency, the switch's and the root's are fitted (params timing.ntb_latency_ps, "
             "switch_latency_ps, root_latency_ps) to 000's path statements, this 2L - 1L difference among them "
             "(params/measurements.yaml; `devlend validate`)"]
    return ExperimentResult(name="d3", title="Ping-pong round trip, ns", source="000 §7.2, Fig 14; 001 §7.3.2",
                            columns=["scenario", "round_trip_ns", "devlend_one_way_ns", "paper_one_way_ns"], rows=rows, notes=notes,
                            plot=plot)


# 000 §7.2 (text beside Fig 14): a second lender adds "a little over 700 ns" to the round trip.
PAPER_SECOND_LENDER_NS = 700


def plot(res: ExperimentResult, path: str) -> None:
    """Fig 14's layout: one bar per scenario, peer-to-peer and via RAM."""
    rows = [r for r in res.rows if r.get("round_trip_ns") is not None]
    with Figure(path, size=(10, 4), dpi=110) as f:
        ax = f.axes[0]
        f.colour("P2P"), f.colour("RAM")  # blue and orange, as the title says
        f.bars(ax, [r["scenario"] for r in rows], [r["round_trip_ns"] / 1000 for r in rows],
               color=[f.colour("P2P") if "P2P" in r["scenario"] else f.colour("RAM") for r in rows])
        ax.tick_params(axis="x", rotation=45)
        rt = {r["scenario"]: r["round_trip_ns"] / 1000 for r in rows}
        one_way = next((r for r in res.rows if r.get("devlend_one_way_ns") is not None), None)
        if "1L-P2P-SW" in rt and "2L-P2P-SW" in rt:
            # 000 §7.2: 1L-P2P-SW equals Loc-P2P-SW; the second lender adds "a little over 700 ns".
            f.paper(ax, ["1L-P2P-SW", "2L-P2P-SW"], [rt["Loc-P2P-SW"], rt["1L-P2P-SW"] + PAPER_SECOND_LENDER_NS / 1000],
                    "1L-P2P-SW = Loc-P2P-SW; 2L-P2P-SW = 1L-P2P-SW + a little over 700 ns (000 §7.2)", joined=False)
        if one_way is not None:
            ax.text(0.01, 0.84, f"RAM-to-RAM one way: ours {one_way['devlend_one_way_ns']:.0f} ns, paper "
                    f"{one_way['paper_one_way_ns']} ns", transform=ax.transAxes, va="top", fontsize=8)
        axes(ax, ylabel="round trip (microseconds)", grid=False, legend=8,
             title="devlend: GPU ping-pong round trip (cf. 000 Fig 14); blue: counters in GPU memory, orange: in RAM")
