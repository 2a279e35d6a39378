"""The ground-truth corpus (issue 27): params/corpus/corpus.yaml (sources, setups, quantities, the
split rule) and its row files (CSV, one measurement per row), checked row by row: an error names
the file, the line and the field, and what was expected. Each row becomes a `Measurement` that
the calibration and validation machinery runs like the seed-paper ones."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from typing import Any

import yaml

from . import PARAMS_DIR, CalibrationError, Measurement

CORPUS = os.path.join(PARAMS_DIR, "corpus", "corpus.yaml")
FIELDS = ("id", "set", "source", "host", "quantity", "size", "window", "cache", "value", "file", "line")
SETUP = ("dir", "cpu", "profile", "gen", "width", "mps", "mrrs", "iommu", "numa")


class CorpusError(CalibrationError):
    """A corpus file that cannot be used: ``where`` is ``FILE:LINE: field FIELD``."""

    def __init__(self, message: str, *, file: str, line: int = 0, field: str = ""):
        self.file, self.line, self.field = file, line, field
        where = file + (f":{line}" if line else "") + (f": field '{field}'" if field else "")
        super().__init__(message, where=where)


@dataclass(frozen=True)
class Corpus:
    path: str
    hosts: dict
    quantities: dict
    sources: dict
    calibration_hosts: frozenset
    measurements: tuple[Measurement, ...]


def load_corpus(path: str = CORPUS) -> Corpus:
    """The corpus at `path` with every row file it names, checked."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise CorpusError(f"not YAML: {getattr(e, 'problem', e)}", file=path, line=mark.line + 1 if mark else 0) from None
    for key in ("split", "sources", "quantities", "hosts"):
        if not isinstance(doc.get(key), dict):
            raise CorpusError("expected a mapping", file=path, field=key)
    cal = doc["split"].get("calibration_hosts")
    if not isinstance(cal, list) or not set(cal) <= set(doc["hosts"]):
        raise CorpusError(f"expected a list of hosts of `hosts` ({', '.join(doc['hosts'])})", file=path, field="split.calibration_hosts")
    for name, setup in doc["hosts"].items():
        missing = [k for k in SETUP if k not in (setup or {})]
        if missing:
            raise CorpusError(f"setup lacks {', '.join(missing)}", file=path, field=f"hosts.{name}")
    ms: list[Measurement] = []
    for name, src in doc["sources"].items():
        if not isinstance(src, dict) or "rows" not in src or "citation" not in src:
            raise CorpusError("expected citation and rows", file=path, field=f"sources.{name}")
        rows_path = os.path.join(os.path.dirname(path), src["rows"])
        ms.extend(_rows(rows_path, doc, frozenset(cal)))
    seen: dict[str, str] = {}
    for m in ms:
        if m.id in seen:
            raise CorpusError(f"id '{m.id}' appears twice (first at {seen[m.id]})", file=m.args["_at"])
        seen[m.id] = m.args["_at"]
    return Corpus(path, doc["hosts"], doc["quantities"], doc["sources"], frozenset(cal), tuple(ms))


def _rows(path: str, doc: dict, cal: frozenset) -> list[Measurement]:
    try:
        fh = open(path, encoding="utf-8", newline="")
    except OSError as e:
        raise CorpusError(f"cannot read: {e.strerror}", file=path) from None
    with fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or tuple(header) != FIELDS:
            raise CorpusError(f"header must be: {','.join(FIELDS)}", file=path, line=1)
        return [_row(path, n, dict(zip(FIELDS, cells)), len(cells), doc, cal) for n, cells in enumerate(reader, start=2)]


def _row(path: str, line: int, r: dict, ncells: int, doc: dict, cal: frozenset) -> Measurement:
    def bad(field: str, expected: str) -> CorpusError:
        return CorpusError(f"{field} {r.get(field)!r}: expected {expected}", file=path, line=line, field=field)

    if ncells != len(FIELDS):
        raise CorpusError(f"{ncells} fields: expected {len(FIELDS)} ({','.join(FIELDS)})", file=path, line=line)
    for f in FIELDS:
        if not r[f].strip():
            raise bad(f, "a value (no field may be empty)")
    if r["source"] not in doc["sources"]:
        raise bad("source", f"one of {', '.join(doc['sources'])}")
    if r["host"] not in doc["hosts"]:
        raise bad("host", f"one of {', '.join(doc['hosts'])}")
    q = doc["quantities"].get(r["quantity"])
    if q is None:
        raise bad("quantity", f"one of {', '.join(doc['quantities'])}")
    want = "calibration" if r["host"] in cal else "validation"
    if r["set"] != want:
        raise bad("set", f"'{want}': the split rule (split.calibration_hosts) puts host {r['host']} there")
    size, window, value = _int(r, "size", bad), _int(r, "window", bad), _positive(r, bad)
    setup = doc["hosts"][r["host"]]
    quote = (f"{r['quantity']} SZ={size} WinSZ={window} {r['cache']}: {value:g} {q['unit']} "
             f"({setup['cpu']}; Gen{setup['gen']} x{setup['width']}, MPS {setup['mps']}, MRRS {setup['mrrs']}, "
             f"IOMMU {'on' if setup['iommu'] else 'off'}, NUMA {setup['numa']})")
    citation = f"{doc['sources'][r['source']]['citation']}; {r['file']} line {r['line']}"
    args = {"host": r["host"], "setup": {k: setup[k] for k in SETUP}, "quantity": r["quantity"], "size": size, "_at": f"{path}:{line}"}
    return Measurement(r["id"], r["set"], citation, quote, "value", q["probe"], args, value, q["unit"],
                       why=f"split rule: host {r['host']} {'calibrates' if want == 'calibration' else 'validates'}",
                       source=r["source"], quantity=r["quantity"], host=r["host"])


def _int(r: dict, field: str, bad) -> int:
    try:
        n = int(r[field])
    except ValueError:
        raise bad(field, "a whole number of bytes") from None
    if n <= 0:
        raise bad(field, "a positive number of bytes")
    return n


def _positive(r: dict, bad) -> float:
    try:
        v = float(r["value"])
    except ValueError:
        raise bad("value", "a number") from None
    if not v > 0:
        raise bad("value", "a positive number")
    return v


def probe_args(m: Measurement) -> dict[str, Any]:
    """The probe's arguments of a corpus measurement (its setup, quantity and size)."""
    return {k: v for k, v in m.args.items() if not k.startswith("_")}
