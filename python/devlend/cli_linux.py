"""``devlend linux ...``: the User-Mode Linux guest kernel (``devlend linux build``)."""

from __future__ import annotations

from typing import Optional

import typer

from .errors import DevlendError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Real Linux guests (User-Mode Linux) on devlend.")


@app.command("build")
def build_cmd(source: Optional[str] = typer.Option(None, "--source", help="a Linux 6.6+ source tree (default: Debian's linux-source-6.12, installed where we are root)"),
              jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="parallel make jobs (default: all cores)")) -> None:
    """Build the UML guest kernel (or reuse the cached one) and print its path."""
    from .cli import _fail, err, out
    from .linux.build import build
    try:
        path = build(source, jobs, log=lambda s: err.print(f"devlend: {s}", markup=False))
    except (DevlendError, OSError) as e:
        _fail(e)
    out.print(str(path), markup=False)
