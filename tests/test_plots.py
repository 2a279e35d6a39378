"""The shared figure helper (devlend.experiments._plot): one colour per series in every panel, the
file written only when drawing succeeded, the figure always closed; and experiments' plots drawn
through it from real (quick) runs."""

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from conftest import quick  # noqa: E402
from devlend.experiments._plot import Figure, axes, points  # noqa: E402

ROWS = [{"scenario": s, "size": n, "GBps": g} for s, n, g in
        [("A", 1, 1.0), ("A", 2, 2.0), ("B", 1, 0.5), ("B", 2, None), ("C", 1, 3.0)]]


def test_points_pick_one_series_and_skip_missing_values():
    assert points(ROWS, "size", "GBps", scenario="A") == ([1, 2], [1.0, 2.0])
    assert points(ROWS, "size", "GBps", scenario="B") == ([1], [0.5])
    assert points(ROWS, "size", "GBps", scenario="Z") == ([], [])


def test_a_series_keeps_its_colour_in_every_panel(tmp_path):
    with Figure(str(tmp_path / "f.png"), ncols=2) as f:
        left, right = f.axes
        for s in ("A", "B"):
            f.line(left, *points(ROWS, "size", "GBps", scenario=s), s)
        for s in ("C", "B", "A"):  # another order, another panel: same colours
            f.line(right, *points(ROWS, "size", "GBps", scenario=s), s)
        axes(left, xlabel="size", logx=True)
        colours = [{l.get_label(): l.get_color() for l in ax.get_lines()} for ax in (left, right)]
    assert colours[0]["A"] == colours[1]["A"] and colours[0]["B"] == colours[1]["B"]
    assert len({colours[1][s] for s in "ABC"}) == 3
    assert (tmp_path / "f.png").stat().st_size > 1000 and not plt.get_fignums()


def test_a_failing_drawing_writes_nothing_and_closes_the_figure(tmp_path):
    with pytest.raises(KeyError):
        with Figure(str(tmp_path / "g.png")) as f:
            f.line(f.axes[0], *points(ROWS, "size", "missing"), "x")
            ROWS[0]["nope"]
    assert not (tmp_path / "g.png").exists() and not plt.get_fignums()


@pytest.fixture(scope="module")
def drawing(tmp_path_factory):
    """`drawing(name)`: quick experiment NAME's figure, drawn once in this module (d3's and r2's are
    checked by two tests): its PNG, the legend labels of each figure saved while it was drawn, and
    the figures still open after it."""
    drawn = {}

    def draw(name):
        if name not in drawn:
            seen = []
            orig = plt.Figure.savefig

            def spy(fig, *a, **k):
                seen.append([label for ax in fig.axes for label in ax.get_legend_handles_labels()[1]])
                return orig(fig, *a, **k)
            plt.Figure.savefig = spy
            try:
                res = quick(name)  # the run the README's figures quote (one per worker)
                png = tmp_path_factory.mktemp(name) / f"{name}.png"
                res.plot(res, str(png))
            finally:
                plt.Figure.savefig = orig
            drawn[name] = (png, seen, plt.get_fignums())
        return drawn[name]
    return draw


@pytest.mark.parametrize("name", ["d3", "r2", "ntb-pingpong", "fio"])
def test_experiment_plots_draw(name, drawing):
    png, _, still_open = drawing(name)
    assert png.stat().st_size > 10_000 and not still_open


def test_no_series_hides_another_and_paper_values_stand_beside_ours(tmp_path):
    """Coinciding series keep apart by marker (hollow after the first); d1's read panel and d2's
    peer-to-peer panels draw the paper's 'a little under 6 GB/s' beside our curves."""
    from devlend.experiments._plot import Figure
    with Figure(str(tmp_path / "t.png")) as f:
        for label in ("a", "b", "c"):
            f.line(f.axes[0], [1, 2], [3, 4], label)
        drawn = [(line.get_marker(), line.get_markerfacecolor()) for line in f.axes[0].get_lines()]
    assert len({m for m, _ in drawn}) == 3 and [c == "none" for _, c in drawn] == [False, True, True]
    import matplotlib.pyplot as plt
    seen = []
    orig = plt.Figure.savefig
    def spy(fig, *a, **k):
        seen.append([line.get_label() for ax in fig.axes for line in ax.get_lines()])
        return orig(fig, *a, **k)
    plt.Figure.savefig = spy
    try:
        for name in ("d1", "d2"):
            res = quick(name)
            res.plot(res, str(tmp_path / f"{name}.png"))
    finally:
        plt.Figure.savefig = orig
    assert any("001 §7.3.1" in label for label in seen[0]) and any("001 §7.3.1" in label for label in seen[1])


@pytest.mark.parametrize("name", ["d3", "d5", "h2", "h3", "h4", "r2", "x3", "x4"])
def test_plots_of_paper_figures_draw_the_papers_values_beside_ours(name, drawing):
    """Each experiment that reproduces a paper figure draws the paper's published values (a
    "paper: ..." series, black hollow X markers or a hatched band) beside its own series."""
    png, (labels,), _ = drawing(name)
    paper = [label for label in labels if label.startswith("paper: ")]
    ours = [label for label in labels if not label.startswith("paper: ")]
    assert paper, f"{name}: no paper series in {labels}"
    assert ours or name in ("d3", "d5"), f"{name}: no series of ours in {labels}"  # d3, d5 draw ours as bars
    assert png.stat().st_size > 10_000
