"""Run a job file's jobs on the model (the Rust driver and controller on one clock) and assemble
fio's JSON and normal text from what they did."""

from __future__ import annotations

import time
import zlib

from .. import __version__, _core
from ..errors import FabricError, NvmeStatusError
from . import report
from .jobfile import Job


def threads(jobs: list[Job]) -> list[dict]:
    """One dict per job thread (numjobs expanded), in the fields of devlend-workloads' JobSpec."""
    out = []
    for job in jobs:
        limit = None if job.time_based else (job.io_size if job.io_size is not None else job.size)
        for k in range(job.numjobs):
            seed = zlib.crc32(f"{job.randseed}/{len(out)}/{job.randrepeat}".encode()) | 1
            out.append({"rw": job.rw, "rwmixread": job.rwmixread, "bssplit": job.bssplit, "iodepth": job.effective_iodepth(),
                        "offset": job.offset, "size": job.size, "io_limit": limit, "ios": job.number_ios,
                        "runtime_ps": None if job.runtime_ps is None else job.ramp_ps + job.runtime_ps,
                        "time_based": job.time_based, "startdelay_ps": job.startdelay_ps, "thinktime_ps": job.thinktime_ps,
                        "rate_iops": job.rate_iops, "randommap": job.randommap, "seed": seed * 0x9E3779B1, "group": job.group})
    return out


def simulate(topology_json: str, host: str, device: str, jobs: list[Job]) -> list[dict]:
    """Every thread's I/Os; NVMe status errors and set-up errors become devlend's errors."""
    try:
        return _core.fio_jobs(topology_json, host, device, threads(jobs))
    except _core.NvmeStatusError as e:
        message, opcode, lba, status = e.args
        raise NvmeStatusError(message, opcode=opcode, lba=lba, status=status) from None
    except _core.FabricError as e:
        raise FabricError(str(e)) from None


def to_json(jobs: list[Job], outs: list[dict], global_opts: dict, device: str, plus: bool = False) -> dict:
    """fio's --output-format=json (json+ with the clat histogram's bins) document."""
    now = time.time()
    doc = {"fio version": f"fio-3.33 (devlend {__version__})", "timestamp": int(now), "timestamp_ms": int(now * 1000),
           "time": time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now)), "global options": global_opts, "jobs": []}
    us = report.units(jobs, outs)
    for u in us:
        entry = {"jobname": u.name, "groupid": u.group, "error": 0, "eta": 0, "elapsed": max(1, round(u.runtime_ps / 1e12)),
                 "job options": u.job.options}
        for d in report.DIRS:
            entry[d] = u.ddir(d == "write", u.job.percentiles, plus)
        entry["trim"] = report.empty_ddir()
        entry["job_runtime"] = int(round(u.runtime_ps / 1e9))
        entry["iodepth_level"] = u.depths
        entry.update(u.lat_buckets())
        entry["latency_depth"] = u.job.effective_iodepth()
        doc["jobs"].append(entry)
    doc["disk_util"] = [disk_util(us, device)]
    return doc


def disk_util(units: list, device: str) -> dict:
    """fio's disk_util entry for the simulated drive: I/Os and the share of the run with one in flight."""
    reads = sum(int((~u.write).sum()) for u in units)
    writes = sum(int(u.write.sum()) for u in units)
    ticks = [sum(int(u.cols["clat_ps"][u.write == w].sum()) // 10**9 for u in units) for w in (False, True)]
    return {"name": device, "read_ios": reads, "write_ios": writes, "read_merges": 0, "write_merges": 0,
            "read_ticks": ticks[0], "write_ticks": ticks[1], "in_queue": ticks[0] + ticks[1], "util": round(busy_share(units) * 100, 6)}


def busy_share(units: list) -> float:
    """The share of the span from the first submission to the last completion with an I/O in flight."""
    spans = sorted((int(a), int(a + s + c)) for u in units for a, s, c in zip(u.cols["at_ps"], u.cols["slat_ps"], u.cols["clat_ps"]))
    if not spans:
        return 0.0
    busy, end = 0, spans[0][0]
    for a, b in spans:
        if b > end:
            busy += b - max(a, end)
            end = b
    return busy / max(end - spans[0][0], 1)
