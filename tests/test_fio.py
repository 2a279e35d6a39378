"""fio on the NVMe testbed: behaviour, not speed. IOPS grow with queue depth until the drive
saturates below its media limit; a borrowed drive is slower per command than a local one; data
written through the NTB reads back intact; a command past the drive's end is an NVMe status error."""

import pytest

from devlend import FabricError
from devlend.experiments import fio as fio_exp, hardware_params

from conftest import quick

BS = 4096


@pytest.fixture(scope="module")
def js():
    return fio_exp.topology_json()


def media_limit_iops() -> float:
    """The drive's own bound on 4 KiB random reads: its media pipe, or its parallelism over its latency."""
    dev = hardware_params()["device"]["optane-900p"]
    return min(dev["media_bandwidth"] / BS, dev["media_parallelism"] / (dev["media_read_latency_ps"] * 1e-12))


@pytest.mark.parametrize("placement", ["local", "borrowed"])
def test_iops_never_fall_with_queue_depth_and_saturate_below_the_drives_limit(js, placement):
    runner = fio_exp.PLACEMENTS[placement]
    iops = [fio_exp.run_fio(js, runner, "randread", qd, 1, fio_exp.ios_per_job(qd, True))["iops"] for qd in (1, 2, 4, 8, 16, 32, 64)]
    for qd, (a, b) in zip((2, 4, 8, 16, 32, 64), zip(iops, iops[1:])):
        assert b >= a * 0.98, f"{placement}: QD{qd} gives {b:.0f} IOPS after {a:.0f}"
    limit = media_limit_iops()
    assert max(iops) <= limit * 1.001, f"{max(iops):.0f} IOPS above the drive's {limit:.0f}"
    assert iops[-1] > 3 * iops[0], "queue depth gives parallelism"
    assert iops[-1] < iops[-2] * 1.1, "saturated: QD64 barely beats QD32"


def test_borrowed_qd1_latency_is_above_local(js):
    lo = fio_exp.run_fio(js, "lender", "randread", 1, 1, 32)
    bo = fio_exp.run_fio(js, "borrower", "randread", 1, 1, 32)
    assert bo["lat_p50_ps"] > lo["lat_p50_ps"]
    assert bo["lat_mean_ps"] > lo["lat_mean_ps"]


@pytest.mark.parametrize("placement, native", [("VMLoc", "local"), ("VMRem", "borrowed")])
def test_a_vm_reads_no_faster_than_its_native_counterpart_at_qd1_and_grows_with_queue_depth(js, placement, native):
    # The guest's driver, its interrupts on the VM path on the clock: each completion pays the
    # hypervisor's path on top of what the native driver on the same host pays.
    bare = fio_exp.run_fio(js, fio_exp.PLACEMENTS[native], "randread", 1, 1, 32)
    vm = {qd: fio_exp.run_vm_fio(placement, "randread", qd, fio_exp.ios_per_job(qd, True)) for qd in (1, 4, 16)}
    assert vm[1]["iops"] < bare["iops"], f"{placement}: {vm[1]['iops']:.0f} IOPS vs {native} {bare['iops']:.0f}"
    assert vm[1]["lat_p50_ps"] > bare["lat_p50_ps"]
    assert vm[4]["iops"] > 1.5 * vm[1]["iops"] and vm[16]["iops"] > vm[4]["iops"], {qd: r["iops"] for qd, r in vm.items()}


def test_writes_read_back_with_equal_checksums_through_the_borrowed_path(js):
    r = fio_exp.run_fio(js, "borrower", "randwrite", 8, 2, 48, verify=True)
    assert r["verified"] > 40
    assert r["mismatches"] == 0


def test_a_span_past_the_drive_is_refused_before_the_run_naming_its_capacity(js):
    # The drive's capacity comes from its profile (the 900P's 280 GB); a span past it is refused up
    # front, as devlend fio and scenario files refuse it (the controller's own LBA Out of Range
    # status is checked in crates/devlend-experiments/tests/it/nvme.rs).
    with pytest.raises(FabricError, match=r"runs past the end of the drive, which holds 280000000000 bytes"):
        fio_exp.run_fio(js, "borrower", "randread", 4, 1, 16, size_blocks=1 << 30)


def test_quick_experiment_has_every_row_and_note():
    res = quick("fio")
    assert len(res.rows) == 2 * (2 * len(fio_exp.QUICK_JOBS) + 2) * len(fio_exp.QUICK_QDS)
    assert any("media slot" in n for n in res.notes)
    assert any("MPS" in n for n in res.notes)
