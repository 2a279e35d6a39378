"""Coverage-guided fuzzing of topology loading (YAML parse, schema validation, and the Rust core's
build, enumeration and setup) with atheris.

    pip install atheris
    python fuzz/fuzz_topology.py -max_total_time=60        # seeds itself from the shipped topologies
    python fuzz/fuzz_topology.py crash-1234abcd            # replay one input (works without atheris)

The property: `devlend.loads(text).build()` returns a fabric, or raises a TopologyError whose
message starts with the file name. Anything else (another exception, a Rust panic) is a crash.
"""

import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = sorted(glob.glob(os.path.join(HERE, "..", "python", "devlend", "topologies", "*.yaml")))


def test_one_input(data: bytes) -> None:
    import devlend
    from devlend.errors import TopologyError
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        devlend.loads(text, "fuzz.yaml").build()
    except TopologyError as e:
        if not str(e).startswith("fuzz.yaml"):
            raise AssertionError(f"error does not name the file: {e}") from None


def main() -> None:
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
        sys.exit("fuzz_topology.py needs atheris: pip install atheris (replaying an input does not)")
    with atheris.instrument_imports():
        import devlend  # noqa: F401
        import devlend.topology  # noqa: F401
    corpus = [a for a in args if not a.startswith("-") and os.path.isdir(a)]
    if not corpus:
        import tempfile
        seed_dir = tempfile.mkdtemp(prefix="devlend-topo-seeds-")
        for i, s in enumerate(SEEDS):
            with open(s, "rb") as src, open(os.path.join(seed_dir, f"seed{i}"), "wb") as dst:
                dst.write(src.read())
        args = args + [seed_dir]
    atheris.Setup([sys.argv[0]] + args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
