"""Scenario files: a topology and a timeline of borrows, workloads and returns (`devlend run`)."""

import os

import pytest

from devlend import scenario_file
from devlend.errors import WorkloadError
from devlend.scenario_file import ScenarioFileError

from test_cli import cli
from conftest import ROOT

SCENARIOS = os.path.join(ROOT, "python", "devlend", "scenarios")
SHIPPED = sorted(f for f in os.listdir(SCENARIOS) if f.endswith(".yaml"))
TOPO = "../python/devlend/topologies/four-server-cluster.yaml"


def scenario(tmp_path, timeline: str, topology: str = TOPO, name: str = "t") -> str:
    d = tmp_path / "sc"
    d.mkdir(exist_ok=True)
    p = d / f"{name}.yaml"
    p.write_text(f"name: {name}\ntopology: {os.path.relpath(os.path.join(ROOT, 'x', topology), d) if topology.startswith('..') else topology}\n"
                 f"timeline:\n{timeline}")
    return str(p)


BORROW = "  - {at: 0, action: borrow, borrower: server1, device: gpu2}\n"
COPY = "  - {at: 1 us, action: gpu_copy, name: copy, runner: server1, gpu: gpu2, direction: htod, bytes: 1 MiB}\n"


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenarios_validate(name):
    sf = scenario_file.load(os.path.join(SCENARIOS, name))
    assert sf.topology.hosts and sf.spec.timeline


def test_four_server_question_bandwidth_and_latency_of_each(tmp_path):
    run = scenario_file.load(os.path.join(SCENARIOS, "four-server-gpu-and-nvme.yaml")).run()
    res = run.results().set_index("name")
    copy, fio = res.loc["gpu-htod"], res.loc["nvme-randread"]
    assert (copy.runner, copy.device, fio.runner, fio.device) == ("server1", "gpu2", "server3", "nvme1")
    assert copy.GBps > 0 and fio.GBps > 0 and fio.iops > 0
    media_us = float(run.scenario.params()["nvme1.media_read_latency_ns"]) / 1000
    assert fio.lat_mean_us > media_us, "a borrowed read costs the media latency and the fabric"
    assert run.pool.idle, "both devices were returned in the pool's replay"
    run.to_csv(tmp_path / "r.csv", tmp_path / "l.csv")
    head = (tmp_path / "r.csv").read_text().splitlines()[0]
    assert head.startswith("# devlend_version=") and "scenario=four-server-gpu-and-nvme" in head and "max_payload_bytes=" in head


def test_a_borrowed_gpu_copy_is_slower_than_the_same_copy_local(tmp_path):
    local = scenario(tmp_path, "  - {at: 0, action: gpu_copy, name: copy, runner: server2, gpu: gpu2, direction: htod, bytes: 1 MiB}\n", name="loc")
    remote = scenario(tmp_path, BORROW + COPY, name="rem")
    bw = {p: scenario_file.load(p).run().results().GBps[0] for p in (local, remote)}
    assert bw[remote] < bw[local]


def bad(tmp_path, timeline, **kw):
    with pytest.raises(ScenarioFileError) as e:
        scenario_file.load(scenario(tmp_path, timeline, **kw)).run()
    return e.value


@pytest.mark.parametrize("timeline, line, field, match", [
    (BORROW + "  - {at: 0, action: borrow, borrower: server3, device: gpu2}\n", 5, "timeline[1].device", "borrowed by server1"),
    ("  - {at: 0, action: borrow, borrower: server1, device: gpu42}\n", 4, "timeline[0].device", "no device"),
    ("  - {at: 5 us, action: borrow, borrower: server1, device: gpu2}\n  - {at: 1 us, action: return, device: gpu2}\n", 5,
     "timeline[1].at", "before the previous action"),
    ("  - {at: 0, action: return, device: gpu2}\n", 4, "timeline[0].device", "not borrowed"),
    (COPY, 4, "timeline[0].gpu", "server1 has not borrowed gpu2"),
    (BORROW + COPY + "  - {at: 2 us, action: return, device: gpu2}\n", 6, "timeline[2].at", "workload copy still drives it"),
    ("  - {at: 0, action: borrow, borrower: server1, device: gpu2, dma_window: 1 GiB}\n", 4, "timeline[0].dma_window", "larger than the NTB can map"),
    (BORROW + "  - {at: 0, action: gpu_copy, name: c, runner: server1, gpu: gpu2, direction: htod, byts: 1}\n", 5, "timeline[1].byts",
     "unknown key 'byts': expected one of at, action, name, runner, gpu, direction, bytes"),
    ("  - {at: soon, action: borrow, borrower: server1, device: gpu2}\n", 4, "timeline[0].at", "is not a time"),
    (BORROW + COPY + "  - {at: 1 ms, action: return, device: gpu2, borrower: server4}\n", 6, "timeline[2].device", "not borrowed by server4"),
])
def test_bad_scenarios_name_file_line_and_field(tmp_path, timeline, line, field, match):
    err = bad(tmp_path, timeline)
    assert (err.line, err.field) == (line, field), str(err)
    assert match in err.message and err.file.endswith("t.yaml"), str(err)


def test_a_top_level_key_spelled_like_an_action_is_an_unknown_key(tmp_path):
    """Found by fuzzing: the action names that pydantic puts into an error's path are dropped only
    after a timeline index, so a top-level key `stream` is reported, not an IndexError."""
    with pytest.raises(ScenarioFileError) as e:
        scenario_file.loads("{stream: 1}", str(tmp_path / "s.yaml"))
    assert e.value.field == "stream" and "unknown key 'stream'" in e.value.message


def test_a_gpu_returned_mid_run_serves_a_second_borrower():
    """The shipped hand-over: both borrowers' copies run, the second after the return, the fio job
    goes on across it, and nothing of either lend is left mapped."""
    run = scenario_file.load(os.path.join(SCENARIOS, "four-server-gpu-handed-over.yaml")).run()
    res = run.results().set_index("name")
    first, second, fio = res.loc["first-htod"], res.loc["second-dtoh"], res.loc["nvme-randread"]
    assert (first.runner, second.runner) == ("server1", "server3") and first.GBps > 0 and second.GBps > 0
    assert first.end_ns <= 20e6 <= 70e6 <= second.start_ns, (first.end_ns, second.start_ns)
    assert fio.start_ns < 20e6 < fio.end_ns, "the fio job on another device runs across the return"
    assert run.scenario.lends() == [] and run.pool.idle
    assert run.scenario.end_lends_and_count_leftovers() == 0


def test_python_scenario_return_in_use_names_the_workload():
    from devlend import Scenario
    s = Scenario(os.path.join(ROOT, "python", "devlend", "topologies", "four-server-cluster.yaml"))
    s.borrow("server1", "gpu2", at_ns=0).gpu_copy("copy", "server1", "gpu2", "htod", 64 << 20, at_ns=1000)
    with pytest.raises(WorkloadError, match="cannot return gpu2 at 2000.000 ns: workload copy still drives it"):
        s.return_device("gpu2", at_ns=2000)
    with pytest.raises(WorkloadError, match="in the past"):
        s.borrow("server3", "gpu3", at_ns=1000)


def test_unreachable_borrow_names_the_borrower(tmp_path):
    topo = tmp_path / "cut.yaml"
    text = open(os.path.join(ROOT, "python", "devlend", "topologies", "four-server-cluster.yaml")).read()
    topo.write_text(text.replace("  - {a: ntb-1-2.cable, b: ntb-2-1.cable, gen: 3, width: 8, kind: cable}\n", ""))
    err = bad(tmp_path, BORROW, topology=str(topo))
    assert (err.line, err.field) == (4, "timeline[0].borrower") and "no NTB joins" in err.message, str(err)


def test_missing_topology_names_the_field(tmp_path):
    err = bad(tmp_path, BORROW, topology="nowhere.yaml")
    assert (err.line, err.field) == (2, "topology") and "no such file" in err.message, str(err)


def test_cli_run_prints_the_tables_and_writes_csv_and_plot(tmp_path):
    path = scenario(tmp_path, BORROW + COPY + "  - {at: 10 ms, action: return, device: gpu2}\n")
    res = cli("run", path, "--out", str(tmp_path / "out"))
    assert "scenario t: workloads" in res.stdout and "busiest link directions" in res.stdout
    for f in ("t.csv", "t-links.csv", "t.png"):
        assert (tmp_path / "out" / f).stat().st_size > 0


def test_cli_run_bad_scenario_is_one_clear_error(tmp_path):
    path = scenario(tmp_path, COPY)
    res = cli("run", path, "--out", str(tmp_path), check=False)
    assert res.returncode == 2 and f"{path}:4:" in res.stderr and "has not borrowed" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_pingpong_and_ntb_perf_in_a_scenario_file(tmp_path):
    """The two workload kinds devlend.Scenario gained: a GPU ping-pong between two borrowed GPUs, and
    ntb_perf between two hosts joined by an NTB, in one run; ntb_perf into a peer whose IOMMU is on
    is refused (its inbound buffer is mapped by physical address)."""
    topo = "../python/devlend/topologies/three-host-cluster.yaml"
    timeline = ("  - {at: 0, action: borrow, borrower: borrower, device: gpu0}\n"
                "  - {at: 0, action: borrow, borrower: borrower, device: gpu1}\n"
                "  - {at: 1 us, action: pingpong, name: pp, runner: borrower, gpu_a: gpu0, gpu_b: gpu1, rounds: 5}\n"
                "  - {at: 1 us, action: ntb_perf, name: perf, runner: borrower, peer: lender-b, chunk_order: 12, total_order: 16}\n")
    res = scenario_file.load(scenario(tmp_path, timeline, topo)).run().results().set_index("name")
    assert res.loc["pp", "rtt_mean_ns"] > 0 and res.loc["pp", "device"] == "gpu0,gpu1" and res.loc["perf", "bytes"] == 1 << 16 and res.loc["perf", "GBps"] > 0
    run = scenario_file.load(scenario(tmp_path, timeline, topo)).run()
    run.plot(str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").stat().st_size > 10_000
    with pytest.raises(ScenarioFileError, match="has not borrowed gpu1") as e:
        scenario_file.load(scenario(tmp_path, timeline.replace("device: gpu1", "device: gpu0").replace("  - {at: 0, action: borrow, borrower: borrower, device: gpu0}\n", "", 1), topo)).run()
    assert e.value.field.endswith("gpu_b")
    with pytest.raises(Exception, match="has its IOMMU on"):
        scenario_file.load(scenario(tmp_path, timeline.replace("runner: borrower, peer: lender-b", "runner: lender-b, peer: borrower"), topo)).run()


def test_a_borrow_with_a_dma_window_is_the_lend_the_workload_uses(tmp_path):
    """devlend.Scenario borrows at the action with the window asked, and the copy's buffer is
    mapped through that window: 4 MiB holds the 1 MiB buffer, 64 KiB does not (refused before the
    run, at the copy's line, naming the window)."""
    borrow = "  - {at: 0, action: borrow, borrower: server1, device: gpu2, dma_window: %s}\n"
    run = scenario_file.load(scenario(tmp_path, borrow % "4 MiB" + COPY, name="fits")).run()
    assert run.results().GBps[0] > 0 and [(l["device"], l["borrower"]) for l in run.scenario.lends()] == [("gpu2", "server1")]
    with pytest.raises(ScenarioFileError, match="a copy of 1048576 bytes: borrowed gpu2's DMA window holds 65536 bytes") as e:
        scenario_file.load(scenario(tmp_path, borrow % "64 KiB" + COPY, name="small")).run()
    assert e.value.line == 5


def test_an_error_in_the_scenarios_own_params_names_its_file_line_and_field(tmp_path):
    """issue 15, bad input: an override in the scenario file's own params section is reported where it
    sits (file, line, field), as one in a topology's params section is."""
    path = scenario(tmp_path, BORROW)
    text = open(path).read().replace("timeline:\n", "params:\n  timing:\n    max_payload: 100\ntimeline:\n")
    open(path, "w").write(text)
    from devlend.errors import TopologyError
    with pytest.raises(TopologyError) as e:
        scenario_file.load(path).run()
    assert (e.value.file, e.value.line, e.value.field) == (path, 5, "params.timing.max_payload")
    assert "not a size the Device Control register can hold" in str(e.value)
