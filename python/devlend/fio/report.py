"""fio's results from the I/Os the simulated jobs completed: per job (or per group with
``group_reporting``) and direction, fio's JSON (``--output-format=json``; ``json+`` adds the
latency histogram's bins) with fio's own keys, and fio's normal text.

Latencies go through fio's own histogram (``stat.c``: 64 buckets per power of two above 128 ns,
FIO_IO_U_PLAT_BITS = 6, 29 groups) and percentiles are read off it as fio reads them (the bucket
where the running count first reaches the percentile, reported as the bucket's middle), so the
same I/Os give the numbers fio would print.
"""

from __future__ import annotations

import numpy as np

PLAT_BITS, PLAT_VAL, PLAT_GROUPS = 6, 64, 29
PLAT_NR = PLAT_GROUPS * PLAT_VAL
DIRS = ("read", "write")


def plat_idx(ns: np.ndarray) -> np.ndarray:
    """fio's plat_val_to_idx: the histogram bucket of each latency (ns)."""
    ns = np.asarray(ns, dtype=np.int64)
    msb = np.where(ns > 0, np.floor(np.log2(np.maximum(ns, 1))).astype(np.int64), 0)
    err = np.maximum(msb - PLAT_BITS, 0)
    idx = ((err + 1) << PLAT_BITS) + ((PLAT_VAL - 1) & (ns >> err))
    return np.where(msb <= PLAT_BITS, ns, np.minimum(idx, PLAT_NR - 1))


def plat_val(idx: int) -> int:
    """fio's plat_idx_to_val: the middle of bucket `idx` (ns)."""
    if idx < (PLAT_VAL << 1):
        return idx
    err = (idx >> PLAT_BITS) - 1
    return int((1 << (err + PLAT_BITS)) + ((idx % PLAT_VAL) + 0.5) * (1 << err))


def percentiles(hist: np.ndarray, plist: list[float]) -> dict[str, int]:
    """fio's calc_clat_percentiles on a histogram, keyed as fio writes them ("99.000000")."""
    n, out = int(hist.sum()), {}
    cum = np.cumsum(hist)
    for p in sorted(plist):
        i = int(np.searchsorted(cum, p / 100.0 * n - 1e-9)) if n else 0
        out[f"{p:.6f}"] = plat_val(min(i, PLAT_NR - 1)) if n else 0
    return out


def lat_stats(ns: np.ndarray, plist: list[float] | None = None, bins: bool = False) -> dict:
    """fio's slat_ns / clat_ns / lat_ns object."""
    if len(ns) == 0:
        return {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}
    d = {"min": int(ns.min()), "max": int(ns.max()), "mean": round(float(ns.mean()), 6),
         "stddev": round(float(ns.std(ddof=1)) if len(ns) > 1 else 0.0, 6), "N": int(len(ns))}
    if plist is not None:
        hist = np.bincount(plat_idx(ns), minlength=PLAT_NR)
        d["percentile"] = percentiles(hist, plist)
        if bins:
            d["bins"] = {str(plat_val(int(i))): int(hist[i]) for i in np.nonzero(hist)[0]}
    return d


class Unit:
    """What one report entry (a job, or a group with group_reporting) did after its ramp."""

    def __init__(self, name: str, group: int, job, threads: list[dict]):
        self.name, self.group, self.job, self.threads = name, group, job, threads
        ramp = job.ramp_ps
        cols = {k: np.concatenate([np.asarray(t[k], dtype=np.int64) for t in threads]) for k in ("at_ps", "slat_ps", "clat_ps", "bytes")}
        write = np.concatenate([np.asarray(t["write"], dtype=bool) for t in threads])
        start = np.concatenate([np.full(len(t["at_ps"]), t["start_ps"], dtype=np.int64) for t in threads])
        done = cols["at_ps"] + cols["slat_ps"] + cols["clat_ps"]
        keep = done >= start + ramp
        self.cols = {k: v[keep] for k, v in cols.items()}
        self.write = write[keep]
        # The job's runtime: from the end of its ramp to its last completion (the longest thread's).
        self.runtime_ps = max(max(t["end_ps"] - t["start_ps"] - ramp, 1) for t in threads)
        self.depths = _depths(threads)

    def ddir(self, write: bool, plist: list[float], bins: bool) -> dict:
        m = self.write == write
        slat, clat = self.cols["slat_ps"][m] // 1000, self.cols["clat_ps"][m] // 1000
        nbytes, secs = int(self.cols["bytes"][m].sum()), self.runtime_ps * 1e-12
        ios = int(m.sum())
        return {"io_bytes": nbytes, "io_kbytes": nbytes >> 10, "bw_bytes": int(nbytes / secs), "bw": int(nbytes / secs / 1024),
                "iops": round(ios / secs, 6), "runtime": int(round(self.runtime_ps / 1e9)) if ios else 0,
                "total_ios": ios, "short_ios": 0, "drop_ios": 0,
                "slat_ns": lat_stats(slat), "clat_ns": lat_stats(clat, plist, bins), "lat_ns": lat_stats(slat + clat),
                "bw_min": 0, "bw_max": 0, "bw_agg": 0.0, "bw_mean": 0.0, "bw_dev": 0.0, "bw_samples": 0,
                "iops_min": 0, "iops_max": 0, "iops_mean": 0.0, "iops_stddev": 0.0, "iops_samples": 0}

    def lat_buckets(self) -> dict[str, dict[str, float]]:
        """fio's latency_ns / latency_us / latency_ms: percent of I/Os whose total latency falls in each range."""
        lat = (self.cols["slat_ps"] + self.cols["clat_ps"]) / 1000.0
        n = max(len(lat), 1)
        edges = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000]
        out = {}
        for unit, scale in (("ns", 1), ("us", 1e3), ("ms", 1e6)):
            keys = edges + ([2000] if unit == "ms" else [])
            d, prev = {}, (-1.0 if unit == "ns" else scale)     # each unit's ranges begin where the last one's end
            for k in keys:
                d[str(k)] = round(100.0 * float(((lat > prev) & (lat <= k * scale)).sum()) / n, 6)
                prev = k * scale
            if unit == "ms":
                d[">=2000"] = round(100.0 * float((lat > 2000 * scale).sum()) / n, 6)
            out[f"latency_{unit}"] = d
        return out


def _depths(threads: list[dict]) -> dict[str, float]:
    """fio's iodepth_level: how many I/Os each submission found in flight (its own included), bucketed as fio does."""
    levels = []
    for t in threads:
        at = np.asarray(t["at_ps"], dtype=np.int64)
        done = at + np.asarray(t["slat_ps"], dtype=np.int64) + np.asarray(t["clat_ps"], dtype=np.int64)
        order = np.sort(at)
        # In flight at a submission: submitted at or before it, not yet reaped.
        levels.append(np.searchsorted(order, at, side="right") - np.searchsorted(np.sort(done), at, side="right"))
    lv = np.maximum(np.concatenate(levels) if levels else np.array([], dtype=np.int64), 1)
    n = max(len(lv), 1)
    bucket = np.minimum(1 << np.floor(np.log2(lv)).astype(np.int64), 64)   # fio: 1, 2-3, 4-7, ... 32-63, >=64
    keys = [1, 2, 4, 8, 16, 32, 64]
    return {(">=64" if k == 64 else str(k)): round(100.0 * float((bucket == k).sum()) / n, 6) for k in keys}


def units(jobs, outs: list[dict]) -> list[Unit]:
    """Report entries: each thread on its own, or each group's threads together (group_reporting)."""
    threads, i = [], 0
    for job in jobs:
        threads.append((job, outs[i:i + job.numjobs]))
        i += job.numjobs
    if any(j.group_reporting for j in jobs):
        by: dict[int, list] = {}
        for job, ts in threads:
            by.setdefault(job.group, []).append((job, ts))
        return [Unit(g[0][0].name, gid, g[0][0], [t for _, ts in g for t in ts]) for gid, g in sorted(by.items())]
    return [Unit(job.name, job.group, job, [t]) for job, ts in threads for t in ts]


def empty_ddir() -> dict:
    """A direction with no I/O (fio's trim when nothing was trimmed)."""
    z = {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}
    return {"io_bytes": 0, "io_kbytes": 0, "bw_bytes": 0, "bw": 0, "iops": 0.0, "runtime": 0, "total_ios": 0, "short_ios": 0,
            "drop_ios": 0, "slat_ns": dict(z), "clat_ns": dict(z), "lat_ns": dict(z), "bw_min": 0, "bw_max": 0, "bw_agg": 0.0,
            "bw_mean": 0.0, "bw_dev": 0.0, "bw_samples": 0, "iops_min": 0, "iops_max": 0, "iops_mean": 0.0, "iops_stddev": 0.0,
            "iops_samples": 0}

