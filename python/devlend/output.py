"""Machine-readable results on stdout (``--format csv|json``): only the data, never mixed with a
table, notes or "wrote" lines (those go to stderr)."""

from __future__ import annotations

import json

FORMATS = ("table", "csv", "json")


def render(res, fmt: str) -> str:
    """An ExperimentResult as CSV (the table's columns) or JSON (name, title, source, columns, rows, notes)."""
    if fmt == "csv":
        return res.to_csv()
    return json.dumps({"name": res.name, "title": res.title, "source": res.source, "columns": res.columns,
                       "rows": res.rows, "notes": res.notes}, indent=2, default=str) + "\n"
