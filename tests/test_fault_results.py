"""A fault ends the workloads it strikes, not the run: every workload of a faulted scenario gets a
row (completed, failed with the error its application saw, or cut short), the CSV and plot are
written and `devlend run` exits 0."""

import csv
import textwrap

import pytest

from test_cli import cli
from conftest import topo_path

FOUR = topo_path("four-server-cluster.yaml")


def scenario(tmp_path, fault: str) -> str:
    """server1 copies from gpu2 (borrowed from server2, done in about 3 ms); server3 reads from
    server2's nvme1 with fio, long enough to be running at 1 ms, when `fault` strikes."""
    p = tmp_path / "faulted.yaml"
    p.write_text(textwrap.dedent(f"""\
        name: faulted
        topology: {FOUR}
        timeline:
          - {{at: 0, action: borrow, borrower: server1, device: gpu2}}
          - {{at: 0, action: borrow, borrower: server3, device: nvme1}}
          - {{at: 1 us, action: gpu_copy, name: copy, runner: server1, gpu: gpu2, direction: dtoh, bytes: 8 MiB}}
          - {{at: 1 us, action: fio, name: reads, runner: server3, drive: nvme1, rw: randread, iodepth: 4, ios: 200000}}
          - {{at: 1 ms, {fault}}}
        """))
    return str(p)


def rows(out_dir) -> dict:
    with open(out_dir / "faulted.csv", encoding="utf-8") as fh:
        lines = [line for line in fh if not line.startswith("#")]
    return {r["name"]: r for r in csv.DictReader(lines)}


@pytest.mark.parametrize("fault, status", [
    ("action: fault, kind: host-crash, target: server3", "cut short"),        # the fio job's own host
    ("action: fault, kind: surprise-removal, target: nvme1", "failed"),       # its drive
])
def test_a_faulted_scenario_writes_every_workloads_row_and_exits_0(tmp_path, fault, status):
    res = cli("run", scenario(tmp_path, fault), "--out", str(tmp_path), check=False)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "faulted.csv").is_file() and (tmp_path / "faulted.png").is_file()
    r = rows(tmp_path)
    assert r["copy"]["status"] == "completed" and float(r["copy"]["GBps"]) > 1
    assert r["reads"]["status"] == status, r["reads"]
    assert r["reads"]["error"], "the error the application saw"
    assert 1_000_000 <= float(r["reads"]["noticed_ns"]) < 100_000_000 or status == "cut short" and r["reads"]["noticed_ns"] == "1000000.0"
    assert 0 < int(r["reads"]["moved_bytes"]) < 200000 * 4096
    assert "Traceback" not in res.stderr and "no device with handle" not in res.stdout


def test_a_host_crash_stops_its_workload_at_the_crash(tmp_path):
    cli("run", scenario(tmp_path, "action: fault, kind: host-crash, target: server3"), "--out", str(tmp_path))
    r = rows(tmp_path)["reads"]
    assert float(r["noticed_ns"]) == 1_000_000 and "crashed" in r["error"]


def test_port_down_on_a_root_port_cuts_the_traffic_through_it(tmp_path):
    # server2.rp2 is the root port above nvme1: the reads stop there.
    cli("run", scenario(tmp_path, "action: fault, kind: port-down, target: server2.rp2"), "--out", str(tmp_path))
    r = rows(tmp_path)
    assert r["copy"]["status"] == "completed"
    assert r["reads"]["status"] in ("failed", "cut short") and int(r["reads"]["moved_bytes"]) < 200000 * 4096, r["reads"]
