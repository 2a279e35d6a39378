"""What a user reads must run and must not point at the project's issue tracker: the package
docstring's examples run as doctests, and no user-facing text (README, experiment titles and
sources, shipped topologies and scenarios, CLI help) refers to an issue number."""

import doctest
import os
import re

import pytest

import devlend
from devlend import experiments, readme_figures

from conftest import ROOT

ISSUE = re.compile(r"\bissue\s+#?\d+", re.I)


def test_package_docstring_examples_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    res = doctest.testmod(devlend, verbose=False, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted >= 4 and res.failed == 0


def _user_files():
    yield os.path.join(ROOT, "README.md")
    for sub in ("topologies", "scenarios"):
        d = os.path.join(ROOT, "python", "devlend", sub)
        yield from (os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".yaml"))


def test_no_user_facing_text_refers_to_issue_numbers():
    found = []
    for path in _user_files():
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            if ISSUE.search(line):
                found.append(f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()[:80]}")
    for e in experiments.all_experiments():
        if ISSUE.search(e.title):
            found.append(f"experiment {e.name}: title {e.title!r}")
    from typer.main import get_command
    from devlend.cli import app
    for name, cmd in get_command(app).commands.items():
        if ISSUE.search(cmd.help or ""):
            found.append(f"devlend {name} --help")
    assert not found, "\n".join(found)


def test_readme_names_each_seed_paper_by_title_and_venue():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    for title, venue in [("using Device Lending\", *Cluster Computing*", "2020"),
                         ("Flexible device sharing in PCIe clusters using Device Lending", "ICPP Companion 2018"),
                         ("HyperTRIO: Hyper-tenant Translation of I/O Addresses", "ISCA 2020"),
                         ("Feasibility and Performance Analysis of RDMA Transfer through PCI Express", "JIPS"),
                         ("InfiniBand Support in Xen Virtual Machine Environment", "OSU-CISRC-10/05-TR63")]:
        line = next((l for l in readme.splitlines() if title in l), "")
        assert venue in line, f"README: no line names {title!r} with {venue!r}"


# The README's figures are generated (scripts/readme-figures); each block is made afresh and compared.


def test_readme_has_every_generated_block_and_only_known_ones():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert set(readme_figures.blocks(readme)) == set(readme_figures.KNOWN)


@pytest.mark.parametrize("name", sorted(readme_figures.BLOCKS))
def test_readme_generated_block_is_what_its_command_makes_now(name):
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    fresh = readme_figures.blocks(readme_figures.regenerate(readme, [name]))[name]
    assert readme_figures.blocks(readme)[name] == fresh, f"README block {name} is stale: run scripts/readme-figures --write"


def test_the_longest_first_order_names_test_modules_that_exist():
    # scripts/test hands modules out in tests/conftest.py's LONGEST_FIRST order; a module renamed
    # without updating it would silently go back to file order (a slower run, no failure).
    from conftest import LONGEST_FIRST
    here = os.path.dirname(os.path.abspath(__file__))
    assert [n for n in LONGEST_FIRST if not os.path.isfile(os.path.join(here, n))] == []
    with open(os.path.join(here, "..", "scripts", "test"), encoding="utf-8") as fh:
        assert "--dist loadscope --no-loadscope-reorder" in fh.read()
