"""fio job files (INI: ``[global]`` and job sections, ``key=value`` or a flag alone, ``#``/``;``
comments) and fio-form command-line overrides (``--runtime=2s``), turned into the jobs the
simulated drive runs.

Every option is one of: modelled (it changes what the drive sees), mapped or ignored (accepted,
and said so: ``filename``, ``directory``, ``ioengine`` names...), or refused at FILE:LINE with
the option named (anything devlend cannot model, and anything fio itself does not have).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..errors import DevlendError
from . import options as o

DRIVE_BYTES = 8 << 30          # a drive whose profile gives no capacity (devlend-devices' nvme::DEFAULT_CAPACITY)
RWS = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw")
ASYNC_ENGINES = ("libaio", "io_uring", "io_uring_cmd", "posixaio", "spdk")
SYNC_ENGINES = ("psync", "sync", "pvsync", "pvsync2", "vsync")
DEFAULT_PERCENTILES = [1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99]
IGNORED = {"filename": "the job runs on the simulated drive given by --device",
           "directory": "the job runs on the simulated drive given by --device",
           "group_reporting": None, "description": None, "thread": "jobs are threads on the simulated host",
           "invalidate": "no page cache is modelled", "lat_percentiles": None, "clat_percentiles": None,
           "new_group": None, "per_job_logs": None, "unlink": "no files are created"}


class FioJobError(DevlendError):
    """A job file or override devlend cannot run, with where it was written."""


@dataclass
class Job:
    """One job section after [global] and the overrides, before numjobs is expanded."""
    name: str
    group: int = 0
    rw: str = "read"
    rwmixread: Optional[int] = None
    bssplit: list = field(default_factory=lambda: [(4096, 100)])
    iodepth: int = 1
    numjobs: int = 1
    size: Optional[int] = None
    offset: int = 0
    io_size: Optional[int] = None
    number_ios: Optional[int] = None
    runtime_ps: Optional[int] = None
    time_based: bool = False
    ramp_ps: int = 0
    startdelay_ps: int = 0
    thinktime_ps: int = 0
    rate_iops: Optional[int] = None
    randommap: bool = True
    randrepeat: bool = True
    randseed: int = 0x89
    stonewall: bool = False
    group_reporting: bool = False
    direct: Optional[bool] = None
    ioengine: str = "psync"
    percentiles: list = field(default_factory=lambda: list(DEFAULT_PERCENTILES))
    options: dict = field(default_factory=dict)      # as written, for fio's "job options"
    notes: list = field(default_factory=list)        # what was ignored or mapped

    def effective_iodepth(self) -> int:
        return 1 if self.ioengine in SYNC_ENGINES else self.iodepth


class FioOptionError(ValueError):
    """One option devlend refuses: the option, and why (without where it was written)."""

    def __init__(self, key: str, why: str):
        super().__init__(why)
        self.key, self.why = key, why


def _set(job: Job, key: str, value: Optional[str], drive: int = DRIVE_BYTES) -> Optional[str]:
    """Apply one option; returns a note when it is ignored or mapped. Raises ValueError/KeyError."""
    need = lambda: value if value is not None else (_ for _ in ()).throw(ValueError("expected a value"))  # noqa: E731
    if key in IGNORED:
        if key == "group_reporting":
            job.group_reporting = o.boolean(value)
        return f"{key}: ignored ({IGNORED[key]})" if IGNORED[key] else None
    if key == "name":
        job.name = need()
    elif key == "rw" or key == "readwrite":
        v = need().strip()
        if ":" in v:
            raise ValueError("an offset modifier (rw=read:4k) is not modelled")
        if v not in RWS:
            raise ValueError(f"expected one of {', '.join(RWS)}, not {v!r}")
        job.rw = v
    elif key in ("rwmixread", "rwmixwrite"):
        n = o.integer(need(), 0, 100)
        job.rwmixread = n if key == "rwmixread" else 100 - n
    elif key in ("bs", "blocksize"):
        if "," in need():
            raise ValueError("separate read and write block sizes (bs=R,W) are not modelled; give one size")
        job.bssplit = [(o.size(value), 100)]
    elif key == "bssplit":
        job.bssplit = o.bssplit(need())
    elif key == "iodepth":
        job.iodepth = o.integer(need(), 1, 1023)
    elif key == "numjobs":
        job.numjobs = o.integer(need(), 1, 16)
    elif key in ("size", "offset", "io_size", "io_limit"):
        n = o.size(need(), drive)
        setattr(job, {"io_limit": "io_size"}.get(key, key), n)
    elif key == "number_ios":
        job.number_ios = o.integer(need(), 1)
    elif key in ("runtime", "timeout"):
        job.runtime_ps = o.duration_ps(need(), "s")
    elif key == "ramp_time":
        job.ramp_ps = o.duration_ps(need(), "s")
    elif key == "startdelay":
        if "-" in need():
            raise ValueError("a random start delay range is not modelled; give one time")
        job.startdelay_ps = o.duration_ps(value, "s")
    elif key == "thinktime":
        job.thinktime_ps = o.duration_ps(need(), "us")
    elif key == "rate_iops":
        if "," in need():
            raise ValueError("separate read and write rates (rate_iops=R,W) are not modelled; give one rate")
        job.rate_iops = o.integer(value, 1)
    elif key in ("time_based", "stonewall", "wait_for_previous", "norandommap", "randrepeat"):
        b = o.boolean(value)
        if key == "norandommap":
            job.randommap = not b
        else:
            setattr(job, {"wait_for_previous": "stonewall"}.get(key, key), b)
    elif key == "randseed":
        job.randseed = o.integer(need())
    elif key == "direct":
        job.direct = o.boolean(value)
        if not job.direct:
            raise ValueError("buffered I/O (direct=0) goes through the page cache, which devlend does not model; use direct=1")
    elif key == "buffered":
        if o.boolean(value):
            raise ValueError("buffered I/O goes through the page cache, which devlend does not model; use direct=1")
        job.direct = True
    elif key == "ioengine":
        v = need().strip()
        if v not in ASYNC_ENGINES + SYNC_ENGINES:
            raise ValueError(f"ioengine {v!r} is not modelled; the drive is driven by the NVMe driver's queues "
                             f"(asynchronous: {', '.join(ASYNC_ENGINES)}; synchronous: {', '.join(SYNC_ENGINES)})")
        job.ioengine = v
        return f"ioengine={v}: mapped to the NVMe driver's queue pair, " + (
            "submitting asynchronously up to iodepth" if v in ASYNC_ENGINES else "one I/O at a time (a synchronous engine)")
    elif key == "percentile_list":
        job.percentiles = o.percentile_list(need())
    else:
        raise KeyError(key)
    return None


def apply(job: Job, key: str, value: Optional[str], drive: int = DRIVE_BYTES) -> None:
    """Apply fio option `key` (its value as fio's text; None: the option alone) to `job`, on a
    drive of `drive` bytes (for ``size=50%``); FioOptionError says why one is refused. The one
    option parser of job files, fio-form overrides, scenario files and run-workloads."""
    try:
        note = _set(job, key, value, drive)
    except KeyError:
        raise FioOptionError(key, f"option {key!r} is not one devlend models (see `devlend fio --help` for those it does)") from None
    except ValueError as e:
        raise FioOptionError(key, f"option {key!r}: {e}") from None
    job.options[key] = value if value is not None else ""
    if note and note not in job.notes:
        job.notes.append(note)


def _apply(job: Job, key: str, value: Optional[str], where: str, drive: int = DRIVE_BYTES) -> None:
    try:
        apply(job, key, value, drive)
    except FioOptionError as e:
        raise FioJobError(f"{where}: {e.why}") from None


def parse_ini(text: str, path: str) -> list[tuple[str, list[tuple[str, Optional[str], int]]]]:
    """Sections in order, each with its (key, value or None, line) options."""
    sections: list = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise FioJobError(f"{path}:{n}: expected a section header such as [global] or [job1], not {line!r}")
            sections.append((line[1:-1].strip(), []))
            continue
        if not sections:
            raise FioJobError(f"{path}:{n}: option {line!r} comes before any section; start with [global] or a job section")
        key, eq, value = line.partition("=")
        sections[-1][1].append((key.strip(), value.strip() if eq else None, n))
    return sections


def parse_overrides(args: list[str]) -> list[tuple[str, Optional[str]]]:
    """fio-form command-line options (``--runtime=2s``, ``--time_based``)."""
    out = []
    for a in args:
        if not a.startswith("--") or len(a) < 3:
            raise FioJobError(f"command line: {a!r}: expected a fio option such as --runtime=2s or --iodepth=8")
        key, eq, value = a[2:].partition("=")
        out.append((key, value if eq else None))
    return out


def load(text: str, path: str, overrides: list[tuple[str, Optional[str]]] = (), drive: int = DRIVE_BYTES) -> tuple[list[Job], dict]:
    """The jobs of a job file, with ``overrides`` applied to each, on a drive of `drive` bytes;
    and the global options as written."""
    sections = parse_ini(text, path)
    base, global_opts, jobs, group = Job(name="global"), {}, [], 0
    for name, opts in sections:
        if name == "global":
            for key, value, n in opts:
                _apply(base, key, value, f"{path}:{n}", drive)
                global_opts[key] = value if value is not None else ""
            continue
        job = Job(**{**base.__dict__, "name": name, "options": {}, "notes": list(base.notes),
                     "bssplit": list(base.bssplit), "percentiles": list(base.percentiles)})
        for key, value, n in opts:
            _apply(job, key, value, f"{path}:{n}", drive)
        for key, value in overrides:
            _apply(job, key, value, f"command line --{key}", drive)
        if job.stonewall and jobs:
            group += 1
        job.group = group
        finish(job, f"{path}: job {job.name!r}", drive)
        jobs.append(job)
    if not jobs:
        raise FioJobError(f"{path}: no job sections (only [global]); add one such as [job1]")
    check_budget(jobs, path)
    if sum(j.numjobs for j in jobs) > 16:
        raise FioJobError(f"{path}: {sum(j.numjobs for j in jobs)} jobs in all (numjobs counted); the drive gives at "
                          "most 16 jobs an I/O queue pair each")
    return jobs, global_opts


def finish(job: Job, where: str, drive: int = DRIVE_BYTES) -> None:
    """Defaults that depend on other options, and the checks fio makes before it starts, on a
    drive of `drive` bytes (its capacity: the profile's, or ``devices.NAME.capacity``)."""
    if job.rwmixread is None:
        job.rwmixread = {"read": 100, "randread": 100, "write": 0, "randwrite": 0}.get(job.rw, 50)
    if job.offset >= drive:
        raise FioJobError(f"{where}: offset {job.offset} is past the end of the drive, which holds {drive} bytes")
    if job.size is None:
        job.size = drive - job.offset
    if job.offset + job.size > drive:
        raise FioJobError(f"{where}: offset {job.offset} plus size {job.size} runs past the end of the drive, "
                          f"which holds {drive} bytes (its capacity: the profile's, or devices.NAME.capacity)")
    bad = [b for b, _ in job.bssplit if b % 512 or b > (1 << 20) or b == 0]
    if bad:
        raise FioJobError(f"{where}: block size {bad[0]}: expected a multiple of 512 bytes, at most 1 MiB "
                          "(one NVMe command per I/O)")
    if max(b for b, _ in job.bssplit) > job.size:
        raise FioJobError(f"{where}: size {job.size} is smaller than the block size")
    if job.time_based and job.runtime_ps is None:
        raise FioJobError(f"{where}: time_based needs a runtime")
    if job.direct is None:
        job.notes.append("direct=0 (fio's default): no page cache is modelled; the I/O goes to the drive as with direct=1")
    if job.ioengine in SYNC_ENGINES and job.iodepth > 1:
        job.notes.append(f"ioengine={job.ioengine} is synchronous: iodepth={job.iodepth} has no effect (as in fio); "
                         "use ioengine=libaio or io_uring for a queue")
    if "ioengine" not in job.options and not any(n.startswith("ioengine=") for n in job.notes):
        job.notes.append("ioengine=psync (fio's default on Linux): one I/O at a time")


# The most I/Os one `devlend fio` run may simulate: each I/O is a few dozen events on the
# machine and a record kept for the percentiles; about a minute on one core (assumed budget).
MAX_IOS = 2_000_000
# No modelled drive completes more than this many I/Os a second (the Optane's media ceiling is
# about 610k): the bound for jobs that end by time.
CEILING_IOPS = 1_000_000


def estimate_ios(jobs: list[Job]) -> int:
    """An upper bound on the I/Os the jobs issue: by size or number_ios, and for jobs that end by
    time, their runtime at CEILING_IOPS per drive (groups run one after another)."""
    total = 0
    for g in sorted({j.group for j in jobs}):
        by_count, by_time = 0, 0.0
        for j in (j for j in jobs if j.group == g):
            limits = []
            if not j.time_based:
                limits.append((j.io_size if j.io_size is not None else j.size) // min(b for b, _ in j.bssplit))
            if j.number_ios is not None:
                limits.append(j.number_ios)
            if limits:
                by_count += j.numjobs * min(limits)
            if j.runtime_ps is not None:
                by_time = max(by_time, (j.ramp_ps + j.runtime_ps + j.startdelay_ps) * 1e-12 * CEILING_IOPS)
        total += round(min(by_count, by_time) if by_count and by_time else (by_count or by_time))
    return total


def check_budget(jobs: list[Job], path: str) -> None:
    n = estimate_ios(jobs)
    if n > MAX_IOS:
        raise FioJobError(f"{path}: the jobs may issue up to {n:,} I/Os, more than devlend simulates in one run "
                          f"({MAX_IOS:,}); shorten them, e.g. --runtime=100ms or --size=64m (a simulated second of a "
                          f"fast drive is up to {CEILING_IOPS:,} I/Os)")


def capacity(topology_json: str, device: str) -> int:
    """Drive `device`'s capacity in bytes: its profile's, or what the topology's params set."""
    from .. import _core
    from ..errors import FabricError
    try:
        return _core.nvme_capacity(topology_json, device)
    except _core.FabricError as e:
        raise FabricError(str(e)) from None


def job_from_options(name: str, options: list[tuple[str, Optional[str]]], drive: int, where: str) -> Job:
    """One job from fio options given outside a job file (a scenario file's fio action,
    run-workloads' --fio), read and checked as a job file's section is, on a drive of `drive`
    bytes. Unless the options say otherwise: an asynchronous engine (libaio, so that iodepth
    holds), and 1000 I/Os when nothing else ends the job. FioOptionError names a refused option;
    FioJobError (at `where`) a job that cannot run."""
    given = {k for k, _ in options}
    defaults: list[tuple[str, Optional[str]]] = [] if "ioengine" in given else [("ioengine", "libaio")]
    if not given & {"number_ios", "size", "io_size", "io_limit", "runtime", "timeout"}:
        defaults.append(("number_ios", "1000"))
    job = Job(name=name)
    for key, value in defaults + list(options):
        apply(job, key, value, drive)
    finish(job, f"{where}: job {name!r}", drive)
    check_budget([job], where)
    return job
