"""The command line every Python fuzz target shares: replay the files named (works without atheris),
or fuzz with atheris from the corpus directories named, seeding a fresh one from `seeds` when none is."""

import importlib
import os
import shutil
import sys
import tempfile


def main(test_one_input, seeds: list, target: str, modules: tuple) -> None:
    args = sys.argv[1:]
    replay = [a for a in args if not a.startswith("-") and os.path.isfile(a)]
    if replay:
        for path in replay:
            with open(path, "rb") as fh:
                test_one_input(fh.read())
        print(f"replayed {len(replay)} input(s) without a crash")
        return
    try:
        import atheris
    except ImportError:
        sys.exit(f"{target} needs atheris: pip install atheris (replaying an input does not)")
    with atheris.instrument_imports(include=["devlend"]):  # devlend only: PyYAML and pydantic are not ours to fuzz, and instrumenting them halves the rate
        for m in modules:
            importlib.import_module(m)
    if not any(not a.startswith("-") and os.path.isdir(a) for a in args):
        seed_dir = tempfile.mkdtemp(prefix=f"devlend-{target.removesuffix('.py')}-seeds-")
        for i, s in enumerate(seeds):
            shutil.copyfile(s, os.path.join(seed_dir, f"seed{i}"))
        args = args + [seed_dir]
    atheris.Setup([sys.argv[0]] + args, test_one_input)
    atheris.Fuzz()


def text_names_file(data: bytes, load, prefix: str) -> None:
    """The property the text targets share: `load(text)` succeeds or raises a TopologyError whose
    message starts with `prefix` (the file, or the directory it sits in); non-UTF-8 input is
    skipped (the loaders take text)."""
    from devlend.errors import TopologyError
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        load(text)
    except TopologyError as e:
        if not str(e).startswith(prefix):
            raise AssertionError(f"error does not name a file: {e}") from None
