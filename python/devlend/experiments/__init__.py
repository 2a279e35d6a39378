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
import pickle
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
# The user's topology standing in for one shipped testbed ("TESTBED\0PATH"), "" when none. Set by
# `overrides`, read by `shipped`.
_STAND_IN: contextvars.ContextVar[str] = contextvars.ContextVar("devlend_experiment_topology", default="")


@contextlib.contextmanager
def overrides(params: Optional[dict], stand_in: "Optional[tuple[str, str]]" = None, origin: str = "override") -> Iterator[None]:
    """Within this block every shipped topology an experiment loads carries `params` (nested or
    dotted keys, as Topology.with_params takes them), so its figures are computed with them; with
    `stand_in` (testbed, path), the topology file at path is loaded in place of that testbed. An
    error in an override names it as `origin` gave it ("--set" for the command line)."""
    token = _OVERRIDES.set(json.dumps({"origin": origin, "params": params}, sort_keys=True) if params else "")
    stand = _STAND_IN.set("\0".join(stand_in) if stand_in else "")
    try:
        yield
    finally:
        _OVERRIDES.reset(token)
        _STAND_IN.reset(stand)


def overrides_key() -> str:
    """The current overrides (and stand-in topology) as a string, for caches of anything built from
    shipped topologies."""
    return _OVERRIDES.get() + ("\0" + _STAND_IN.get() if _STAND_IN.get() else "")


def shipped(name: str):
    """The shipped topology `name` (or the user's topology standing in for it) with the current
    overrides applied and checked (an unknown constant or a name the topology lacks is a
    TopologyError naming it)."""
    testbed, _, path = _STAND_IN.get().partition("\0")
    # A deep copy (the caller may edit it; the cache keeps the original): a pickle round trip copies
    # a topology, its private fields included, in about a third of model_copy(deep=True)'s time.
    return pickle.loads(pickle.dumps(_shipped(path if testbed == name else topology_path(name), _OVERRIDES.get()), pickle.HIGHEST_PROTOCOL))


@functools.lru_cache(maxsize=256)
def _shipped(path: str, params: str):
    from .. import load
    topo = load(path)
    if not params:
        return topo
    given = json.loads(params)
    topo = topo.with_params(given["params"], given["origin"])
    bare = topo.model_copy(update={"setup": []})
    bare._file, bare._marks, bare._sets = topo._file, topo._marks, topo._sets
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


@dataclass(frozen=True)
class Stand:
    """The one testbed an experiment runs on, which another topology may stand in for
    (`--topology`), and the names the experiment uses in it (hosts, devices, NTBs): the other
    topology must have them, in the same roles."""
    testbed: str
    names: tuple[str, ...]


@dataclass
class Experiment:
    name: str
    title: str
    fn: Callable[..., ExperimentResult]
    # True when every topology the experiment runs on is loaded through `shipped`, so that
    # hardware-constant overrides reach all of its figures.
    takes_params: bool = False
    # Set when the experiment runs on one testbed only, by the names in it (`--topology`).
    stand: Optional[Stand] = None
    # The experiment's own knobs (`--opt KEY=VALUE`) and their defaults, passed to it by name.
    options: dict = field(default_factory=dict)

    def run(self, quick: bool = False, progress: Optional[Callable[[str], None]] = None,
            params: Optional[dict] = None, topology: "Optional[str | os.PathLike]" = None,
            origin: str = "override", options: Optional[dict] = None) -> ExperimentResult:
        """Run the experiment; `params` overrides hardware constants for this run only; `topology`
        (a file) stands in for the experiment's testbed; `origin` names where `params` came from
        in errors ("--set": the command line)."""
        from ..errors import DevlendError
        if params and not self.takes_params:
            takers = ", ".join(e.name for e in all_experiments() if e.takes_params)
            raise DevlendError(f"experiment '{self.name}' does not take hardware-constant overrides "
                               f"(its model reads its own parameter tables); these do: {takers}")
        stand_in = None
        if topology is not None:
            stand_in = (self._stand_in(os.fspath(topology)), os.path.abspath(os.fspath(topology)))
        opts = self._options(options or {})
        with overrides(params, stand_in, origin):
            return self.fn(quick=quick, progress=progress, **opts)

    def _options(self, given: dict) -> dict:
        """The given options, checked against the experiment's and typed as their defaults."""
        from ..errors import DevlendError
        unknown = [k for k in given if k not in self.options]
        if unknown:
            known = ", ".join(self.options) or "none"
            raise DevlendError(f"experiment '{self.name}' has no option {', '.join(unknown)} (its options: {known})")
        out = {}
        for k, v in given.items():
            kind = type(self.options[k]) if self.options[k] is not None else str
            try:
                out[k] = _typed(kind, v)
            except ValueError:
                raise DevlendError(f"option {k}={v!r}: expected {kind.__name__}") from None
        return out

    def _stand_in(self, path: str) -> str:
        """The testbed `path` stands in for, after checking it has the names the experiment uses."""
        from .. import load
        from ..errors import DevlendError
        if self.stand is None:
            takers = ", ".join(e.name for e in all_experiments() if e.stand)
            raise DevlendError(f"experiment '{self.name}' runs on the paper's own testbeds (several, or named placements "
                               f"the paper measured), so another topology cannot stand in for them; these take --topology: {takers}")
        topo = load(path)
        have = {x.name for x in (*topo.hosts, *topo.devices, *topo.ntbs, *topo.switches)}
        missing = [n for n in self.stand.names if n not in have]
        if missing:
            raise DevlendError(f"{path}: experiment '{self.name}' runs on a topology like {self.stand.testbed} and uses its "
                               f"names {', '.join(self.stand.names)} in the same roles; this topology lacks {', '.join(missing)}")
        return self.stand.testbed


def _typed(kind: type, v):
    """An option's value (a string from the command line, or already typed) as `kind`."""
    if kind is bool and isinstance(v, str):
        if v.lower() not in ("1", "0", "true", "false", "yes", "no", "y", "n"):
            raise ValueError(v)
        return v.lower() in ("1", "true", "yes", "y")
    return kind(v)


REGISTRY: dict[str, Experiment] = {}


def register(name: str, title: str, params: bool = False, stand: Optional[Stand] = None, options: Optional[dict] = None):
    """Register an experiment; `params=True` when it loads its topologies through `shipped`;
    `stand` when it runs on that one testbed only, so that another topology may stand in for it;
    `options`: its own knobs and their defaults (None: no default), given by name to it."""
    def deco(fn):
        REGISTRY[name] = Experiment(name, title, fn, params, stand, dict(options or {}))
        return fn
    return deco


def stand_in_active() -> bool:
    """Whether a user's topology stands in for the experiment's testbed now (`--topology`)."""
    return bool(_STAND_IN.get())


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
