"""What a person reads: every command takes --quiet; nothing that draws progress reaches a pipe;
every command that prints results takes --format json and prints JSON alone; the main tables fit
80 columns at COLUMNS=80."""

import json
import os

import pytest

import clirun
from conftest import ROOT

PXH = "topologies/pxh830-two-host.yaml"
FOUR = "topologies/four-server-cluster.yaml"
# Characters rich and tqdm draw progress with (spinner frames, bars, carriage returns).
PROGRESS = set("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏━╸╺█▏▎▍▌▋▊▉\r")


def cli(*args, env=None, check=True):
    return clirun.run(*args, cwd=ROOT, check=check, env=env)


def _leaves(group, prefix=()):
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            yield from _leaves(cmd, prefix + (name,))
        else:
            yield prefix + (name,), cmd


def test_every_command_takes_quiet():
    from typer.main import get_command
    from devlend.cli import app
    missing = [" ".join(path) for path, cmd in _leaves(get_command(app))
               if path[0] != "linux" and not any("--quiet" in p.opts for p in cmd.params)]
    assert not missing, f"commands without --quiet: {missing}"


# Each command that prints results, with --format json: (args, a key its JSON has).
JSON_COMMANDS = [
    (["experiment", "hops", "--format", "json"], "rows"),
    (["run-streams", PXH, "--stream", "a:gpu0:ntb-l.mw1:64KiB", "--format", "json"], "links"),
    (["run-workloads", PXH, "--stream", "a:gpu0:ntb-l.mw1:64KiB", "--format", "json"], "workloads"),
    (["pool", FOUR, "--reset", "--format", "json", "list"], "pool"),
    (["validate", "--corpus", "", "--format", "json"], "verdicts"),
    (["topo", PXH, "--format", "json"], "hosts"),
    (["route", PXH, "--from", "lender:gpu0", "--addr", "ntb-l.mw1", "--format", "json"], "hops"),
    (["trace", "replay", "python/devlend/traces/sample_qemu.log", "--format", "json"], "translations"),
]


@pytest.mark.parametrize("args, key", JSON_COMMANDS, ids=[a[0] for a, _ in JSON_COMMANDS])
def test_format_json_prints_json_alone_and_nothing_piped_draws_progress(args, key, tmp_path):
    r = cli(*args, env={"XDG_STATE_HOME": str(tmp_path)})
    doc = json.loads(r.stdout)
    assert key in doc
    if args[0] in ("experiment", "run-streams", "run-workloads"):
        assert doc["devlend provenance"]["devlend_version"]
    assert not PROGRESS & set(r.stderr + r.stdout), r.stderr


@pytest.mark.parametrize("args", [["experiment", "hops"], ["experiment", "d3", "--quick"],
                                  ["run-streams", PXH, "--stream", "a:gpu0:ntb-l.mw1:64KiB"],
                                  ["run-workloads", PXH, "--stream", "a:gpu0:ntb-l.mw1:64KiB"],
                                  ["pool", FOUR, "--reset", "connect", "server2", "server1", "add", "gpu2", "show", "gpu2"],
                                  ["validate", "--corpus", ""]], ids=lambda a: " ".join(a[:2]))
def test_main_tables_fit_80_columns(args, tmp_path):
    r = cli(*args, env={"COLUMNS": "80", "XDG_STATE_HOME": str(tmp_path)})
    table = [line for line in r.stdout.splitlines() if set(line) & set("│┃┏┗└┌━─")]
    assert table, r.stdout
    wide = [line for line in table if len(line) > 80]
    assert not wide, "\n".join(wide)


def test_format_csv_of_route_topo_and_provenance_is_data(tmp_path):
    import csv
    import io
    rows = list(csv.DictReader(io.StringIO(cli("route", PXH, "--from", "lender:gpu0", "--addr", "ntb-l.mw1", "--read",
                                               "--format", "csv").stdout)))
    assert {r["route"] for r in rows} == {"request", "completion"} and rows[0]["kind"] == "start"
    tree = list(csv.DictReader(io.StringIO(cli("topo", PXH, "--format", "csv").stdout)))
    assert any(r["component"] == "gpu0" and r["host"] == "lender" for r in tree)
    cli("run-streams", PXH, "--stream", "a:gpu0:ntb-l.mw1:64KiB", "--csv", str(tmp_path / "s.csv"), "-q")
    rec = json.loads(cli("provenance", str(tmp_path / "s.csv"), "--format", "json").stdout)
    assert rec["topology"] == "pxh830-two-host.yaml"
    bad = cli("route", PXH, "--from", "lender:gpu0", "--addr", "ntb-l.mw1", "--format", "yaml", check=False)
    assert bad.returncode == 2 and "expected one of table, csv, json" in bad.stderr


def test_calibrate_format_json_is_the_fit_alone():
    r = cli("calibrate", "--only", "timing.ntb_latency_ps", "--measurement", "d5-ram-to-ram-back-to-back", "--format", "json",
            "--max-evaluations", "8", check=False)
    doc = json.loads(r.stdout)
    assert doc["constants"][0]["constant"] == "timing.ntb_latency_ps" and doc["residuals"] and "cost" in doc
