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

from _harness import text_names_file

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = sorted(glob.glob(os.path.join(HERE, "..", "python", "devlend", "topologies", "*.yaml")))


def test_one_input(data: bytes) -> None:
    import devlend
    text_names_file(data, lambda text: devlend.loads(text, "fuzz.yaml").build(), "fuzz.yaml")

if __name__ == "__main__":
    from _harness import main

    main(test_one_input, SEEDS, "fuzz_topology.py", ("devlend", "devlend.topology"))
