"""The README's walk of one borrowed GPU's host-to-device copy ("One borrowed GPU's
host-to-device copy, file by file", issue 31) must stay true to the code: every row's file exists,
every function, type or field a row names occurs in that row's file (defined or called there; or in
a file the row names beside it, or in the crate a `devlend_x::` path names), and the walk is at most eight files, the number the issue asks a reader to open."""

import os
import re

from conftest import ROOT

README = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
HEADING = "### One borrowed GPU's host-to-device copy, file by file"
MAX_FILES = 8


def _walk() -> list[tuple[str, str]]:
    """(file, what happens there) for each row of the walk's table, in order."""
    section = README.split(HEADING, 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|\s*`([^`]+)`\s*\|(.*)\|\s*$", line)
        if m:
            rows.append((m.group(2), m.group(3)))
    return rows


def _words(path: str) -> set[str]:
    """The identifiers a Rust file (or every file under a folder) contains."""
    full = os.path.join(ROOT, path)
    paths = [full] if os.path.isfile(full) else [os.path.join(d, f) for d, _, fs in os.walk(full) for f in fs if f.endswith(".rs")]
    return set().union(*(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", open(q, encoding="utf-8").read()) for q in paths))


def _named(cell: str) -> list[tuple[str | None, str]]:
    """The code names a row's text gives (`Type::method`, `method`, `f(args)`), each with the
    crate a `devlend_x::` path names (None: the row's own file); not file names."""
    names = []
    for tok in re.findall(r"`([^`]+)`", cell):
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)(?:\(.*\))?", tok)
        if m:
            parts = m.group(1).split("::")
            crate = parts[0].replace("_", "-") if parts[0].startswith("devlend_") and len(parts) > 1 else None
            names.append((crate, parts[-1]))
    return names


def test_the_walk_has_rows():
    assert len(_walk()) >= 5, "README: the walk's table was not found or lost its rows"


def test_every_file_of_the_walk_exists():
    for path, _ in _walk():
        assert os.path.isfile(os.path.join(ROOT, path)), f"README walk: {path} is not a file"


def test_every_name_of_the_walk_occurs_in_its_row():
    rows = _walk()
    files = [p for p, _ in rows]
    for path, cell in rows:
        # A row may point at a name in another row's file ("in `fabric.rs`, row 7").
        here = _words(path).union(*(_words(p) for p in files if os.path.basename(p) in cell and p != path))
        missing = [n for c, n in _named(cell) if n not in (_words(f"crates/{c}/src") if c else here)]
        assert not missing, f"README walk: {path} does not contain {missing}"


def test_the_walk_is_at_most_eight_files():
    files = {p for p, _ in _walk()}
    assert len(files) <= MAX_FILES, f"README walk: {len(files)} files, issue 31 asks for at most {MAX_FILES}"
