"""`devlend validate`: every published measurement devlend knows, ours beside theirs, with the
error, the tolerance and whether it holds; the calibration and validation sets apart."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Callable, Optional

from . import Catalogue, Measurement, evaluate


@dataclass
class Verdict:
    m: Measurement
    ours: object              # a number, or the pair an ordering compares
    error: Optional[float]    # ours - theirs in the unit (value), or the pair's relative difference (ordering)
    rel_error: Optional[float]
    ok: bool

    def row(self) -> dict:
        m = self.m
        if m.kind == "value":
            ours, theirs, tol = f"{self.ours:.4g}", f"{m.value:g}", _tol_text(m)
        else:
            a, b = self.ours
            ours, theirs, tol = f"{a:.4g} {m.relation} {b:.4g}?", f"a {m.relation} b", _tol_text(m)
        return {"set": m.set, "id": m.id, "unit": m.unit, "ours": ours, "theirs": theirs,
                "error": "" if self.error is None else f"{self.error:+.3g}",
                "rel_error": "" if self.rel_error is None else f"{self.rel_error:+.1%}",
                "tolerance": tol, "ok": "pass" if self.ok else "FAIL", "citation": m.citation}


def _tol_text(m: Measurement) -> str:
    if m.kind == "ordering" and m.relation != "=":
        return "exact"
    t = m.tol()
    parts = [f"{t['rel']:.0%}"] if "rel" in t else []
    if "abs" in t:
        parts.append(f"{t['abs']:g} {m.unit}")
    return " or ".join(parts)


def judge(m: Measurement, ours) -> Verdict:
    """Whether `ours` meets `m` within its tolerance (a value) or its relation (an ordering)."""
    t = m.tol()
    if m.kind == "value":
        err = ours - m.value
        rel = err / m.value
        ok = abs(rel) <= t.get("rel", 0.0) or abs(err) <= t.get("abs", 0.0)
        return Verdict(m, ours, err, rel, ok)
    a, b = ours
    rel = (a - b) / b
    ok = {"<": a < b, ">": a > b, "=": abs(rel) <= t.get("rel", 0.0)}[m.relation]
    return Verdict(m, ours, None, rel, ok)


def run(cat: Catalogue, which: Optional[str] = None, params: Optional[dict] = None,
        progress: Optional[Callable[[str], None]] = None) -> list[Verdict]:
    """Judge every measurement of `which` set (both when None), calibration first."""
    out = []
    for s in ("calibration", "validation"):
        if which not in (None, s):
            continue
        for m in cat.of(s):
            out.append(judge(m, evaluate(m, params)))
            if progress:
                progress(m.id)
    return out


def summary(verdicts: list[Verdict], which: str) -> str:
    """'validation: 7 of 9 within tolerance (77.8%); median |error| 3.1%, p90 12.0%; worst error
    +61.3% (d5-...)'."""
    vs = [v for v in verdicts if v.m.set == which]
    if not vs:
        return f"{which}: no measurements"
    f = figures(vs)
    scored = [v for v in vs if v.m.kind == "value"]
    worst = max(scored, key=lambda v: abs(v.rel_error), default=None)
    med = f"; median |error| {f.median:.1%}, p90 {f.p90:.1%}" if f.median is not None else ""
    tail = f"; worst error {worst.rel_error:+.1%} ({worst.m.id})" if worst else ""
    return f"{which}: {f.within} of {f.n} within tolerance ({f.fraction:.1%}){med}{tail}"


def to_csv(verdicts: list[Verdict]) -> str:
    buf = io.StringIO()
    rows = [v.row() for v in verdicts]
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["id"])
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _abs_errors(vs: list[Verdict]) -> list[float]:
    return sorted(abs(v.rel_error) for v in vs if v.m.kind == "value")


def _quantile(xs: list[float], q: float) -> Optional[float]:
    """The q-quantile of sorted `xs`, linear between ranks (numpy's default); None when empty."""
    if not xs:
        return None
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class Figures:
    """One group's figures: how many, how many within tolerance, median and 90th-percentile
    absolute relative error (of the value measurements; orderings have no error)."""
    n: int
    within: int
    median: Optional[float]
    p90: Optional[float]

    @property
    def fraction(self) -> float:
        return self.within / self.n if self.n else 0.0


def figures(vs: list[Verdict]) -> Figures:
    errs = _abs_errors(vs)
    return Figures(len(vs), sum(v.ok for v in vs), _quantile(errs, 0.5), _quantile(errs, 0.9))


def breakdown(verdicts: list[Verdict]) -> list[dict]:
    """Per set, source and quantity (and each set's total): n, within tolerance, median and p90
    absolute error: the table a modeller reads first."""
    rows = []
    for s in ("calibration", "validation"):
        vs = [v for v in verdicts if v.m.set == s]
        groups: dict[tuple[str, str], list[Verdict]] = {}
        for v in vs:
            groups.setdefault(v.m.group(), []).append(v)
        for (source, quantity), g in sorted(groups.items()):
            rows.append(_figures_row(s, source, quantity, figures(g)))
        if vs:
            rows.append(_figures_row(s, "all", "all", figures(vs)))
    return rows


def _figures_row(s: str, source: str, quantity: str, f: Figures) -> dict:
    pct = (lambda x: "" if x is None else f"{x:.1%}")
    return {"set": s, "source": source, "quantity": quantity, "n": f.n, "within": f"{f.within} ({f.fraction:.0%})",
            "median |error|": pct(f.median), "p90 |error|": pct(f.p90)}
