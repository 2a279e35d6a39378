"""The pool's state between ``devlend pool`` calls, as smartio_tool users see the lending daemon's:
what one call connected, added, borrowed or faulted, the next one sees.

The state file holds, per topology file (by its absolute path), the topology's content hash and
the verbs that were carried out on it, in order. A call opens the topology, replays those verbs
(the model is deterministic, so the pool, its lends and what the fabric has programmed are as the
last call left them), carries out its own verbs and appends those that succeeded. A topology
whose content changed since is refused with the state file named (``--reset`` starts over).

Default file: ``$XDG_STATE_HOME/devlend/pool.json`` (``~/.local/state/devlend/pool.json`` when
XDG_STATE_HOME is unset), the XDG Base Directory place for state that outlives a process but is
no user document; ``--state FILE`` or ``DEVLEND_POOL_STATE`` name another.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from .errors import DevlendError

VERSION = 1


def default_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "devlend" / "pool.json"


def _digest(topology: Path) -> str:
    return hashlib.sha256(topology.read_bytes()).hexdigest()


class PoolState:
    """The verbs carried out so far on one topology, kept in a state file."""

    def __init__(self, path: "Optional[os.PathLike]", topology: "os.PathLike", reset: bool = False):
        """`reset`: forget what was kept for `topology` (its verbs, and the content it had)."""
        self.path = Path(path) if path is not None else default_path()
        self.topology = Path(topology).resolve()
        self.key = str(self.topology)
        self.all = self._read()
        self.digest = _digest(self.topology)
        mine = None if reset else self.all.get(self.key)
        if mine is not None and mine.get("sha256") != self.digest:
            raise DevlendError(f"{self.path}: the pool's state was kept for {self.topology} as it was before it changed; "
                               "run with --reset to start the pool over")
        self.verbs: list[list[str]] = [list(v) for v in (mine or {}).get("verbs", [])]
        # Set once the kept verbs have been carried out: only then may the state be written back.
        self.loaded = False

    def _read(self) -> dict:
        p = self.path
        if not p.exists():
            return {}
        if not p.is_file():
            raise DevlendError(f"{p}: the pool's state file is not a regular file")
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DevlendError(f"{p}: not a devlend pool state file ({e}); remove it or name another with --state") from None
        if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("pools"), dict):
            raise DevlendError(f"{p}: not a devlend pool state file (expected version {VERSION} with 'pools'); "
                               "remove it or name another with --state")
        return data["pools"]

    def replay(self, pool, apply) -> None:
        """Carry out the kept verbs on a freshly opened `pool` (`apply(pool, verb)`)."""
        for v in self.verbs:
            try:
                apply(pool, v)
            except DevlendError as e:
                raise DevlendError(f"{self.path}: replaying 'pool {' '.join(v)}' for {self.topology} failed ({e}); "
                                   "run with --reset to start the pool over") from None
        self.loaded = True

    def record(self, verb: list[str]) -> None:
        if verb[0] not in ("list", "show"):
            self.verbs.append(list(verb))

    def save(self) -> None:
        self.all[self.key] = {"sha256": self.digest, "verbs": self.verbs}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"version": VERSION, "pools": self.all}, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)
