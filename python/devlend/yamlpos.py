"""YAML loading that remembers where every value came from.

Each YAML node has a start mark; we build plain Python data and, beside it, a map from each
value's path (a tuple of keys and indices) to its (line, column), so that errors found later (by
pydantic or by the Rust core) can name the file, line and field. Duplicate keys, which PyYAML would
silently overwrite, are errors here.

The nodes are composed here, iteratively, from the event stream of libyaml's parser (PyYAML's C
binding, `yaml.CSafeLoader`; PyYAML's pure-Python parser when PyYAML was built without libyaml).
That is PyYAML's own `Composer` (one document, anchors and aliases, tags resolved the safe loader's
way) without its recursion: PyYAML's C composer recurses in C per nesting level and crashes the
interpreter on deeply nested input (`[[[[...` 100,000 deep), and its Python parser is ~5x slower.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import SafeConstructor

from .errors import TopologyError

Path = tuple
MAX_NODES = 200_000  # an alias bomb expands past this; no real topology comes close
MAX_DEPTH = 64  # nesting deeper than any topology or scenario; also ends recursive aliases
_LOADER = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
_COLLECTIONS = {yaml.SequenceStartEvent: yaml.SequenceNode, yaml.MappingStartEvent: yaml.MappingNode}
_NO_KEY = object()
_TOO_DEEP = "the document is too large or too deeply nested to be a topology"
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"  # libyaml's scanner limit (PyYAML 6.0.4's bundled libyaml)


def compose(text: str, file: str) -> yaml.Node | None:
    """The one document's root node (None for an empty stream), as `yaml.compose(text,
    Loader=yaml.SafeLoader)` gives it, composed without recursion."""
    loader = _LOADER(text)
    try:
        loader.get_event()  # stream start
        root = None
        if not loader.check_event(yaml.StreamEndEvent):
            loader.get_event()  # document start
            root = _compose_node(loader, file)
            loader.get_event()  # document end
        if not loader.check_event(yaml.StreamEndEvent):
            event = loader.get_event()
            raise ComposerError("expected a single document in the stream", root.start_mark,
                                "but found another document", event.start_mark)
        return root
    finally:
        loader.dispose()


def _compose_node(loader, file: str) -> yaml.Node:
    anchors: dict[str, yaml.Node] = {}
    stack: list[list] = []  # open collections: [node, pending mapping key or _NO_KEY]
    while True:
        event = loader.get_event()
        kind = type(event)
        if kind is yaml.AliasEvent:
            node = anchors.get(event.anchor)
            if node is None:
                raise ComposerError(None, None, f"found undefined alias {event.anchor!r}", event.start_mark)
        elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
            node = stack.pop()[0]
            node.end_mark = event.end_mark
        else:
            node = _new_node(loader, event, kind, anchors)
            if kind is not yaml.ScalarEvent:
                if len(stack) >= MAX_DEPTH:
                    raise TopologyError(_TOO_DEEP, file=file, line=event.start_mark.line + 1)
                stack.append([node, _NO_KEY])
                continue
        if not stack:
            return node
        top = stack[-1]
        parent = top[0]
        if type(parent) is yaml.SequenceNode:
            parent.value.append(node)
        elif top[1] is _NO_KEY:
            top[1] = node
        else:
            parent.value.append((top[1], node))
            top[1] = _NO_KEY


def _new_node(loader, event, kind, anchors: dict) -> yaml.Node:
    anchor = event.anchor
    if anchor is not None and anchor in anchors:
        raise ComposerError(f"found duplicate anchor {anchor!r}; first occurrence", anchors[anchor].start_mark,
                            "second occurrence", event.start_mark)
    tag = event.tag
    if kind is yaml.ScalarEvent:
        if tag is None or tag == "!":
            tag = loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
    else:
        node_class = _COLLECTIONS[kind]
        if tag is None or tag == "!":
            tag = loader.resolve(node_class, None, event.implicit)
        node = node_class(tag, [], event.start_mark, None, flow_style=event.flow_style)
    if anchor is not None:
        anchors[anchor] = node
    return node


def load_with_marks(text: str, file: str) -> tuple[Any, dict[Path, tuple[int, int]]]:
    try:
        root = compose(text, file)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        if e.problem == _LIBYAML_TOO_DEEP:  # PyYAML 6.0.4's libyaml stops first: same error as ours
            raise TopologyError(_TOO_DEEP, file=file, line=mark.line + 1 if mark else None) from None
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
        if count[0] > MAX_NODES or depth > MAX_DEPTH:
            raise TopologyError(_TOO_DEEP, file=file, line=node.start_mark.line + 1)
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


def document_path(loc: tuple, tags) -> Path:
    """A pydantic error's `loc` as a path in the document: without pydantic's own validator names,
    and without the tag a discriminated union puts after a list item's index (a name in `tags`;
    elsewhere such a name is the user's key and stays)."""
    loc = tuple(p for p in loc if not (isinstance(p, str) and p.startswith(("function-", "tagged-union"))))
    return tuple(p for i, p in enumerate(loc) if not (p in tags and i > 0 and isinstance(loc[i - 1], int)))


def pointer_to_path(pointer: str) -> Path:
    """'/devices/3/bars/0' -> ('devices', 3, 'bars', 0)."""
    parts = [p for p in pointer.split("/") if p != ""]
    return tuple(int(p) if p.isdigit() else p for p in parts)
