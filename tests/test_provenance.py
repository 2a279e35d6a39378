"""Result files carry how they were made, and `devlend provenance FILE` prints it back."""

import json
import subprocess

import clirun
from conftest import ROOT


def cli(*args, check=True):
    return clirun.run(*args, cwd=ROOT, check=check)


def test_an_experiments_csv_and_plot_carry_version_parameters_and_every_set(tmp_path):
    cli("experiment", "d3", "--quick", "--set", "timing.ntb_latency_ps=500000", "--out", str(tmp_path))
    for f in ("d3.csv", "d3.png"):
        shown = cli("provenance", str(tmp_path / f)).stdout
        assert "devlend_version: 0.1.0" in shown and "parameters: sha256:" in shown
        assert "set: timing.ntb_latency_ps=500000" in shown, f
    rows = (tmp_path / "d3.csv").read_text().splitlines()
    assert rows[-1].startswith("# devlend provenance: {") and json.loads(rows[-1].split(": ", 1)[1])["set"]


def test_fio_json_carries_the_topology_and_job_file_hashes(tmp_path):
    job = tmp_path / "j.fio"
    job.write_text("[j]\nioengine=libaio\ndirect=1\nrw=randread\nsize=1m\nnumber_ios=16\n")
    cli("fio", str(job), "--topology", "topologies/nvme-back-to-back.yaml", "--host", "lender", "--device", "nvme0",
        "--output-format=json", "--output", str(tmp_path / "o.json"), "-q")
    shown = cli("provenance", str(tmp_path / "o.json")).stdout
    assert "topology: nvme-back-to-back.yaml" in shown and "topology_hash: sha256:" in shown
    assert "scenario: j.fio" in shown and "seed: 137" in shown


def test_a_file_without_provenance_is_said_to_have_none(tmp_path):
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    r = cli("provenance", str(tmp_path / "x.csv"), check=False)
    assert r.returncode == 2 and "carries no devlend provenance" in r.stderr


SCENARIO = """name: prov
topology: {topo}
params:
  timing: {{max_payload: 128}}
timeline:
  - {{at: 0, action: borrow, borrower: server1, device: gpu2}}
  - {{at: 1 us, action: gpu_copy, name: copy, runner: server1, gpu: gpu2, direction: htod, bytes: 1 MiB}}
  - {{at: 10 ms, action: return, device: gpu2}}
"""


def _shown(path):
    return cli("provenance", str(path)).stdout


def test_a_scenario_runs_csvs_plot_and_json_carry_hashes_sets_and_effective_parameters(tmp_path):
    import os
    path = tmp_path / "prov.yaml"
    path.write_text(SCENARIO.format(topo=os.path.join(ROOT, "python", "devlend", "topologies", "four-server-cluster.yaml")))
    r = cli("run", str(path), "--out", str(tmp_path / "o"), "--set", "timing.ntb_latency_ps=400 ns", "--format", "json", "-q")
    doc = json.loads(r.stdout)
    for f in ("prov.csv", "prov-links.csv", "prov.png"):
        shown = _shown(tmp_path / "o" / f)
        assert "scenario: prov.yaml" in shown and "scenario_hash: sha256:" in shown, f
        assert "topology: four-server-cluster.yaml" in shown and "topology_hash: sha256:" in shown, f
        assert "timing.ntb_latency_ps=400 ns" in shown and "timing.max_payload=128 (" in shown, f   # --set and the file's own
        assert "effective:" in shown and "  max_payload_bytes: 128" in shown and "  ntb_latency_ns: 400" in shown, f
        assert "seed: " in shown and "command: devlend run " in shown
    assert doc["devlend provenance"]["scenario"] == "prov.yaml" and doc["workloads"][0]["name"] == "copy"


def test_run_workloads_and_run_streams_csvs_carry_the_topology_hash_and_every_set(tmp_path):
    cli("run-workloads", "topologies/pxh830-two-host.yaml", "--stream", "a:gpu0:ntb-l.mw1:64KiB", "--set", "timing.max_payload=128",
        "--csv", str(tmp_path / "w.csv"), "--links-csv", str(tmp_path / "wl.csv"), "-q")
    for f in ("w.csv", "wl.csv"):
        shown = _shown(tmp_path / f)
        assert "topology: pxh830-two-host.yaml" in shown and "set: timing.max_payload=128" in shown, f
    cli("run-streams", "topologies/pxh830-two-host.yaml", "--stream", "a:gpu0:ntb-l.mw1:64KiB", "--csv", str(tmp_path / "s.csv"), "-q")
    assert "topology_hash: sha256:" in _shown(tmp_path / "s.csv")


def test_validate_csv_and_plots_carry_provenance(tmp_path):
    r = cli("validate", "--which", "validation", "--csv", str(tmp_path / "v.csv"), "--plot", str(tmp_path / "p"),
            "--set", "timing.ntb_latency_ps=300 ns", "--summary", "-q")
    assert "validation:" in r.stdout and "wrote" not in r.stdout + r.stderr          # -q: nothing said on stderr
    assert "set: timing.ntb_latency_ps=300 ns" in _shown(tmp_path / "v.csv")
    pngs = list((tmp_path / "p").iterdir())
    assert pngs
    for png in pngs:
        assert "devlend_version: " in _shown(png)


def test_export_dot_and_svg_carry_the_topology_hash_and_stay_graphviz_readable(tmp_path):
    import shutil
    import pytest
    topo = "topologies/pxh830-two-host.yaml"
    cli("export", topo, "-o", str(tmp_path / "t.dot"), "-q")
    shown = _shown(tmp_path / "t.dot")
    assert "topology: pxh830-two-host.yaml" in shown and "topology_hash: sha256:" in shown and "command: devlend export" in shown
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (SVG export needs it)")
    # Graphviz still reads the stamped DOT
    assert subprocess.run(["dot", "-Tsvg", str(tmp_path / "t.dot")], capture_output=True).returncode == 0
    cli("export", topo, "-o", str(tmp_path / "t.svg"), "-q")
    svg = (tmp_path / "t.svg").read_text()
    assert svg.startswith("<?xml")
    import xml.dom.minidom
    xml.dom.minidom.parseString(svg)  # still well-formed XML
    assert "topology_hash: sha256:" in _shown(tmp_path / "t.svg")


def test_an_svg_comment_survives_a_command_line_with_double_dashes(tmp_path):
    from devlend.provenance import read, stamp_svg
    path = tmp_path / "a.svg"
    path.write_text('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"/>\n')
    stamp_svg(str(path), {"command": "devlend export t.yaml --set a=b ---x", "seed": None})
    import xml.dom.minidom
    xml.dom.minidom.parseString(path.read_text())
    assert read(str(path))["command"] == "devlend export t.yaml --set a=b ---x"


def test_a_trace_carries_its_seed_and_command_and_still_replays(tmp_path):
    out = tmp_path / "t.dlt"
    cli("trace", "synth", "-o", str(out), "--workload", "iperf3", "--tenants", "4", "--packets-per-tenant", "50",
        "--seed", "7", "-q")
    shown = _shown(out)
    assert "seed: 7" in shown and "command: devlend trace synth" in shown and "devlend_version:" in shown
    info = json.loads(cli("trace", "info", str(out), "--format", "json").stdout)
    assert info["packets"] == 200 and info["meta"]["made_by"] == "devlend trace synth"
    sample = tmp_path / "s.log"
    cli("trace", "sample", "-o", str(sample), "-q")
    built = tmp_path / "b.dlt"
    cli("trace", "build", str(sample), "--tenants", "6", "-o", str(built), "-q")
    assert "command: devlend trace build" in _shown(built)
    assert cli("trace", "replay", str(built), "--format", "json").returncode == 0
