"""How a result was made, carried inside the files devlend writes and printed back by
``devlend provenance FILE``: devlend's version, the effective hardware parameters (a hash of
params/hardware.toml as built in, and every ``--set``), the content hashes of the topology and
scenario files, and the seed.

Where it goes: a CSV ends with one ``# devlend provenance: {json}`` line (CSV readers skip it with
``comment='#'``); a JSON document gets a top-level ``"devlend provenance"`` object; a PNG a text
chunk of that name.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Optional

from .errors import DevlendError

KEY = "devlend provenance"


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def file_hash(path: Optional[str]) -> Optional[str]:
    if not path:
        return None
    with open(path, "rb") as fh:
        return _sha(fh.read())


def record(*, sets: Optional[list[str]] = None, topology: Optional[str] = None, scenario: Optional[str] = None,
           seed=None, command: Optional[str] = None) -> dict:
    """The provenance of a run: `topology` and `scenario` are file paths (hashed by content)."""
    from . import __version__, _core
    return {"devlend_version": __version__, "command": command,
            "parameters": _sha(_core.params_toml().encode()), "set": list(sets or []),
            "topology": os.path.basename(topology) if topology else None, "topology_hash": file_hash(topology),
            "scenario": os.path.basename(scenario) if scenario else None, "scenario_hash": file_hash(scenario),
            "seed": seed}


def csv_line(rec: dict) -> str:
    return f"# {KEY}: {json.dumps(rec, sort_keys=True)}\n"


def stamp_png(path: str, rec: dict) -> None:
    """Add the record to a PNG as a text chunk (the picture is unchanged)."""
    from PIL import Image, PngImagePlugin
    with Image.open(path) as im:
        info = PngImagePlugin.PngInfo()
        info.add_text(KEY, json.dumps(rec, sort_keys=True))
        im.load()
        im.save(path, pnginfo=info)


def read(path: str) -> dict:
    """The record a devlend CSV, JSON or PNG carries; DevlendError when it carries none."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head.startswith(b"\x89PNG"):
        from PIL import Image
        with Image.open(path) as im:
            text = im.text.get(KEY) if hasattr(im, "text") else None
        if text:
            return json.loads(text)
    else:
        with open(path, encoding="utf-8", errors="replace") as fh:
            body = fh.read()
        if body.lstrip().startswith("{"):
            try:
                doc = json.loads(body)
            except ValueError:
                doc = {}
            if isinstance(doc, dict) and KEY in doc:
                return doc[KEY]
        for line in body.splitlines():
            if line.startswith(f"# {KEY}: "):
                return json.loads(line[len(KEY) + 4:])
    raise DevlendError(f"{path}: carries no devlend provenance (written by an older devlend, or not by devlend)")


def lines(rec: dict) -> list[str]:
    return [f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in rec.items() if v not in (None, [])]
