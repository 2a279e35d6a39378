"""Coverage-guided fuzzing of devlend's lspci importer with atheris (libFuzzer for CPython).

    pip install atheris
    python fuzz/fuzz_lspci.py -max_total_time=60              # seeds itself from the test fixtures
    python fuzz/fuzz_lspci.py -max_total_time=600 my-corpus/  # keep and grow a corpus
    python fuzz/fuzz_lspci.py crash-1234abcd                  # replay one input (works without atheris)

One fuzz input is the ``lspci -tvnn`` capture and the ``lspci -vvv`` capture joined by SEP; an
input without SEP is taken as the verbose capture beside the fixture tree. The property: the
importer returns a result whose description validates, renders to YAML that loads back, and
builds or fails to build with a TopologyError; or it raises a TopologyError that names the file
and a line. Anything else (another exception, a Rust panic) is a crash.
"""

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "lspci")
SEP = b"\n\x00\x00\n"

lspci = None  # devlend.lspci, imported (instrumented when fuzzing) in main()


def _fixture(name: str) -> bytes:
    with open(os.path.join(FIXTURES, name), "rb") as fh:
        return fh.read()


def split(data: bytes) -> tuple:
    i = data.find(SEP)
    if i < 0:
        return _fixture("xeon-gpu-nvme.tree.txt"), data
    return data[:i], data[i + len(SEP):]


def test_one_input(data: bytes) -> None:
    from devlend.errors import TopologyError
    from devlend.topology import from_dict, loads

    tree, vvv = split(data)
    try:
        result = lspci.parse_lspci(lspci.decode_text(tree, "tree.txt"), lspci.decode_text(vvv, "vvv.txt"),
                                   tree_file="tree.txt", verbose_file="vvv.txt")
    except TopologyError as e:
        if e.file not in ("tree.txt", "vvv.txt") or not e.line or e.line < 1:
            raise AssertionError(f"a TopologyError without file and line: {e}") from None
        return
    from_dict(result.description)
    loads(result.to_yaml(), "out.yaml")
    try:
        result.build()
    except TopologyError:
        pass


def _seed_corpus() -> str:
    d = tempfile.mkdtemp(prefix="fuzz-lspci-corpus-")
    tree, vvv = _fixture("xeon-gpu-nvme.tree.txt"), _fixture("xeon-gpu-nvme.vvv.txt")
    seeds = {"full": tree + SEP + vvv,
             "small": tree.split(b"\n", 1)[0] + b"\n" + SEP + vvv.split(b"\n\n", 1)[0] + b"\n"}
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(data)
    print(f"fuzz_lspci: seed corpus (and new inputs) in {d}", file=sys.stderr)
    return d


def main(argv: list) -> None:
    global lspci
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    files = [a for a in argv[1:] if not a.startswith("-")]
    try:
        import atheris
    except ImportError:
        if files and all(os.path.isfile(f) for f in files):
            from devlend import lspci as module
            lspci = module
            for f in files:
                with open(f, "rb") as fh:
                    test_one_input(fh.read())
                print(f"{f}: ok")
            return
        sys.exit("fuzz_lspci.py needs atheris to fuzz: pip install atheris (CPython on Linux or macOS). "
                 "Without it, it can only replay saved inputs: python fuzz/fuzz_lspci.py FILE...")
    with atheris.instrument_imports(include=["devlend"]):
        from devlend import lspci as module
    lspci = module
    if not any(os.path.isdir(f) for f in files) and not (files and all(os.path.isfile(f) for f in files)):
        argv = argv + [_seed_corpus()]
    if not any(a.startswith("-max_len=") for a in argv):
        argv = argv + ["-max_len=200000"]
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
