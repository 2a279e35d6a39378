"""HyperTRIO on a lent NIC (issue 5, a result 002 did not have): the hyper-tenant NIC sits in
another host and is lent to the tenants' host through an NTB with Device Lending.

The tenants' IOMMU (the one that walks their nested tables) is in the borrower's root complex, so
every address-translation request the NIC sends, and every completion, now crosses the NTB. The
extra one-way latency is not typed in: it comes from the fabric model (topology
`nic-lending.yaml`), as half the difference between the NIC's read round trip to the borrower's
RAM from the lender (through the NTB) and from the borrower's own slot (nic0). 002's one-way
latency between device and chipset (Table II, 450 ns) is the local baseline; the lent NIC sees
450 ns plus that difference. The data the NIC writes to the tenants' memory crosses the NTB too:
its capacity comes from a timed DMA stream on the same path, and caps the bandwidth.

Each point is the HyperTRIO simulator (crates/devlend-hypertrio) with the one-way latency
overridden, Base and HyperTRIO configurations (002 Table IV), iperf3 tenants, RR1 order.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from .. import load
from . import ExperimentResult, hardware_params, register, topology_path
from ._hypertrio import LINK_GBPS, grid, quick_packets

TENANTS = [1, 4, 16, 64, 256, 1024]
QUICK_TENANTS = [4, 64, 1024]
IOVA = 0x4000_0000


def _fabric():
    f = load(topology_path("nic-lending.yaml")).build()
    # What Device Lending sets up for a lent device's DMA (000 §4): the lender's NTB window into
    # the borrower, the borrower's IOMMU mapping the window's landing addresses onto its RAM, the
    # lender's requester-ID LUT entry for the NIC. nic0 (the local comparison) shares the domain.
    f.iommu_domain_alloc("borrower", "tenants")
    for dev in ("nic0", "ntb-b"):
        f.iommu_attach("borrower", "tenants", dev)
    f.iommu_map("borrower", "tenants", IOVA, f"borrower.ram+{IOVA:#x}", 64 << 20)
    f.mw_set_trans("ntb-b", 1, IOVA, 64 << 20)
    f.rid_lut_add("ntb-l", "nic1")
    f.set_bus_master("nic0", True)
    f.set_bus_master("nic1", True)
    return f


def path_costs() -> dict:
    """From the fabric model: the lent NIC's extra one-way latency to the borrower's root complex
    (ps) and the data path's capacity for the NIC's writes through the NTB (Gb/s)."""
    f = _fabric()
    local = f.dma("nic0", IOVA, 64, write=False, warm=True).time_ps
    lent = f.dma("nic1", "ntb-l.mw1", 64, write=False, warm=True).time_ps
    stream = f.dma("nic1", "ntb-l.mw1", 16 << 20, write=True, warm=True)
    return {"extra_one_way_ps": (lent - local) // 2, "ntb_gbps": stream.nbytes * 8 / (stream.time_ps * 1e-12) / 1e9}


@register("hnic", "HyperTRIO on a NIC lent through an NTB: 1-1024 tenants, Base vs HyperTRIO (issue 5)")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    costs = path_costs()
    base = hardware_params()["hypertrio"]["pcie_one_way_ps"]
    one_way = {"local": base, "lent": base + costs["extra_one_way_ps"]}
    tenants = QUICK_TENANTS if quick else TENANTS
    points = [{"label": f"{config}|{where}", "config": config, "overrides": {"pcie_one_way_ps": one_way[where]},
               "workload": "iperf3", "tenants": n, "order": "RR1",
               "packets_per_tenant": quick_packets(n) if quick else None}
              for config in ("base", "hypertrio") for where in ("local", "lent") for n in tenants]
    if progress:
        progress(f"{len(points)} simulation points")
    done = grid(points)
    rows = []
    for p in done:
        config, where = p["config"].split("|")
        gbps = p["stats"]["gbps"]
        if where == "lent":
            gbps = min(gbps, costs["ntb_gbps"])
        rows.append({"config": config, "nic": where, "tenants": p["tenants"], "one_way_ns": one_way[where] / 1000,
                     "gbps": round(gbps, 1)})
    rows.sort(key=lambda r: (r["config"], r["nic"], r["tenants"]))
    notes = [f"the NTB path adds {costs['extra_one_way_ps'] / 1000:.0f} ns one way to each translation request "
             f"(fabric model, nic-lending.yaml); 002's local one-way latency is {base / 1000:.0f} ns",
             f"the lent NIC's data path through the Gen4 x16 NTB carries {costs['ntb_gbps']:.0f} Gb/s "
             f"(timed DMA stream), above the {LINK_GBPS:.0f} Gb/s link: translation, not the NTB's bandwidth, limits",
             "no paper value: 002 did not lend the NIC"]
    return ExperimentResult(name="hnic", title="I/O link bandwidth (Gb/s), local vs lent NIC, iperf3, RR1",
                            source="002 Table II, Table IV; 000 §4; issue 5",
                            columns=["config", "nic", "tenants", "one_way_ns", "gbps"], rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Fig 10's axes: bandwidth against tenants, one line per configuration and NIC placement."""
    with Figure(path, dpi=110) as f:
        ax = f.axes[0]
        for config in ("base", "hypertrio"):
            for where, ls in (("local", "-"), ("lent", "--")):
                f.line(ax, *points(res.rows, "tenants", "gbps", config=config, nic=where), f"{config}, {where} NIC", ls,
                       key=config, marker="o", markersize=3)
        axes(ax, xlabel="tenants", ylabel="I/O link bandwidth (Gb/s)", logx=True, ylim=(0, LINK_GBPS * 1.05),
             title="devlend: HyperTRIO on a NIC lent through an NTB")
