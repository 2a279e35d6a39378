"""How a result was made, carried inside the files devlend writes and printed back by
``devlend provenance FILE``: devlend's version, the effective hardware parameters (a hash of
params/hardware.toml as built in, and every ``--set``), the content hashes of the topology and
scenario files, and the seed.

Where it goes: a CSV ends with one ``# devlend provenance: {json}`` line (CSV readers skip it with
``comment='#'``); a JSON document gets a top-level ``"devlend provenance"`` object; each line of a
JSON-lines store (a sweep's) one of that name; a PNG a text chunk of that name; a Graphviz DOT file
a ``// devlend provenance: {json}`` comment line after the graph's opening line; an SVG an XML comment of that form after its
XML declaration; a .dlt trace a ``"devlend provenance"`` object in its header's meta JSON. Every
writer goes through :func:`write_csv`, :func:`stamped` (a JSON document), :func:`stamp_png`,
:func:`stamp_dot`, :func:`stamp_svg` or :func:`stamp_dlt`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
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


def command_line() -> str:
    """The devlend command this process runs, as typed (for records made by the CLI)."""
    return "devlend " + shlex.join(sys.argv[1:])


def record(*, sets: Optional[list[str]] = None, topology: Optional[str] = None, scenario: Optional[str] = None,
           seed=None, command: Optional[str] = None, effective: Optional[dict] = None) -> dict:
    """The provenance of a run: `topology` and `scenario` are file paths (hashed by content);
    `effective` the parameters the run used where it reports them (a Scenario's MPS, MRRS, ...)."""
    from . import __version__, _core
    rec = {"devlend_version": __version__, "command": command,
           "parameters": _sha(_core.params_toml().encode()), "set": list(sets or []),
           "topology": os.path.basename(topology) if topology else None, "topology_hash": file_hash(topology),
           "scenario": os.path.basename(scenario) if scenario else None, "scenario_hash": file_hash(scenario),
           "seed": seed}
    if effective:
        rec["effective"] = {k: v for k, v in effective.items() if k != "devlend_version"}
    return rec


def overrides(topology) -> list[str]:
    """A Topology's overrides (``with_params``: every ``--set`` and a scenario's own ``params``) as KEY=VALUE."""
    out = []
    for origin, key, value in getattr(topology, "_sets", {}).values():
        where = origin if isinstance(origin, str) else ":".join(map(str, origin[:2])) if origin else ""
        out.append(f"{key}={value}" + ("" if where == "--set" else f" ({where})"))
    return out


def write_csv(path, table, rec: dict, header: Optional[str] = None) -> None:
    """A CSV (`table`: CSV text or a DataFrame) ending with the provenance line; `header`, a
    commented first line, where the writer has one."""
    with open(path, "w", encoding="utf-8", newline="") as fh:
        if header:
            fh.write(header.rstrip("\n") + "\n")
        if isinstance(table, str):
            fh.write(table)
        else:
            table.to_csv(fh, index=False)
        fh.write(csv_line(rec))


def stamped(doc: dict, rec: dict) -> dict:
    """A JSON document with the record as its top-level ``"devlend provenance"`` object."""
    return {**doc, KEY: rec}


def csv_line(rec: dict) -> str:
    return f"# {KEY}: {json.dumps(rec, sort_keys=True, default=str)}\n"


def stamp_png(path: str, rec: dict) -> None:
    """Add the record to a PNG as a text chunk (the picture is unchanged)."""
    from PIL import Image, PngImagePlugin
    with Image.open(path) as im:
        info = PngImagePlugin.PngInfo()
        info.add_text(KEY, json.dumps(rec, sort_keys=True))
        im.load()
        im.save(path, pnginfo=info)


def stamp_dot(dot: str, rec: dict) -> str:
    """DOT text with the record as a DOT comment line (Graphviz ignores it) after the graph's
    opening line, so that the file still starts with its graph."""
    head, nl, body = dot.partition("\n")
    return f"{head}{nl}// {KEY}: {json.dumps(rec, sort_keys=True, default=str)}\n{body}"


def _svg_comment(rec: dict) -> str:
    # An XML comment may not hold "--" (a command line's "--set" would): JSON only has "--" inside
    # strings, where "\u002d" reads back as "-".
    return f"<!-- {KEY}: " + json.dumps(rec, sort_keys=True, default=str).replace("--", "-\\u002d") + " -->"


def stamp_svg(path: str, rec: dict) -> None:
    """Add the record to an SVG file as an XML comment after its XML declaration (or first)."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    at = text.index("?>") + 2 if text.startswith("<?xml") else 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text[:at] + ("\n" if at else "") + _svg_comment(rec) + ("" if at else "\n") + text[at:])


_DLT_MAGIC = b"\x89DLT\r\n\x1a\n"


def _dlt_header(fh) -> tuple[bytes, dict, int]:
    """A .dlt trace's fixed header and page dictionary (bytes), its meta (JSON) and the offset of its body."""
    head = fh.read(24)
    if len(head) < 24 or head[:8] != _DLT_MAGIC:
        raise DevlendError(f"{fh.name}: not a devlend trace (.dlt)")
    pages, meta_len = int.from_bytes(head[16:20], "little"), int.from_bytes(head[20:24], "little")
    head += fh.read(16 * pages)
    meta = fh.read(meta_len)
    doc = _json_or_none(meta.decode("utf-8", "replace")) if meta else {}
    return head, doc if isinstance(doc, dict) else {}, 24 + 16 * pages + meta_len


def stamp_dlt(path: str, rec: dict) -> None:
    """Put the record into a .dlt trace's header meta (the body, and the hash that covers only the
    body, unchanged); the trace is copied once through a file beside it."""
    import shutil
    with open(path, "rb") as fh:
        head, meta, body = _dlt_header(fh)
        meta_bytes = json.dumps({**meta, KEY: rec}, sort_keys=True, default=str).encode()
        tmp = path + ".provenance.tmp"
        try:
            with open(tmp, "wb") as out:
                out.write(head[:20] + len(meta_bytes).to_bytes(4, "little") + head[24:] + meta_bytes)
                fh.seek(body)
                shutil.copyfileobj(fh, out, 1 << 20)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def read(path: str) -> dict:
    """The record a devlend CSV, JSON, PNG, DOT, SVG or .dlt trace carries; DevlendError when it
    carries none."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head == _DLT_MAGIC:
        with open(path, "rb") as fh:
            rec = _dlt_header(fh)[1].get(KEY)
        if isinstance(rec, dict):
            return rec
    elif head.startswith(b"\x89PNG"):
        from PIL import Image
        with Image.open(path) as im:
            text = im.text.get(KEY) if hasattr(im, "text") else None
        if text:
            return json.loads(text)
    else:
        with open(path, encoding="utf-8", errors="replace") as fh:
            body = fh.read()
        if body.lstrip().startswith("{"):
            doc = _json_or_none(body)
            if isinstance(doc, dict) and KEY in doc:
                return doc[KEY]
            first = _json_or_none(body.lstrip().split("\n", 1)[0])  # a JSON-lines store: its first line
            if isinstance(first, dict) and KEY in first:
                return first[KEY]
        for line in body.splitlines():
            for start, end in ((f"# {KEY}: ", ""), (f"// {KEY}: ", ""), (f"<!-- {KEY}: ", " -->")):
                if line.startswith(start) and line.endswith(end):
                    return json.loads(line[len(start):len(line) - len(end)])
    raise DevlendError(f"{path}: carries no devlend provenance (written by an older devlend, or not by devlend)")


def _json_or_none(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def lines(rec: dict) -> list[str]:
    """The record as `key: value` lines (the effective parameters one a line, indented)."""
    out = []
    for k, v in rec.items():
        if k == "seed" and v is None:
            out.append("seed: none given (fixed seeds: the run is deterministic)")
        elif isinstance(v, dict):
            out.append(f"{k}:")
            out.extend(f"  {kk}: {vv}" for kk, vv in v.items())
        elif v not in (None, []):
            out.append(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}")
    return out
