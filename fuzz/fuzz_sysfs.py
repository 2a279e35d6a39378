"""Coverage-guided fuzzing of the sysfs importer (`devlend import-sysfs`, `devlend.lspci.parse_sysfs`)
with atheris.

    pip install atheris
    python fuzz/fuzz_sysfs.py -max_total_time=60          # seeds itself (see below)
    python fuzz/fuzz_sysfs.py crash-1234abcd              # replay one input (works without atheris)

A sysfs capture is a directory tree, not one text, so an input is a list of edits to the fixture
tree (tests/fixtures/sysfs, 111 attribute files): records separated by b"\\n\\0\\n", each one byte
choosing a file (index into the sorted file list, modulo its length), one byte choosing what to do
(even: replace the file's contents with the rest of the record; odd: delete the file) and the
rest. The seeds are the unchanged tree and one record per attribute kind with its own contents.
The property: `parse_sysfs` returns a description that validates against the schema and builds
(or fails to build with a TopologyError), or raises a TopologyError naming a file. Anything else
(another exception, a Rust panic, a hang on a special file) is a crash.
"""

import atexit
import glob
import os
import shutil
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "tests", "fixtures", "sysfs")
FILES = sorted(os.path.relpath(os.path.join(d, f), FIXTURE) for d, _, fs in os.walk(FIXTURE) for f in fs)
SEP = b"\n\0\n"


def _original(rel: str) -> bytes:
    with open(os.path.join(FIXTURE, rel), "rb") as fh:
        return fh.read()


ORIGINAL = {rel: _original(rel) for rel in FILES}  # to undo an input's edits without copying files


def _seeds() -> list:
    out = tempfile.mkdtemp(prefix="devlend-fuzz-sysfs-seedfiles-")
    seeds = []
    for i, rel in enumerate([None] + FILES[:: max(1, len(FILES) // 12)]):
        path = os.path.join(out, f"s{i}")
        with open(path, "wb") as fh:
            if rel is not None:
                with open(os.path.join(FIXTURE, rel), "rb") as src:
                    fh.write(bytes([FILES.index(rel) % 256, 0]) + src.read())
        seeds.append(path)
    return seeds


_work = None  # a copy of the fixture tree, made once; each input's edits are undone after it


def _tree() -> str:
    global _work
    if _work is None:
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()  # tmpfs: 111 files per input
        _sweep(shm)
        _work = os.path.join(tempfile.mkdtemp(prefix=f"devlend-fuzz-sysfs-{os.getpid()}-", dir=shm), "devices")
        shutil.copytree(FIXTURE, _work)
        atexit.register(shutil.rmtree, os.path.dirname(_work), True)
    return _work


def _sweep(where: str) -> None:
    """Remove the copies of fuzzers that are gone (libFuzzer ends the process without `atexit`)."""
    for d in glob.glob(os.path.join(where, "devlend-fuzz-sysfs-*-*")):
        pid = os.path.basename(d).split("-")[3]
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (ValueError, PermissionError):
            pass


def _apply(root: str, data: bytes) -> set:
    touched = set()
    for rec in data.split(SEP):
        if len(rec) < 2:
            continue
        rel = FILES[rec[0] % len(FILES)]
        touched.add(rel)
        path = os.path.join(root, rel)
        if rec[1] % 2:
            if os.path.exists(path):
                os.remove(path)
        else:
            with open(path, "wb") as fh:
                fh.write(rec[2:])
    return touched


def _restore(root: str, touched: set) -> None:
    for rel in touched:
        with open(os.path.join(root, rel), "wb") as fh:
            fh.write(ORIGINAL[rel])


def test_one_input(data: bytes) -> None:
    from devlend.errors import TopologyError
    from devlend.lspci import parse_sysfs
    root = _tree()
    touched = _apply(root, data)
    try:
        try:
            result = parse_sysfs(root, ram=32 << 30)
        except TopologyError as e:
            if not e.file:
                raise AssertionError(f"error names no file: {e}") from None
            return
        try:
            result.build()
        except TopologyError:
            pass
    finally:
        _restore(root, touched)


if __name__ == "__main__":
    from _harness import main

    main(test_one_input, _seeds(), "fuzz_sysfs.py", ("devlend", "devlend.lspci", "devlend.lspci.sysfs"))
