"""Fault injection (issue 17): faults at a simulated time from Python, scenario files and the CLI;
the guarantees under fire (an error, never a hang, never silent wrong data; nothing lands after a fault
that cuts the path; nothing left mapped; a touched device reset before its next borrower, or
refused); and the `faults` experiment."""

import os
from typing import Optional

import pytest

from devlend import Pool, PoolError, Scenario, scenario_file
from devlend.errors import WorkloadError
from devlend.pool import FAULT_KINDS
from devlend.scenario_file import ScenarioFileError

from conftest import ROOT, quick, topo_path
from test_cli import cli
from test_scenario_files import BORROW, COPY, bad, scenario

FOUR = topo_path("four-server-cluster.yaml")


@pytest.fixture(scope="module")
def experiment():
    return quick("faults")


def test_every_fault_gives_the_application_an_error_never_a_hang_and_leaves_nothing_mapped(experiment):
    assert {r["kind"] for r in experiment.rows} == set(FAULT_KINDS) - {"link-up", "host-reboot", "port-up"}
    for r in experiment.rows:
        what = f"{r['workload']} / {r['fault']}: {r['application_saw']}"
        assert r["outcome"] == "error", what
        assert "differs" not in r["application_saw"], "silent wrong data: " + what
        assert r["mappings_left"] == 0, what
        assert 0 < r["bytes_before"] < r["bytes_without_fault"], "the fault struck mid-transfer: " + what
        assert r["noticed_after_us"] is not None and r["noticed_after_us"] >= 0, what


def test_the_drivers_name_what_they_noticed(experiment):
    """A pulled cable: fio's request times out and CSTS reads all ones; the GPU's copy wait finds
    BAR 0 unreadable (Xid 79). Neither notices later than its timeout plus the reads it makes."""
    row = {(r["workload"], r["kind"]): r for r in experiment.rows}
    fio, gpu = row[("fio", "link-down")], row[("gpu-copy", "link-down")]
    assert "I/O timeout" in fio["application_saw"] and "all ones" in fio["application_saw"], fio
    assert "fallen off the bus" in gpu["application_saw"], gpu
    assert fio["noticed_after_us"] <= 30e6 + 1e5, fio  # nvme_core.io_timeout (30 s) and a CSTS read
    assert gpu["noticed_after_us"] <= 1e6 + 1e5, gpu  # the copy watchdog (1 s) and an ID read


def test_a_removal_reaches_the_driver_by_hot_plug_not_by_its_timeout(experiment):
    """A surprise removal: the lender's slot interrupt, pciehp, Device Lending's notice, the
    borrower's hot-remove; a lender crash: the borrower's NTB link-down interrupt, its agent, the
    hot-remove. The driver gets "no such device" at the last step, long before its own timeout."""
    row = {(r["workload"], r["fault"]): r for r in experiment.rows}
    for w in ("fio", "gpu-copy"):
        removal, crash = row[(w, "surprise removal")], row[(w, "lender crash")]
        for r in (removal, crash):
            assert "no such device" in r["application_saw"], r
            assert 24_000 <= r["noticed_after_us"] < 25_000, r  # 24 ms to the slot interrupt, then the steps
            assert r["hotplug"].split("; ")[-1].startswith("driver-removed on server1"), r
        steps = [s.split(" +")[0] for s in removal["hotplug"].split("; ")]
        assert steps == ["slot-interrupt on server2", "pciehp-removed on server2", "lending-notified on server1", "driver-removed on server1"], removal
        assert [s.split(" +")[0] for s in crash["hotplug"].split("; ")] == ["slot-interrupt on server1", "lending-notified on server1", "driver-removed on server1"], crash


def test_a_crashed_borrower_stops_its_application_at_the_crash(experiment):
    for r in experiment.rows:
        if r["fault"] == "borrower crash":
            assert "host server1 crashed at" in r["application_saw"] and r["noticed_after_us"] == 0.0, r


def test_errors_the_hardware_reports_reach_the_aer_driver_with_their_severity(experiment):
    row = {(r["workload"], r["fault"]): r for r in experiment.rows}
    for w in ("fio", "gpu-copy"):
        assert "non-fatal poisoned-tlp" in row[(w, "poisoned completion")]["aer"], row[(w, "poisoned completion")]
        assert "fatal surprise-down" in row[(w, "surprise removal")]["aer"].replace("non-fatal", ""), row[(w, "surprise removal")]
        assert "fatal surprise-down" in row[(w, "port down")]["aer"], row[(w, "port down")]
        assert row[(w, "cable pulled")]["aer"] == "", "an NTB link going down is the adapter's own event, not AER"
        assert "non-fatal completion-timeout" in row[(w, "completion timeout")]["aer"], row[(w, "completion timeout")]


def test_a_poisoned_command_fetch_is_not_executed_the_driver_times_out_on_it(experiment):
    """The controller cannot name a command it fetched poisoned, so it posts no completion (it sets
    CSTS.CFS); the driver's timeout fails the request. Its CSTS read is poisoned too: all ones."""
    fio = next(r for r in experiment.rows if r["workload"] == "fio" and r["kind"] == "poisoned")
    assert "I/O timeout" in fio["application_saw"] and "not in flight" not in fio["application_saw"], fio


def test_a_fault_that_cuts_the_path_lets_no_byte_land_after_it(experiment):
    for r in experiment.rows:
        if r["kind"] != "poisoned":  # poisoning spoils completions; the device's posted writes still land
            assert r["bytes_after"] == 0, f"{r['workload']} / {r['fault']}: {r['bytes_after']} bytes after the fault"


def test_crashes_and_removals_end_the_lend_cables_and_ports_do_not(experiment):
    for r in experiment.rows:
        ends = r["kind"] in ("host-crash", "surprise-removal")
        assert (r["lends_ended"] == 1) == ends, r


def test_the_experiment_writes_csv_and_plot(experiment, tmp_path):
    assert experiment.to_csv().splitlines()[0].startswith("fault,kind,target")
    experiment.plot(experiment, str(tmp_path / "f.png"))
    assert (tmp_path / "f.png").stat().st_size > 10_000


def test_a_poisoned_completion_is_an_error_for_the_driver_never_its_data():
    s = Scenario(FOUR)
    s.gpu_copy("copy", "server1", "gpu2", "htod", 1 << 20, at_ns=0)
    s.fault("poisoned", "gpu2", at_ns=0)
    with pytest.raises(WorkloadError, match="poisoned completion"):
        s.run()
    assert s.end_lends_and_count_leftovers() == 0


def test_a_fault_in_the_past_or_at_nothing_is_refused():
    s = Scenario(FOUR)
    with pytest.raises(WorkloadError, match="no fault kind 'meteor'"):
        s.fault("meteor", "gpu2")
    with pytest.raises(WorkloadError, match="no function|no device"):
        s.fault("surprise-removal", "gpu99")
    with pytest.raises(WorkloadError, match="NTB adapter"):
        s.fault("poisoned", "ntb-1-2")


def pool() -> Pool:
    p = Pool(FOUR)
    p.connect("server2", "server1")
    for d in ("gpu2", "gpu3"):
        p.add(d).available(d)
    return p


def test_a_device_that_cannot_be_reset_is_refused_with_the_reason_and_a_removed_one_until_it_is_back():
    p = pool()
    p.borrow("server1", "gpu2").borrow("server1", "gpu3")
    assert p.fault("completion-timeout", "gpu2") == []
    p.return_device("gpu2")
    with pytest.raises(PoolError, match="Function Level Reset failed") as e:
        p.borrow("server1", "gpu2")
    assert e.value.kind == "reset-failed"
    ended = p.fault("surprise-removal", "gpu3")
    assert [x["device"] for x in ended] == ["gpu3"] and "surprise-removed" in ended[0]["why"]
    with pytest.raises(PoolError) as e:
        p.borrow("server1", "gpu3")
    assert e.value.kind == "removed"
    p.fault("port-up", "gpu3")
    p.borrow("server1", "gpu3")
    assert "gpu3" not in p.needs_reset(), "reset (FLR) before the next borrower"
    p.return_device("gpu3")
    assert p.idle


def test_a_lender_reboot_ends_its_lends_and_the_device_can_be_borrowed_again():
    p = pool()
    p.borrow("server1", "gpu2")
    ended = p.fault("host-crash", "server2")
    assert ended[0]["device"] == "gpu2" and "lender server2 crashed" in ended[0]["why"] and p.idle
    p.fault("host-reboot", "server2")
    p.borrow("server1", "gpu2").return_device("gpu2")
    assert p.idle


def test_a_scenario_file_injects_faults_on_the_clock_and_the_other_lend_goes_on():
    sf = scenario_file.load(os.path.join(ROOT, "python", "devlend", "scenarios", "four-server-borrower-crash.yaml"))
    run = sf.run()
    assert run.results().end_ns.notna().all()
    assert [f["kind"] for f in run.scenario.faults()] == ["host-crash", "link-down", "link-up"]
    assert all(f["struck"] and f["error"] is None for f in run.scenario.faults())
    assert run.pool.show("gpu3")["state"] == "available" and "gpu3" in run.pool.needs_reset()


@pytest.mark.parametrize("entry, field, match", [
    ("  - {at: 1 us, action: fault, kind: meteor, target: gpu2}\n", "timeline[1].kind", "Input should be"),
    ("  - {at: 1 us, action: fault, kind: surprise-removal, target: gpu99}\n", "timeline[1].target", "gpu99"),
    ("  - {at: 1 us, action: fault, kind: link-down, target: server1}\n", "timeline[1].target", "server1"),
    ("  - {at: 1 us, action: fault, kind: poisoned}\n", "timeline[1].target", "required field 'target'"),
])
def test_bad_fault_actions_name_file_line_and_field(tmp_path, entry, field, match):
    err = bad(tmp_path, BORROW + entry)
    assert (err.line, err.field) == (5, field), str(err)
    assert match in err.message, str(err)


def test_a_fault_that_breaks_a_scenario_file_workload_is_its_error(tmp_path):
    # Re-baselined: a fault ends the workload it breaks, not the run; its row carries the error.
    path = scenario(tmp_path, BORROW + COPY + "  - {at: 100 us, action: fault, kind: link-down, target: ntb-1-2}\n")
    row = scenario_file.load(path).run().results().set_index("name").loc["copy"]
    assert row.status == "failed" and "workload copy failed" in row.error, row.to_dict()


def test_cli_pool_fault_verb():
    res = cli("pool", FOUR, "connect", "server2", "server1", "add", "gpu2", "available", "gpu2", "borrow", "server1", "gpu2",
              "fault", "host-crash", "server1")
    assert "fault: host-crash" in res.stdout and "reclaimed" in res.stdout and "{" not in res.stdout  # no JSON in the table
    bad_ = cli("pool", FOUR, "fault", "meteor", "gpu2", check=False)
    assert bad_.returncode != 0 and "no fault kind 'meteor'" in bad_.stderr


# Issue 30, item 3: a VM stops with its host; a mediated guest is told of its lender's crash
# through the lending agent and the hot-unplug its hypervisor forwards, not by its watchdog.
VM = "vms:\n  - {name: vm-a, host: server1, memory: 256 MiB, devices: [gpu0, {device: gpu2, path: mediated}]}\n"


def _vm_copy(gpu: str, fault: Optional[tuple] = None):
    from test_vm_topology import cluster
    s = Scenario(cluster(VM))
    s.gpu_copy("copy", "vm-a", gpu, "htod", 16 << 20)
    if fault:
        s.fault(fault[0], fault[1], at_ns=fault[2])
    return s, s.run(keep_going=True).results().set_index("name").loc["copy"]


@pytest.mark.parametrize("gpu", ["gpu0", "gpu2"])
def test_a_vm_whose_host_crashes_stops_at_the_crash_with_that_error(gpu):
    at = _vm_copy(gpu)[1].end_ns / 2
    _, row = _vm_copy(gpu, ("host-crash", "server1", at))
    assert row.status == "cut short" and "host server1 crashed at" in row.error, row.to_dict()
    assert row.noticed_ns == pytest.approx(at, abs=1e-3), "the guest stopped at the crash, not at its watchdog 1 s later"


def test_a_mediated_guest_learns_of_its_lenders_crash_through_the_forwarded_hot_unplug():
    at = _vm_copy("gpu2")[1].end_ns / 2
    s, row = _vm_copy("gpu2", ("host-crash", "server2", at))
    assert row.status == "failed" and "gpu2 was removed (hot-plug)" in row.error and "on VM vm-a" in row.error, row.to_dict()
    steps = [(e["step"], e["host"]) for e in s.events() if e["kind"] == "hotplug"]
    assert steps == [("slot-interrupt", "server1"), ("lending-notified", "server1"), ("driver-removed", "server1"),
                     ("guest-driver-removed", "server1")], steps
    guest_told = next(e["at_ps"] for e in s.events() if e["kind"] == "hotplug" and e["step"] == "guest-driver-removed") / 1e3
    assert at < guest_told <= row.noticed_ns < at + 50e6, "told within the lending agent's notice time (~25 ms), not 1 s"


# Issue 30, item 4: a device that receives a poisoned completion reports it at once.
def test_a_poisoned_gpu_fails_its_copy_at_once_in_a_scenario_file(tmp_path):
    path = scenario(tmp_path, BORROW + COPY + "  - {at: 20 us, action: fault, kind: poisoned, target: gpu2}\n")
    row = scenario_file.load(path).run().results().set_index("name").loc["copy"]
    assert row.status == "failed" and "copy engine 0's copy failed" in row.error and "poisoned completion" in row.error, row.to_dict()
    assert 20e3 < row.noticed_ns < 120e3, "the application had the failed copy at once, not at the GPU's watchdog"


def test_a_poisoned_page_of_ram_is_a_fault_target_and_a_bad_one_names_the_field(tmp_path):
    s = Scenario(FOUR)
    s.fault("poisoned", "server1.ram+0x100000", at_ns=0)
    s.run()
    assert s.faults()[0]["struck"] and s.faults()[0]["error"] is None
    assert "HOST.ram+OFFSET" in FAULT_KINDS["poisoned"]
    err = bad(tmp_path, BORROW + "  - {at: 1 us, action: fault, kind: poisoned, target: server1.ram+0x100000000000}\n")
    assert (err.line, err.field) == (5, "timeline[1].target") and "RAM" in err.message, str(err)
