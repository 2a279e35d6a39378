"""The command line as a user runs it: exit codes, output, and one-line errors."""

import json
import os
import shutil
import subprocess
import sys

import jsonschema
import pytest
import yaml

from devlend.topology import json_schema

import clirun
from conftest import ROOT, topo_path

SHIPPED = sorted(f for f in os.listdir(os.path.join(ROOT, "python", "devlend", "topologies")) if f.endswith(".yaml"))


def cli(*args, check=True, process=False):
    """`devlend ARGS`: in this process (tests/clirun.py), or with `process` as a user runs it, the
    installed `devlend` script in a new process (a few tests below, so the script itself is tested)."""
    if process:
        script = os.path.join(os.path.dirname(sys.executable), "devlend")
        res = subprocess.run([script, *args], capture_output=True, text=True, cwd=ROOT)
    else:
        res = clirun.run(*args, cwd=ROOT)
    if check and res.returncode != 0:
        raise AssertionError(f"devlend {' '.join(args)} exited {res.returncode}: {res.stderr}")
    return res


def test_topo_prints_each_hosts_tree_with_bars_and_windows():
    out = cli("topo", topo_path("pxh830-two-host.yaml"), process=True).stdout
    assert "host borrower" in out and "host lender" in out
    assert "[02:01.0] lender-sw.d1 switch downstream port  bus 04-04" in out
    assert "BAR1 0x380040000000 [size=256 MiB] 64-bit prefetchable" in out
    assert "window 0 = BAR2" in out and "64 LUT segments" in out


def test_route_prints_hops_with_addresses_per_domain():
    res = cli("route", topo_path("pxh830-two-host.yaml"), "--from", "lender:gpu0", "--addr", "ntb-l.mw1+0x2000")
    lines = res.stdout.splitlines()
    assert lines[0] == "write request"
    assert any("ntb" in l and "borrower" in l and "0x0000000080002000" in l for l in lines)
    assert any("iommu" in l and "0x0000000040002000" in l for l in lines)
    assert "delivered to RAM of borrower at 0x40002000; 6 hops" in res.stdout


def test_route_read_shows_the_completion():
    res = cli("route", topo_path("pxh830-two-host.yaml"), "--from", "borrower:cpu", "--addr", "ntb-b.mw0", "--read")
    assert "completion" in res.stdout and "delivered to CPU of borrower" in res.stdout


def test_route_json_and_failure_exit_code():
    res = cli("route", topo_path("pxh830-two-host.yaml"), "--from", "gpu0", "--addr", "ntb-l.mw1+0x8000000", "--json", check=False,
              process=True)
    assert res.returncode == 1
    d = json.loads(res.stdout)
    assert d["outcome"]["failure"]["kind"] == "iommu-fault"


def test_bad_file_is_one_line_on_stderr_with_exit_2(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\nhosts:\n  - name: a\n    cpu: intel-xeon-e5\n    ram: 1 GiB\n    root_ports: 2\n    colour: blue\n")
    res = cli("topo", str(p), check=False, process=True)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().count("\n") == 0
    assert f"{p}:7:5: hosts[0].colour: unknown key 'colour'" in res.stderr
    res = cli("route", topo_path("pxh830-two-host.yaml"), "--from", "nohost:cpu", "--addr", "0", check=False)
    assert res.returncode == 2 and "no host named 'nohost'" in res.stderr and "Traceback" not in res.stderr


def test_export_dot_and_svg(tmp_path):
    dot = tmp_path / "t.dot"
    cli("export", topo_path("expansion-chassis-vm.yaml"), "-o", str(dot))
    text = dot.read_text()
    assert text.startswith("digraph devlend") and '"ntb-chassis" -> "ntb-remote"' in text and "cluster_lender" in text
    svg = tmp_path / "t.svg"
    res = cli("export", topo_path("expansion-chassis-vm.yaml"), "-o", str(svg), check=False)
    if shutil.which("dot") is None:
        assert res.returncode == 2 and "apt-get install graphviz" in res.stderr
    else:
        assert res.returncode == 0 and "<svg" in svg.read_text()


def test_experiment_hops_prints_ours_beside_the_papers(tmp_path):
    csv = tmp_path / "hops.csv"
    res = cli("experiment", "hops", "--csv", str(csv))
    assert "NatRem-RAM-IOMMU" in res.stdout
    rows = csv.read_text().splitlines()
    assert rows[0].startswith("scenario,devlend_hops,paper_hops")
    assert any(r.startswith("NatRem-RAM-IOMMU,21,21,3,3,2,2,4,4,True") for r in rows)
    assert "hops" in cli("experiment", "--list").stdout
    assert cli("experiment", "nope", check=False).returncode == 2


def test_published_schema_is_current_and_validates_every_shipped_topology():
    with open(os.path.join(ROOT, "python", "devlend", "topologies", "topology.schema.json")) as fh:
        published = json.load(fh)
    assert published == json_schema(), "run: devlend schema -o topologies/topology.schema.json"
    for name in SHIPPED:
        with open(topo_path(name)) as fh:
            jsonschema.validate(yaml.safe_load(fh), published)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", "hosts": [{"name": "a", "cpu": "c", "ram": 1, "root_ports": 1, "bogus": 1}]}, published)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_topology_builds_and_lists(name):
    assert "host " in cli("topo", topo_path(name)).stdout


def test_import_lspci_writes_a_description_that_topo_lists(tmp_path):
    fx = os.path.join(ROOT, "tests", "fixtures", "lspci")
    out = tmp_path / "host.yaml"
    res = cli("import-lspci", "--tree", os.path.join(fx, "xeon-gpu-nvme.tree.txt"), "--verbose",
              os.path.join(fx, "xeon-gpu-nvme.vvv.txt"), "--host", "real", "-o", str(out))
    assert out.exists() and "wrote" in res.stderr
    listing = cli("topo", str(out)).stdout
    assert "host real" in listing and "switch downstream port" in listing
    bad = tmp_path / "bad.txt"
    bad.write_text("this is not lspci output\n")
    res = cli("import-lspci", "--tree", str(bad), "--verbose", str(bad), check=False)
    assert res.returncode == 2 and "bad.txt:1" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("args,needle", [
    (["topo", "python"], "is a directory"),
    (["export", topo_path("pxh830-two-host.yaml"), "-o", "/nonexistent/dir/x.dot"], "/nonexistent/dir/x.dot: No such file"),
    (["schema", "-o", "/nonexistent/x.json"], "/nonexistent/x.json: No such file"),
    (["experiment", "hops", "--out", "/proc/devlend-nope"], "/proc/devlend-nope"),
])
def test_file_system_errors_are_one_line_not_a_traceback(args, needle):
    res = cli(*args, check=False)
    assert res.returncode == 2 and needle in res.stderr and "Traceback" not in res.stderr


def test_the_cli_starts_without_the_topology_models_or_the_extension():
    """`devlend --help` and every command's start import neither pydantic's models nor the Rust
    core: devlend's package attributes load on first use."""
    code = "import sys, devlend.cli; print(sorted(m for m in ('devlend.topology', 'devlend._core', 'pydantic') if m in sys.modules))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert res.stdout.strip() == "[]", res.stdout
