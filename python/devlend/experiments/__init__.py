"""Registered experiments: each rebuilds a paper setup from the shipped topologies, runs it on
the model, and returns a table with the paper's value beside ours. Results are never typed in:
the "paper" column quotes the paper; the "devlend" column comes from the model.

Add one by decorating a function returning an ``ExperimentResult`` with ``@register``.
"""

from __future__ import annotations

import csv
import functools
import io
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

# The shipped testbeds live inside the package (devlend/topologies), so installed copies have them.
TOPOLOGIES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "topologies")


@functools.cache
def hardware_params() -> dict:
    """params/hardware.toml as compiled into the core (every constant with its source)."""
    import tomllib

    from .. import _core
    return tomllib.loads(_core.params_toml())


def topology_path(name: str) -> str:
    """The path of a shipped topology file."""
    p = os.path.join(TOPOLOGIES, name)
    if not os.path.exists(p):
        raise FileNotFoundError(f"shipped topology {name} not found in {TOPOLOGIES}")
    return p


@dataclass
class ExperimentResult:
    name: str
    title: str
    source: str
    columns: list[str]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    # plot(result, path) draws the figure in the paper's layout, for experiments that have one.
    plot: Optional[Callable[["ExperimentResult", str], None]] = None

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=self.columns, extrasaction="ignore")
        w.writeheader()
        for r in self.rows:
            w.writerow(r)
        return buf.getvalue()


@dataclass
class Experiment:
    name: str
    title: str
    run: Callable[..., ExperimentResult]


REGISTRY: dict[str, Experiment] = {}


def register(name: str, title: str):
    def deco(fn):
        REGISTRY[name] = Experiment(name, title, fn)
        return fn
    return deco


def _load_all() -> None:
    """Import every public module of this package: each registers its experiments. Modules whose
    names start with "_" are helpers."""
    import importlib
    import pkgutil
    for m in pkgutil.iter_modules(__path__):
        if not m.name.startswith("_"):
            importlib.import_module(f"{__name__}.{m.name}")


def get(name: str) -> Experiment:
    _load_all()
    if name not in REGISTRY:
        from ..errors import DevlendError
        raise DevlendError(f"no experiment named '{name}': expected one of {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def all_experiments() -> list[Experiment]:
    _load_all()
    return [REGISTRY[k] for k in sorted(REGISTRY)]
