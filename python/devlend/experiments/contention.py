"""Contention (beyond the papers): N DMA streams share one lender's NTB link.

Setup: pxh830-two-host (000 Fig 9). The lender's gpu0 reaches the borrower's RAM through the
lender's NTB window 1 and the borrower's IOMMU. The topology has one DMA-capable device in the
lender, so the N streams are N DMA streams of that one requester (as N copy-engine channels would
be), each to its own 8 MiB region of the lent buffer; each stream keeps its own read tags. All
N start at once and move the same number of bytes; separately all write, and all read.

- Rem-SW: the lender's IOMMU off; the streams cross the lender's switch straight into the NTB.
- Rem-IOMMU: the lender's IOMMU on (gpu0 maps the window at IOVA 0x10000000); the streams turn
  at the lender's root complex, so they also share its root port, and reads are re-split there.

Per N: each stream's bandwidth (bytes over its own start-to-end), the total (all bytes over the
time the last one ends), and the analytic bound beside: the bottleneck link's capacity
(devlend_engine::analytic on one stream's route) shared fairly, capacity / N per stream. While the
load runs, one 4-byte access of the same kind (a write, or a read) by the same requester starts at
half the expected run time; its end-to-start time is its latency under load, beside the latency of
the same access on the idle fabric.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from ..fabric import Fabric
from . import ExperimentResult, Stand, hardware_params, register, shipped

MiB = 1 << 20
TOPOLOGY = "pxh830-two-host.yaml"
NS = list(range(1, 9))
REGION = 8 * MiB          # each stream's share of the borrower's 64 MiB lent buffer
PROBE_OFFSET = 63 * MiB   # the small access's address, past every stream's region
SCENARIOS = {"Rem-SW": False, "Rem-IOMMU": True}
LENDER_IOVA = 0x1000_0000


def testbed(lender_iommu: bool) -> tuple[Fabric, int]:
    """The two-host testbed and the address gpu0 uses for the lent buffer."""
    topo = shipped(TOPOLOGY)
    for h in topo.hosts:
        if h.name == "lender":
            h.iommu = lender_iommu
    fab = topo.build()
    if not lender_iommu:
        return fab, fab.resolve("ntb-l.mw1")
    fab.iommu_domain_alloc("lender", "lend")
    fab.iommu_attach("lender", "lend", "gpu0")
    fab.iommu_map("lender", "lend", LENDER_IOVA, "ntb-l.mw1", 64 * MiB)
    return fab, LENDER_IOVA


def probe_ns(fab: Fabric, base: int, write: bool, load_streams: int, nbytes: int, at_ns: float) -> tuple[float, dict]:
    """Run `load_streams` streams of `nbytes` and one 4-byte access at `at_ns`; return the access's
    latency (ns) and the run's results."""
    run = fab.machine()
    for i in range(load_streams):
        run.stream(f"s{i}", "gpu0", base + i * REGION, nbytes, write=write)
    run.stream("probe", "gpu0", base + PROBE_OFFSET, 4, write=write, at_ns=at_ns)
    run.run()
    res = run.results()
    return float(res[res.name == "probe"].time_ns.iloc[0]), {"results": res[res.name != "probe"], "links": run.link_stats()}


def measure(nbytes: int, ns: list[int], progress: Optional[Callable[[str], None]] = None) -> tuple[list[dict], dict]:
    rows, params = [], {}
    for scenario, iommu in SCENARIOS.items():
        fab, base = testbed(iommu)
        for write in (True, False):
            access = "write" if write else "read"
            run = fab.machine()
            a = run.analytic("gpu0", base, write=write)
            cap = a["link_Bps"]
            params[scenario, access] = a
            idle, _ = probe_ns(fab, base, write, 0, nbytes, 0)
            for n in ns:
                expected_ns = n * nbytes / cap * 1e9
                loaded, out = probe_ns(fab, base, write, n, nbytes, expected_ns / 2)
                res, links = out["results"], out["links"]
                busiest = links.loc[links.payload.idxmax()]
                total = n * nbytes / (res.end_ns.max() * 1e-9)
                rows.append({"scenario": scenario, "access": access, "N": n,
                             "per_stream_GBps": round(res.GBps.mean(), 3), "min_stream_GBps": round(res.GBps.min(), 3),
                             "bound_per_stream_GBps": round(cap / n / 1e9, 3), "total_GBps": round(total / 1e9, 3),
                             "capacity_GBps": round(cap / 1e9, 3), "one_stream_analytic_GBps": round(a["stream_Bps"] / 1e9, 3),
                             "end_spread_pct": round((res.end_ns.max() - res.end_ns.min()) / res.end_ns.max() * 100, 2),
                             "busiest_link": busiest.link, "busiest_util": round(float(busiest.utilisation), 3),
                             "credit_stall_us": round(float(links.credit_stall_ns.sum()) / 1e3, 2),
                             "probe_idle_ns": round(idle, 1), "probe_loaded_ns": round(loaded, 1)})
                if progress:
                    progress(f"{scenario} {access} N={n}")
    return rows, params


def _effective(params: dict) -> list[str]:
    t = hardware_params()["timing"]
    topo = shipped(TOPOLOGY)
    links = ", ".join(f"{ln.a}<->{ln.b} Gen{ln.gen} x{ln.width}" for ln in topo.links)
    cpl = sorted({min(hardware_params()["cpu"][h.cpu]["ram_completion_bytes"], t["max_payload"]) for h in topo.hosts})
    notes = [f"effective: MPS {t['max_payload']} B, MRRS {t['max_read_request']} B, {t['read_tags']} read tags per stream and per re-splitting root, "
             f"RAM completions of {'/'.join(map(str, cpl))} B, {t['rx_buffer_tlps']} receive-buffer TLPs per class; links: {links}"]
    for (scenario, access), a in params.items():
        notes.append(f"{scenario} {access}: bottleneck link capacity {a['link_Bps'] / 1e9:.3f} GB/s, "
                     f"one stream alone (analytic) {a['stream_Bps'] / 1e9:.3f} GB/s")
    return notes


@register("contention", "N DMA streams sharing one lender's NTB link: bandwidth and latency under load (beyond the papers)",
          params=True, stand=Stand(TOPOLOGY, ("lender", "borrower", "gpu0", "ntb-l")))
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    nbytes = 1 * MiB if quick else 4 * MiB
    ns = [1, 2, 4, 8] if quick else NS
    rows, params = measure(nbytes, ns, progress)
    notes = [f"N streams of {nbytes // MiB} MiB each by the lender's gpu0 (the one DMA-capable device in the lender; "
             "several streams of one requester to separate 8 MiB regions), all starting at t=0"] + _effective(params)
    notes.append("bound_per_stream = capacity / N (fair share); the probe is a 4-byte access of the same kind by gpu0 at half the expected run time")
    notes.append("Rem-IOMMU reads: the lender's root re-splits every read it forwards into 64 B requests issued from one pool of read "
                 "tags shared by all routes through it (assumed), so the root, not the link, is the bottleneck: the total stays at one "
                 "stream's rate and N streams share it")
    cols = ["scenario", "access", "N", "per_stream_GBps", "min_stream_GBps", "bound_per_stream_GBps", "total_GBps", "capacity_GBps",
            "one_stream_analytic_GBps", "end_spread_pct", "busiest_link", "busiest_util", "credit_stall_us", "probe_idle_ns", "probe_loaded_ns"]
    return ExperimentResult(name="contention", title="DMA streams sharing the lender's NTB link (GB/s; probe latency ns)",
                            source="beyond the papers", columns=cols, rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Per access: per-stream and total bandwidth against N, one colour per scenario; the fair-share
    bound (capacity / N) and the capacity dashed."""
    with Figure(path, ncols=2, size=(11, 4.2), sharey=True,
                title="devlend: contention on one lender's NTB link (pxh830-two-host)") as f:
        for ax, access in zip(f.axes, ("write", "read")):
            for scenario in SCENARIOS:
                def line(key, label, style, **kw):
                    f.line(ax, *points(res.rows, "N", key, scenario=scenario, access=access), f"{scenario} {label}", style,
                           key=scenario, **kw)
                line("total_GBps", "total", "-s")
                line("per_stream_GBps", "per stream", "-o", alpha=0.6)
                line("bound_per_stream_GBps", "capacity / N", "--", alpha=0.8)
                line("capacity_GBps", "capacity", ":", alpha=0.8)
            axes(ax, xlabel="streams sharing the NTB link (N)", title=f"DMA {access}s through the lender's NTB", legend=None)
        axes(f.axes[0], ylabel="bandwidth (GB/s)", grid=False, legend=7)
