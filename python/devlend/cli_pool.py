"""``devlend pool TOPOLOGY VERB ...``: the device pool from the command line, with smartio_tool's
verbs. One call is one process: the topology's borrow/return operations are applied, then the
verbs in the order given, then the pool's table is printed.

Verbs: ``connect LENDER BORROWER``, ``add DEVICE``, ``remove DEVICE``, ``available DEVICE``,
``unavailable DEVICE``, ``borrow BORROWER DEVICE [DMA_WINDOW_SIZE]``, ``return DEVICE``,
``list``, ``show DEVICE``, ``fault KIND TARGET`` (a fault now: ``devlend.pool.FAULT_KINDS``). DEVICE
is a function name or a fabric device ID (hex, as listed).

The pool remembers between calls (``pool_state``): a state file keeps the verbs carried out on
each topology, so a borrow made by one call is still borrowed in the next.
"""

from __future__ import annotations

from typing import Optional

import typer

from .errors import DevlendError
from .sizes import parse_size

VERBS = {"connect": 2, "add": 1, "remove": 1, "available": 1, "unavailable": 1, "borrow": 2, "return": 1, "list": 0, "show": 1, "fault": 2}


def parse_verbs(words: list[str]) -> list[list[str]]:
    """Split the words into verbs with their arguments (borrow takes an optional size after its two)."""
    out, i = [], 0
    while i < len(words):
        verb = words[i]
        if verb not in VERBS:
            raise DevlendError(f"pool: unknown verb {verb!r}: expected one of {', '.join(VERBS)}")
        n = VERBS[verb]
        args = words[i + 1:i + 1 + n]
        if len(args) < n:
            raise DevlendError(f"pool {verb}: expected {n} argument{'s' if n > 1 else ''}, got {len(args)}")
        i += 1 + n
        if verb == "borrow" and i < len(words) and words[i] not in VERBS:
            try:
                parse_size(words[i])
            except ValueError as e:
                raise DevlendError(f"pool borrow {' '.join(args)} {words[i]}: the DMA window size: {e}") from None
            args.append(words[i])
            i += 1
        out.append([verb, *args])
    return out


def apply(pool, verb: list[str]) -> Optional[dict]:
    """Carry out one verb; `show` returns the device's details."""
    name, args = verb[0], verb[1:]
    if name == "borrow":
        pool.borrow(args[0], args[1], args[2] if len(args) > 2 else None)
    elif name == "return":
        pool.return_device(args[0])
    elif name == "show":
        return pool.show(args[0])
    elif name == "fault":
        return {"fault": args[0], "target": args[1], "ended": pool.fault(args[0], args[1]), "needs_reset": pool.needs_reset()}
    elif name != "list":
        getattr(pool, name)(*args)
    return None


def _hex(v, key: str = ""):
    """Addresses as hex in `show`'s output."""
    if isinstance(v, dict):
        return {k: _hex(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [_hex(x, key) for x in v]
    return hex(v) if isinstance(v, int) and not isinstance(v, bool) and key.endswith(("addr", "iova")) else v


def pool_cmd(file: str = typer.Argument(..., help="topology file (YAML or JSON)"),
             verbs: Optional[list[str]] = typer.Argument(None, help="verbs with their arguments, e.g. connect lender borrower add gpu0 "
                                                                    "available gpu0 borrow borrower gpu0 64MiB show gpu0"),
             state: Optional[str] = typer.Option(None, "--state", envvar="DEVLEND_POOL_STATE",
                                                 help="the pool's state file, kept between calls (default "
                                                      "$XDG_STATE_HOME/devlend/pool.json)"),
             reset: bool = typer.Option(False, "--reset", help="forget the kept state of this topology's pool first"),
             hygiene: str = typer.Option("scrub", help="scrub: a returned device is cleared before its next borrower; "
                                                        "none: it is not (what real lending may leak)"),
             fmt: str = typer.Option("table", "--format", help="table (show's and fault's details as text, then the pool), "
                                     "csv (the pool's table) or json (every detail and the pool) on stdout"),
             quiet: bool = typer.Option(False, "--quiet", "-q", help="no notes on stderr beside --format csv or json")) -> None:
    """Device Lending's pool (smartio_tool's verbs) on any topology: connect, add, remove, available,
    unavailable, borrow [DMA window size], return, list, show; prints the pool's table. The pool
    remembers: each call starts from the state the previous calls left (``--state``)."""
    from .cli import _fail, err, out
    from .cli_run import _table
    from .output import check, frames
    from .pool import Pool
    from .pool_state import PoolState
    kept, details = None, []
    try:
        check(fmt)
        steps = parse_verbs(verbs or [])
        kept = PoolState(state, file, reset)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pool = Pool(file, hygiene=hygiene)
        if hygiene == "none" and not (quiet and fmt != "table"):
            from .pool import NO_SCRUB_NOTE
            (out if fmt == "table" else err).print(f"note: {NO_SCRUB_NOTE}", markup=False)
        kept.replay(pool, apply)
        for v in steps:
            try:
                shown = apply(pool, v)
            except DevlendError as e:
                raise DevlendError(f"pool {' '.join(v)}: {e}") from None
            kept.record(v)
            if shown is not None:
                details.append({"verb": " ".join(v), **_hex(shown)})
        kept.save()
    except (DevlendError, OSError) as e:
        if kept is not None and kept.loaded:
            kept.save()  # the verbs before the failed one were carried out
        _fail(e)
    table = pool.list()
    if fmt != "table":
        import sys
        sys.stdout.write(frames(fmt, {"pool": table}, {"details": details}))
        return
    import yaml
    for d in details:
        out.print(yaml.safe_dump(d, sort_keys=False, width=78).rstrip(), markup=False)
    out.print(_table(table.fillna(""), f"device pool of {pool.topology.name} (fabric device IDs in hex)"))
