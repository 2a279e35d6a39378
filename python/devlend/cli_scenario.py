"""``devlend run SCENARIO.yaml``: a scenario file (a topology and a timeline of borrows, workloads
and returns) run on one clock; prints the workloads' and the busiest links' tables and writes
NAME.csv, NAME-links.csv (each under a commented line of the effective parameters and devlend's
version) and NAME.png (bandwidth, latency, link utilisation) into the output directory."""

from __future__ import annotations

import os

import typer

from .cli_workloads import SET_HELP
from .errors import DevlendError


def run_scenario(file: str = typer.Argument(..., help="scenario file (YAML)"),
                 out_dir: str = typer.Option(".", "--out", "-o", help="directory for NAME.csv, NAME-links.csv and NAME.png"),
                 busiest: int = typer.Option(8, "--busiest", help="link directions to show and plot, busiest first"),
                 set_: list[str] = typer.Option([], "--set", help=SET_HELP)) -> None:
    """Run a scenario file: borrow at t, workloads (stream, gpu_copy, fio), return at t'."""
    from .cli import _fail, out
    from .cli_run import _table
    from .scenario_file import load
    from .topology import parse_sets
    try:
        sf = load(file)
        run = (sf.with_params(parse_sets(set_), "--set") if set_ else sf).run()
        res, links = run.results(), run.link_stats().nlargest(busiest, "utilisation")
        os.makedirs(out_dir, exist_ok=True)
        base = os.path.join(out_dir, run.file.spec.name)
        run.to_csv(base + ".csv", base + "-links.csv")
        run.plot(base + ".png", busiest)
    except (DevlendError, OSError) as e:
        _fail(e)
    out.print(_table(res.dropna(axis=1, how="all"), f"scenario {run.file.spec.name}: workloads (times in ns, bandwidth in GB/s, latency in us)"))
    out.print(_table(links.drop(columns=["link_index", "towards_down"]), f"the {len(links)} busiest link directions"))
    out.print(run.header(), markup=False)
    for suffix in (".csv", "-links.csv", ".png"):
        out.print(f"wrote {base}{suffix}", markup=False)
