"""fio job files: fio's option names, value syntax and units; overrides; refusals at file:line."""

import numpy as np
import pytest

from devlend.fio import jobfile as jf, options as o, report

JOB = """\
; a comment
[global]
ioengine=libaio
direct=1
filename=/dev/nvme0n1
size=64m
runtime=500ms
time_based

[seq]
rw=read
bs=128k
iodepth=8

[rand]
stonewall
rw=randrw
rwmixwrite=30
bssplit=4k/60:16k:64k/10
numjobs=2
thinktime=5
percentile_list=50:99:99.9
"""


def test_sizes_times_and_flags_read_as_fio_reads_them():
    assert o.size("4k") == o.size("4KiB") == o.size("4KB") == 4096
    assert o.size("1m") == 1 << 20 and o.size("2g") == 2 << 30
    assert o.size("50%", 8 << 30) == 4 << 30
    assert o.duration_ps("2s") == o.duration_ps("2") == 2 * 10**12
    assert o.duration_ps("200ms") == 200 * 10**9 and o.duration_ps("500us") == 500 * 10**6
    assert o.duration_ps("5", "us") == 5 * 10**6        # thinktime's default unit
    assert o.boolean(None) and not o.boolean("0")
    assert o.bssplit("4k/60:16k:64k/10") == [(4096, 60), (16384, 30), (65536, 10)]
    assert o.percentile_list("50:99:99.9") == [50.0, 99.0, 99.9]


def test_a_job_file_gives_each_section_global_options_and_its_own():
    jobs, glob = jf.load(JOB, "t.fio")
    seq, rand = jobs
    assert glob["ioengine"] == "libaio" and glob["time_based"] == ""
    assert (seq.rw, seq.bssplit, seq.iodepth, seq.group, seq.size) == ("read", [(131072, 100)], 8, 0, 64 << 20)
    assert seq.runtime_ps == 500 * 10**9 and seq.time_based
    assert (rand.rw, rand.rwmixread, rand.numjobs, rand.group) == ("randrw", 70, 2, 1)
    assert rand.thinktime_ps == 5 * 10**6 and rand.percentiles == [50.0, 99.0, 99.9]
    assert any("filename: ignored" in n for n in seq.notes)
    assert any(n.startswith("ioengine=libaio: mapped") for n in seq.notes)


def test_command_line_overrides_win_over_the_file():
    jobs, _ = jf.load(JOB, "t.fio", jf.parse_overrides(["--runtime=200ms", "--iodepth=4", "--bs=16k"]))
    assert all(j.runtime_ps == 200 * 10**9 and j.iodepth == 4 and j.bssplit == [(16384, 100)] for j in jobs)


@pytest.mark.parametrize("line,expect", [
    ("verify=crc32c", "t.fio:3: option 'verify' is not one devlend models"),
    ("bogus=1", "t.fio:3: option 'bogus'"),
    ("rw=trim", "t.fio:3: option 'rw': expected one of read"),
    ("ioengine=mmap", "t.fio:3: option 'ioengine': ioengine 'mmap' is not modelled"),
    ("direct=0", "t.fio:3: option 'direct': buffered I/O"),
    ("bs=4k,64k", "t.fio:3: option 'bs': separate read and write block sizes"),
    ("runtime=fast", "t.fio:3: option 'runtime': expected a time"),
    ("bssplit=4k/70:64k/20", "t.fio:3: option 'bssplit': the percentages must add up to 100"),
])
def test_options_devlend_cannot_model_are_refused_at_their_line(line, expect):
    with pytest.raises(jf.FioJobError) as e:
        jf.load(f"[global]\nsize=1m\n{line}\n[j]\nrw=read\n", "t.fio")
    assert str(e.value).startswith(expect)


def test_whole_job_problems_name_the_job():
    with pytest.raises(jf.FioJobError, match="job 'j': offset 8589934592 is past the end of the drive, which holds 8589934592 bytes"):
        jf.load("[j]\noffset=8g\nsize=1m\n", "t.fio")
    with pytest.raises(jf.FioJobError, match="no job sections"):
        jf.load("[global]\nrw=read\n", "t.fio")
    with pytest.raises(jf.FioJobError, match="t.fio:1: option 'rw=read' comes before any section"):
        jf.load("rw=read\n", "t.fio")
    with pytest.raises(jf.FioJobError, match="command line: 'runtime=2s'"):
        jf.parse_overrides(["runtime=2s"])


def test_the_histogram_is_fios_and_percentiles_read_off_it_as_fio_does():
    import json
    sample = json.load(open("tests/data/fio-3.33-jsonplus.json"))
    clat = sample["jobs"][0]["read"]["clat_ns"]
    # every bin fio 3.33 wrote is the middle of one of our buckets, and maps back to it
    for key in clat["bins"]:
        v = int(key)
        assert report.plat_val(int(report.plat_idx(np.array([v]))[0])) == v
    lat = np.array([1000] * 50 + [2000] * 49 + [100000])
    p = report.percentiles(np.bincount(report.plat_idx(lat), minlength=report.PLAT_NR), [50, 99, 99.9])
    # buckets 8, 16 and 1024 ns wide there; fio reports their middles
    assert p == {"50.000000": 1004, "99.000000": 2008, "99.900000": 99840}


def test_a_job_too_big_to_simulate_is_refused_before_it_starts_with_the_limit_named():
    # fio's default size is the whole (8 GiB) drive: 2 Mi 4k reads, more than one run simulates
    with pytest.raises(jf.FioJobError, match=r"t.fio: the jobs may issue up to 2,097,152 I/Os, more than .* \(2,000,000\)"):
        jf.load("[j]\nrw=randread\n", "t.fio")
    with pytest.raises(jf.FioJobError, match="up to 60,000,000 I/Os"):
        jf.load("[j]\nrw=randread\nruntime=60\ntime_based\n", "t.fio")
    jobs, _ = jf.load("[j]\nrw=randread\nruntime=60\ntime_based\n", "t.fio", jf.parse_overrides(["--runtime=100ms"]))
    assert jf.estimate_ios(jobs) == 100_000
    jobs, _ = jf.load("[j]\nrw=read\nsize=64m\nbs=128k\nruntime=60\n", "t.fio")
    assert jf.estimate_ios(jobs) == 512                    # size ends it first
