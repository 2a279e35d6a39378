"""Progress on a terminal: a spinner with what is running and the time it has taken, on stderr,
shown only when stderr is a terminal and the user did not ask for quiet (never when piped)."""

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
