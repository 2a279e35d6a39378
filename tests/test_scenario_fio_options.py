"""Scenario files and `devlend run-workloads` take fio's job options as `devlend fio` does: the same
parser (devlend.fio.jobfile.apply), the same values and the same refusals, at file:line:field."""

import pytest

from devlend import scenario_file
from devlend.fio import jobfile
from devlend.scenario_file import ScenarioFileError

from conftest import topo_path
from test_cli import cli
from test_scenario_files import scenario

BORROW = "  - {at: 0, action: borrow, borrower: server1, device: nvme1}\n"


def fio(options: str) -> str:
    return "  - {at: 1 us, action: fio, name: f, runner: server1, drive: nvme1, " + options + "}\n"


def test_fio_job_options_reach_the_drive(tmp_path):
    p = scenario(tmp_path, BORROW + fio("rw: randrw, rwmixread: 70, bs: 64k, iodepth: 4, numjobs: 2, number_ios: 50, "
                                        "offset: 1g, size: 2g, randrepeat: 0, thinktime: 0"))
    row = scenario_file.load(p).run().results().set_index("name").loc["f"]
    assert row.ios == 100 and row.bytes == 100 * 65536, row


def test_bssplit_and_a_time_based_run(tmp_path):
    p = scenario(tmp_path, BORROW + fio("rw: randread, bssplit: '4k/50:64k/50', iodepth: 8, runtime: 200us, time_based: 1, "
                                        "ramp_time: 0"))
    row = scenario_file.load(p).run().results().set_index("name").loc["f"]
    assert row.ios > 10 and 4096 * row.ios < row.bytes < 65536 * row.ios, row
    # time_based stops submitting at the runtime; what is in flight then (8 of up to 64 KiB at the
    # 900P's 2.5 GB/s, about 210 us) still completes
    assert 200_000 < row.end_ns - row.start_ns < 450_000, row


def test_the_short_form_still_runs_as_before(tmp_path):
    p = scenario(tmp_path, BORROW + fio("rw: randread, iodepth: 8, ios: 300"))
    row = scenario_file.load(p).run().results().set_index("name").loc["f"]
    assert row.ios == 300 and row.bytes == 300 * 4096


@pytest.mark.parametrize("option,value,key", [("bs", "4x", "bs"), ("iodepht", "8", "iodepht"), ("rw", "randomread", "rw"),
                                              ("rwmixread", "120", "rwmixread"), ("bssplit", "4k/30:8k/30", "bssplit"),
                                              ("direct", "0", "direct"), ("ioengine", "windowsaio", "ioengine")])
def test_a_bad_option_is_refused_at_file_line_field_with_devlend_fios_words(tmp_path, option, value, key):
    p = scenario(tmp_path, BORROW + "  - {at: 1 us, action: fio, name: f, runner: server1, drive: nvme1,\n"
                                    f"     {option}: '{value}'}}\n")
    with pytest.raises(ScenarioFileError) as e:
        scenario_file.load(p).run()
    job = jobfile.Job(name="j")
    with pytest.raises(jobfile.FioOptionError) as same:
        jobfile.apply(job, option, value)
    assert (e.value.line, e.value.field) == (6, f"timeline[1].{key}"), e.value
    assert e.value.message == same.value.why, (e.value.message, same.value.why)
    # and devlend fio says the same of the same line in a job file
    jf = tmp_path / "j.fio"
    jf.write_text(f"[j]\n{option}={value}\n")
    res = cli("fio", str(jf), "--topology", topo_path("nvme-back-to-back.yaml"), "--host", "borrower", "--device", "nvme0",
              check=False)
    assert res.returncode == 2 and f"{jf}:2: {same.value.why}" in res.stderr, res.stderr


def test_a_region_past_the_drive_is_refused_at_the_line(tmp_path):
    p = scenario(tmp_path, BORROW + fio("rw: read, offset: 200g, size: 100g"))
    with pytest.raises(Exception, match=r":5: job 'f': offset 214748364800 plus size 107374182400 runs past the end of the drive, "
                                        r"which holds 280000000000 bytes"):
        scenario_file.load(p).run()


def test_run_workloads_takes_the_same_options_after_commas():
    topo = topo_path("nvme-back-to-back.yaml")
    res = cli("run-workloads", topo, "--fio", "f:borrower:nvme0:randrw:4:1:40,bs=64k,rwmixread=50")
    assert "f" in res.stdout and "fio" in res.stdout
    bad = cli("run-workloads", topo, "--fio", "f:borrower:nvme0:randread:4:1:40,bs=4x", check=False)
    why = "option 'bs': expected a size such as 4k, 64KiB, 1m or 2g, not '4x'"
    assert bad.returncode == 2 and f"--fio f:borrower:nvme0:randread:4:1:40,bs=4x: {why}" in bad.stderr, bad.stderr
