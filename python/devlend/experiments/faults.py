"""Faults under fire: for each injected fault, a bandwidthTest-style copy and an
fio-style job running when it strikes, each alone on the four-server cluster.

Setup: four-server-cluster; server1 borrows server2's gpu2 (a host-to-device cudaMemcpy) or nvme1
(fio 4 KiB random reads, queue depth 8), through ntb-1-2/ntb-2-1. Each workload first runs without
a fault; the fault then strikes at half that run's duration, on the same clock as the workload
(devlend.Scenario.fault): flows in flight stop where it cuts them.

Faults (devlend-host's `fault` module states each behaviour and its source): the cable pulled
(link-down of ntb-2-1), the lender crashing (host-crash server2), the borrower crashing
(host-crash server1), a surprise removal of the device, the device's slot link going down
(port-down; the cluster has no switch, so the port is the root port's), a completion timeout (the
device stops answering) and poisoned completions to and from the device.

Per fault and workload: what the application saw (it completed with its data checked, or its driver
got an error: a failed access, a poisoned completion, or its own timeout: the NVMe driver's
per-request I/O timeout, `timing.nvme_io_timeout_ps`, Linux's 30 s, after which it reads CSTS; the
GPU driver's copy watchdog, `timing.gpu_watchdog_ps`, after which it reads BAR 0 and reports a GPU
fallen off the bus on all ones; a hang would be reported as one), the bytes the device had moved when the fault struck and
after it, the time from the fault to the error the application got, the lends the fault ended,
the AER errors the hosts' AER drivers handled (devlend-fabric's `aer`: source, severity), the
hot-plug steps by which a removal reached the driver (the slot's interrupt, pciehp, Device
Lending's notice, the borrower's hot-remove; `timing.hotplug_detect_ps`, `hotplug_remove_ps`,
`dl_notice_ps`), and what Device Lending left programmed once every lend is ended (must be 0;
devlend-host's leftover checker). A driver whose device's removal reaches it gets "no such
device" then, not after its own timeout; an application on a host that crashes stops with it.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes
from ..errors import WorkloadError
from ..scenario import Scenario
from . import ExperimentResult, register, topology_path

MiB = 1 << 20
TOPOLOGY = "four-server-cluster.yaml"
BORROWER, LENDER, NTB = "server1", "server2", "ntb-2-1"
DEVICES = {"gpu-copy": "gpu2", "fio": "nvme1"}
# (label, kind, target: None means the workload's device)
FAULTS = [("cable pulled", "link-down", NTB), ("lender crash", "host-crash", LENDER), ("borrower crash", "host-crash", BORROWER),
          ("surprise removal", "surprise-removal", None), ("port down", "port-down", None),
          ("completion timeout", "completion-timeout", None), ("poisoned completion", "poisoned", None)]


def _scenario(workload: str, quick: bool) -> Scenario:
    s = Scenario(topology_path(TOPOLOGY))
    if workload == "gpu-copy":
        s.gpu_copy("app", BORROWER, DEVICES[workload], "htod", (16 if quick else 64) * MiB)
    else:
        s.fio("app", BORROWER, DEVICES[workload], "randread", iodepth=8, ios=2000 if quick else 8000)
    return s


def _outcome(s: Scenario) -> tuple[str, str]:
    try:
        s.run()
        return "completed", "completed; data checked"
    except WorkloadError as e:
        msg = str(e)
        return ("hang" if "nothing left to happen" in msg else "error"), msg


def _settle(s: Scenario) -> None:
    """After the application's error, let what is under way happen (AER messages, hot-plug steps)."""
    try:
        s.run()
    except WorkloadError:
        pass


def _aer(events: list[dict]) -> str:
    """AER messages handled, as "N severity error" per kind (with the like errors they stood for)."""
    counts: dict = {}
    for e in events:
        if e["kind"] == "aer":
            key = f"{e['severity']} {e['error']}"
            counts[key] = counts.get(key, 0) + 1 + e["more"]
    return "; ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def _hotplug(events: list[dict], at_ns: float) -> str:
    """The hot-plug steps, each with its time after the fault."""
    return "; ".join(f"{e['step']} on {e['host']} +{(e['at_ps'] / 1e3 - at_ns) / 1e3:.1f} us" for e in events if e["kind"] == "hotplug")


def _noticed(outcome: str, saw: str, s: Scenario, at_ns: float) -> Optional[float]:
    """From the fault to the application's error (when its last thread ended); 0 when the
    application's own host crashed (it stopped at the fault, and the run went on until the other
    hosts' software had seen it)."""
    if outcome != "error":
        return None
    if "crashed at" in saw:
        return 0.0
    return round(((s.threads_ended_ns or s.now_ns) - at_ns) / 1e3, 3)


def strike(workload: str, label: str, kind: str, target: Optional[str], at_ns: float, quick: bool) -> dict:
    """Run `workload` with fault `kind` at `at_ns`; what the application saw and what was left."""
    device = DEVICES[workload]
    s = _scenario(workload, quick)
    s.fault(kind, target or device, at_ns=at_ns)
    outcome, saw = _outcome(s)
    _settle(s)
    events = s.events()
    moved = s.moved(device)
    struck = s.faults()[0]
    before = moved["at_faults"][0][1] if moved["at_faults"] else None
    return {"fault": label, "kind": kind, "target": target or device, "workload": workload, "outcome": outcome, "application_saw": saw,
            "fault_us": round(at_ns / 1e3, 3), "bytes_before": before, "bytes_after": None if before is None else moved["total"] - before,
            "noticed_after_us": _noticed(outcome, saw, s, at_ns), "aer": _aer(events), "hotplug": _hotplug(events, at_ns),
            "lends_ended": len(struck["ended"]), "mappings_left": s.end_lends_and_count_leftovers()}


def measure(quick: bool, progress: Optional[Callable[[str], None]] = None) -> tuple[list[dict], dict]:
    rows, clean = [], {}
    for workload, device in DEVICES.items():
        s = _scenario(workload, quick)
        s.run()
        r = s.results().iloc[0]
        clean[workload] = {"end_ns": float(r.end_ns), "bytes": s.moved(device)["total"]}
        for label, kind, target in FAULTS:
            row = strike(workload, label, kind, target, clean[workload]["end_ns"] / 2, quick)
            rows.append({**row, "bytes_without_fault": clean[workload]["bytes"]})
            if progress:
                progress(f"{workload}: {label}")
    return rows, clean


@register("faults", "Faults mid-transfer: what a borrowed GPU's copy and NVMe job see, bytes moved, mappings left")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    rows, clean = measure(quick, progress)
    notes = [f"{w} without a fault: {c['bytes']} bytes moved by {DEVICES[w]} in {c['end_ns'] / 1e3:.1f} us; each fault strikes at half that"
             for w, c in clean.items()]
    notes += ["bytes_before/after: bytes the device moved as requester (writes landed, reads served) before and after the fault struck",
              "noticed_after_us: from the fault to the error the application got (empty for a hang or a completed run; 0 when its own host crashed)",
              "a removal (surprise removal, the lender's crash) reaches the driver through the slot's hot-plug interrupt (24 ms after the link "
              "goes down: the LTSSM's Recovery timeout), pciehp's removal, Device Lending's notice and the borrower's hot-remove: the driver gets "
              "'no such device' then (hotplug column: each step after the fault)",
              "aer: the AER errors the hosts' AER drivers handled, by severity and kind (PCIe Base 4.0 §6.2; default severities)",
              "the drivers notice by their own timeouts where nothing tells them sooner: NVMe's I/O timeout (Linux nvme_core.io_timeout, 30 s) "
              "reads CSTS (all ones: the controller is gone), the GPU's copy watchdog (1 s, assumed) reads BAR 0 (all ones: Xid 79); "
              "CPU stores to a target that is gone are dropped silently, as PCIe posts them",
              "poisoned completion (PCIe Base 3.0 §2.7.2.2): the GPU's copy engine receives its read data poisoned and fails the copy at once "
              "(the error notifier says so); the NVMe controller's next command fetch comes back poisoned, and a command whose identifier is in "
              "the lost bytes cannot be completed (CSTS.CFS): the driver's timeout finds it (a write whose data alone is poisoned completes "
              "with Data Transfer Error at once: tests/test_faults.py, crates/devlend-workloads/tests/it/poison.rs)",
              "mappings_left: what no live lend owns once every lend is ended (devlend-host's leftover checker: NTB translations, LUT entries, IOMMU context entries and mapped bytes; must be 0)"]
    cols = ["fault", "kind", "target", "workload", "outcome", "fault_us", "bytes_before", "bytes_after", "bytes_without_fault", "noticed_after_us", "lends_ended",
            "mappings_left", "aer", "hotplug", "application_saw"]
    return ExperimentResult(name="faults", title="Faults mid-transfer on a borrowed GPU and NVMe drive", source="beyond the papers",
                            columns=cols, rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Per workload: the bytes moved before and after each fault beside the run without one; the outcome in the label."""
    with Figure(path, ncols=2, size=(13, 4.8), title="devlend: faults mid-transfer (four-server cluster, borrowed from server2)") as f:
        for ax, workload in zip(f.axes, DEVICES):
            rows = [r for r in res.rows if r["workload"] == workload]
            names = [f"{r['fault']}\n({r['outcome']})" for r in rows]
            ax.barh(names, [r["bytes_without_fault"] for r in rows], color=f.colour("whole"), alpha=0.25, label="the run without a fault")
            ax.barh(names, [r["bytes_before"] or 0 for r in rows], color=f.colour("before"), label="before the fault")
            ax.barh(names, [r["bytes_after"] or 0 for r in rows], left=[r["bytes_before"] or 0 for r in rows],
                    color=f.colour("after"), label="after the fault")
            ax.invert_yaxis()
            axes(ax, xlabel="bytes moved by the device", title=f"{workload} ({DEVICES[workload]})", legend=7)
