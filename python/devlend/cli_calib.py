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
from .output import FORMAT_HELP

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
                                         "and say whether they land on the same values"),
              fmt: str = typer.Option("table", "--format", help="table, csv (the fitted constants) or json (constants, "
                                      "residuals, identifiability, cost)"),
              quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr")) -> None:
    """Fit the fitted constants within their bounds to the calibration set (scipy least squares on relative residuals, soft-L1 loss)."""
    from .cli import _fail, out
    from .progress import spinner
    from . import calibration
    from .calibration.fit import calibrate as fit, spread_starts
    from .output import check
    try:
        check(fmt)
        cat = calibration.load(measurements_file or calibration.MEASUREMENTS)

        def progress(n, vals, cost):
            shown = ", ".join(f"{c.name}={v / 1000:.1f} ns" if c.unit == "ps" else f"{c.name}={v:g}" for c, v in zip(chosen, vals))
            if say:
                say(f"calibrate: evaluation {n}: {shown}; cost {cost:.3g}")
        chosen = [c for c in cat.fitted if not only or c.key in only]
        if not only and not measurement and cat.stages:
            _staged(cat, starts, max_evaluations, fmt, write, toml_file, quiet)
            return
        with spinner("calibrate: starting", quiet) as say:
            r = fit(cat, only=only or None, fit_ids=measurement or None, progress=progress, max_nfev=max_evaluations)
            others = []
            for k, st in enumerate(spread_starts(cat, starts, only or None) if starts > 1 else [], start=1):
                if say:
                    say(f"calibrate: fitting again from start {k}")
                others.append(fit(cat, only=only or None, fit_ids=measurement or None, max_nfev=max_evaluations, start=st))
    except (DevlendError, OSError) as e:
        _fail(e)
    if fmt != "table":
        _fit_data(fmt, r)
    else:
        _fit_tables(r, others)
    if write:
        _write([(r.constants, r.values, "calibration set of params/measurements.yaml")], toml_file, fmt)
    elif fmt == "table":
        out.print("dry run: params/hardware.toml unchanged (--write writes the values)", markup=False)


def _staged(cat, starts: int, max_evaluations: int, fmt: str, write: bool, toml_file, quiet: bool) -> None:
    """The declared staged fit (params/measurements.yaml `stages`), from the compiled values and
    from `starts` spread starting points; the values it writes are the first run's."""
    from .cli import out
    from .progress import spinner
    from .calibration.fit import calibrate_staged, spread_starts

    with spinner("calibrate: starting", quiet) as say:
        def progress(stage, n, vals, cost):
            if say:
                say(f"calibrate: {stage}: evaluation {n}; cost {cost:.3g}")
        grid_fits: dict = {}   # each stage's fit from its grid start, the same from every start
        evaluations: dict = {}   # the model's answers, shared by every start's fits (fit.py's doc)
        r = calibrate_staged(cat, max_nfev=max_evaluations, progress=progress, grid_fits=grid_fits, evaluations=evaluations)
        others = []
        for k, st in enumerate(spread_starts(cat, starts) if starts > 1 else [], start=1):
            if say:
                say(f"calibrate: the staged fit again from start {k}")
            others.append(calibrate_staged(cat, start=st, max_nfev=max_evaluations, grid_fits=grid_fits, evaluations=evaluations))
    if fmt != "table":
        _staged_data(fmt, cat, r, others)
    else:
        _staged_tables(cat, r, others)
    if write:
        agree = f", same digits from {len(others) + 1} starts" if others and all(o.values == r.values for o in others) else ""
        _write([(f.constants, f.values, f"staged fit of params/measurements.yaml, stage '{st.name}' on its {len(f.measurements)} "
                 f"calibration rows{agree}") for st, f in r.stages], toml_file, fmt)
    elif fmt == "table":
        out.print("dry run: params/hardware.toml unchanged (--write writes the values)", markup=False)


def _staged_rows(cat, r) -> list[dict]:
    """Per fitted constant: its stage, the rows it was fitted to, its value and what pins it."""
    from .calibration.fit import identifiability, singular_values
    rows = []
    for st, f in r.stages:
        sv = singular_values(f)
        exact = len(f.measurements) <= len(f.constants)   # no redundancy: no error to estimate, the statements alone fix them
        for c, v, i in zip(f.constants, f.values, identifiability(f)):
            rows.append({"constant": c.key, "unit": c.unit, "stage": st.name, "rows": len(f.measurements),
                         "fitted": v, "lower": c.lower, "upper": c.upper, "sigma": None if exact else i.sigma,
                         "pinned": "exactly determined" if exact and min(sv) > 1e-3 else i.pinned, "at_bound": c.key in f.at_bound,
                         "stage_singular_values": sv, "stage_cost": f.cost, "identified_by": st.why})
    return rows


def _staged_data(fmt: str, cat, r, others) -> None:
    import json
    import pandas as pd
    rows = _staged_rows(cat, r)
    if fmt == "csv":
        sys.stdout.write(pd.DataFrame([{k: x[k] for k in ("constant", "unit", "stage", "rows", "fitted", "lower", "upper")}
                                       for x in rows]).to_csv(index=False))
        return
    doc = {"constants": rows, "starts": [{"values": o.values, "same": o.values == r.values} for o in others],
           "residuals": [{"stage": st.name, "measurement": m.id, "theirs": m.value, "ours": o, "unit": m.unit, "residual": res}
                         for st, f in r.stages for m, o, res in zip(f.measurements, f.ours, f.residuals)]}
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


def _staged_tables(cat, r, others) -> None:
    from .calibration.fit import F_SCALE, LOSS
    from .cli import out
    by_key = {c.key: c for c in cat.fitted}
    t = Table(title="fitted constants, stage by stage (params/measurements.yaml stages)", title_justify="left")
    for col in ("stage", "rows", "constant", "fitted", "bounds", "1-sigma", "pinned", "stage singular values"):
        t.add_column(col)
    for x in _staged_rows(cat, r):
        c = by_key[x["constant"]]
        sv = ", ".join(f"{s:.3g}" for s in x["stage_singular_values"])
        t.add_row(x["stage"], str(x["rows"]), c.key, _show(c, x["fitted"]) + (" (on a bound)" if x["at_bound"] else ""),
                  f"[{_show(c, c.lower)}, {_show(c, c.upper)}]", "-" if x["sigma"] is None else _show(c, x["sigma"]),
                  x["pinned"] if isinstance(x["pinned"], str) else "yes" if x["pinned"] else "NO", sv)
    out.print(t)
    n = sum(len(f.measurements) for _, f in r.stages)
    fitted_ids = {m.id for _, f in r.stages for m in f.measurements}
    unfitted = [m for m in cat.of("calibration") if m.id not in fitted_ids]
    if unfitted:
        groups = sorted({f"{m.host or m.source} {m.quantity or m.probe}" for m in unfitted})
        out.print(f"calibration rows no stage fits ({len(unfitted)}; judged by devlend validate): {', '.join(groups)}", markup=False)
    out.print(f"loss {LOSS} (scale {F_SCALE:.0%}); {n} calibration measurements for {len(cat.fitted)} fitted constants: "
              f"{n / len(cat.fitted):.1f} per constant; singular values: of each stage's Jacobian of relative residuals "
              "against its constants scaled to their bound ranges", markup=False)
    for st, f in r.stages:
        worst = max(zip(f.residuals, f.measurements), key=lambda x: abs(x[0]))
        out.print(f"  {st.name}: {len(f.measurements)} rows, cost {f.cost:.4g}, worst {worst[0]:+.1%} ({worst[1].id}); "
                  f"identified by: {st.why}", markup=False)
    for k, o in enumerate(others, start=1):
        diff = [c.name for c in cat.fitted if _show(c, o.values[c.key]) != _show(c, r.values[c.key])]
        shown = ", ".join(f"{c.name}={_show(c, o.values[c.key])}" for c in cat.fitted)
        out.print(f"start {k} of {len(others)}: {shown}: " + ("the same values" if not diff else "DIFFERENT: " + ", ".join(diff)),
                  markup=False)


def _fit_data(fmt: str, r) -> None:
    """The fit as data: the constants (CSV), or constants, residuals, identifiability and cost (JSON)."""
    import json
    import pandas as pd
    from .calibration.fit import identifiability
    consts = pd.DataFrame([{"constant": c.key, "unit": c.unit, "start": s, "fitted": v, "lower": c.lower, "upper": c.upper}
                           for c, s, v in zip(r.constants, r.start, r.values)])
    if fmt == "csv":
        sys.stdout.write(consts.to_csv(index=False))
        return
    doc = {"constants": json.loads(consts.to_json(orient="records")),
           "residuals": [{"measurement": m.id, "theirs": m.value, "ours": o, "unit": m.unit, "residual": res}
                         for m, o, res in zip(r.measurements, r.ours, r.residuals)],
           "identifiability": [{"constant": i.key, "rows": i.rows, "sensitivity": i.sensitivity, "sigma": i.sigma,
                                "pinned": i.pinned} for i in identifiability(r)],
           "cost": r.cost, "evaluations": r.evaluations, "message": r.message, "at_bound": list(r.at_bound)}
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


def _fit_tables(r, others) -> None:
    from .calibration.fit import F_SCALE, LOSS, identifiability
    from .cli import out
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


def _write(groups, toml_file, fmt: str) -> None:
    """Put the fitted values and their provenance into params/hardware.toml (or `toml_file`)."""
    from . import calibration
    from .calibration.tomledit import write_fitted
    from .cli import _fail, err, out
    path = toml_file or calibration.HARDWARE
    try:
        from .inputs import not_regular
        if (kind := not_regular(path)) is not None:
            raise DevlendError(f"{path}: {kind}, expected params/hardware.toml")
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        for constants, fitted, set_name in groups:
            values = {c.key: int(v) if c.unit in ("ps", "pct") else v for c, v in zip(constants, fitted)}
            text = write_fitted(text, values, set_name, datetime.date.today().isoformat())
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except (DevlendError, OSError) as e:
        _fail(e)
    (out if fmt == "table" else err).print(f"wrote {path}; rebuild the core (pip install -e . or cargo build) for the values to take effect", markup=False)


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
                                                    "(latency and bandwidth against size) as PNGs into this directory"),
             fmt: str = typer.Option("table", "--format", help=FORMAT_HELP),
             quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress and no 'wrote' lines on stderr")) -> None:
    """Run every published measurement: ours, theirs, error, tolerance and pass/fail, the two sets apart, and per
    source and quantity the number within tolerance and the median and p90 absolute error."""
    from .cli import _fail, out
    from . import calibration
    from .calibration import validate as v
    from .output import check, wrote
    from .progress import spinner
    from .provenance import command_line, record, stamp_png, write_csv
    from .topology import parse_sets
    try:
        check("csv" if csv_out == "-" else fmt)
        if which not in (None, *calibration.SETS):
            raise DevlendError(f"--which {which!r}: expected calibration or validation")
        cat = calibration.load(measurements_file or calibration.MEASUREMENTS, corpus_file)
        params = parse_sets(sets) if sets else None
        with spinner("validate: starting", quiet) as say:
            verdicts = v.run(cat, which, params, progress=(lambda mid: say(f"validate: {mid}")) if say else None)
        rec = record(sets=sets, command=command_line())
    except (DevlendError, OSError) as e:
        _fail(e)
    if csv_out == "-" or fmt != "table":
        sys.stdout.write(v.to_csv(verdicts) if fmt == "csv" or csv_out == "-" else _json(v, verdicts, which))
    else:
        if not summary_only:
            for s in calibration.SETS:
                rows = [x.row() for x in verdicts if x.m.set == s]
                if rows:
                    out.print(_table(s, rows))
            out.print(_breakdown(v.breakdown(verdicts)))
        for s in calibration.SETS:
            if which in (None, s):
                out.print(v.summary(verdicts, s), markup=False)
    written = []
    try:
        if plot_dir:
            from .calibration.plots import plot_hosts
            for png in plot_hosts(verdicts, plot_dir):
                stamp_png(png, rec)
                written.append(png)
        if csv_out and csv_out != "-":
            write_csv(csv_out, v.to_csv(verdicts), rec)
            written.append(csv_out)
    except OSError as e:
        _fail(e)
    wrote(written, "table" if csv_out == "-" else fmt, quiet)


def _json(v, verdicts, which) -> str:
    """Every verdict, the breakdown per source and quantity, and the summary lines, as one JSON object."""
    import json
    from . import calibration
    return json.dumps({"verdicts": [x.row() for x in verdicts], "breakdown": v.breakdown(verdicts),
                       "summary": [v.summary(verdicts, s) for s in calibration.SETS if which in (None, s)]},
                      indent=2, default=str) + "\n"


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
