"""HyperTRIO on a lent NIC (a result 002 did not have): the hyper-tenant NIC sits in
another host and is lent to the tenants' host through an NTB with Device Lending.

The tenants' IOMMU (the one that walks their nested tables) is in the borrower's root complex, so
every address-translation request the NIC sends, and every completion, crosses the NTB. The PCIe
round trip of a translation is not typed in: it is measured on the engine (one Machine run per
placement, topology `nic-lending.yaml`) as an 8-byte read (an ATS translation request and its
one-translation completion) from the NIC to the borrower's root complex, from the borrower's own
slot (nic0, 002's set-up) or from the lender's slot through the NTB (nic1), less the engine's
charge at the completer (its IOTLB probe and memory read: the pipeline charges the IOMMU's work
from 002 Table II). The data the NIC writes to the tenants' memory crosses the NTB too: its
capacity comes from a stream on the same path, and caps the bandwidth.

Each point is the HyperTRIO simulator (crates/devlend-hypertrio) with that round trip, Base and
HyperTRIO configurations (002 Table IV), iperf3 tenants, RR1 order. Next to a GPU copy through the
same NTB (`coupled`), the lent NIC's traffic runs on the machine at the pipeline's rates and the
round trip its translation requests see there is fed back to the pipeline until it holds (a
fixed-point search by bisection; devlend-workloads' `nic` workload does the same along one run's clock).
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, hardware_params, register, shipped
from ._hypertrio import LINK_GBPS, grid, quick_packets, simulate

TENANTS = [1, 4, 16, 64, 256, 1024]
QUICK_TENANTS = [4, 64, 1024]
IOVA = 0x4000_0000


def _fabric(params: Optional[dict] = None):
    topo = shipped("nic-lending.yaml")
    f = (topo.with_params(params) if params else topo).build()
    # What Device Lending sets up for a lent device's DMA (000 §4): the lender's NTB window into
    # the borrower, the borrower's IOMMU mapping the window's landing addresses onto its RAM, the
    # lender's requester-ID LUT entry for the NIC. nic0 (the local comparison) shares the domain.
    f.iommu_domain_alloc("borrower", "tenants")
    for dev in ("nic0", "ntb-b"):
        f.iommu_attach("borrower", "tenants", dev)
    f.iommu_map("borrower", "tenants", IOVA, f"borrower.ram+{IOVA:#x}", 64 << 20)
    f.mw_set_trans("ntb-b", 1, IOVA, 64 << 20)
    f.rid_lut_add("ntb-l", "nic1")
    f.rid_lut_add("ntb-l", "gpu0")
    for dev in ("nic0", "nic1", "gpu0"):
        f.set_bus_master(dev, True)
    return f


# Where each NIC's translation requests and packet data go: the borrower's RAM, directly (nic0)
# or through the lender's NTB window (nic1).
ROUTES = {"local": ("nic0", IOVA), "lent": ("nic1", "ntb-l.mw1")}
TRANSLATION_BYTES = 8   # PCIe ATS: a translation request reads 2 DW, one translation's completion


def _completer_ps(run) -> int:
    """What the engine charges at the root complex for a read of RAM behind the IOMMU (its IOTLB
    hit and memory read): the IOMMU's work, which the HyperTRIO pipeline charges itself."""
    p = run.params()
    return sum(round(float(p[k]) * 1000) for k in ("dram_latency_ns", "iotlb_hit_ns"))


def round_trip_ps(where: str, params: Optional[dict] = None) -> int:
    """The PCIe round trip of one translation request from the NIC at `where` ("local" or
    "lent") to the borrower's root complex, measured on the engine: the second of two 8-byte
    reads (the first warms the engine's IOTLB), less the engine's IOTLB hit and memory read at
    the completer, which the HyperTRIO pipeline charges itself (002 Table II)."""
    who, addr = ROUTES[where]
    run = _fabric(params).machine()
    run.stream("warm-up", who, addr, TRANSLATION_BYTES, write=False)
    run.stream("translation", who, addr, TRANSLATION_BYTES, write=False, at_ns=10_000)
    res = run.run().results()
    timed = round(float(res.loc[res["name"] == "translation", "time_ns"].iloc[0]) * 1000)
    return timed - _completer_ps(run)


def path_costs(params: Optional[dict] = None) -> dict:
    """From the engine: each placement's translation round trip (ps) and the capacity of the lent
    NIC's data path through the NTB for its writes (Gb/s, one stream alone)."""
    run = _fabric(params).machine()
    who, addr = ROUTES["lent"]
    run.stream("data", who, addr, 16 << 20)
    row = run.run().results().iloc[0]
    return {"round_trip_ps": {w: round_trip_ps(w, params) for w in ROUTES},
            "ntb_gbps": row["bytes"] * 8 / (row["time_ns"] * 1e-9) / 1e9}


# Shared links: the lent NIC's traffic next to a GPU copy over the same NTB.
SHARE_WINDOW_NS = 20_000        # how long the NIC's traffic is driven
NIC_DATA = 0                    # window offsets: the NIC's packet buffers (16 MiB, reused) ...
GPU_DATA = 32 << 20             # ... and the GPU copy's destination
GPU_BYTES = 512 << 10           # about as long as the window at the NTB's rate


def _nic_flows(run, stats: dict, packet_bytes: int) -> list[str]:
    """Drive the lent NIC's traffic as flows, at the rates of a HyperTRIO point (`stats`): its
    packets written to the tenants' memory through the NTB at the achieved bandwidth, and its
    translation requests (demand requests reaching the IOMMU and prefetched translations) as
    8-byte reads at theirs. Returns the names of the translation flows."""
    who, _ = ROUTES["lent"]
    packet_ns = packet_bytes * 8 / stats["gbps"]
    for i in range(int(SHARE_WINDOW_NS / packet_ns)):
        offset = NIC_DATA + (i * packet_bytes) % (16 << 20)
        run.stream(f"packet{i}", who, f"ntb-l.mw1+{offset:#x}", packet_bytes, at_ns=i * packet_ns)
    reads = stats["iommu_requests"] + stats["prefetch_requests"]
    names = []
    if reads:
        gap_ns = stats["time_ps"] / 1000 / reads
        for j in range(int(SHARE_WINDOW_NS / gap_ns)):
            names.append(f"translation{j}")
            run.stream(names[-1], who, "ntb-l.mw1", TRANSLATION_BYTES, write=False, at_ns=j * gap_ns)
    return names


def _gbps(rows) -> float:
    return rows["bytes"].sum() * 8 / (rows["end_ns"].max() - rows["start_ns"].min())


def _share_run(case: str, stats: dict, packet_bytes: int, params: Optional[dict]) -> dict:
    """One machine: the NIC ("nic"), the GPU copy ("gpu") or both ("together")."""
    run = _fabric(params).machine()
    reads = _nic_flows(run, stats, packet_bytes) if case != "gpu" else []
    if case != "nic":
        run.stream("gpu-copy", "gpu0", f"ntb-l.mw1+{GPU_DATA:#x}", GPU_BYTES)
    res = run.run().results()
    row = {}
    if case != "gpu":
        row["nic_gbps"] = _gbps(res[res["name"].str.startswith("packet")])
        row["round_trip_ns"] = res[res["name"].isin(reads)]["time_ns"].mean() - _completer_ps(run) / 1000
    if case != "nic":
        row["gpu_gbps"] = _gbps(res[res["name"] == "gpu-copy"])
    links = run.link_stats()
    top = links.loc[links["payload"].idxmax()]
    row.update(link=top["link"], link_gbps=top["payload"] * 8 / run.now_ns, link_utilisation=top["utilisation"])
    return row


def shared_links(stats: dict, packet_bytes: int, params: Optional[dict] = None) -> dict:
    """The lent NIC (driven at `stats`' rates) and a GPU copy into the borrower through the same
    NTB, alone and together, each case on one machine: each one's throughput (Gb/s), the
    translations' mean round trip (ns, counted as `round_trip_ps` counts it), the busiest link
    direction and its data rate over the run (Gb/s); and that link's capacity for the NIC's
    writes (Gb/s, the engine's analytic model)."""
    out = {case: _share_run(case, stats, packet_bytes, params) for case in ("nic", "gpu", "together")}
    who, _ = ROUTES["lent"]
    out["link_capacity_gbps"] = _fabric(params).machine().analytic(who, f"ntb-l.mw1+{NIC_DATA:#x}")["link_Bps"] * 8 / 1e9
    return out


@register("hnic", "HyperTRIO on a NIC lent through an NTB: 1-1024 tenants, Base vs HyperTRIO", params=True)
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    costs = path_costs()
    rtt = costs["round_trip_ps"]
    tenants = QUICK_TENANTS if quick else TENANTS
    points = [{"label": f"{config}|{where}", "config": config, "overrides": {"pcie_round_trip_ps": rtt[where]},
               "workload": "iperf3", "tenants": n, "order": "RR1",
               "packets_per_tenant": quick_packets(n) if quick else None}
              for config in ("base", "hypertrio") for where in ROUTES for n in tenants]
    if progress:
        progress(f"{len(points)} simulation points")
    done = grid(points)
    rows = []
    for p in done:
        config, where = p["config"].split("|")
        gbps = p["stats"]["gbps"]
        if where == "lent":
            gbps = min(gbps, costs["ntb_gbps"])
        rows.append({"config": config, "nic": where, "tenants": p["tenants"], "round_trip_ns": rtt[where] / 1000,
                     "gbps": round(gbps, 1)})
    rows.sort(key=lambda r: (r["config"], r["nic"], r["tenants"]))
    table2 = hardware_params()["hypertrio"]["pcie_one_way_ps"] * 2
    notes = [f"a translation's PCIe round trip, measured on the engine (nic-lending.yaml): {rtt['local'] / 1000:.0f} ns "
             f"from the borrower's slot, {rtt['lent'] / 1000:.0f} ns through the NTB (002 Table II: {table2 / 1000:.0f} ns); "
             "the IOMMU's own latencies are Table II's",
             f"the lent NIC's data path through the Gen4 x16 NTB carries {costs['ntb_gbps']:.0f} Gb/s "
             f"(engine stream), above the {LINK_GBPS:.0f} Gb/s link: translation, not the NTB's bandwidth, limits",
             *_shared_notes(rtt["lent"], max(tenants)),
             "no paper value: 002 did not lend the NIC"]
    return ExperimentResult(name="hnic", title="I/O link bandwidth (Gb/s), local vs lent NIC, iperf3, RR1",
                            source="002 Table II, Table IV; 000 §4",
                            columns=["config", "nic", "tenants", "round_trip_ns", "gbps"], rows=rows, notes=notes,
                            plot=plot)


MAX_ITERATIONS = 12             # the coupling's pipeline runs at most, per case


def coupled(config: str, tenants: int, round_trip_ps: int, params: Optional[dict] = None) -> dict:
    """`shared_links` with the loop closed: the pipeline runs with a round trip r (first the idle
    one, `round_trip_ps`), the NIC's traffic at its rates runs on the machine ("nic" alone, and
    "together" with the GPU copy), and the round trip its requests saw there decides the next r
    by bisection, as devlend-workloads' NIC workload does along one run (its module docs: the
    seen round trip falls as r grows and is nearly a step, so plain or damped iteration swings
    for ever), until r moves by less than 1% or MAX_ITERATIONS. Each case's row gains
    `iterations`, `converged`, `model_round_trip_ns` and `model_gbps` (the pipeline's last). The
    pipeline's tenants each send `quick_packets(tenants)` packets (a steady-state cut: the loop
    runs it up to 24 times)."""
    packet_bytes = hardware_params()["hypertrio"]["packet_bytes"]
    out = {"gpu": _share_run("gpu", {}, packet_bytes, params)}
    for case in ("nic", "together"):
        rtt, lo, hi = round_trip_ps, None, None
        for i in range(1, MAX_ITERATIONS + 1):
            stats = simulate(config, "iperf3", tenants, "RR1", quick_packets(tenants), {"pcie_round_trip_ps": rtt})
            row = _share_run(case, stats, packet_bytes, params)
            seen = round(row["round_trip_ns"] * 1000)
            if seen >= rtt:
                lo, hi = rtt, (hi if hi is not None and hi > rtt else None)
            else:
                lo, hi = (lo if lo is not None and lo < rtt else None), rtt
            nxt = (lo + hi) // 2 if lo is not None and hi is not None else seen
            converged = abs(nxt - rtt) < 0.01 * rtt
            if converged or i == MAX_ITERATIONS:
                break
            rtt = nxt
        out[case] = {**row, "iterations": i, "converged": converged, "model_gbps": stats["gbps"],
                     "model_round_trip_ns": rtt / 1000}
    who, _ = ROUTES["lent"]
    out["link_capacity_gbps"] = _fabric(params).machine().analytic(who, f"ntb-l.mw1+{NIC_DATA:#x}")["link_Bps"] * 8 / 1e9
    return out


def _shared_notes(round_trip_ps: int, tenants: int) -> list[str]:
    share = coupled("hypertrio", tenants, round_trip_ps)
    nic, gpu, both = share["nic"], share["gpu"], share["together"]
    loop = "; ".join(f"{c}: {share[c]['iterations']} pipeline runs, " + ("settled within 1%" if share[c]["converged"] else
                                                                          "still moving by 1% or more")
                     for c in ("nic", "together"))
    return [f"sharing the NTB (one machine): the lent HyperTRIO NIC at {tenants} tenants (its packets and translation "
            f"requests at the pipeline's rates) moves {nic['nic_gbps']:.0f} Gb/s alone and {both['nic_gbps']:.0f} next to "
            f"a GPU copy; the GPU copy {gpu['gpu_gbps']:.0f} Gb/s alone, {both['gpu_gbps']:.0f} together; a translation's "
            f"round trip is {nic['round_trip_ns']:.0f} ns alone and {both['round_trip_ns']:.0f} ns together (even alone the "
            "requests wait for the NIC's read tags, [timing] read_tags); busiest link "
            f"{both['link']} carries {both['link_gbps']:.0f} of {share['link_capacity_gbps']:.0f} Gb/s",
            f"the pipeline sees that contention: the round trip it runs with is bisected on what its requests saw until "
            f"it moves by less than 1% ({loop}): {nic['model_round_trip_ns']:.0f} ns alone, "
            f"{both['model_round_trip_ns']:.0f} ns together; its rate then {nic['model_gbps']:.0f} and "
            f"{both['model_gbps']:.0f} Gb/s"]


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
