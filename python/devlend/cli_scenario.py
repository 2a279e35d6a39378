"""``devlend run SCENARIO.yaml``: a scenario file (a topology and a timeline of borrows, workloads
and returns) run on one clock; prints the workloads' and the busiest links' tables and writes
NAME.csv, NAME-links.csv (each under a commented line of the effective parameters, ending with the
run's provenance) and NAME.png (bandwidth, latency, link utilisation; the provenance inside) into
the output directory."""

from __future__ import annotations

import os
import sys

import typer

from .cli_workloads import QUIET_HELP, SET_HELP
from .errors import DevlendError
from .output import FORMAT_HELP


def run_scenario(file: str = typer.Argument(..., help="scenario file (YAML)"),
                 out_dir: str = typer.Option(".", "--out", "-o", help="directory for NAME.csv, NAME-links.csv and NAME.png"),
                 busiest: int = typer.Option(8, "--busiest", help="link directions to show and plot, busiest first"),
                 set_: list[str] = typer.Option([], "--set", help=SET_HELP),
                 fmt: str = typer.Option("table", "--format", help=FORMAT_HELP),
                 quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP)) -> None:
    """Run a scenario file: borrow at t, workloads (stream, gpu_copy, fio), return at t'."""
    from .cli import _fail, out
    from .cli_run import _table
    from .output import check, frames, wrote
    from .progress import bar
    from .provenance import KEY, command_line
    from .scenario_file import load
    from .topology import parse_sets
    try:
        check(fmt)
        sf = load(file)
        sf = sf.with_params(parse_sets(set_), "--set") if set_ else sf
        with bar(f"scenario {sf.spec.name}", quiet) as step:
            run = sf.run(progress=step)
        res, links = run.results(), run.link_stats().nlargest(busiest, "utilisation")
        rec = run.provenance(command_line())
        os.makedirs(out_dir, exist_ok=True)
        base = os.path.join(out_dir, run.file.spec.name)
        run.to_csv(base + ".csv", base + "-links.csv", provenance=rec)
        run.plot(base + ".png", busiest, provenance=rec)
    except (DevlendError, OSError) as e:
        _fail(e)
    if fmt != "table":
        sys.stdout.write(frames(fmt, {"workloads": res, "links": links}, {"parameters": run.scenario.params(), KEY: rec}))
    else:
        out.print(_table(res.dropna(axis=1, how="all"), f"scenario {run.file.spec.name}: workloads (times in ns, bandwidth in GB/s, latency in us)"))
        out.print(_table(links.drop(columns=["link_index", "towards_down"]), f"the {len(links)} busiest link directions"))
        out.print(run.header(), markup=False)
    wrote([base + s for s in (".csv", "-links.csv", ".png")], fmt, quiet)
