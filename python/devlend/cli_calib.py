"""``devlend calibrate`` and ``devlend validate``: fit the fitted constants of
params/hardware.toml to the calibration set of params/measurements.yaml, and judge every published
measurement, the calibration and validation sets apart."""

from __future__ import annotations

import datetime
import sys
from typing import Optional

import typer
from rich.table import Table

from .errors import DevlendError

SET_HELP = ("override a hardware constant for this run: timing.KEY=VALUE, hosts.NAME.KEY=VALUE, ...; "
            "repeatable")


def calibrate(write: bool = typer.Option(False, "--write/--dry-run", help="write the fitted values into params/hardware.toml "
                                         "(default: --dry-run, print only)"),
              only: Optional[list[str]] = typer.Option(None, "--only", help="fit only this constant (TABLE.NAME); repeatable"),
              measurement: Optional[list[str]] = typer.Option(None, "--measurement", help="fit to this calibration measurement "
                                                              "id only; repeatable"),
              max_evaluations: int = typer.Option(60, "--max-evaluations", help="model evaluations the optimiser may spend"),
              measurements_file: Optional[str] = typer.Option(None, "--measurements", help="measurements file "
                                                              "(default params/measurements.yaml)"),
              toml_file: Optional[str] = typer.Option(None, "--toml", help="the file --write edits (default params/hardware.toml)"),
              starts: int = typer.Option(1, "--starts", help="also fit from this many starting points spread inside the bounds "
                                         "and say whether they land on the same values")) -> None:
    """Fit the fitted constants within their bounds to the calibration set (scipy least squares on relative residuals, soft-L1 loss)."""
    from .cli import _fail, err, out
    from . import calibration
    from .calibration.fit import F_SCALE, LOSS, calibrate as fit, identifiability, spread_starts
    from .calibration.tomledit import write_fitted
    try:
        cat = calibration.load(measurements_file or calibration.MEASUREMENTS)

        def progress(n, vals, cost):
            shown = ", ".join(f"{c.name}={v / 1000:.1f} ns" if c.unit == "ps" else f"{c.name}={v:g}" for c, v in zip(chosen, vals))
            err.print(f"  evaluation {n}: {shown}; cost {cost:.3g}", markup=False)
        chosen = [c for c in cat.fitted if not only or c.key in only]
        r = fit(cat, only=only or None, fit_ids=measurement or None, progress=progress, max_nfev=max_evaluations)
        others = [fit(cat, only=only or None, fit_ids=measurement or None, max_nfev=max_evaluations, start=st)
                  for st in (spread_starts(cat, starts, only or None) if starts > 1 else [])]
    except (DevlendError, OSError) as e:
        _fail(e)
    t = Table(title="fitted constants", title_justify="left")
    for col in ("constant", "start", "fitted", "bounds"):
        t.add_column(col)
    for c, s, v in zip(r.constants, r.start, r.values):
        t.add_row(c.key, _show(c, s), _show(c, v), f"[{_show(c, c.lower)}, {_show(c, c.upper)}]")
    out.print(t)
    t = Table(title="calibration residuals", title_justify="left")
    for col in ("measurement", "theirs", "ours", "residual"):
        t.add_column(col)
    for m, o, res in zip(r.measurements, r.ours, r.residuals):
        t.add_row(m.id, f"{m.value:g} {m.unit}", f"{o:.1f} {m.unit}", f"{res:+.2%}")
    out.print(t)
    out.print(f"loss {LOSS} (scale {F_SCALE:.0%}); cost {r.cost:.4g} (half the sum of squared relative residuals) after {r.evaluations} evaluations: {r.message}", markup=False)
    if r.at_bound:
        out.print(f"on a bound: {', '.join(r.at_bound)}", markup=False)
    out.print(f"{len(r.measurements)} calibration measurements for {len(r.constants)} fitted constants: "
              f"{len(r.measurements) / len(r.constants):.1f} per constant", markup=False)
    t = Table(title="identifiability (from the Jacobian at the solution)", title_justify="left")
    for col in ("constant", "rows it moves", "residual rms per 1% of range", "1-sigma", "pinned"):
        t.add_column(col)
    for i, c in zip(identifiability(r), r.constants):
        t.add_row(i.key, str(i.rows), f"{i.sensitivity:.2e}", "-" if i.sigma is None else _show(c, i.sigma), "yes" if i.pinned else "NO")
    out.print(t)
    for k, o in enumerate(others, start=1):
        same = [_show(c, a) == _show(c, b) for c, a, b in zip(r.constants, r.values, o.values)]
        shown = ", ".join(f"{c.name}={_show(c, v)}" for c, v in zip(o.constants, o.values))
        out.print(f"start {k} of {len(others)}: {shown}; cost {o.cost:.4g}: "
                  + ("the same values" if all(same) else "DIFFERENT: " + ", ".join(c.name for c, ok in zip(r.constants, same) if not ok)), markup=False)
    if not write:
        out.print("dry run: params/hardware.toml unchanged (--write writes the values)", markup=False)
        return
    path = toml_file or calibration.HARDWARE
    try:
        from .inputs import not_regular
        if (kind := not_regular(path)) is not None:
            raise DevlendError(f"{path}: {kind}, expected params/hardware.toml")
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        values = {c.key: int(v) if c.unit in ("ps", "pct") else v for c, v in zip(r.constants, r.values)}
        text = write_fitted(text, values, "calibration set of params/measurements.yaml", datetime.date.today().isoformat())
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except (DevlendError, OSError) as e:
        _fail(e)
    out.print(f"wrote {path}; rebuild the core (pip install -e . or cargo build) for the values to take effect", markup=False)


def _show(c, v: float) -> str:
    return f"{v / 1000:g} ns" if c.unit == "ps" else f"{v:g} {c.unit}"


def validate(which: Optional[str] = typer.Option(None, "--which", help="calibration or validation (default: both)"),
             csv_out: Optional[str] = typer.Option(None, "--csv", help="write the table as CSV to this file ('-': stdout)"),
             summary_only: bool = typer.Option(False, "--summary", help="print only the summary lines"),
             sets: Optional[list[str]] = typer.Option(None, "--set", help=SET_HELP),
             measurements_file: Optional[str] = typer.Option(None, "--measurements", help="measurements file "
                                                             "(default params/measurements.yaml)"),
             corpus_file: Optional[str] = typer.Option(None, "--corpus", help="corpus file (default params/corpus/corpus.yaml; "
                                                       "'' for none)"),
             plot_dir: Optional[str] = typer.Option(None, "--plot", help="draw model against measurement per corpus host "
                                                    "(latency and bandwidth against size) as PNGs into this directory")) -> None:
    """Run every published measurement: ours, theirs, error, tolerance and pass/fail, the two sets apart, and per
    source and quantity the number within tolerance and the median and p90 absolute error."""
    from .cli import _fail, err, out
    from . import calibration
    from .calibration import validate as v
    from .topology import parse_sets
    try:
        if which not in (None, *calibration.SETS):
            raise DevlendError(f"--which {which!r}: expected calibration or validation")
        cat = calibration.load(measurements_file or calibration.MEASUREMENTS, corpus_file)
        params = parse_sets(sets) if sets else None
        verdicts = v.run(cat, which, params, progress=lambda mid: err.print(f"  {mid}", markup=False) if err.is_terminal else None)
    except (DevlendError, OSError) as e:
        _fail(e)
    if csv_out == "-":
        sys.stdout.write(v.to_csv(verdicts))
        return
    if not summary_only:
        for s in calibration.SETS:
            rows = [x.row() for x in verdicts if x.m.set == s]
            if rows:
                out.print(_table(s, rows))
    if not summary_only:
        out.print(_breakdown(v.breakdown(verdicts)))
    for s in calibration.SETS:
        if which in (None, s):
            out.print(v.summary(verdicts, s), markup=False)
    if plot_dir:
        from .calibration.plots import plot_hosts
        try:
            paths = plot_hosts(verdicts, plot_dir)
        except OSError as e:
            _fail(e)
        out.print(f"wrote {len(paths)} figures to {plot_dir}", markup=False)
    if csv_out:
        try:
            with open(csv_out, "w", encoding="utf-8") as fh:
                fh.write(v.to_csv(verdicts))
        except OSError as e:
            _fail(e)
        out.print(f"wrote {csv_out}", markup=False)


def _table(which: str, rows: list[dict]) -> Table:
    t = Table(title=f"{which} set", title_justify="left")
    for col in ("id", "ours", "theirs", "unit", "error", "rel_error", "tolerance", "ok"):
        t.add_column(col, no_wrap=col == "id")
    for r in rows:
        t.add_row(*(r[c] for c in ("id", "ours", "theirs", "unit", "error", "rel_error", "tolerance", "ok")))
    return t


def _breakdown(rows: list[dict]) -> Table:
    t = Table(title="per source and quantity", title_justify="left")
    cols = list(rows[0]) if rows else []
    for col in cols:
        t.add_column(col, no_wrap=True)
    for r in rows:
        t.add_row(*(str(r[c]) for c in cols))
    return t
