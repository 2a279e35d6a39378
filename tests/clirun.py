"""The `devlend` command line run inside the test process: `devlend.cli.main` with the given
arguments, its stdout and stderr captured, its exit status returned, as `subprocess.run([python,
"-m", "devlend.cli", ...], capture_output=True, text=True)` would give them, without starting an
interpreter and importing devlend again for each call (~1 s each). Tests that check the process
itself (the installed script, a terminal, a hang) still start one (`tests/test_cli.py`,
`tests/test_progress.py`, `tests/test_input_limits.py`)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import traceback

from devlend import cli as _cli


def _text(buf: io.TextIOWrapper) -> str:
    buf.flush()
    # What a pipe read with text=True gives: the locale's decoding, universal newlines.
    return io.TextIOWrapper(io.BytesIO(buf.buffer.getvalue()), newline=None).read()


def run(*args: str, cwd: str | None = None, env: dict[str, str] | None = None,
        check: bool = False) -> subprocess.CompletedProcess:
    """`devlend ARGS` in this process, in `cwd`, with `env` added to the environment. Raises
    `subprocess.CalledProcessError` on a non-zero status when `check` is set, as subprocess does."""
    out = io.TextIOWrapper(io.BytesIO(), write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), write_through=True)
    saved = (sys.argv, sys.stdout, sys.stderr, os.getcwd(), dict(os.environ))
    code = 0
    try:
        os.environ.update(env or {})
        # A new process sizes its tables when it starts: COLUMNS if set, else 100 columns (piped).
        _cli.out.width = None if os.environ.get("COLUMNS") else 100
        if cwd is not None:
            os.chdir(cwd)
        sys.argv, sys.stdout, sys.stderr = ["devlend", *args], out, err
        try:
            _cli.main()
        except SystemExit as e:
            if isinstance(e.code, str):
                err.write(e.code + "\n")
                code = 1
            else:
                code = e.code or 0
        except Exception:  # a crash: what the interpreter would print, status 1
            err.write(traceback.format_exc())
            code = 1
    finally:
        sys.argv, sys.stdout, sys.stderr = saved[0], saved[1], saved[2]
        os.chdir(saved[3])
        os.environ.clear()
        os.environ.update(saved[4])
    res = subprocess.CompletedProcess(["devlend", *args], code, _text(out), _text(err))
    if check:
        res.check_returncode()
    return res
