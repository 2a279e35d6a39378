"""`devlend calibrate`: fit the fitted constants to the calibration set within their bounds with
scipy.optimize.least_squares (trust-region reflective, which keeps every trial inside the
bounds), on relative residuals (ours - theirs) / theirs under a robust loss (soft-L1 with a 5%
scale: a residual well inside the 10% tolerance counts as in least squares, one far outside it,
a measurement the model lacks the mechanism for, counts linearly and cannot drag every constant
towards it). Variables are scaled to their bound
ranges so that one step size suits them all; the model's constants are integer picoseconds, so
finite-difference steps are large enough (1% of the range) not to drown in rounding.

`devlend calibrate` runs the declared staged fit (`calibrate_staged`, the `stages` of
params/measurements.yaml), not one joint fit of every constant. Why: a joint fit over all
calibration rows let the five path latencies (NTB, switch, E5 root, DMA issue, CUDA call) trade
against each other along directions that only the four seed-paper rows hold, among 100-odd corpus
rows whose robust loss is flat there; three starts landed 20-90 ns apart (issue 27). The rows form
a triangular system instead: no row of a stage moves with a constant of a later stage (the seed
papers' CPU-store paths take no DMA engine and no CUDA call; pcie-bench's reads take the root
and the engine but no NTB or switch; writes take the intake alone), so fitting stage after stage,
each on the rows that identify its constants with the earlier ones held at their rounded values,
reaches the joint solution wherever each stage is solved, and each small stage is solved the same
way from every start. Each stage starts from the best point of a coarse grid over its bounds as
well as from the user's start and keeps the lower loss: the model has plateaus (an intake faster
than the link binds nothing) on which a local fit can stop. What identifies each constant is the
stage's `why`; the report gives per stage the singular values of the Jacobian scaled to the bound
ranges and each constant's 1-sigma range, and says which stages are exactly determined (as many
statements as constants: the data fix them only as far as those statements are exact).

The model sees each constant as its rounded integer override, so the optimiser's trial points,
its finite-difference steps and the fits from several starts ask for the same model run again and
again (a third of `devlend calibrate --starts 2`'s 7,135 runs, 2026-11-29): a fit's `evaluations`
dict keeps each row's answer per override set, shared by every fit of one run (`calibrate_staged`,
the CLI's starts). A row's answer depends on nothing else (the compiled parameters are fixed for a
process), so a fit reads what it would have computed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from . import Catalogue, CalibrationError, Fitted, Measurement, evaluate

ROUND_TO = 1000   # fitted picosecond constants are written to the nearest ns: the statements are good to ~10 ns
# A per-line time (ps/line) sets a bandwidth (64 B per line time): to the nearest 100 ps, 1% of a
# 10 ns line, as fine as the bandwidth curves it is fitted to.
RESOLUTION = {"ps": ROUND_TO, "ps/line": 100, "pct": 1}
LOSS, F_SCALE = "soft_l1", 0.05   # robust loss on relative residuals, its scale (half the 10% tolerance)


def rounded(unit: str, v: float) -> float:
    """A fitted value as params/hardware.toml holds it: ps to the nearest ns, a per-line time to
    the nearest 100 ps, percentages whole."""
    step = RESOLUTION.get(unit)
    return float(round(v / step) * step) if step else float(v)


@dataclass
class FitResult:
    constants: list[Fitted]
    start: list[float]
    values: list[float]                 # rounded, in each constant's unit
    measurements: list[Measurement]
    ours: list[float]                   # each calibration measurement at the fitted values
    residuals: list[float]              # relative
    cost: float                         # 0.5 * sum of squared relative residuals, at the rounded values (what the robust loss weighs is in `message`)
    evaluations: int
    at_bound: list[str]                 # constants the fit left on a bound
    message: str
    jacobian: Optional[np.ndarray] = None   # d residual / d constant (per unit of the constant), at the solution

    def overrides(self) -> dict:
        return overrides_of(self.constants, self.values)


def overrides_of(constants: list[Fitted], values) -> dict:
    return {c.override: int(round(v)) for c, v in zip(constants, values)}


def overrides_for(m: Measurement, constants: list[Fitted], values) -> dict:
    """The overrides measurement `m` runs with: a corpus-scoped constant (one of the corpus
    testbed's device) only on a corpus row, whose testbed has that device."""
    return overrides_of([c for c in constants if m.host or c.scope == "all"],
                        [v for c, v in zip(constants, values) if m.host or c.scope == "all"])


def current_values(constants: list[Fitted]) -> list[float]:
    """Each constant's value as compiled into the core (params/hardware.toml)."""
    from ..experiments import hardware_params
    hw = hardware_params()
    out = []
    for c in constants:
        table = hw
        for part in c.table.split("."):
            table = table.get(part, {})
        if c.name not in table:
            raise CalibrationError(f"fitted constant {c.key} is not in params/hardware.toml (as compiled in)")
        out.append(float(table[c.name]))
    return out


def calibrate(cat: Catalogue, only: Optional[list[str]] = None, fit_ids: Optional[list[str]] = None,
              progress: Optional[Callable[[int, list[float], float], None]] = None, max_nfev: int = 60,
              start: Optional[dict] = None, held: Optional[dict] = None, evaluations: Optional[dict] = None) -> FitResult:
    """Fit `cat.fitted` (or those named in `only`) to the calibration set (or the measurements
    named in `fit_ids`), from their compiled values (or `start`, by key); the others keep their
    compiled values, or the values `held` gives by key. `evaluations`: the model's answers already
    computed, by (row id, overrides), read and filled (the module's doc)."""
    from scipy.optimize import least_squares
    constants = [c for c in cat.fitted if only is None or c.key in only]
    if only is not None and len(constants) != len(set(only)):
        unknown = sorted(set(only) - {c.key for c in cat.fitted})
        raise CalibrationError(f"not fitted constants: {', '.join(unknown)}; params/measurements.yaml fits "
                               f"{', '.join(c.key for c in cat.fitted)}")
    ms = [m for m in cat.of("calibration") if fit_ids is None or m.id in fit_ids]
    if not constants or not ms:
        raise CalibrationError("nothing to fit: no fitted constants or no calibration measurements selected")
    lo = np.array([c.lower for c in constants])
    span = np.array([c.upper - c.lower for c in constants])
    start = [float((start or {}).get(c.key, v)) for c, v in zip(constants, current_values(constants))]
    calls = [0]
    fixed = [c for c in cat.fitted if c.key in (held or {}) and c not in constants]
    fixed_values = [float(held[c.key]) for c in fixed]

    def values_of(u):
        return lo + np.clip(u, 0.0, 1.0) * span

    known = {} if evaluations is None else evaluations

    def run(m, vals):
        over = overrides_for(m, fixed + constants, fixed_values + list(vals))
        key = (m.id, tuple(sorted(over.items())))
        if key not in known:
            known[key] = evaluate(m, over)
        return known[key]

    def residuals(u):
        vals = values_of(u)
        ours = [run(m, vals) for m in ms]
        res = np.array([(o - m.value) / m.value for o, m in zip(ours, ms)])
        calls[0] += 1
        if progress:
            progress(calls[0], list(vals), 0.5 * float(res @ res))
        return res

    u0 = np.clip((np.array(start) - lo) / span, 0.0, 1.0)
    # Finite-difference steps of 1% of the range, 5% for a whole-percent constant (1% of its
    # range is under the 1-point rounding the model applies, which would read as a flat residual).
    steps = np.array([0.05 if c.unit == "pct" else 0.01 for c in constants])
    sol = least_squares(residuals, u0, bounds=(0.0, 1.0), method="trf", diff_step=steps, x_scale=1.0, max_nfev=max_nfev,
                        loss=LOSS, f_scale=F_SCALE)
    values = [rounded(c.unit, v) for c, v in zip(constants, values_of(sol.x))]
    ours = [run(m, values) for m in ms]
    res = [(o - m.value) / m.value for o, m in zip(ours, ms)]
    at_bound = [c.key for c, v in zip(constants, values)
                if min(abs(v - c.lower), abs(v - c.upper)) < RESOLUTION.get(c.unit, 1)]
    jac = np.asarray(sol.jac) / span if sol.jac is not None else None
    return FitResult(constants, start, values, ms, ours, res, 0.5 * sum(r * r for r in res), calls[0], at_bound, sol.message, jac)


@dataclass
class StagedFit:
    """The declared staged fit (params/measurements.yaml `stages`): one FitResult per stage, in
    order, and every fitted constant's value."""
    stages: list                        # (Stage, FitResult) pairs; a stage whose rows are absent is left out
    values: dict                        # key -> fitted value (a constant of a skipped stage: its compiled value)

    def constants_values(self, cat: Catalogue) -> tuple[list[Fitted], list[float]]:
        return list(cat.fitted), [self.values[c.key] for c in cat.fitted]


def calibrate_staged(cat: Catalogue, start: Optional[dict] = None, max_nfev: int = 60,
                     progress: Optional[Callable[[str, int, list[float], float], None]] = None,
                     grid_fits: Optional[dict] = None, evaluations: Optional[dict] = None) -> StagedFit:
    """Fit stage after stage: each stage's constants to its own calibration rows, from `start`
    (by key; default the compiled values), the constants of earlier stages held at their rounded
    fitted values. The rounding between stages makes a later stage see the same inputs whenever the
    earlier ones agree to their printed digits. `grid_fits`: a dict shared by the fits of one
    catalogue from several starts; a stage's fit from its grid start depends only on the stage and
    the held values, not on `start`, so it is computed once per (stage, held values) and reused.
    `evaluations`: the model's answers shared by every fit of the run (the module's doc); default
    one dict for this call's fits."""
    if not cat.stages:
        raise CalibrationError("params/measurements.yaml declares no stages: fit with --only and --measurement")
    values = dict(zip((c.key for c in cat.fitted), current_values(list(cat.fitted))))
    evaluations = {} if evaluations is None else evaluations
    done = []
    for st in cat.stages:
        ids = [m.id for m in cat.rows_of(st)]
        if not ids:
            continue
        cb = (lambda n, v, cost, name=st.name: progress(name, n, v, cost)) if progress else None
        held = {k: v for k, v in values.items() if k not in st.constants}
        key = (st.name, tuple(sorted(held.items())), max_nfev)
        grid = grid_fits.get(key) if grid_fits is not None else None
        if grid is None:
            grid = calibrate(cat, only=list(st.constants), fit_ids=ids, start=grid_start(cat, st, ids, held), held=held,
                             max_nfev=max_nfev, progress=cb, evaluations=evaluations)
            if grid_fits is not None:
                grid_fits[key] = grid
        fits = [grid, calibrate(cat, only=list(st.constants), fit_ids=ids, start=start, held=held, max_nfev=max_nfev, progress=cb,
                          evaluations=evaluations)]
        r = min(fits, key=lambda f: robust_cost(f.residuals))   # the grid's first: a tie keeps what does not depend on the start
        values.update({c.key: v for c, v in zip(r.constants, r.values)})
        done.append((st, r))
    return StagedFit(done, values)


def robust_cost(residuals) -> float:
    """The soft-L1 loss the fit minimises, in units of F_SCALE squared."""
    r = np.asarray(residuals) / F_SCALE
    return float(np.sum(2 * (np.sqrt(1 + r * r) - 1)))


GRID = {1: 8, 2: 5, 3: 3}   # grid points per constant, by the stage's number of constants


def grid_start(cat: Catalogue, stage, ids: list[str], held: dict) -> dict:
    """The best point of a coarse grid over the stage's bounds (at (k + 1/2) / K of each range):
    where the model has plateaus (a bound that stops binding, a link that takes over), a local
    fit from an arbitrary start can stop on one; from the grid's best point it starts in the
    right basin, the same one whatever start the user gave."""
    import itertools
    constants = [c for c in cat.fitted if c.key in stage.constants]
    ms = [m for m in cat.of("calibration") if m.id in ids]
    fixed = [c for c in cat.fitted if c.key in held and c not in constants]
    k = GRID.get(len(constants), 2)
    best, best_cost = None, float("inf")
    for point in itertools.product(*[[c.lower + (c.upper - c.lower) * (i + 0.5) / k for i in range(k)] for c in constants]):
        vals = [float(held[c.key]) for c in fixed] + list(point)
        res = np.array([(evaluate(m, overrides_for(m, fixed + constants, vals)) - m.value) / m.value for m in ms])
        cost = robust_cost(res)
        if cost < best_cost:
            best, best_cost = {c.key: v for c, v in zip(constants, point)}, cost
    return best


def spread_starts(cat: Catalogue, n: int, only: Optional[list[str]] = None) -> list[dict]:
    """`n` starting points spread inside each constant's bounds (at 1/(n+1), 2/(n+1) ... of its
    range), to show that the fit lands on the same values whatever it starts from."""
    constants = [c for c in cat.fitted if only is None or c.key in only]
    return [{c.key: c.lower + (c.upper - c.lower) * (k + 1) / (n + 1) for c in constants} for k in range(n)]


@dataclass
class Identifiability:
    """How well the calibration data pin one constant down, from the Jacobian at the solution:
    `sensitivity` is the root-mean-square change of the relative residuals per 1% of the
    constant's bound range; `sigma` the constant's one-standard-error range from (J^T J)^-1 scaled
    by the residuals' variance (None when the data do not constrain it at all); `pinned` when that
    range is under 5% of the bound range."""
    key: str
    sensitivity: float
    sigma: Optional[float]
    pinned: bool
    rows: int          # calibration measurements whose residual moves with it


def singular_values(r: FitResult) -> list[float]:
    """Singular values of the Jacobian of the relative residuals against each constant scaled to
    its bound range (change of the residuals for a move across the whole range), largest first:
    the smallest against the largest says whether the rows pin every direction of the constants
    together, not only each one alone."""
    if r.jacobian is None:
        return []
    span = np.array([c.upper - c.lower for c in r.constants])
    return [float(s) for s in np.linalg.svd(r.jacobian * span, compute_uv=False)]


def identifiability(r: FitResult) -> list[Identifiability]:
    if r.jacobian is None:
        return []
    j = r.jacobian
    m, n = j.shape
    dof = max(m - n, 1)
    var = 2 * r.cost / dof
    try:
        cov = np.linalg.pinv(j.T @ j) * var
    except np.linalg.LinAlgError:
        cov = np.full((n, n), np.nan)
    out = []
    for i, c in enumerate(r.constants):
        span = c.upper - c.lower
        col = j[:, i]
        moving = int(np.sum(np.abs(col * span * 0.01) > 1e-4))
        sens = float(np.sqrt(np.mean((col * span * 0.01) ** 2)))
        sigma = float(np.sqrt(cov[i, i])) if moving and np.isfinite(cov[i, i]) else None
        out.append(Identifiability(c.key, sens, sigma, sigma is not None and sigma < 0.05 * span, moving))
    return out
