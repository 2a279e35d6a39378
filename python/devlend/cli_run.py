"""``devlend run-streams``: several DMA streams at once on one topology (devlend.Run), printed as
a table of streams and a table of the links they loaded; optionally written as CSV."""

from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from .errors import DevlendError
from .output import FORMAT_HELP
from .sizes import parse_size

STREAM_HELP = ("a stream NAME:REQUESTER:ADDR:BYTES[:read|:write][@START_NS], e.g. a:gpu0:ntb-l.mw1:4MiB or "
               "b:lender:cpu:gpu0.bar1+0x1000:64KiB:read@500; repeat for more streams (they share the links). "
               "REQUESTER is HOST:cpu or a function name; BYTES takes units (KiB, MiB); default write, start 0")


def parse_stream(spec: str) -> dict:
    """NAME:REQUESTER:ADDR:BYTES[:read|:write][@START_NS] (REQUESTER may itself hold a colon)."""
    at = 0.0
    if "@" in spec:
        spec, _, t = spec.rpartition("@")
        try:
            at = float(t)
        except ValueError:
            raise DevlendError(f"--stream ...@{t}: the start time is not a number of nanoseconds") from None
    parts = spec.split(":")
    write = True
    if parts and parts[-1].lower() in ("read", "write"):
        write = parts.pop().lower() == "write"
    if len(parts) < 4:
        raise DevlendError(f"--stream {spec!r}: expected NAME:REQUESTER:ADDR:BYTES[:read]")
    name, requester, addr, size = parts[0], ":".join(parts[1:-2]), parts[-2], parts[-1]
    try:
        nbytes = parse_size(size)
    except ValueError as e:
        raise DevlendError(f"--stream {spec!r}: {e}") from None
    return {"name": name, "requester": requester, "addr": addr, "nbytes": nbytes, "write": write, "at_ns": at}


def _cell(c: str, v) -> str:
    """A value as a person reads it: floats to 3 places, addresses in hex, an empty cell as a dash."""
    import pandas as pd
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return "—"
    if isinstance(v, float):
        return f"{v:.3f}"
    return hex(v) if c == "addr" else str(v)


def _table(df, title: str) -> Table:
    """The frame as a table for people; where its columns cannot fit the console even wrapped
    (many quantities, few rows), turned on its side: one row per quantity, one column per row."""
    from .cli import out
    from .output import table
    headers = list(df.columns)
    text = [[_cell(c, v) for c, v in zip(headers, row)] for row in df.itertuples(index=False)]
    need = sum(3 + min(8, max([len(r[i]) for r in text] + [1])) for i in range(len(headers)))
    if need > (out.width or 100) and 0 < len(text) <= 6:
        sideways = [[h] + [r[i] for r in text] for i, h in enumerate(headers[1:], start=1)]
        return table(title, [headers[0]] + [r[0] for r in text], sideways)
    return table(title, headers, text)


def run_streams(file: str = typer.Argument(..., help="topology file (YAML or JSON)"),
                stream: list[str] = typer.Option(..., "--stream", "-s", help=STREAM_HELP),
                csv_out: Optional[str] = typer.Option(None, "--csv", help="write the streams' table as CSV to this file"),
                links_csv: Optional[str] = typer.Option(None, "--links-csv", help="write the links' table as CSV to this file"),
                fmt: str = typer.Option("table", "--format", help=FORMAT_HELP),
                quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar and no 'wrote' lines on stderr")) -> None:
    """Run several DMA streams at once on one clock and print each stream's start, end and
    bandwidth, and each loaded link direction's bytes, utilisation, credit stall and queueing."""
    from .cli import _build, _fail, out
    from .output import check, frames, wrote
    from .progress import spinner
    from .provenance import KEY, command_line, record, write_csv
    try:
        check(fmt)
        specs = [parse_stream(s) for s in stream]
        run = _build(file).machine()
        for s in specs:
            run.stream(s["name"], s["requester"], s["addr"], s["nbytes"], write=s["write"], at_ns=s["at_ns"])
        with spinner(f"run-streams: {', '.join(s['name'] for s in specs)}", quiet):
            run.run()
        res, links = run.results(), run.link_stats()
        rec = record(topology=file, command=command_line())
        for path, df in ((csv_out, res), (links_csv, links)):
            if path:
                write_csv(path, df, rec)
    except (DevlendError, OSError) as e:
        _fail(e)
    if fmt != "table":
        import sys
        sys.stdout.write(frames(fmt, {"streams": res, "links": links}, {KEY: rec}))
    else:
        out.print(_table(res.drop(columns=["time_ns"]), "streams (times in ns, bandwidth in GB/s)"))
        out.print(_table(links.drop(columns=["link_index", "towards_down"]), "link directions that carried TLPs"))
    wrote([p for p in (csv_out, links_csv) if p], fmt, quiet)
