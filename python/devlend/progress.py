"""Progress on a terminal: a spinner with what is running and the time it has taken, or (where
the core says how far a run is) a bar with a percentage, on stderr, shown only when stderr is a
terminal and the user did not ask for quiet (never when piped)."""

from __future__ import annotations

import sys
from contextlib import contextmanager


def shown(quiet: bool = False) -> bool:
    return not quiet and sys.stderr.isatty()


@contextmanager
def spinner(what: str, quiet: bool = False):
    """Show `what` with a spinner and the elapsed time while the block runs (after 0.5 s... rich
    draws from the start; a run under ~2 s flashes by and is removed, transient)."""
    if not shown(quiet):
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=None)
        yield lambda msg: bar.update(task, description=msg)


@contextmanager
def bar(what: str, quiet: bool = False):
    """Show `what` with a bar, the percentage done and the elapsed time while the block runs; the
    block gets a function taking the fraction done (0 to 1), or None when nothing is shown."""
    if not shown(quiet):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
    with Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as shown_bar:
        task = shown_bar.add_task(what, total=100)
        yield lambda done: shown_bar.update(task, completed=100 * min(max(done, 0.0), 1.0))
