"""The Python fuzz targets (fuzz/) replay inputs without atheris: each target's property holds on its
seeds and on a few hand-made inputs, so the targets cannot rot between fuzzing runs."""

import importlib.util
import os
import sys

import pytest

FUZZ = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz")


def _target(name):
    sys.path.insert(0, FUZZ)
    try:
        spec = importlib.util.spec_from_file_location(name, os.path.join(FUZZ, f"{name}.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(FUZZ)


def test_sysfs_target_replays_edits_of_the_fixture_tree():
    t = _target("fuzz_sysfs")
    n = len(t.FILES)
    config = t.FILES.index(next(f for f in t.FILES if f.endswith("config")))
    resource = t.FILES.index(next(f for f in t.FILES if f.endswith("resource")))
    inputs = [b"",                                        # the fixture as it is
              bytes([config % 256, 1]),                   # a config file deleted
              bytes([config % 256, 0]) + b"\xff" * 70,    # a config file of garbage
              bytes([resource % 256, 0]) + b"0x1 0x0 0x200\n" * 3,  # a BAR ending before it starts
              t.SEP.join(bytes([i % 256, 0]) + b"zz\n" for i in range(n))]  # every attribute garbage
    for data in inputs:
        t.test_one_input(data)


@pytest.mark.parametrize("name", ["fuzz_topology", "fuzz_scenario", "fuzz_lspci"])
def test_targets_accept_their_seeds_and_garbage(name):
    t = _target(name)
    if name == "fuzz_lspci":  # its main() imports the importer (instrumented when fuzzing)
        import devlend.lspci
        t.lspci = devlend.lspci
    seeds = getattr(t, "SEEDS", None)
    for path in (seeds or [])[:3]:
        with open(path, "rb") as fh:
            t.test_one_input(fh.read())
    for data in (b"", b"\xff\xfe", b"- [\n  : :\n", b"hosts: 7\n", b"[" * 100_000,
                 b" {iommu_map,r}", b"{stream: 1}"):  # found by fuzzing (session 10): keys spelled like tags
        t.test_one_input(data)
