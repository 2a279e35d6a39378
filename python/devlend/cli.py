"""The ``devlend`` command line (typer). Every user error prints one line naming the file, line
and field, and exits with status 2; no tracebacks for bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from .errors import DevlendError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False,
                  help="devlend: PCIe device sharing across hosts and tenants, modelled TLP by TLP.")
# Tables fit the terminal, or COLUMNS where it is set; piped without COLUMNS, 100 columns.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 100)
err = Console(stderr=True, highlight=False, soft_wrap=True)
# Every command takes --quiet: no progress, notes, warnings or "wrote" lines on stderr (errors still).
QUIET = typer.Option(False, "--quiet", "-q", help="no progress, notes or 'wrote' lines on stderr")


def _fail(e: Exception) -> None:
    if isinstance(e, OSError) and e.filename:
        msg = f"{e.filename}: {e.strerror}"
    else:
        msg = str(e)
    err.print(f"devlend: error: {msg}", markup=False)
    raise typer.Exit(2)


def _build(path: str):
    from . import load
    return load(path).build()


@app.command()
def topo(file: str = typer.Argument(..., help="topology file (YAML or JSON)"),
         as_json: bool = typer.Option(False, "--json", help="print the enumerated inventory as JSON (as --format json)"),
         fmt: str = typer.Option("table", "--format", help="table (the trees), csv (one row per function or bridge) or json "
                                 "(the whole inventory)"),
         quiet: bool = QUIET) -> None:
    """Print each host's PCIe tree like `lspci -tv`, with bus numbers, BARs, bridge windows and NTB windows."""
    from .output import check
    from .show import tree_lines
    try:
        check(fmt)
        fabric = _build(file)
        inv = fabric.inventory()
    except (DevlendError, OSError) as e:
        _fail(e)
    if as_json or fmt == "json":
        out.print(json.dumps(inv, indent=2), markup=False)
        return
    if fmt == "csv":
        import pandas as pd
        sys.stdout.write(pd.DataFrame(_tree_rows(inv)).to_csv(index=False))
        return
    for line in tree_lines(inv):
        out.print(line, markup=False)
    for t in [] if quiet else fabric.trained_down:
        err.print(f"devlend: warning: link {t['link']}: {t['message']}", markup=False)


def _tree_rows(inv: dict) -> list[dict]:
    """Every node of every host's tree as a row: the host, then the node's own scalar fields
    (lists and mappings as JSON text), depth first."""
    rows = []

    def walk(host: str, node: dict) -> None:
        rows.append({"host": host, **{k: json.dumps(v) if isinstance(v, (list, dict)) else v
                                       for k, v in node.items() if k != "children"}})
        for child in node.get("children", []):
            walk(host, child)
    for h in inv["hosts"]:
        walk(h["name"], h["tree"])
    return rows


@app.command()
def route(file: str = typer.Argument(..., help="topology file"),
          requester: str = typer.Option(..., "--from", help="HOST:cpu or HOST:DEVICE (DEVICE, DEVICE.fN, DEVICE.vfN)"),
          addr: str = typer.Option(..., "--addr", help="address: 0x..., or FUNC.barN / HOST.ram / HOST.msi / NTB.mwN [+OFFSET]"),
          read: bool = typer.Option(False, "--read", help="route a read request and its completion"),
          write: bool = typer.Option(False, "--write", help="route a posted write (the default)"),
          as_json: bool = typer.Option(False, "--json", help="print the route as JSON (as --format json)"),
          fmt: str = typer.Option("table", "--format", help="table (one line per step), csv (one row per step) or json"),
          quiet: bool = QUIET) -> None:
    """Print the hops a TLP takes, with the address and requester ID in each host's domain."""
    from .output import check
    if read and write:
        _fail(DevlendError("choose one of --read and --write"))
    try:
        check(fmt)
        fab = _build(file)
        r = fab.route(requester, addr, write=not read)
    except (DevlendError, OSError) as e:
        _fail(e)
    if fmt == "csv":
        import pandas as pd
        from dataclasses import asdict
        doc = asdict(r)
        completion = (doc.get("completion") or {}).get("hops") or []
        steps = [{"route": "request", **h} for h in doc["hops"]] + [{"route": "completion", **h} for h in completion]
        sys.stdout.write(pd.DataFrame(steps).to_csv(index=False))
    elif as_json or fmt == "json":
        from dataclasses import asdict
        out.print(json.dumps(asdict(r), indent=2), markup=False)
    else:
        out.print(r.text(), markup=False)
    if not r.delivered:
        raise typer.Exit(1)


@app.command()
def export(file: str = typer.Argument(..., help="topology file"),
           output: str = typer.Option(..., "-o", "--output", help="output path; .dot or .svg"),
           fmt: Optional[str] = typer.Option(None, "--format", help="dot or svg (default: from the output's suffix)"),
           quiet: bool = QUIET) -> None:
    """Export the topology as a Graphviz DOT file or an SVG drawing (SVG needs Graphviz's `dot`)."""
    from .show import to_dot
    fmt = fmt or os.path.splitext(output)[1].lstrip(".").lower()
    if fmt not in ("dot", "svg"):
        _fail(DevlendError(f"--format {fmt!r}: expected dot or svg"))
    from .provenance import command_line, record, stamp_dot, stamp_svg
    try:
        from . import load
        topo = load(file)
        dot = to_dot(topo.build().inventory(), topo.cluster_switches or [], topo.vms or [])
        rec = record(topology=file, command=command_line())
    except (DevlendError, OSError) as e:
        _fail(e)
    if fmt == "dot":
        try:
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(stamp_dot(dot, rec))
        except OSError as e:
            _fail(e)
    else:
        exe = shutil.which("dot")
        if exe is None:
            _fail(DevlendError("SVG export needs Graphviz's `dot` program (Debian: apt-get install graphviz); use -o FILE.dot for DOT text"))
        res = subprocess.run([exe, "-Tsvg", "-o", output], input=dot.encode(), capture_output=True)
        if res.returncode != 0:
            _fail(DevlendError(f"dot failed: {res.stderr.decode(errors='replace').strip()}"))
        try:
            stamp_svg(output, rec)
        except OSError as e:
            _fail(e)
    if not quiet:
        err.print(f"wrote {output}", markup=False)


@app.command()
def schema(output: Optional[str] = typer.Option(None, "-o", "--output", help="write to a file instead of stdout"),
           quiet: bool = QUIET) -> None:
    """Print the topology JSON Schema (for editor completion and validation)."""
    from .topology import schema_json
    emit(schema_json(), output, quiet)


def emit(text: str, output: Optional[str], quiet: bool = False) -> None:
    """`text` to stdout, or to the file `output` (saying so on stderr unless `quiet`)."""
    if not output:
        sys.stdout.write(text)
        return
    try:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as e:
        _fail(e)
    if not quiet:
        err.print(f"wrote {output}", markup=False)


@app.command("import-lspci")
def import_lspci(tree: Optional[str] = typer.Option(None, "--tree", help="saved output of `lspci -tvnn`"),
                 verbose: Optional[str] = typer.Option(None, "--verbose", help="saved output of `lspci -vvv`"),
                 sysfs: Optional[str] = typer.Option(None, "--sysfs", help="saved copy of /sys/bus/pci/devices (instead of lspci text)"),
                 host: str = typer.Option("imported", "--host", help="host name in the description"),
                 cpu: str = typer.Option("intel-xeon-e5", "--cpu", help="CPU profile"),
                 ram: Optional[str] = typer.Option(None, "--ram", help="RAM size, e.g. '64 GiB'"),
                 output: Optional[str] = typer.Option(None, "-o", "--output", help="write YAML here instead of stdout"),
                 quiet: bool = QUIET) -> None:
    """Turn a real machine's lspci output (or sysfs copy) into a host description."""
    import warnings
    from .lspci import main_import
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            text = main_import(tree, verbose, sysfs, host, cpu, ram, output)
    except (DevlendError, OSError) as e:
        _fail(e)
    for w in seen:
        err.print(f"devlend: warning: {w.message}", markup=False)
    if output is None and text:
        sys.stdout.write(text)
    elif output and not quiet:
        err.print(f"wrote {output}", markup=False)


@app.command("import-merge")
def import_merge(files: list[str] = typer.Argument(..., help="imported host descriptions (import-lspci's output), two or more"),
                 name: str = typer.Option("cluster", "--name", help="the cluster's name"),
                 ntb: str = typer.Option("pxh830", "--ntb", help="NTB adapter profile for the links added between hosts"),
                 output: Optional[str] = typer.Option(None, "-o", "--output", help="write YAML here instead of stdout"),
                 quiet: bool = QUIET) -> None:
    """Merge imported hosts into one cluster file, adding NTB links between every pair of hosts."""
    from .lspci.merge import main_merge
    try:
        text = main_merge(files, name, ntb, output)
    except (DevlendError, OSError) as e:
        _fail(e)
    if output is None:
        sys.stdout.write(text)
    elif not quiet:
        err.print(f"wrote {output}", markup=False)


@app.command()
def experiment(name: Optional[str] = typer.Argument(None, help="experiment name; omit with --list"),
               list_: bool = typer.Option(False, "--list", help="list the experiments"),
               quick: bool = typer.Option(False, "--quick", help="fewer sizes/repetitions (for tests)"),
               out_dir: Optional[str] = typer.Option(None, "--out", help="write NAME.csv (and NAME.png where the paper has a figure) here"),
               csv_out: Optional[str] = typer.Option(None, "--csv", help="write the table as CSV to this file"),
               sets: Optional[list[str]] = typer.Option(None, "--set", help="override a hardware constant for this run: "
                                                        "timing.KEY=VALUE, hosts.NAME.KEY=VALUE, devices.NAME.KEY=VALUE, "
                                                        "links.END.KEY=VALUE or limits.KEY=VALUE (`devlend params` lists them), "
                                                        "e.g. 'timing.ntb_latency_ps=300 ns'; repeatable"),
               topology: Optional[str] = typer.Option(None, "--topology", help="a topology file to run on instead of the experiment's "
                                                      "testbed, with the names the experiment uses (d1, fio, contention, ntb-perf, ntb-pingpong)"),
               opts: Optional[list[str]] = typer.Option(None, "--opt", help="one of the experiment's own options, KEY=VALUE, e.g. "
                                                        "ntb-perf's 'use_dma=1' or 'threads_count=4'; repeatable"),
               fmt: str = typer.Option("table", "--format", help="table (with notes), csv or json on stdout; "
                                       "files written are then listed on stderr"),
               quiet: bool = QUIET) -> None:
    """Rebuild a paper's setup, run it on the model, and print our numbers beside the paper's."""
    from . import experiments
    from .progress import spinner
    if list_ or name is None:
        for e in experiments.all_experiments():
            out.print(f"{e.name:<12} {e.title}", markup=False)
        return
    try:
        from .output import check
        from .topology import parse_sets
        check(fmt)
        exp = experiments.get(name)
        params = parse_sets(sets) if sets else None
        options = _parse_opts(opts or [])
        with spinner(f"{name}: starting", quiet) as say:
            res = exp.run(quick=quick, progress=lambda msg: say and say(f"{name}: {msg}"), params=params,
                          topology=topology, origin="--set", options=options)
    except (DevlendError, OSError) as e:
        _fail(e)
    from .output import render, wrote
    try:
        from .provenance import command_line, record
        testbed = topology or (exp.stand and _shipped_path(exp.stand.testbed))
        rec = record(sets=sets, topology=testbed, command=command_line())
    except OSError as e:
        _fail(e)
    if fmt == "table":
        out.print(_table(res))
        for n in res.notes:
            out.print(f"  note: {n}", markup=False)
    else:
        sys.stdout.write(render(res, fmt, rec))
    try:
        written = _write_outputs(res, name, csv_out, out_dir, rec)
    except OSError as e:
        _fail(e)
    wrote(written, fmt, quiet)


def _parse_opts(opts: list[str]) -> dict:
    """--opt KEY=VALUE pairs (values typed by the experiment)."""
    out = {}
    for o in opts:
        key, eq, value = o.partition("=")
        if not eq or not key.strip():
            raise DevlendError(f"--opt {o!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def _shipped_path(testbed: str) -> Optional[str]:
    path = os.path.join(os.path.dirname(__file__), "topologies", testbed)
    return path if os.path.exists(path) else None


def _write_outputs(res, name: str, csv_out: Optional[str], out_dir: Optional[str], rec: dict) -> list[str]:
    """The table as CSV and the plot, each carrying the run's provenance (`devlend provenance FILE`)."""
    from .provenance import stamp_png, write_csv
    written = []
    if csv_out:
        write_csv(csv_out, res.to_csv(), rec)
        written.append(csv_out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, f"{name}.csv")
        write_csv(path, res.to_csv(), rec)
        written.append(path)
        if res.plot is not None:
            png = os.path.join(out_dir, f"{name}.png")
            res.plot(res, png)
            stamp_png(png, rec)
            written.append(png)
    return written


@app.command("provenance")
def provenance_cmd(file: str = typer.Argument(..., help="a CSV, JSON, JSON-lines, PNG, DOT, SVG or .dlt trace that devlend wrote"),
                   fmt: str = typer.Option("table", "--format", help="table (key: value lines), csv (key,value rows) or json"),
                   quiet: bool = QUIET) -> None:
    """Print how a result file was made: devlend's version, parameters and --set, topology and scenario hashes, seed."""
    from .output import check
    from .provenance import lines, read
    try:
        check(fmt)
        rec = read(file)
    except (DevlendError, OSError, ValueError) as e:
        _fail(e)
    if fmt != "table":
        import csv
        if fmt == "json":
            sys.stdout.write(json.dumps(rec, indent=2) + "\n")
            return
        w = csv.writer(sys.stdout)
        w.writerow(["key", "value"])
        w.writerows([k, json.dumps(v) if isinstance(v, (list, dict)) else v] for k, v in rec.items())
        return
    for line in lines(rec):
        out.print(line, markup=False)


def _table(res) -> Table:
    """One column per quantity; a devlend_X / paper_X pair shares a column as 'ours (paper)'."""
    from .output import table
    cols = [c for c in res.columns if not (c.startswith("paper_") and f"devlend_{c[6:]}" in res.columns)]
    headers = [f"{c[8:]}\nours (paper)" if c.startswith("devlend_") else c for c in cols]
    rows = []
    for r in res.rows:
        cells = []
        for c in cols:
            v = "—" if r.get(c) is None else str(r[c])
            if c.startswith("devlend_"):
                p = r.get("paper_" + c[8:])
                v += f" ({p})" if p is not None else " (—)"
            cells.append(v)
        rows.append(cells)
    return table(f"{res.title}\n[{res.source}]", headers, rows)


@app.command()
def params(grep: Optional[str] = typer.Option(None, "--grep", help="only the constants whose line matches this regular "
                                              "expression (case-insensitive), each under its [table]"),
           quiet: bool = QUIET) -> None:
    """Print the hardware parameter file (every constant with its source), then what --set may set."""
    from . import _core
    from .params_settable import settable_toml
    text = _core.params_toml() + settable_toml()
    if grep is None:
        sys.stdout.write(text)
        return
    from .params_grep import matching
    try:
        lines = matching(text, grep)
    except DevlendError as e:
        _fail(e)
    if not lines:
        if not quiet:
            err.print(f"devlend: no constant matches {grep!r}", markup=False)
        raise typer.Exit(1)
    sys.stdout.write("\n".join(lines) + "\n")


from .cli_run import run_streams as _run_streams  # noqa: E402  (`devlend run-streams`)
app.command("run-streams")(_run_streams)
from .cli_workloads import run_workloads as _run_workloads  # noqa: E402  (`devlend run-workloads`)
app.command("run-workloads")(_run_workloads)

from .cli_fio import fio_cmd as _fio  # noqa: E402  (`devlend fio`)
app.command("fio", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(_fio)
from .cli_pool import pool_cmd as _pool  # noqa: E402  (`devlend pool`)
app.command("pool")(_pool)
from .cli_scenario import run_scenario as _run_scenario  # noqa: E402  (`devlend run`)
app.command("run")(_run_scenario)

from .cli_calib import calibrate as _calibrate, validate as _validate  # noqa: E402  (`devlend calibrate`, `devlend validate`)
app.command("calibrate")(_calibrate)
app.command("validate")(_validate)
from .cli_trace import app as _trace_app  # noqa: E402  (the `devlend trace` commands)
app.add_typer(_trace_app, name="trace")
from .cli_linux import app as _linux_app  # noqa: E402  (the `devlend linux` commands)
app.add_typer(_linux_app, name="linux")


def main() -> None:
    try:
        app()
    except DevlendError as e:  # anything that slipped past a command's own handler
        err.print(f"devlend: error: {e}", markup=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
