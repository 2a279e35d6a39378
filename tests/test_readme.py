"""Keep the README true: its first two commands, the experiment table it shows, and its route listing."""

import os
import re

import clirun
from conftest import ROOT

README = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()


def _blocks() -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", README, re.S)


def _run(*args: str) -> str:
    return clirun.run(*args, cwd=ROOT, check=True).stdout


def test_readme_opens_with_exactly_the_two_commands():
    first = [l.split("#")[0].strip() for l in _blocks()[0].strip().splitlines()]
    assert first == ["pip install . && devlend experiment hops", "./scripts/test"]
    with open(os.path.join(ROOT, ".ci", "run")) as fh:
        assert "./scripts/test" in fh.read()


def test_readme_experiment_output_is_what_the_command_prints():
    shown = _blocks()[1].strip()
    real = _run("experiment", "hops")
    assert shown in real, "README's table differs from `devlend experiment hops`; update the README"


def test_readme_route_listing_is_what_the_command_prints():
    shown = next(b for b in _blocks() if b.startswith("write request")).strip()
    real = _run("route", "topologies/pxh830-two-host.yaml", "--from", "lender:gpu0", "--addr", "ntb-l.mw1+0x2000").strip()
    assert shown == real
