"""fio's normal (human) output for the JSON document run.to_json builds: per job its IOPS,
bandwidth, slat/clat/lat lines, clat percentiles, latency ranges and I/O depths; then each
group's run status and the drive's statistics, laid out as fio lays them out."""

from __future__ import annotations


def _num(v: float) -> str:
    """fio's short numbers: 5035, 19.9k, 1234k."""
    if v < 10000:
        return f"{v:.0f}"
    for unit, div in (("k", 1e3), ("M", 1e6), ("G", 1e9)):
        if v / div < 1000:
            return f"{v / div:.1f}{unit}" if v / div < 100 else f"{v / div:.0f}{unit}"
    return f"{v / 1e9:.0f}G"


def _bw(bps: float) -> str:
    """fio's bandwidth: binary first, decimal in brackets."""
    def scale(v, base, units):
        for u in units[:-1]:
            if v < 10000:
                return f"{v:.0f}{u}" if v >= 1000 or v == int(v) else f"{v:.1f}{u}"
            v /= base
        return f"{v:.1f}{units[-1]}"
    b = scale(bps / 1024, 1024, ["KiB/s", "MiB/s", "GiB/s"])
    d = scale(bps / 1000, 1000, ["kB/s", "MB/s", "GB/s"])
    return f"{b} ({d})"


def _size(n: int) -> str:
    for u, div in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= 10 * div:
            return f"{n // div}{u}"
    return f"{n >> 10}KiB"


def _lat_line(label: str, s: dict) -> str:
    unit, div = ("msec", 1e6) if s["min"] >= 10_000_000 else ("usec", 1e3) if s["min"] >= 10_000 else ("nsec", 1)
    return (f"{label} ({unit}): min={s['min'] / div:.0f}, max={s['max'] / div:.0f}, avg={s['mean'] / div:.2f}, "
            f"stdev={s['stddev'] / div:.2f}")


def _percentiles(p: dict) -> list[str]:
    vals = list(p.values())
    unit, div = ("usec", 1000) if vals and min(vals) >= 10_000 else ("nsec", 1)
    cells = [f"{float(k):5.2f}th=[{v / div:7.0f}]" for k, v in p.items()]
    lines = [f"    clat percentiles ({unit}):"]
    for i in range(0, len(cells), 3):
        lines.append("     | " + ", ".join(cells[i:i + 3]) + ("," if i + 3 < len(cells) else ""))
    return lines


def job_text(j: dict) -> list[str]:
    lines = [f"{j['jobname']}: (groupid={j['groupid']}, jobs=1): err= 0: pid=0"]
    for d in ("read", "write"):
        s = j[d]
        if not s["total_ios"]:
            continue
        lines.append(f"  {d}: IOPS={_num(s['iops'])}, BW={_bw(s['bw_bytes'])}({_size(s['io_bytes'])}/{s['runtime']}msec)")
        lines.append("    " + _lat_line("slat", s["slat_ns"]))
        lines.append("    " + _lat_line("clat", s["clat_ns"]))
        lines.append("     " + _lat_line("lat", s["lat_ns"]))
        lines += _percentiles(s["clat_ns"].get("percentile", {}))
    for unit in ("ns", "us", "ms"):
        cells = [f"{k}={v:.2f}%" for k, v in j[f"latency_{unit}"].items() if v >= 0.01]
        if cells:
            lines.append(f"  lat ({'nsec' if unit == 'ns' else 'usec' if unit == 'us' else 'msec'})   : " + ", ".join(cells))
    lines.append("  IO depths    : " + ", ".join(f"{k}={v:.1f}%" for k, v in j["iodepth_level"].items()))
    r, w = j["read"]["total_ios"], j["write"]["total_ios"]
    lines.append(f"     issued rwts: total={r},{w},0,0 short=0,0,0,0 dropped=0,0,0,0")
    lines.append(f"     latency   : target=0, window=0, percentile=100.00%, depth={j['latency_depth']}")
    return lines


def render(doc: dict, header: list[str]) -> str:
    lines = list(header) + [doc["fio version"], f"Starting {len(doc['jobs'])} thread(s)", ""]
    for j in doc["jobs"]:
        lines += job_text(j)
    for g in sorted({j["groupid"] for j in doc["jobs"]}):
        lines += ["", f"Run status group {g} (all jobs):"]
        js = [j for j in doc["jobs"] if j["groupid"] == g]
        for d in ("read", "write"):
            rows = [j[d] for j in js if j[d]["total_ios"]]
            if not rows:
                continue
            total, io = sum(r["bw_bytes"] for r in rows), sum(r["io_bytes"] for r in rows)
            lo, hi = min(r["bw_bytes"] for r in rows), max(r["bw_bytes"] for r in rows)
            rt = [r["runtime"] for r in rows]
            lines.append(f"  {d.upper():>5}: bw={_bw(total)}, {_bw(lo).split(' ')[0]}-{_bw(hi).split(' ')[0]}, "
                         f"io={_size(io)} ({io / 1e6:.1f}MB), run={min(rt)}-{max(rt)}msec")
    for d in doc.get("disk_util", []):
        lines += ["", "Disk stats (read/write):",
                  f"  {d['name']}: ios={d['read_ios']}/{d['write_ios']}, merge=0/0, ticks={d['read_ticks']}/{d['write_ticks']}, "
                  f"in_queue={d['in_queue']}, util={d['util']:.2f}%"]
    return "\n".join(lines) + "\n"
