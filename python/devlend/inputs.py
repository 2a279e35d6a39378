"""Input files are regular files: a FIFO, a device, a socket or a directory given where devlend
reads a file is refused by what it is, before it is opened (opening a FIFO to read waits for a
writer; a device may never end)."""

from __future__ import annotations

import os
import stat
from typing import Optional


def not_regular(path: "str | os.PathLike") -> Optional[str]:
    """What `path` is when it is no regular file ("a FIFO", ...); None for a regular file, or
    when it cannot be looked at (opening it then reports why)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"
