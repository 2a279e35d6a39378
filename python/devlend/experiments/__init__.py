"""Registered experiments: each rebuilds a paper setup from the shipped topologies, runs it on
the model, and returns a table with the paper's value beside ours. Results are never typed in:
the "paper" column quotes the paper; the "devlend" column comes from the model.

Add one by decorating a function returning an ``ExperimentResult`` with ``@register``.
"""

from __future__ import annotations

import contextlib
import contextvars
import csv
import functools
import io
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

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


# Hardware-constant overrides for the experiment running now (a Topology.with_params dict), as
# JSON so that cached topologies can key on it; "" when none. Set by `overrides`, read by `shipped`.
_OVERRIDES: contextvars.ContextVar[str] = contextvars.ContextVar("devlend_experiment_params", default="")


@contextlib.contextmanager
def overrides(params: Optional[dict]) -> Iterator[None]:
    """Within this block every shipped topology an experiment loads carries `params` (nested or
    dotted keys, as Topology.with_params takes them), so its figures are computed with them."""
    token = _OVERRIDES.set(json.dumps(params, sort_keys=True) if params else "")
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


def overrides_key() -> str:
    """The current overrides as a string, for caches of anything built from shipped topologies."""
    return _OVERRIDES.get()


def shipped(name: str):
    """The shipped topology `name` with the current overrides applied and checked (an unknown
    constant or a name the topology lacks is a TopologyError naming it)."""
    return _shipped(name, _OVERRIDES.get()).model_copy(deep=True)


@functools.lru_cache(maxsize=256)
def _shipped(name: str, params: str):
    from .. import load
    topo = load(topology_path(name))
    if not params:
        return topo
    topo = topo.with_params(json.loads(params))
    bare = topo.model_copy(update={"setup": []})
    bare._file, bare._marks = topo._file, topo._marks
    bare.build()   # checks every override against this topology before any experiment runs on it
    return topo


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
    fn: Callable[..., ExperimentResult]
    # True when every topology the experiment runs on is loaded through `shipped`, so that
    # hardware-constant overrides reach all of its figures.
    takes_params: bool = False

    def run(self, quick: bool = False, progress: Optional[Callable[[str], None]] = None,
            params: Optional[dict] = None) -> ExperimentResult:
        """Run the experiment; `params` overrides hardware constants for this run only."""
        if params and not self.takes_params:
            from ..errors import DevlendError
            takers = ", ".join(e.name for e in all_experiments() if e.takes_params)
            raise DevlendError(f"experiment '{self.name}' does not take hardware-constant overrides "
                               f"(its model reads its own parameter tables); these do: {takers}")
        with overrides(params):
            return self.fn(quick=quick, progress=progress)


REGISTRY: dict[str, Experiment] = {}


def register(name: str, title: str, params: bool = False):
    """Register an experiment; `params=True` when it loads its topologies through `shipped`."""
    def deco(fn):
        REGISTRY[name] = Experiment(name, title, fn, params)
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
