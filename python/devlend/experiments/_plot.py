"""The one way experiment figures are drawn: a :class:`Figure` that opens matplotlib headless, gives
every named series the same colour in every panel of the figure, and writes and closes the file;
:func:`axes` for the labels, log axes, grid and legend that every panel sets; :func:`points` to pick
one series out of a result's rows; :meth:`Figure.paper` and :meth:`Figure.paper_band` draw the
paper's published values beside ours where an experiment reproduces a paper figure.

    with Figure(path, ncols=2, size=(10, 4), title="devlend: ...") as f:
        for ax, key in zip(f.axes, ("write_GBps", "read_GBps")):
            for s in SCENARIOS:
                f.line(ax, *points(res.rows, "size", key, scenario=s), s)
            axes(ax, xlabel="transfer size (bytes)", logx=True)
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

# matplotlib's "tab10" then "tab20" colours: a series keeps its colour in every panel of a figure.
_PALETTE = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray",
            "tab:olive", "tab:cyan", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94"]


# One marker per series of a panel, in this order (see Figure.line).
_MARKERS = "osD^vP<X>hp*"


def points(rows: Iterable[dict], x: str, y: str, **match: Any) -> tuple[list, list]:
    """The (x, y) values of the rows whose fields equal ``match``, skipping rows without a y value."""
    pts = [(r[x], r[y]) for r in rows if all(r.get(k) == v for k, v in match.items()) and r.get(y) not in (None, "")]
    return [p[0] for p in pts], [p[1] for p in pts]


def axes(ax, *, xlabel: Optional[str] = None, ylabel: Optional[str] = None, title: Optional[str] = None,
         logx: bool = False, logy: bool = False, ylim: Optional[tuple] = None, legend: Optional[float] = 8,
         grid: bool = True) -> None:
    """Labels, base-2 log x axis, log y axis, limits, grid and a legend (font size; None: no legend)."""
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    if ylim is not None:
        ax.set_ylim(*ylim)
    if grid:
        ax.grid(True, alpha=0.3)
    if legend is not None and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=legend)


class Figure:
    """A figure of ``nrows`` x ``ncols`` panels written to ``path`` when the ``with`` block ends
    without an error; closed in every case. ``axes`` is the flat list of panels (row by row)."""

    def __init__(self, path: str, *, nrows: int = 1, ncols: int = 1, size: tuple = (7, 4), title: Optional[str] = None,
                 dpi: int = 120, sharey: bool = False):
        self.path, self.title, self.dpi = path, title, dpi
        self._shape, self._size, self._sharey = (nrows, ncols), size, sharey
        self._colours: dict[str, str] = {}

    def __enter__(self) -> "Figure":
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        self._plt = plt
        self.fig, grid = plt.subplots(*self._shape, figsize=self._size, sharey=self._sharey, squeeze=False)
        self.axes = [ax for row in grid for ax in row]
        return self

    def __exit__(self, kind, value, tb) -> None:
        try:
            if kind is None:
                if self.title:
                    self.fig.suptitle(self.title)
                self.fig.tight_layout()
                self.fig.savefig(self.path, dpi=self.dpi)
        finally:
            self._plt.close(self.fig)

    def colour(self, name: str) -> str:
        """The colour of series ``name``: the same in every panel of this figure."""
        if name not in self._colours:
            self._colours[name] = _PALETTE[len(self._colours) % len(_PALETTE)]
        return self._colours[name]

    def line(self, ax, xs: list, ys: list, label: str, style: str = "-o", *, key: Optional[str] = None,
             markersize: float = 4, **kw: Any) -> None:
        """One series; its colour follows ``key`` (default: the label) unless ``color`` is given.
        No series hides another: each series of a panel gets its own marker (the style's line kept),
        and every one after the first is drawn hollow and a little larger, so that coinciding
        series stay visible one around the other."""
        kw.setdefault("color", self.colour(key or label))
        n = sum(1 for line in ax.get_lines() if not line.get_label().startswith("_"))
        linestyle = next((ls for ls in ("--", "-.", "-", ":") if style.startswith(ls)), "None")
        kw["marker"] = _MARKERS[n % len(_MARKERS)]
        if n:
            kw.setdefault("markerfacecolor", "none")
            markersize += 1.5
        ax.plot(xs, ys, linestyle=linestyle, label=label, markersize=markersize, **kw)

    def paper(self, ax, xs: list, ys: list, label: str, yerr: Any = None, joined: bool = True) -> None:
        """The paper's published values beside ours: black hollow 'X' markers (no series of ours
        uses black or 'X'), dotted between points when ``joined``, drawn on top of ours; ``yerr``
        ((below, above) or one value) for a value the paper gives as a range; the legend says
        "paper: LABEL"."""
        ax.errorbar(xs, ys, yerr=yerr, fmt=":X" if joined and len(xs) > 1 else "X", color="black", markersize=8, capsize=4,
                    markerfacecolor="none", zorder=5, label=f"paper: {label}")

    def paper_band(self, ax, lo: float, hi: float, label: str, xspan: Optional[tuple] = None) -> None:
        """A range the paper states (e.g. "2-10 us"): a hatched band behind our series, over the
        whole x axis or ``xspan``; the legend says "paper: LABEL"."""
        import matplotlib.patches as mpatches
        if xspan is None:
            ax.axhspan(lo, hi, facecolor="none", edgecolor="grey", hatch="//", lw=0, zorder=0, label=f"paper: {label}")
        else:
            ax.add_patch(mpatches.Rectangle((xspan[0], lo), xspan[1] - xspan[0], hi - lo, facecolor="none",
                                            edgecolor="grey", hatch="//", lw=0, zorder=0, label=f"paper: {label}"))

    def bars(self, ax, names: list, values: list, **kw: Any) -> None:
        """One bar per name, each in its name's colour unless ``color`` is given."""
        kw.setdefault("color", [self.colour(n) for n in names])
        ax.bar(names, values, **kw)
