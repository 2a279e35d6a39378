"""Several workloads at once on any topology, on one clock (devlend-workloads' Scenario):
timing-only DMA streams, bandwidthTest-style GPU copies, GPU ping-pongs (the ping-pong kernel on
two GPUs), fio-style NVMe jobs, Linux's ntb_perf between two hosts joined by an NTB, each
driven by its real driver, and the hyper-tenant NIC of 002 (``nic``: its traffic at the HyperTRIO
pipeline's rates, fed back with the round trip it sees on the run), started at given times and
run together.

    s = devlend.Scenario("topologies/three-host-cluster.yaml")
    s.gpu_copy("copy", "borrower", "gpu0", "dtoh", 8 << 20)          # borrows gpu0 from lender-a
    bar1 = s.lends()[0]["bars"][1]["cpu_addr"]                        # gpu0's BAR 1 as the borrower sees it
    s.stream("load", "borrower:cpu", bar1 + (128 << 20), 8 << 20, write=False, at_ns=1000)
    s.return_device("gpu0", at_ns=5e6)     # at 5 ms, once both have ended; another host may borrow it next
    s.run()
    s.results(); s.link_stats(); s.params(); s.to_csv("out.csv")

Times are in nanoseconds. The topology should have no Device Lending ``setup`` section: the
scenario borrows devices itself. The topology's ``vms`` start with the scenario; a workload's runner
may name a VM as it names a host, and drives the devices the VM's description gives it:

    s.fio("reads", "vm1", "nvme1", "randread", iodepth=8)             # vm1: {host: server1, devices: [nvme1]}
"""

from __future__ import annotations

import json

import os
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from . import _core
from . import checks
from .errors import WorkloadError, WorkloadTypeError, WorkloadValueError
from .lspci.profiles import warn_default
from .machine import _call

if TYPE_CHECKING:
    import pandas as pd

    from .topology import Topology

Addr = Union[int, str]

RESULT_COLUMNS = ["name", "kind", "at_ns", "start_ns", "end_ns", "bytes", "GBps", "ios", "iops", "lat_mean_us", "lat_p50_us", "lat_p99_us",
                  "rounds", "rtt_mean_ns", "rtt_p50_ns", "rtt_p99_ns", "rtt_max_ns", "threads", "thread_min_MBps", "thread_max_MBps",
                  "status", "error", "noticed_ns", "moved_bytes"]
LINK_COLUMNS = ["link", "link_index", "towards_down", "tlps", "bytes", "payload", "utilisation", "busy_ns", "credit_stall_ns", "mean_queue_ns"]


def _ps(name: str, at_ns: float, field: str = "at_ns") -> int:
    """A time in ns as ps, checked (finite, from 0 to 2^64-1 ps): else a WorkloadError naming the field."""
    return checks.time_ps(at_ns, field, f"workload {name}", WorkloadValueError, WorkloadTypeError)


def _n(name: str, field: str, v, *, lo: int = 0, hi: int = checks.U64_END) -> int:
    """An integer argument, checked for type and range: else a WorkloadError naming the field."""
    return checks.count(v, field, f"workload {name}", WorkloadValueError, WorkloadTypeError, lo=lo, hi=hi)


def _name(name) -> str:
    if not isinstance(name, str):
        raise WorkloadTypeError(f"workload name {name!r}: expected a string", "name")
    return name


# Events the core runs between two progress updates: a few milliseconds of a run (the environment
# variable DEVLEND_PROGRESS_SLICE_EVENTS sets it, for tests of the bar).
PROGRESS_SLICE_EVENTS = int(os.environ.get("DEVLEND_PROGRESS_SLICE_EVENTS", "20000"))


class Scenario:
    """Workloads started at given times on one machine, run together."""

    def __init__(self, topology: "Union[str, os.PathLike, Topology]", hygiene: str = "scrub"):
        """`hygiene`: what the lender does with a returned device before its next borrower
        ("scrub", the default, or "none"; see ``devlend.pool.HYGIENE_POLICIES``): under "scrub" a
        borrow before the scrub has ended is refused with the time it ends."""
        from .pool import check_hygiene
        from .topology import Topology, load
        check_hygiene(hygiene)
        topo = topology if isinstance(topology, Topology) else load(topology)
        if topo.params or topo.vms:
            topo.build()  # an override or a VM the core refuses is a file:line:field error, as for any topology
        self._s = _call(_core.Scenario, topo.to_json(), hygiene)
        self._topo = topo
        self._ran = False
        self._topology = topo

    def borrow(self, borrower: str, device: str, *, dma_window: "Union[int, None]" = None,
               at_ns: "Union[float, None]" = None) -> "Scenario":
        """Borrow `device` for `borrower` now, or at simulated time `at_ns` (the machine runs up to
        it first), with a DMA window of `dma_window` bytes (default: a whole NTB memory window);
        workloads of `borrower` on it then use this lend."""
        at = None if at_ns is None else _ps(f"borrow of {device}", at_ns)
        win = None if dma_window is None else _n(f"borrow of {device}", "dma_window", dma_window)
        _call(self._s.borrow, borrower, device, win, at)
        return self

    def return_device(self, device: str, *, at_ns: float, borrower: "Union[str, None]" = None) -> "Scenario":
        """Return `device` to its lender at simulated time `at_ns` (the machine runs up to it first):
        every workload on it must have ended by then (else an error naming the one still running);
        every mapping of the lend is undone, and another host may borrow it afterwards."""
        _call(self._s.return_device, device, _ps(f"return of {device}", at_ns), borrower)
        return self

    def stream(self, name: str, requester: str, addr: Addr, nbytes: int, *, write: bool = True, at_ns: float = 0) -> "Scenario":
        """`nbytes` of max-payload writes (or max-read-request reads) by `requester` at `addr`."""
        if not isinstance(addr, str):
            addr = _n(_name(name), "addr", addr)
        _call(self._s.stream, _name(name), requester, addr, _n(name, "nbytes", nbytes), bool(write), _ps(name, at_ns))
        return self

    def gpu_copy(self, name: str, runner: str, gpu: str, direction: str, nbytes: int, *, at_ns: float = 0) -> "Scenario":
        """One cudaMemcpy ("htod" or "dtoh") of `nbytes` by `runner`'s driver; borrows `gpu` if it sits elsewhere."""
        _call(self._s.gpu_copy, _name(name), runner, gpu, direction, _n(name, "nbytes", nbytes), _ps(name, at_ns))
        return self

    def fio(self, name: str, runner: str, drive: str, rw: str, *, iodepth: int = 1, numjobs: int = 1, ios: int = 1000,
            bs: int = 4096, at_ns: float = 0) -> "Scenario":
        """An fio job (fio's rw: read, write, randread, randwrite, rw/readwrite or randrw with half reads; 4 KiB) on
        `drive` by `runner`; borrows it if it sits elsewhere."""
        n = {k: _n(_name(name), k, v, hi=hi) for k, v, hi in (("iodepth", iodepth, 1 << 32), ("numjobs", numjobs, 1 << 16), ("ios", ios, 1 << 32), ("bs", bs, checks.U64_END))}
        warn_default(self._topo, drive)
        _call(self._s.fio, name, runner, drive, rw, n["iodepth"], n["numjobs"], n["ios"], n["bs"], _ps(name, at_ns))
        return self

    def fio_job(self, name: str, runner: str, drive: str, job: "devlend.fio.jobfile.Job", *, at_ns: float = 0) -> "Scenario":
        """An fio job read by devlend fio's parser (``devlend.fio.jobfile.job_from_options``, or a
        job file's section): every fio option devlend models, its numjobs threads on `drive` by
        `runner`; borrows it if it sits elsewhere. Its region is checked against the drive's capacity."""
        from .fio.jobfile import Job
        from .fio.run import threads
        if not isinstance(job, Job):
            raise WorkloadTypeError(f"{_name(name)}: job: expected a devlend.fio.jobfile.Job (jobfile.job_from_options, "
                                    f"or a job file's section), not {type(job).__name__}", "job")
        warn_default(self._topo, drive)
        _call(self._s.fio_jobs, _name(name), runner, drive, threads([job]), _ps(name, at_ns))
        return self

    def gpu_pingpong(self, name: str, runner: str, gpu_a: str, gpu_b: str, *, via: str = "peer", rounds: int = 100,
                     at_ns: float = 0) -> "Scenario":
        """`rounds` round trips of the ping-pong kernel between `gpu_a` (it stores first) and `gpu_b`,
        launched by `runner` (which borrows GPUs that sit elsewhere); the counters meet in each
        other's memory (via "peer") or in a buffer in `runner`'s RAM (via "ram")."""
        _call(self._s.gpu_pingpong, _name(name), runner, gpu_a, gpu_b, via, _n(name, "rounds", rounds, hi=1 << 32), _ps(name, at_ns))
        return self

    def ntb_perf(self, name: str, runner: str, peer: str, *, use_dma: bool = False, threads: int = 1, chunk_order: int = 19,
                 total_order: int = 20, max_mw_size: "int | None" = None, dma: "str | None" = None, at_ns: float = 0) -> "Scenario":
        """Linux's ntb_perf from `runner` into `peer`'s memory through the NTB joining them: each of
        `threads` threads copies 2**total_order bytes in chunks of 2**chunk_order with CPU stores
        (write-combining) or, `use_dma`, on a DMA channel of its own (the engine `dma`, or the
        runner's function with the pex8749-dma profile). Linux's default total_order is 30; 20
        here because every byte is simulated."""
        n = {k: _n(_name(name), k, v, hi=1 << 32) for k, v in (("threads", threads), ("chunk_order", chunk_order), ("total_order", total_order))}
        mw = None if max_mw_size is None else _n(name, "max_mw_size", max_mw_size)
        _call(self._s.ntb_perf, name, runner, peer, bool(use_dma), n["threads"], n["chunk_order"], n["total_order"],
              mw, dma, _ps(name, at_ns))
        return self

    def nic(self, name: str, runner: str, nic: str, *, config: str, tenants: int, duration_ns: float,
            profile: str = "iperf3", order: str = "RR1", packets_per_tenant: "int | None" = None,
            epoch_ns: float = 5000, at_ns: float = 0) -> "Scenario":
        """The hyper-tenant NIC `nic` serving `tenants` tenants of `runner` (which borrows it if it
        sits elsewhere) for `duration_ns`: its packet writes and translation requests (8-byte reads
        of `runner`'s RAM) at the rates of the HyperTRIO pipeline (002 Table IV column `config`,
        "base" or "hypertrio"; workload `profile`, interleaving `order`), the pipeline run again
        each `epoch_ns` with the round trip the requests saw on this run when it moved by 1% or
        more (see ``nic_results``)."""
        ppt = None if packets_per_tenant is None else _n(_name(name), "packets_per_tenant", packets_per_tenant)
        _call(self._s.nic, name, runner, nic, config, _n(name, "tenants", tenants, hi=1 << 32), _ps(name, duration_ns, "duration_ns"), profile,
              order, ppt, _ps(name, epoch_ns, "epoch_ns"), _ps(name, at_ns))
        return self

    def nic_results(self) -> dict:
        """Per NIC workload, after the run: packets written, packets dropped (the previous one's write
        had not left the NIC), translations, the probe's and the mean
        translation round trip (ns, as the pipeline counts it: the completer's DRAM read and IOTLB
        hit excluded), the pipeline's last round trip and rate (Gb/s), its runs (``iterations``),
        when the round trip first moved by less than 1% (ns, or None) and each epoch
        (end_ns, round_trip_ns or None, gbps)."""
        out = {}
        for name, packets, drops, translations, first, rtt, model_rtt, model_gbps, iterations, conv, epochs in self._s.nic_results():
            out[name] = {"packets": packets, "drops": drops, "translations": translations, "first_round_trip_ns": first / 1000,
                         "round_trip_ns": rtt / 1000, "model_round_trip_ns": model_rtt / 1000, "model_gbps": model_gbps,
                         "iterations": iterations, "converged_at_ns": None if conv is None else conv / 1000,
                         "epochs": [{"end_ns": e / 1000, "round_trip_ns": None if r is None else r / 1000, "gbps": g}
                                    for e, r, g in epochs]}
        return out

    def vms(self) -> list[dict]:
        """The topology's VMs, started with the scenario: runners as hosts are."""
        return [{"vm": n, "host": h} for n, h in self._s.vms()]

    def fault(self, kind: str, target: str, *, at_ns: float = 0) -> "Scenario":
        """Inject fault `kind` (``devlend.pool.FAULT_KINDS``) at `target` at time `at_ns`, on the
        same clock as the workloads: flows in flight stop where the fault cuts them."""
        _call(self._s.fault, _ps(f"fault {kind}", at_ns), kind, target)
        return self

    def faults(self) -> list[dict]:
        """Each fault: time (ns), kind, target, whether it struck, its error, the lends it ended."""
        keys = ("at_ns", "kind", "target", "struck", "error", "ended")
        return [dict(zip(keys, (at / 1000, k, t, s, e, [dict(zip(("device", "lender", "borrower", "why"), x)) for x in ended])))
                for at, k, t, s, e, ended in self._s.faults()]

    def moved(self, device: str) -> dict:
        """Bytes `device` moved as a requester: ``total``, and ``at_faults``: [(ns, bytes)] when each fault struck."""
        total, at = _call(self._s.moved, device)
        return {"total": total, "at_faults": [(t / 1000, b) for t, b in at]}

    def end_lends_and_count_leftovers(self) -> int:
        """End every lend still held; the number of NTB translations, LUT entries and IOMMU
        entries of Device Lending left programmed (0 unless a teardown leaks)."""
        return _call(self._s.end_lends_and_count_leftovers)

    def leftovers(self) -> list[str]:
        """What is programmed now that no live lend owns (NTB translations, LUT entries, IOMMU
        context entries and mapped bytes), one message each; [] when all is well."""
        return _call(self._s.leftovers)

    @property
    def threads_ended_ns(self) -> Optional[float]:
        """When the last of the scenario's software threads ended (after a fault: when the
        software had noticed it; ``now_ns`` may be later, moved on by waits' stale deadlines)."""
        ps = self._s.threads_ended_ps()
        return None if ps is None else ps / 1000

    def events(self) -> list[dict]:
        """The fabric's recent events: failed accesses, interrupts, AER messages (``kind`` "aer":
        time, host, root port, source ID, error, severity) and hot-plug steps (``kind`` "hotplug")."""
        return json.loads(_call(self._s.events))

    def lends(self) -> list[dict]:
        """Devices borrowed so far, with their BARs as the borrower sees them (for stream addresses)."""
        return [{"device": d, "lender": le, "borrower": b, "bars": [{"index": i, "size": s, "cpu_addr": a} for i, s, a in bars]}
                for d, le, b, bars in self._s.lends()]

    def keep_going(self) -> "Scenario":
        """From now on, go on past workloads' failures (see ``run``), also in the runs up to a
        borrow or return at a time."""
        self._s.keep_going()
        return self

    def run(self, keep_going: bool = False, progress: "Optional[Callable[[float], Any]]" = None) -> "Scenario":
        """Run until nothing is left to happen. A workload's failure (a fault's doing) is a
        WorkloadError; with `keep_going` the run goes on and each workload's row says how it
        ended (``status``: completed, failed or cut short; ``error``: what its application saw;
        ``noticed_ns``; ``moved_bytes``: what its device had moved). With `progress`, the core
        runs in slices of events and `progress` gets how far the workloads are (0 to 1) between
        them (the results are the same)."""
        if progress is not None:
            if keep_going:
                self._s.keep_going()
            while _call(self._s.run_events, PROGRESS_SLICE_EVENTS):
                progress(self._s.progress())
            progress(1.0)
        _call(self._s.run, keep_going)
        self._ran = True
        return self

    @property
    def now_ns(self) -> float:
        return self._s.now_ps() / 1000

    def results(self) -> "pd.DataFrame":
        """One row per workload: start/end (ns), bytes, GB/s; IOPS and latencies (us) for fio;
        round trips (ns) for a ping-pong; threads and their MB/s (bytes per us) for ntb_perf."""
        import pandas as pd
        rows = []
        for name, kind, at, start, end, nbytes, fio, trips, perf in self._s.results():
            t = None if end is None else end - start
            row = {"name": name, "kind": kind, "at_ns": at / 1000, "start_ns": start / 1000,
                   "end_ns": None if end is None else end / 1000, "bytes": nbytes,
                   "GBps": nbytes / (t * 1e-12) / 1e9 if t else None}
            if fio:
                ios, iops, mean, p50, p99 = fio
                row.update(ios=ios, iops=iops, lat_mean_us=mean / 1e6, lat_p50_us=p50 / 1e6, lat_p99_us=p99 / 1e6)
            if trips:
                rounds, mean, p50, p99, worst = trips
                row.update(rounds=rounds, rtt_mean_ns=mean / 1e3, rtt_p50_ns=p50 / 1e3, rtt_p99_ns=p99 / 1e3, rtt_max_ns=worst / 1e3)
            if perf:
                mbps = [b / (ps * 1e-6) for b, ps in perf if ps]
                row.update(threads=len(perf), thread_min_MBps=min(mbps, default=None), thread_max_MBps=max(mbps, default=None))
            rows.append(row)
        for row, (status, error, noticed, moved) in zip(rows, self._s.outcomes()):
            row.update(status=status, error=error, noticed_ns=None if noticed is None else noticed / 1000, moved_bytes=moved)
        df = pd.DataFrame(rows, columns=RESULT_COLUMNS)
        df["moved_bytes"] = df["moved_bytes"].astype("Int64")  # bytes stay integers beside empty cells
        df.attrs["params"] = self.params()
        return df

    @property
    def span_ns(self) -> "Optional[tuple[float, float]]":
        """(first workload's start, last workload's end) in ns: what the link statistics cover."""
        span = self._s.span_ps()
        return None if span is None else (span[0] / 1000, span[1] / 1000)

    def link_stats(self) -> "pd.DataFrame":
        """One row per link direction that carried TLPs from the first workload's start on:
        bytes, utilisation (busy time over the workloads' span, ``span_ns``: never over timers
        that fire after the work), credit stall, mean queueing delay per TLP."""
        import pandas as pd
        span = self._s.span_ps()
        length = span[1] - span[0] if span else 0
        rows = [{"link": f"{a} -> {b}", "link_index": link, "towards_down": down, "tlps": tlps, "bytes": wire, "payload": payload,
                 "utilisation": busy / length if length else 0.0, "busy_ns": busy / 1000, "credit_stall_ns": stall / 1000,
                 "mean_queue_ns": queue / tlps / 1000}
                for link, down, a, b, tlps, wire, payload, busy, queue, stall in self._s.link_stats()]
        df = pd.DataFrame(rows, columns=LINK_COLUMNS)
        df.attrs["span_ns"] = self.span_ns
        return df

    def params(self) -> dict:
        """The effective parameters (MPS, MRRS, read tags, latencies, each drive's media) and devlend's version."""
        return dict(self._s.params())

    def header(self) -> str:
        """The parameters as one commented CSV line."""
        return "# " + "; ".join(f"{k}={v}" for k, v in self.params().items())

    def provenance(self, *, scenario: "Optional[str]" = None, command: "Optional[str]" = None) -> dict:
        """How this run was made (``devlend.provenance.record``): devlend's version, the parameters
        with every override and the effective values, the topology's (and `scenario` file's) hash."""
        from .provenance import overrides, record
        if scenario is not None and not isinstance(scenario, (str, os.PathLike)):
            raise WorkloadTypeError(f"provenance scenario {scenario!r}: expected a file path or None", "scenario")
        if command is not None and not isinstance(command, str):
            raise WorkloadTypeError(f"provenance command {command!r}: expected a string or None", "command")
        try:
            return record(sets=overrides(self._topology), topology=self._topology._file, scenario=scenario,
                          command=command, effective=self.params())
        except OSError as e:
            raise WorkloadValueError(f"provenance scenario {scenario!r}: cannot be read to hash it ({e.strerror})", "scenario") from None

    def to_csv(self, path: "Union[str, os.PathLike, None]", links_path: "Union[str, os.PathLike, None]" = None, *,
               provenance: "Optional[dict]" = None) -> None:
        """Write the results (and the link statistics) as CSV, each under a commented parameters
        line and ending with the run's provenance (`provenance`, default ``self.provenance()``)."""
        from .provenance import write_csv
        if provenance is not None and not isinstance(provenance, dict):
            raise WorkloadTypeError(f"to_csv provenance {provenance!r}: expected a dict (Scenario.provenance()) or None", "provenance")
        rec = provenance or self.provenance()
        for p, df in ((path, self.results()), (links_path, self.link_stats())):
            if p is not None:
                write_csv(p, df, rec, self.header())
