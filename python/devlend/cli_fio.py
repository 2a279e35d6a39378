"""``devlend fio``: run an fio job file on a simulated NVMe drive, as fio users run fio."""

from __future__ import annotations

import json
from typing import Optional

import typer

from .errors import DevlendError

OUTPUT_FORMATS = ("normal", "json", "json+")
HELP = """Run an fio job file (INI: \\[global] and job sections) on DEVICE from HOST, borrowing it through
Device Lending when it sits in another host. fio-form options after the file override it
(--runtime=2s, --iodepth=8, --bs=64k). Modelled: rw (read, write, randread, randwrite, rw,
readwrite, randrw), rwmixread, rwmixwrite, bs, bssplit, iodepth, numjobs, size, offset, io_size,
number_ios, runtime, time_based, ramp_time, startdelay, thinktime, rate_iops, stonewall,
group_reporting, norandommap, randrepeat, randseed, percentile_list, name, direct=1. Mapped or
ignored (and said so): ioengine (libaio, io_uring, psync...), filename, directory. Anything else is
refused at FILE:LINE. --set overrides a hardware constant (the drive's media, links,
IOMMU: `devlend params` lists them); a region past the drive's capacity is refused up front."""


def fio_cmd(ctx: typer.Context,
            jobfile: str = typer.Argument(..., help="fio job file"),
            topology: str = typer.Option(..., "--topology", help="topology file"),
            host: str = typer.Option(..., "--host", help="the host the jobs run on"),
            device: str = typer.Option(..., "--device", help="the NVMe drive (borrowed when it sits elsewhere)"),
            output_format: str = typer.Option("normal", "--output-format", help="normal, json or json+ (as fio)"),
            output: Optional[str] = typer.Option(None, "--output", help="write the result here instead of stdout (as fio)"),
            quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress or notes on stderr"),
            sets: list[str] = typer.Option([], "--set", help="override a hardware constant (not a fio option): e.g. "
                                           "'devices.nvme0.media_read_latency_ps=20 us', links.*.width=4 "
                                           "(`devlend params` lists them); repeatable")) -> None:
    from .cli import _fail, emit, err
    from . import load
    from .fio import jobfile as jf, run, text
    from .progress import spinner
    try:
        if output_format not in OUTPUT_FORMATS:
            raise DevlendError(f"--output-format {output_format!r}: expected one of {', '.join(OUTPUT_FORMATS)}")
        overrides = jf.parse_overrides(list(ctx.args))
        from .topology import parse_sets
        topo = load(topology).with_params(parse_sets(sets), "--set") if sets else load(topology)
        if sets and not topo.lending_ops():
            topo.build()  # a --set the core refuses is named as given
        from .lspci.profiles import warn_default
        import warnings
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            warn_default(topo, device)
        if not quiet:
            for w in seen:
                err.print(f"devlend: warning: {w.message}", markup=False)
        with open(jobfile, encoding="utf-8") as fh:
            jobs, global_opts = jf.load(fh.read(), jobfile, overrides, jf.capacity(topo.to_json(), device))
        with spinner(f"fio {jobfile}: {sum(j.numjobs for j in jobs)} job(s) on {device} from {host}", quiet):
            outs = run.simulate(topo.to_json(), host, device, jobs)
        doc = run.to_json(jobs, outs, global_opts, device, plus=output_format == "json+")
        from .provenance import command_line, record, stamped
        doc = stamped(doc, record(sets=sets, topology=topology, scenario=jobfile, seed=sorted({j.randseed for j in jobs}),
                                  command=command_line()))
    except (DevlendError, OSError) as e:
        _fail(e)
    if not quiet:
        for note in dict.fromkeys(n for j in jobs for n in j.notes):
            err.print(f"devlend: note: {note}", markup=False)
    if output_format == "normal":
        header = [f"{j.name}: (g={j.group}): rw={j.rw}, bs={'/'.join(f'{b}B' for b, _ in j.bssplit)}, "
                  f"ioengine={j.ioengine}, iodepth={j.iodepth}" for j in jobs]
        body = text.render(doc, header)
    else:
        body = json.dumps(doc, indent=2) + "\n"
    emit(body, output, quiet)


fio_cmd.__doc__ = HELP
