"""``devlend trace``: HyperSIO's trace half (002 §IV-A/B) — QEMU intel-iommu logs and the
binary hyper-trace format (.dlt), the trace constructor (RR1/RR4/RAND1, stop at the first
tenant that runs out) and replay through the HyperTRIO model (002 §IV-C).

    devlend trace sample -o sample.log                      # the shipped 3-tenant QEMU log
    devlend trace build sample.log --tenants 1024 --order RR4 -o t.dlt
    devlend trace info t.dlt
    devlend trace replay t.dlt --config hypertrio
    devlend trace replay sample.log --tenants 64 --order RAND1 --config base
    devlend trace synth --workload iperf3 --tenants 1024 -o iperf3.dlt   # 002 §IV-D generator

Errors name the file and line (logs) or byte and packet (traces) and exit with status 2.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from typing import List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from .errors import DevlendError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False,
                  help="Hyper-tenant traces (002 §IV): QEMU logs, the .dlt format, construction and replay.")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

# The Rust core takes tenant counts as u32 and seeds and packet counts as u64; larger values are
# refused here, as usage errors naming the option, and the core checks the real limits.
U32_MAX, U64_MAX = (1 << 32) - 1, (1 << 64) - 1

SAMPLE_LOG = os.path.join(os.path.dirname(__file__), "traces", "sample_qemu.log")


def _fail(e: Exception) -> None:
    msg = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.filename else str(e)
    err.print(f"devlend: error: {msg}", markup=False)
    raise typer.Exit(2)


@contextlib.contextmanager
def _progress(what: str, quiet: bool):
    """A (done, total) callback drawing a progress bar on a terminal; nothing otherwise."""
    if quiet or not err.is_terminal:
        yield None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[n]}"),
                  TimeElapsedColumn(), console=err, transient=True) as p:
        task = p.add_task(what, total=None, n="")

        def cb(done: int, total: int) -> None:
            if total:
                p.update(task, description=what, completed=done, total=total, n=f"{done:,} / ≤{total:,} packets")
            else:
                p.update(task, description="reading inputs", n=f"{done:,} lines/packets")
        yield cb


def _check(fmt: str) -> None:
    from .output import check
    try:
        check(fmt)
    except DevlendError as e:
        _fail(e)


def _data(fmt: str, as_json: bool, doc: dict) -> bool:
    """Print `doc` as data when --format csv|json (or --json) asked for it; False for a table."""
    if fmt == "table" and not as_json:
        return False
    from .output import mapping
    sys.stdout.write(mapping("json" if as_json else fmt, doc))
    return True


def _core_call(fn, *args, **kw):
    from . import _core
    from .experiments._hypertrio import call
    try:
        return call(fn(_core), *args, **kw)
    except (_core.FabricError, DevlendError, OSError, ValueError) as e:
        _fail(e)


def _print_stats(st: dict, as_json: bool) -> None:
    if as_json:
        out.print(json.dumps(st, indent=2), markup=False)
        return
    rows = [
        ("tenants", st["tenants"]), ("packets", f"{st['packets']:,}"), ("translations", f"{st['translations']:,}"),
        ("bandwidth", f"{st['gbps']:.1f} Gb/s ({100 * st['utilisation']:.1f}% of the link)"),
        ("DevTLB hit rate", f"{st['devtlb_hit_rate']:.3f}"), ("prefetch-buffer hit rate", f"{st['pb_hit_rate']:.3f}"),
        ("context cache / IOTLB hit rate", f"{st['context_hit_rate']:.3f} / {st['iotlb_hit_rate']:.3f}"),
        ("L2 / L3 page-cache hit rate", f"{st['l2_hit_rate']:.3f} / {st['l3_hit_rate']:.3f}"),
        ("walks (mean accesses)", f"{st['walks']:,} ({st['mean_walk_accesses']:.1f})"),
        ("PTB occupancy mean / max", f"{st['ptb_mean']:.2f} / {st['ptb_max']}"), ("drops", f"{st['drops']:,}"),
        ("prefetch accuracy / coverage", f"{st['prefetch_accuracy']:.3f} / {st['prefetch_coverage']:.3f}"),
    ]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        out.print(f"{k:<{w}}  {v}", markup=False)


def _stamp(output: str, seed: int) -> None:
    """The trace's provenance (`devlend provenance FILE`) into its header meta."""
    from .provenance import command_line, record, stamp_dlt
    try:
        stamp_dlt(output, record(seed=seed, command=command_line()))
    except (DevlendError, OSError) as e:
        _fail(e)


@app.command()
def build(inputs: List[str] = typer.Argument(..., help="QEMU intel-iommu logs and/or .dlt traces (each SID of each file is a source tenant)"),
          output: str = typer.Option(..., "-o", "--output", help="the .dlt hyper-trace to write"),
          tenants: Optional[int] = typer.Option(None, "--tenants", min=1, max=U32_MAX, help="tenants in the trace; tenant i replays source i mod sources (default: one per source)"),
          order: str = typer.Option("RR1", "--order", help="interleaving: RR<burst> or RAND<burst> (002 §V-A: RR1, RR4, RAND1)"),
          seed: int = typer.Option(1, "--seed", min=0, max=U64_MAX, help="seed of the RAND interleaving"),
          as_json: bool = typer.Option(False, "--json", help="print the summary as JSON (as --format json)"),
          fmt: str = typer.Option("table", "--format", help="table, csv (key,value rows) or json"),
          quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar")) -> None:
    """Combine per-tenant logs into one hyper-tenant trace (002 §IV-B), stopping when any tenant runs out."""
    _check(fmt)
    with _progress("building", quiet) as cb:
        s = json.loads(_core_call(lambda c: c.hypertrio_trace_build, inputs, output, tenants, order, seed, cb))
    _stamp(output, seed)
    if _data(fmt, as_json, s):
        return
    out.print(f"wrote {s['output']}: {s['tenants']} tenants from {s['sources']} source tenants, {s['order']}, "
              f"{s['packets']:,} packets ({s['translations']:,} translations), {s['pages']} pages, {s['bytes']:,} bytes",
              markup=False)


@app.command()
def info(trace: str = typer.Argument(..., help=".dlt trace"),
         as_json: bool = typer.Option(False, "--json", help="print as JSON (as --format json)"),
         fmt: str = typer.Option("table", "--format", help="table, csv (key,value rows) or json"),
         quiet: bool = typer.Option(False, "--quiet", "-q", help="accepted for uniformity (info draws no progress)")) -> None:
    """Header and a verifying pass over a .dlt trace (counts, per-tenant lengths, how it was made)."""
    _check(fmt)
    i = json.loads(_core_call(lambda c: c.hypertrio_trace_info, trace))
    if _data(fmt, as_json, i):
        return
    out.print(f"{i['path']}: devlend trace v{i['version']}, {i['bytes']:,} bytes ({i['bytes_per_translation']:.3f} per translation)\n"
              f"  tenants {i['tenants']}, pages {i['pages']} ({i['pages_4k']} x 4 KiB, {i['pages_2m']} x 2 MiB)\n"
              f"  packets {i['packets']:,} ({i['translations']:,} translations), per tenant {i['packets_per_tenant_min']:,}..{i['packets_per_tenant_max']:,}\n"
              f"  made by: {json.dumps(i['meta'])}", markup=False)


@app.command()
def replay(inputs: List[str] = typer.Argument(..., help="one .dlt trace, or QEMU logs / traces to construct from on the fly"),
           config: str = typer.Option("hypertrio", "--config", help="base or hypertrio (002 Table IV)"),
           overrides: Optional[str] = typer.Option(None, "--set", help='JSON field overrides, e.g. \'{"ptb_entries": 8}\''),
           tenants: Optional[int] = typer.Option(None, "--tenants", min=1, max=U32_MAX, help="construct with this many tenants (logs; default one per source)"),
           order: Optional[str] = typer.Option(None, "--order", help="construct with this interleaving (default RR1 for logs; a trace replays as it is)"),
           seed: int = typer.Option(1, "--seed", min=0, max=U64_MAX, help="seed of the RAND interleaving"),
           as_json: bool = typer.Option(False, "--json", help="print the statistics as JSON (as --format json)"),
           fmt: str = typer.Option("table", "--format", help="table, csv (key,value rows) or json"),
           quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar")) -> None:
    """Run the HyperTRIO model (002 §IV-C) on recorded translations; same statistics as synthetic runs."""
    _check(fmt)
    with _progress("replaying", quiet) as cb:
        st = json.loads(_core_call(lambda c: c.hypertrio_trace_replay, inputs, config, overrides, tenants, order, seed, cb))
    if not _data(fmt, as_json, st):
        _print_stats(st, False)


@app.command()
def synth(output: str = typer.Option(..., "-o", "--output", help="the .dlt trace to write"),
          workload: str = typer.Option("iperf3", "--workload", help="iperf3, mediastream or websearch (002 Table III)"),
          tenants: int = typer.Option(1024, "--tenants", min=1, max=U32_MAX),
          order: str = typer.Option("RR1", "--order", help="RR<burst> or RAND<burst>"),
          packets_per_tenant: Optional[int] = typer.Option(None, "--packets-per-tenant", min=1, max=U64_MAX, help="default: Table III's length"),
          seed: int = typer.Option(1, "--seed", min=0, max=U64_MAX),
          quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar")) -> None:
    """Write the synthetic tenants of 002 §IV-D as a .dlt trace (replays exactly like `devlend experiment h2`'s runs)."""
    with _progress("writing", quiet) as cb:
        n = _core_call(lambda c: c.hypertrio_trace_synth, output, workload, tenants, order, packets_per_tenant, seed, cb)
    _stamp(output, seed)
    out.print(f"wrote {output}: {n:,} packets ({3 * n:,} translations)", markup=False)


@app.command()
def sample(output: str = typer.Option(..., "-o", "--output", help="where to copy the sample log"),
           quiet: bool = typer.Option(False, "--quiet", "-q", help="do not say what was written")) -> None:
    """Copy the shipped sample QEMU log (3 tenants, made by devlend/traces/sample_log.py)."""
    try:
        shutil.copyfile(SAMPLE_LOG, output)
    except OSError as e:
        _fail(e)
    if not quiet:
        out.print(f"wrote {output}", markup=False)


if __name__ == "__main__":
    sys.exit(app())
