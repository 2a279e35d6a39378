"""Calibration and validation: published measurements as data
(params/measurements.yaml), each computed by a small simulation (a probe), the unknown component
latencies fitted to the calibration set within physical bounds, and every measurement judged, the
calibration and validation sets apart.

- `load()` reads the measurements and the fitted-constant list;
- `evaluate(m, params)` runs one measurement's probe with hardware-constant overrides;
- devlend.calibration.fit fits, devlend.calibration.tomledit writes the values back,
  devlend.calibration.validate judges.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional

import yaml

from ..errors import DevlendError

# The repository's params directory (measurements.yaml beside hardware.toml).
PARAMS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "params")
MEASUREMENTS = os.path.join(PARAMS_DIR, "measurements.yaml")
HARDWARE = os.path.join(PARAMS_DIR, "hardware.toml")

SETS = ("calibration", "validation")
KINDS = ("value", "ordering")
RELATIONS = ("<", ">", "=")
# the acceptance bounds: latency within 10% or 50 ns, bandwidth within 10%
DEFAULT_TOLERANCE = {"ns": {"rel": 0.10, "abs": 50.0}, "GB/s": {"rel": 0.10}, "Gb/s": {"rel": 0.10}, "MB/s": {"rel": 0.10}}


class CalibrationError(DevlendError):
    """A measurement file that cannot be used, or a fit that cannot run: ``where`` names the file
    and the entry (``params/measurements.yaml: measurements[3] (d5-...): ...``)."""

    def __init__(self, message: str, *, where: str = ""):
        self.message, self.where = message, where
        super().__init__(f"{where}: {message}" if where else message)


@dataclass(frozen=True)
class Fitted:
    """A constant fitted to the calibration set, within [lower, upper] in its own unit."""
    key: str                 # TABLE.NAME in params/hardware.toml
    unit: str
    lower: float
    upper: float
    bounds: str              # why these bounds
    override: str            # the topology `params` key that varies it per run
    scope: str = "all"       # "corpus": a constant of the corpus testbed's device only, overridden on corpus rows alone

    @property
    def table(self) -> str:
        return self.key.rpartition(".")[0]

    @property
    def name(self) -> str:
        return self.key.rpartition(".")[2]


@dataclass(frozen=True)
class Measurement:
    id: str
    set: str
    citation: str
    quote: str
    kind: str
    probe: str
    args: dict = field(default_factory=dict)
    value: Optional[float] = None
    unit: str = ""
    relation: Optional[str] = None
    tolerance: dict = field(default_factory=dict)
    why: str = ""
    source: str = ""         # who measured it: pcie-bench, seed-papers, gdrcopy ... (the report groups by it)
    quantity: str = ""       # what was measured (the report groups by it); the probe's name by default
    host: str = ""           # the corpus host (setup) it was measured on; "" for a seed-paper path

    def group(self) -> tuple[str, str]:
        return self.source or "seed-papers", self.quantity or self.probe

    def tol(self) -> dict:
        """The tolerance that applies: the entry's own, else the default for its unit."""
        return self.tolerance or DEFAULT_TOLERANCE.get(self.unit, {"rel": 0.10})


@dataclass(frozen=True)
class Stage:
    """One step of the declared staged fit (params/measurements.yaml `stages`): `constants` fitted
    to the calibration rows that `rows` selects (by id, or by corpus host and quantity), every
    constant of an earlier stage held at its fitted value, every later one at its compiled value."""
    name: str
    constants: tuple[str, ...]
    ids: tuple[str, ...] = ()
    host: str = ""
    quantity: str = ""
    why: str = ""

    def selects(self, m: Measurement) -> bool:
        if self.ids:
            return m.id in self.ids
        return m.host == self.host and (not self.quantity or m.quantity == self.quantity)


@dataclass(frozen=True)
class Catalogue:
    fitted: tuple[Fitted, ...]
    measurements: tuple[Measurement, ...]
    stages: tuple[Stage, ...] = ()

    def rows_of(self, stage: Stage) -> list[Measurement]:
        """The calibration rows `stage` is fitted to."""
        return [m for m in self.of("calibration") if stage.selects(m)]

    def of(self, which: str) -> list[Measurement]:
        return [m for m in self.measurements if m.set == which]

    def get(self, mid: str) -> Measurement:
        for m in self.measurements:
            if m.id == mid:
                return m
        raise CalibrationError(f"no measurement with id '{mid}'", where=MEASUREMENTS)


def load(path: str = MEASUREMENTS, corpus: Optional[str] = None) -> Catalogue:
    """params/measurements.yaml and the corpus (params/corpus/corpus.yaml, or `corpus`; "" for
    none), checked: every entry complete, ids unique, probes known."""
    from .corpus import CORPUS, load_corpus
    from .probes import PROBES
    from ..inputs import not_regular
    if (kind := not_regular(path)) is not None:
        raise CalibrationError(f"{kind}, expected a measurements file (YAML)", where=str(path))
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    fitted = tuple(_fitted(path, i, f) for i, f in enumerate(data.get("fitted") or []))
    ms = tuple(_measurement(path, i, m, PROBES) for i, m in enumerate(data.get("measurements") or []))
    stages = _stages(path, data.get("stages") or [], fitted)
    if corpus != "":
        ms += load_corpus(corpus or CORPUS).measurements
    seen: set[str] = set()
    for i, m in enumerate(ms):
        if m.id in seen:
            raise CalibrationError(f"id '{m.id}' appears twice", where=f"{path}: measurements[{i}]")
        seen.add(m.id)
    return Catalogue(fitted, ms, stages)


def _stages(path: str, raw: Any, fitted: tuple[Fitted, ...]) -> tuple[Stage, ...]:
    """The staged fit's steps, checked: every fitted constant in exactly one stage, every stage
    selecting its rows by ids or by a corpus host."""
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise CalibrationError("expected a list of stages", where=f"{path}: stages")
    keys = {c.key for c in fitted}
    out, seen = [], set()
    for i, st in enumerate(raw):
        where = f"{path}: stages[{i}]"
        _require(where, st, ("name", "constants", "rows", "why"))
        rows = st["rows"]
        if not isinstance(rows, dict) or not (rows.get("ids") or rows.get("host")):
            raise CalibrationError("rows: expected {ids: [...]} or {host: H, quantity: Q}", where=where)
        for k in st["constants"]:
            if k not in keys:
                raise CalibrationError(f"constant {k} is not a fitted constant", where=where)
            if k in seen:
                raise CalibrationError(f"constant {k} is fitted in two stages", where=where)
            seen.add(k)
        out.append(Stage(st["name"], tuple(st["constants"]), tuple(rows.get("ids") or ()), rows.get("host", ""),
                         rows.get("quantity", ""), st["why"]))
    if missing := sorted(keys - seen):
        raise CalibrationError(f"fitted constants in no stage: {', '.join(missing)}", where=f"{path}: stages")
    return tuple(out)


def _fitted(path: str, i: int, f: Any) -> Fitted:
    where = f"{path}: fitted[{i}]"
    _require(where, f, ("key", "unit", "lower", "upper", "bounds"))
    if not float(f["lower"]) < float(f["upper"]):
        raise CalibrationError(f"lower {f['lower']} is not below upper {f['upper']}", where=where)
    if f.get("scope", "all") not in ("all", "corpus"):
        raise CalibrationError(f"scope '{f['scope']}': expected all or corpus", where=where)
    return Fitted(f["key"], f["unit"], float(f["lower"]), float(f["upper"]), f["bounds"], f.get("override", f["key"]),
                  f.get("scope", "all"))


def _measurement(path: str, i: int, m: Any, probes: dict) -> Measurement:
    where = f"{path}: measurements[{i}]" + (f" ({m['id']})" if isinstance(m, dict) and "id" in m else "")
    _require(where, m, ("id", "set", "citation", "quote", "kind", "probe", "why"))
    if m["set"] not in SETS:
        raise CalibrationError(f"set '{m['set']}': expected one of {', '.join(SETS)}", where=where)
    if m["kind"] not in KINDS:
        raise CalibrationError(f"kind '{m['kind']}': expected one of {', '.join(KINDS)}", where=where)
    if m["probe"] not in probes:
        raise CalibrationError(f"probe '{m['probe']}' is not one of devlend.calibration.probes: {', '.join(sorted(probes))}", where=where)
    if m["kind"] == "value":
        _require(where, m, ("value", "unit"))
    elif m.get("relation") not in RELATIONS:
        raise CalibrationError(f"an ordering needs relation: one of {' '.join(RELATIONS)}", where=where)
    if m["kind"] == "ordering" and m["set"] == "calibration":
        raise CalibrationError("an ordering has no residual to fit: put it in the validation set", where=where)
    return Measurement(m["id"], m["set"], m["citation"], m["quote"], m["kind"], m["probe"], dict(m.get("args") or {}),
                       float(m["value"]) if "value" in m else None, m.get("unit", ""), m.get("relation"),
                       dict(m.get("tolerance") or {}), m["why"], source=_source_of(m["id"]))


def _source_of(mid: str) -> str:
    """Who measured a params/measurements.yaml entry, from its id's first word."""
    return {"pciebench": "pcie-bench", "gdrcopy": "gdrcopy"}.get(mid.split("-")[0], "seed-papers")


def _require(where: str, entry: Any, keys: tuple[str, ...]) -> None:
    if not isinstance(entry, dict):
        raise CalibrationError("expected a mapping", where=where)
    missing = [k for k in keys if k not in entry]
    if missing:
        raise CalibrationError(f"missing {', '.join(missing)}", where=where)


def evaluate(m: Measurement, params: Optional[dict] = None) -> Any:
    """Run `m`'s probe with hardware-constant `params` (dotted override keys): a number in
    `m.unit`, or for an ordering the pair of quantities compared."""
    from ..experiments import overrides
    from .probes import PROBES
    with overrides(params):
        return PROBES[m.probe](**{k: v for k, v in m.args.items() if not k.startswith("_")})
