"""fio on a real Linux kernel beside devlend's own fio model: the same 4 KiB jobs on the Optane of
the NVMe testbed, local (a guest of the lender, whose drive it is) and borrowed (a guest of the
other host, through Device Lending), each run twice: with Linux's nvme driver, blk-mq and fio in a
User-Mode Linux guest on the engine's clock (devlend.linux), and with devlend's fio model (its own
NVMe driver on the same engine and fabric). The guest's interrupts per I/O come from its own
/proc/interrupts around each job; the device server counts the rest."""

from __future__ import annotations

import tempfile
from typing import Callable, Optional

from . import ExperimentResult, Stand, hardware_params, register, shipped

JOBS = [("randread", 1), ("randread", 16), ("randwrite", 1)]
PLACEMENTS = {"local": "lender", "borrowed": "borrower"}
COLUMNS = ["job", "placement", "side", "kIOPS", "lat_mean_us", "lat_p99_us", "irqs_per_io", "difference"]


def nvme_interrupts(text: str) -> int:
    """The nvme queues' interrupts in a `grep nvme /proc/interrupts` output (one CPU in UML)."""
    total = 0
    for line in text.splitlines():
        f = line.split()
        if len(f) > 2 and f[0].endswith(":") and f[1].isdigit() and "nvme" in f[-1]:
            total += int(f[1])
    return total


def guest_runs(topo, host: str, ios: int, outdir: str, jobs: list[tuple] = JOBS) -> list[tuple]:
    """Every job of `jobs` in one guest of `host`: (FioSide, interrupts per I/O) each."""
    from ..linux import compare
    from ..linux.guest import LinuxGuestError, run
    cmds = []
    for rw, qd in jobs:
        cmds += ["grep nvme /proc/interrupts", compare.guest_command(rw, qd, ios)]
    cmds.append("grep nvme /proc/interrupts")
    r = run(topo, host, cmds, device="nvme0", outdir=outdir, timeout_s=900)
    out = []
    for i, (rw, _) in enumerate(jobs):
        if r.returncodes[2 * i + 1] != 0:
            raise LinuxGuestError(f"fio {rw} failed in the guest of {host}: {r.outputs[2 * i + 1][-500:]}", "crash")
        s = compare.side(compare.fio_json(r.outputs[2 * i + 1]), write=rw.endswith("write"))
        irqs = nvme_interrupts(r.outputs[2 * i + 2]) - nvme_interrupts(r.outputs[2 * i])
        out.append((s, irqs / max(1, s.ios)))
    return out


def measure(ios: int, progress: Optional[Callable[[str], None]] = None, jobs: list[tuple] = JOBS) -> list[dict]:
    from ..linux import compare
    topo = shipped("nvme-back-to-back.yaml")
    entry_us = hardware_params()["timing"]["irq_entry_ps"] / 1e6
    rows = []
    for placement, host in PLACEMENTS.items():
        with tempfile.TemporaryDirectory(prefix="devlend-linux-fio-") as d:
            guest = guest_runs(topo, host, ios, d, jobs)
        for (rw, qd), (g, irqs) in zip(jobs, guest):
            m = compare.model(topo, host, "nvme0", rw, qd, ios)
            job = f"{rw} QD{qd}"
            rows.append({"job": job, "placement": placement, "side": "linux guest", "kIOPS": round(g.iops / 1e3, 1),
                         "lat_mean_us": round(g.clat_mean_ns / 1e3, 3), "lat_p99_us": round(g.clat_p99_ns / 1e3, 3),
                         "irqs_per_io": round(irqs, 2), "difference": ""})
            rows.append({"job": job, "placement": placement, "side": "devlend model", "kIOPS": round(m.iops / 1e3, 1),
                         "lat_mean_us": round(m.clat_mean_ns / 1e3, 3), "lat_p99_us": round(m.clat_p99_ns / 1e3, 3),
                         "irqs_per_io": "",
                         "difference": f"model - guest {(m.clat_mean_ns - g.clat_mean_ns) / 1e3:+.2f} us mean: the model charges "
                                       f"{entry_us:g} us of interrupt entry on the CPU, the guest's time none (no CPU model); "
                                       f"the guest took {irqs:.2f} interrupts per I/O"})
        if progress:
            progress(placement)
    return rows


def borrowed_minus_local(rows: list[dict], side: str, job: str = "randread QD1") -> float:
    by = {(r["placement"], r["side"], r["job"]): r for r in rows}
    return by["borrowed", side, job]["lat_mean_us"] - by["local", side, job]["lat_mean_us"]


@register("linux-fio", "fio on a real Linux kernel in a guest beside devlend's fio model, local vs borrowed Optane", params=True,
          stand=Stand("nvme-back-to-back.yaml", ("lender", "borrower", "nvme0")))
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    rows = measure(64 if quick else 512, progress)
    notes = [f"{side}: borrowed minus local, randread QD1 mean completion latency {borrowed_minus_local(rows, side):+.2f} us"
             for side in ("linux guest", "devlend model")]
    notes += ["latency is fio's completion latency (clat) in both; the guest's is simulated time read with "
              "clock_gettime (UML time travel with devlend's engine as its clock), so guest CPU work costs nothing there",
              "fio computes IOPS over its runtime in whole milliseconds, so a short job's guest IOPS is coarse "
              "(the mean latency is not)",
              "the guest runs Linux 6.12's nvme driver with one I/O queue (UML has one CPU); devlend's model runs its own "
              "driver with one I/O queue pair per job"]
    return ExperimentResult(name="linux-fio", title="fio: a real Linux guest beside devlend's fio model, local vs borrowed",
                            source="000 §7.4 testbed; Linux 6.12 nvme driver and fio in a UML guest", columns=COLUMNS, rows=rows, notes=notes)
