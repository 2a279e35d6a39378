"""Result files carry how they were made, and `devlend provenance FILE` prints it back."""

import json
import subprocess
import sys

from conftest import ROOT


def cli(*args, check=True):
    return subprocess.run([sys.executable, "-m", "devlend.cli", *args], capture_output=True, text=True, cwd=ROOT, check=check)


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
