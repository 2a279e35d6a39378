"""``devlend run-workloads``: DMA streams, GPU copies and ping-pongs, fio jobs and ntb_perf runs at once on one topology
(devlend.Scenario), printed as a table of workloads and a table of loaded links; CSV on request,
each file under a commented line of the effective parameters."""

from __future__ import annotations

from typing import Optional

import typer

from .cli_run import STREAM_HELP, _table, parse_stream
from .errors import DevlendError
from .output import FORMAT_HELP
from .sizes import parse_size

QUIET_HELP = "no progress bar and no 'wrote' lines on stderr"

GPU_HELP = ("a GPU copy NAME:HOST:DEVICE:htod|dtoh:BYTES[@START_NS], e.g. c:borrower:gpu0:dtoh:8MiB@1000; "
            "HOST runs the driver and borrows DEVICE if it sits elsewhere")
SET_HELP = ("override a hardware constant without editing the file: timing.KEY=VALUE, hosts.NAME.KEY=VALUE, "
            "devices.NAME.KEY=VALUE, links.END.KEY=VALUE (links.*.KEY: every link) or limits.KEY=VALUE, e.g. timing.max_payload=128, "
            "links.*.gen=2 or 'devices.nvme0.media_read_latency_ps=20 us' (`devlend params` lists them); repeatable")
FIO_HELP = ("an fio job NAME:HOST:DEVICE:RW:QD:JOBS:IOS[@START_NS][,OPTION=VALUE...], e.g. f:borrower:nvme0:randread:8:1:1000 "
            "or f:borrower:nvme0:randrw:8:1:1000,bs=64k,rwmixread=70 (RW: fio's read, write, randread, randwrite, rw, readwrite "
            "or randrw; QD per job; after commas any fio job option devlend fio takes, read by its parser)")

PINGPONG_HELP = ("a GPU ping-pong NAME:HOST:GPU_A:GPU_B:peer|ram:ROUNDS[@START_NS], e.g. p:borrower:gpu0:gpu1:peer:100; "
                 "HOST launches the kernels and borrows GPUs that sit elsewhere")
NTB_PERF_HELP = ("an ntb_perf run NAME:HOST:PEER:cpu|dma:THREADS:CHUNK_ORDER:TOTAL_ORDER[@START_NS], e.g. n:host-b:host-a:dma:1:16:20 "
                 "(HOST copies into PEER's memory through the NTB joining them)")


def _at(opt: str, spec: str) -> tuple[str, float]:
    if "@" not in spec:
        return spec, 0.0
    body, _, t = spec.rpartition("@")
    try:
        return body, float(t)
    except ValueError:
        raise DevlendError(f"{opt} {spec!r}: the start time after @ is not a number of nanoseconds") from None


def parse_gpu_copy(spec: str) -> dict:
    body, at = _at("--gpu-copy", spec)
    parts = body.split(":")
    if len(parts) != 5:
        raise DevlendError(f"--gpu-copy {spec!r}: expected NAME:HOST:DEVICE:htod|dtoh:BYTES[@START_NS]")
    name, host, dev, direction, size = parts
    if direction.lower() not in ("htod", "dtoh"):
        raise DevlendError(f"--gpu-copy {spec!r}: direction {direction!r} must be htod or dtoh")
    try:
        nbytes = parse_size(size)
    except ValueError as e:
        raise DevlendError(f"--gpu-copy {spec!r}: {e}") from None
    return {"name": name, "runner": host, "gpu": dev, "direction": direction.lower(), "nbytes": nbytes, "at_ns": at}


FIO_RWS = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw")


def parse_fio(spec: str) -> dict:
    head, *extra = spec.split(",")
    body, at = _at("--fio", head)
    parts = body.split(":")
    if len(parts) != 7:
        raise DevlendError(f"--fio {spec!r}: expected NAME:HOST:DEVICE:RW:QD:JOBS:IOS[@START_NS][,OPTION=VALUE...]")
    name, host, dev, rw, qd, jobs, ios = parts
    if rw not in FIO_RWS:
        raise DevlendError(f"--fio {spec!r}: rw {rw!r} must be one of fio's {', '.join(FIO_RWS)}")
    _ints("--fio", spec, ["QD", "JOBS", "IOS"], [qd, jobs, ios])
    options = [("rw", rw), ("iodepth", qd), ("numjobs", jobs), ("number_ios", ios)]
    for opt in extra:
        key, eq, value = opt.partition("=")
        options.append((key.strip(), value.strip() if eq else None))
    return {"name": name, "runner": host, "drive": dev, "options": options, "at_ns": at, "spec": spec}


def add_fio(sc, topology_json: str, j: dict) -> None:
    """An --fio job on the scenario: its options read by devlend fio's parser, on the drive's capacity."""
    from .fio import jobfile
    where = f"command line: --fio {j['spec']}"
    try:
        job = jobfile.job_from_options(j["name"], j["options"], jobfile.capacity(topology_json, j["drive"]), where)
    except jobfile.FioOptionError as e:
        raise DevlendError(f"{where}: {e.why}") from None
    sc.fio_job(j["name"], j["runner"], j["drive"], job, at_ns=j["at_ns"])


def _ints(opt: str, spec: str, names: list[str], values: list[str]) -> list[int]:
    try:
        return [int(v) for v in values]
    except ValueError:
        raise DevlendError(f"{opt} {spec!r}: {', '.join(names)} must be whole numbers") from None


def parse_gpu_pingpong(spec: str) -> dict:
    body, at = _at("--gpu-pingpong", spec)
    parts = body.split(":")
    if len(parts) != 6:
        raise DevlendError(f"--gpu-pingpong {spec!r}: expected NAME:HOST:GPU_A:GPU_B:peer|ram:ROUNDS[@START_NS]")
    name, host, a, b, via, rounds = parts
    if via.lower() not in ("peer", "ram"):
        raise DevlendError(f"--gpu-pingpong {spec!r}: via {via!r} must be peer or ram")
    (rounds_,) = _ints("--gpu-pingpong", spec, ["ROUNDS"], [rounds])
    return {"name": name, "runner": host, "gpu_a": a, "gpu_b": b, "via": via.lower(), "rounds": rounds_, "at_ns": at}


def parse_ntb_perf(spec: str) -> dict:
    body, at = _at("--ntb-perf", spec)
    parts = body.split(":")
    if len(parts) != 7:
        raise DevlendError(f"--ntb-perf {spec!r}: expected NAME:HOST:PEER:cpu|dma:THREADS:CHUNK_ORDER:TOTAL_ORDER[@START_NS]")
    name, host, peer, how, threads, chunk, total = parts
    if how.lower() not in ("cpu", "dma"):
        raise DevlendError(f"--ntb-perf {spec!r}: copy {how!r} must be cpu or dma")
    t, c, o = _ints("--ntb-perf", spec, ["THREADS", "CHUNK_ORDER", "TOTAL_ORDER"], [threads, chunk, total])
    return {"name": name, "runner": host, "peer": peer, "use_dma": how.lower() == "dma", "threads": t, "chunk_order": c,
            "total_order": o, "at_ns": at}


def run_workloads(file: str = typer.Argument(..., help="topology file (YAML or JSON), without a setup section"),
                  stream: list[str] = typer.Option([], "--stream", "-s", help=STREAM_HELP),
                  gpu_copy: list[str] = typer.Option([], "--gpu-copy", "-g", help=GPU_HELP),
                  fio: list[str] = typer.Option([], "--fio", "-f", help=FIO_HELP),
                  gpu_pingpong: list[str] = typer.Option([], "--gpu-pingpong", "-p", help=PINGPONG_HELP),
                  ntb_perf: list[str] = typer.Option([], "--ntb-perf", "-n", help=NTB_PERF_HELP),
                  csv_out: Optional[str] = typer.Option(None, "--csv", help="write the workloads' table as CSV to this file"),
                  links_csv: Optional[str] = typer.Option(None, "--links-csv", help="write the links' table as CSV to this file"),
                  set_: list[str] = typer.Option([], "--set", help=SET_HELP),
                  fmt: str = typer.Option("table", "--format", help=FORMAT_HELP),
                  quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP)) -> None:
    """Run streams, GPU copies and ping-pongs, fio jobs and ntb_perf at once on one clock and print
    each workload's start, end, bandwidth (IOPS and latency for fio, round trips for a ping-pong)
    and each loaded link direction's statistics; --set overrides hardware constants (no rebuild)."""
    from .cli import _fail, out
    from .output import check, frames, wrote
    from .progress import bar
    from .provenance import KEY, command_line
    from .scenario import Scenario
    from .topology import load, parse_sets
    try:
        check(fmt)
        if not (stream or gpu_copy or fio or gpu_pingpong or ntb_perf):
            raise DevlendError("give at least one --stream, --gpu-copy, --gpu-pingpong, --fio or --ntb-perf")
        streams, copies, jobs = [parse_stream(s) for s in stream], [parse_gpu_copy(g) for g in gpu_copy], [parse_fio(f) for f in fio]
        pongs, perfs = [parse_gpu_pingpong(p) for p in gpu_pingpong], [parse_ntb_perf(n) for n in ntb_perf]
        names = [w["name"] for w in (*pongs, *perfs, *copies, *jobs, *streams)]
        topo = load(file).with_params(parse_sets(set_), "--set") if set_ else load(file)
        sc = Scenario(topo)
        for p in pongs:
            sc.gpu_pingpong(p.pop("name"), p.pop("runner"), p.pop("gpu_a"), p.pop("gpu_b"), **p)
        for n in perfs:
            sc.ntb_perf(n.pop("name"), n.pop("runner"), n.pop("peer"), **n)
        for c in copies:
            sc.gpu_copy(c["name"], c["runner"], c["gpu"], c["direction"], c["nbytes"], at_ns=c["at_ns"])
        for j in jobs:
            add_fio(sc, topo.to_json(), j)
        for s in streams:
            sc.stream(s["name"], s["requester"], s["addr"], s["nbytes"], write=s["write"], at_ns=s["at_ns"])
        with bar(f"run-workloads: {', '.join(names)}", quiet) as step:
            sc.run(progress=step)
        res, links = sc.results(), sc.link_stats()
        rec = sc.provenance(command=command_line())
        sc.to_csv(csv_out, links_csv, provenance=rec)
    except (DevlendError, OSError) as e:
        _fail(e)
    if fmt != "table":
        import sys
        sys.stdout.write(frames(fmt, {"workloads": res, "links": links}, {"parameters": sc.params(), KEY: rec}))
    else:
        out.print(_table(res.dropna(axis=1, how="all"), "workloads (times in ns, bandwidth in GB/s, latency in us)"))
        out.print(_table(links.drop(columns=["link_index", "towards_down"]), "link directions that carried TLPs"))
        out.print(sc.header(), markup=False)
    wrote([p for p in (csv_out, links_csv) if p], fmt, quiet)
