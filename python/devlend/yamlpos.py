"""YAML loading that remembers where every value came from.

PyYAML's composer gives each node a start mark; we build plain Python data and, beside it, a map
from each value's path (a tuple of keys and indices) to its (line, column), so that errors found
later (by pydantic or by the Rust core) can name the file, line and field. Duplicate keys, which
PyYAML would silently overwrite, are errors here.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from .errors import TopologyError

Path = tuple
MAX_NODES = 200_000  # an alias bomb expands past this; no real topology comes close


def load_with_marks(text: str, file: str) -> tuple[Any, dict[Path, tuple[int, int]]]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise TopologyError(f"malformed YAML: {e.problem or e.context}", file=file,
                            line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None) from None
    except yaml.YAMLError as e:
        raise TopologyError(f"malformed YAML: {e}", file=file) from None
    except (ValueError, RecursionError) as e:  # e.g. control characters PyYAML rejects late
        raise TopologyError(f"malformed YAML: {e}", file=file) from None
    if root is None:
        raise TopologyError("the file is empty: expected a topology mapping with 'name' and 'hosts'", file=file, line=1)
    marks: dict[Path, tuple[int, int]] = {}
    constructor = SafeConstructor()
    count = [0]

    def walk(node: yaml.Node, path: Path, depth: int) -> Any:
        count[0] += 1
        if count[0] > MAX_NODES or depth > 64:
            raise TopologyError("the document is too large or too deeply nested to be a topology",
                                file=file, line=node.start_mark.line + 1)
        marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for k, v in node.value:
                if not isinstance(k, yaml.ScalarNode):
                    raise TopologyError("mapping keys must be plain names", file=file, line=k.start_mark.line + 1,
                                        column=k.start_mark.column + 1)
                key = k.value
                if key in out:
                    raise TopologyError(f"duplicate key '{key}'", file=file, line=k.start_mark.line + 1,
                                        column=k.start_mark.column + 1, field=dotted(path + (key,)))
                out[key] = walk(v, path + (key,), depth + 1)
                marks[path + (key,)] = (k.start_mark.line + 1, k.start_mark.column + 1)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [walk(v, path + (i,), depth + 1) for i, v in enumerate(node.value)]
        try:
            return constructor.construct_object(node, deep=True)
        except Exception as e:  # a malformed timestamp, binary, etc.
            raise TopologyError(f"cannot read value: {e}", file=file, line=node.start_mark.line + 1,
                                column=node.start_mark.column + 1, field=dotted(path)) from None

    return walk(root, (), 0), marks


def dotted(path: Path) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


def locate(marks: dict[Path, tuple[int, int]], path: Path) -> tuple[int | None, int | None]:
    """The line and column of `path`, or of its nearest ancestor that has one."""
    p = tuple(path)
    while True:
        if p in marks:
            return marks[p]
        if not p:
            return None, None
        p = p[:-1]


def pointer_to_path(pointer: str) -> Path:
    """'/devices/3/bars/0' -> ('devices', 3, 'bars', 0)."""
    parts = [p for p in pointer.split("/") if p != ""]
    return tuple(int(p) if p.isdigit() else p for p in parts)
