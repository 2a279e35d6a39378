"""Results on stdout in the form asked for (``--format table|csv|json``): a table for people, or
only the data (CSV of the main table, or JSON of every table), never mixed with a table, notes or
"wrote" lines (those go to stderr)."""

from __future__ import annotations

import json
from typing import Optional

from .errors import DevlendError

FORMATS = ("table", "csv", "json")
FORMAT_HELP = "table (for people), csv (the main table) or json (every table) on stdout; files written are then listed on stderr"


def check(fmt: str) -> str:
    if fmt not in FORMATS:
        raise DevlendError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return fmt


def render(res, fmt: str, provenance: Optional[dict] = None) -> str:
    """An ExperimentResult as CSV (the table's columns) or JSON (name, title, source, columns, rows,
    notes and, given, the run's provenance)."""
    if fmt == "csv":
        return res.to_csv()
    doc = {"name": res.name, "title": res.title, "source": res.source, "columns": res.columns, "rows": res.rows, "notes": res.notes}
    if provenance is not None:
        from .provenance import KEY
        doc[KEY] = provenance
    return json.dumps(doc, indent=2, default=str) + "\n"


def frames(fmt: str, tables: dict, extra: Optional[dict] = None) -> str:
    """DataFrames as data: CSV of the first table, or one JSON object with every table as a list
    of records (and `extra`'s keys, e.g. the parameters and the provenance)."""
    first = next(iter(tables.values()))
    if fmt == "csv":
        return first.to_csv(index=False)
    doc = {name: json.loads(df.to_json(orient="records")) for name, df in tables.items()}
    return json.dumps({**doc, **(extra or {})}, indent=2, default=str) + "\n"


def mapping(fmt: str, doc: dict) -> str:
    """One record as data: CSV key,value rows (nested values as JSON text) or JSON."""
    if fmt == "json":
        return json.dumps(doc, indent=2, default=str) + "\n"
    import csv
    import io
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["key", "value"])
    w.writerows([k, json.dumps(v) if isinstance(v, (list, dict)) else v] for k, v in doc.items())
    return buf.getvalue()


def wrote(paths, fmt: str, quiet: bool = False) -> None:
    """Say what was written: on stdout beside a table, on stderr beside data; nothing when quiet."""
    if quiet:
        return
    from .cli import err, out
    for p in paths:
        (out if fmt == "table" else err).print(f"wrote {p}", markup=False)


def _number(text: str) -> bool:
    try:
        float(text.split(" ")[0].replace(",", ""))
        return True
    except ValueError:
        return text in ("", "—", "nan", "None")


def table(title: str, headers: list[str], rows: list[list[str]], left: int = 1):
    """A rich Table for people that fits the console by wrapping, not by cutting: headers break at
    their underscores and spaces; the first `left` columns and every column of words (names,
    links, states) are left-aligned and fold where they must; a column of numbers keeps its digits
    (never narrower than its longest value) and takes no more room than that."""
    from rich.table import Table
    t = Table(title=title, title_justify="left")
    for i, h in enumerate(headers):
        numeric = i >= left and all(_number(r[i]) for r in rows)
        values = max([len(r[i]) for r in rows] + [4])
        word = max(map(len, h.replace("\n", " ").split("_")))
        t.add_column(h.replace("_", " "), justify="right" if numeric else "left", overflow="fold",
                     min_width=values if numeric else None, max_width=max(values, word) if numeric else None)
    for r in rows:
        t.add_row(*r)
    return t
