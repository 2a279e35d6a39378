"""compose (beyond every paper): three workloads of three seed papers on one fabric, on
one clock, alone and together.

Topology `compose-three-host.yaml`: a lender holds an Optane P5800X, a Tesla K40c and the hyper-tenant
NIC of 002; one PXH830 adapter joins it to the borrower and to a VM host (two cables). At once:
- the borrower runs an fio job (4 KiB random reads) on the lender's drive, borrowed with Device
  Lending (000 §4);
- a VM on the VM host copies from the lender's GPU into its memory with its guest driver (the
  mediated path of 000 §5: the VM host borrows the GPU when the guest enables bus mastering);
- the lender's NIC serves 256 iperf3 tenants of the borrower (their IOMMU is the borrower's), its
  packets and translation requests crossing the same NTB at the rates of the HyperTRIO pipeline,
  Base or HyperTRIO configuration (002 Table IV), fed back with the round trip its requests see
  on the run (devlend-workloads' `nic`).

Each workload runs alone, then all three together, per configuration. Reported per workload:
throughput (GB/s: bytes over its first to its last transfer) and latency (fio: mean and p99 per
I/O; GPU: the copy's time; NIC: a translation request's mean round trip as the pipeline counts
it); per run, the busiest link direction and its utilisation, and the three workloads' total
rate over the run against that link's capacity.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes
from . import ExperimentResult, register, shipped, topology_path  # noqa: F401 (topology_path: for tests)

TOPOLOGY = "compose-three-host.yaml"
TENANTS = 256
WORKLOADS = ("fio", "gpu", "nic")
CONFIGS = ("hypertrio", "base")
# How much each workload moves: about as long each as the others on the shared link.
FULL = {"ios": 2000, "gpu_bytes": 4 << 20, "nic_ns": 600_000, "packets_per_tenant": 2000}
QUICK = {"ios": 500, "gpu_bytes": 1 << 20, "nic_ns": 150_000, "packets_per_tenant": 160}
# Gen 1-5 transfer rates (GT/s) and line codes (PCIe Base 5.0 §4.2: 8b/10b to Gen2, 128b/130b from Gen3).
GT_PER_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0}


def _scenario(workloads: tuple, config: str, size: dict, params: Optional[dict]):
    from ..scenario import Scenario
    topo = shipped(TOPOLOGY)
    s = Scenario(topo.with_params(params) if params else topo)
    if "fio" in workloads:
        s.fio("fio", "borrower", "nvme0", "randread", iodepth=8, ios=size["ios"])
    if "gpu" in workloads:
        s.gpu_copy("gpu", "vm1", "gpu0", "dtoh", size["gpu_bytes"])
    if "nic" in workloads:
        s.nic("nic", "borrower", "nic0", config=config, tenants=TENANTS, duration_ns=size["nic_ns"],
              packets_per_tenant=size["packets_per_tenant"])
    return s.run()


def link_capacity_gbps(topo, link: str) -> float:
    """The raw data rate of the topology link one of whose ends is `link`'s first end (Gb/s)."""
    end = link.split(" -> ")[0].strip()
    for ln in topo.links:
        if end in (ln.a, ln.b) or end.split(".")[0] in (ln.a, ln.b):
            code = 8 / 10 if ln.gen <= 2 else 128 / 130
            return GT_PER_S[ln.gen] * ln.width * code
    raise KeyError(f"no link of {topo.name} ends at {end}")


def _measure(s, case: str, config: str) -> list[dict]:
    res = s.results().set_index("name")
    nic = s.nic_results()
    rows = []
    for w in res.index:
        r = res.loc[w]
        row = {"case": case, "config": config, "workload": w, "GBps": float(r.GBps)}
        if w == "fio":
            row.update(latency_us=float(r.lat_mean_us), p99_us=float(r.lat_p99_us))
        elif w == "gpu":
            row.update(latency_us=(r.end_ns - r.start_ns) / 1000)
        else:
            n = nic[w]
            row.update(latency_us=n["round_trip_ns"] / 1000, model_gbps=round(n["model_gbps"], 1),
                       iterations=n["iterations"])
        rows.append(row)
    return rows


def _links(s, topo) -> dict:
    """The busiest link direction of a run (busy time over the workloads' span: from the first
    one's start to the last one's end; the clock runs on past it for the drivers' timers), its
    payload rate and capacity, and the workloads' total rate over the span."""
    links = s.link_stats()
    res = s.results()
    span_ns = res["end_ns"].max() - res["start_ns"].min()
    top = links.loc[links["busy_ns"].idxmax()]
    return {"link": top["link"], "utilisation": float(top["busy_ns"]) / span_ns,
            "link_gbps": float(top["payload"]) * 8 / span_ns,
            "total_gbps": float(res["bytes"].sum()) * 8 / span_ns,
            "capacity_gbps": link_capacity_gbps(topo, top["link"])}


def cases(quick: bool = True, params: Optional[dict] = None, progress: Optional[Callable[[str], None]] = None) -> dict:
    """Every run: ("alone", workload, config) and ("together", config) -> (rows, links)."""
    size = QUICK if quick else FULL
    topo = shipped(TOPOLOGY)
    runs = [("alone", ("fio",), "-"), ("alone", ("gpu",), "-")]
    runs += [("alone", ("nic",), c) for c in CONFIGS] + [("together", WORKLOADS, c) for c in CONFIGS]
    out = {}
    for case, ws, config in runs:
        if progress:
            progress(f"{case}: {', '.join(ws)} ({config})")
        s = _scenario(ws, config if config != "-" else CONFIGS[0], size, params)
        out[(case, ws[0] if case == "alone" else "all", config)] = (_measure(s, case, config), _links(s, topo))
    return out


@register("compose", "fio on a borrowed drive, a VM's GPU copies and the hyper-tenant NIC (256 tenants) on one fabric", params=True)
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    done = cases(quick, progress=progress)
    rows, notes = [], []
    for (case, _, config), (measured, link) in done.items():
        for r in measured:
            r.update(bottleneck=link["link"], utilisation=round(link["utilisation"], 3))
            rows.append(r)
        if case == "together":
            notes.append(f"together, NIC {config}: busiest link direction {link['link']} at {link['utilisation']:.0%} busy; "
                         f"the three move {link['total_gbps']:.1f} Gb/s over the run against its "
                         f"{link['capacity_gbps']:.1f} Gb/s")
    alone = {r["workload"] + "|" + r["config"]: r for r in rows if r["case"] == "alone"}
    for r in rows:
        if r["case"] == "together":
            key = r["workload"] + "|" + (r["config"] if r["workload"] == "nic" else "-")
            r["vs_alone"] = round(r["GBps"] / alone[key]["GBps"], 3)
    for r in rows:
        r["GBps"] = round(r["GBps"], 3)
        r["latency_us"] = round(r["latency_us"], 3)
    notes.append("NIC: GB/s of packet data delivered; latency a translation request's mean round trip; model_gbps the "
                 "HyperTRIO pipeline's rate after its last run, iterations its runs (the loaded round trip fed back)")
    notes.append("no paper value: no seed paper ran these together")
    return ExperimentResult(name="compose", title=f"fio, a VM's GPU copy and the hyper-tenant NIC ({TENANTS} tenants): alone and together",
                            source="000 §4, §5; 002 Table IV",
                            columns=["case", "config", "workload", "GBps", "vs_alone", "latency_us", "p99_us", "model_gbps",
                                     "iterations", "bottleneck", "utilisation"],
                            rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Throughput and latency per workload, alone and together (NIC HyperTRIO, then Base); one
    colour per workload in every panel."""
    groups = [("alone", "hypertrio"), ("together", "hypertrio"), ("alone", "base"), ("together", "base")]
    with Figure(path, ncols=2, size=(12, 4.5), title="devlend compose: one fabric, three workloads") as f:
        for ax, metric, label in ((f.axes[0], "GBps", "throughput (GB/s)"), (f.axes[1], "latency_us", "latency (us, log)")):
            width = 0.8 / len(WORKLOADS)
            for i, w in enumerate(WORKLOADS):
                ys = []
                for case, config in groups:
                    match = [r for r in res.rows if r["workload"] == w and r["case"] == case
                             and (r["config"] == config or (w != "nic" and case == "alone"))]
                    ys.append(match[0][metric] if match else 0)
                ax.bar([g + (i - 1) * width for g in range(len(groups))], ys, width, label=w, color=f.colour(w))
            ax.set_xticks(range(len(groups)), [f"{c}\nNIC {k}" for c, k in groups])
            axes(ax, ylabel=label, logy=metric == "latency_us", legend=8)
