"""Coverage-guided fuzzing of scenario files (YAML parse with line marks, validation of the
timeline's actions, fault actions included, the topology they name, time order) with atheris.

    pip install atheris
    python fuzz/fuzz_scenario.py -max_total_time=60        # seeds itself from the shipped scenarios
    python fuzz/fuzz_scenario.py crash-1234abcd            # replay one input (works without atheris)

The input is read as a scenario file that sits beside the shipped ones (so their relative topology
paths resolve). The property: `scenario_file.loads(text, path)` returns a validated scenario, or
raises a TopologyError (ScenarioFileError is one) whose message starts with a file name. Anything
else (another exception, a Rust panic) is a crash. Running the scenario is not fuzzed: one run
takes milliseconds to seconds, and what it can refuse is checked by tests/test_scenario_files.py.
"""

import glob
import os

from _harness import text_names_file

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "..", "python", "devlend", "scenarios")
SEEDS = sorted(glob.glob(os.path.join(SCENARIOS, "*.yaml")))
FILE = os.path.join(SCENARIOS, "fuzz.yaml")


def test_one_input(data: bytes) -> None:
    from devlend import scenario_file
    text_names_file(data, lambda text: scenario_file.loads(text, FILE), os.path.dirname(FILE))

if __name__ == "__main__":
    from _harness import main

    main(test_one_input, SEEDS, "fuzz_scenario.py", ("devlend", "devlend.scenario_file"))
