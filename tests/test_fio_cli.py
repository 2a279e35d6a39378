"""`devlend fio JOBFILE`: a job file with sequential, random and mixed sections runs on the NVMe
model (borrowed through Device Lending) and writes fio's JSON, keyed as fio 3.33 keys it."""

import json
import os

import pytest

import clirun
from conftest import ROOT

TOPO = os.path.join(ROOT, "topologies", "nvme-back-to-back.yaml")
SAMPLE = json.load(open(os.path.join(ROOT, "tests", "data", "fio-3.33-jsonplus.json")))
JOBS = """\
[global]
ioengine=libaio
direct=1
filename=/dev/nvme0n1
size=256m
runtime=1ms
time_based

[seqread]
rw=read
bs=128k
iodepth=4

[randread]
stonewall
rw=randread
bs=4k
iodepth=32
numjobs=2

[mixed]
stonewall
rw=randrw
rwmixread=70
bssplit=4k/60:16k/40
iodepth=16
percentile_list=50:99:99.9
"""


def devlend(*args, check=True):
    return clirun.run(*args, cwd=ROOT, check=check)


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    d = tmp_path_factory.mktemp("fio")
    (d / "mix.fio").write_text(JOBS)
    out = d / "out.json"
    r = devlend("fio", str(d / "mix.fio"), "--topology", TOPO, "--host", "borrower", "--device", "nvme0",
                "--output-format=json+", "--output", str(out))
    assert f"wrote {out}" in r.stderr and r.stdout == ""
    assert "filename: ignored" in r.stderr and "ioengine=libaio: mapped" in r.stderr
    return json.loads(out.read_text())


def test_fio_json_has_fios_structure_and_keys(doc):
    assert set(SAMPLE) - set(doc) == set()                       # fio version, timestamp, global options, jobs, disk_util
    sj = SAMPLE["jobs"][0]
    for j in doc["jobs"]:
        assert {"jobname", "groupid", "job options", "read", "write", "job_runtime", "iodepth_level", "latency_us"} <= set(j)
        for d in ("read", "write"):
            assert set(sj[d]) - {"clat_ns"} <= set(j[d])
            for lat in ("slat_ns", "lat_ns"):
                assert set(sj[d][lat]) <= set(j[d][lat])
    assert doc["global options"]["ioengine"] == "libaio"
    assert [j["jobname"] for j in doc["jobs"]] == ["seqread", "randread", "randread", "mixed"]
    assert [j["groupid"] for j in doc["jobs"]] == [0, 1, 1, 2]


def test_sequential_random_and_mixed_sections_each_do_what_they_say(doc):
    seq, r1, r2, mixed = doc["jobs"]
    assert seq["read"]["total_ios"] > 0 and seq["write"]["total_ios"] == 0
    assert seq["read"]["io_bytes"] == seq["read"]["total_ios"] * 131072
    assert r1["read"]["io_bytes"] == r1["read"]["total_ios"] * 4096 and r2["read"]["total_ios"] > 0
    rd, wr = mixed["read"]["total_ios"], mixed["write"]["total_ios"]
    assert rd > 0 and wr > 0 and 0.55 < rd / (rd + wr) < 0.85   # rwmixread=70
    sizes = {mixed[d]["io_bytes"] / mixed[d]["total_ios"] for d in ("read", "write")}
    assert all(4096 < s < 16384 for s in sizes)                  # a 4k/16k split
    for j in doc["jobs"]:
        for d in ("read", "write"):
            s = j[d]
            if s["total_ios"]:
                assert s["iops"] == pytest.approx(s["total_ios"] / (s["runtime"] / 1e3), rel=0.5)
                assert s["lat_ns"]["N"] == s["clat_ns"]["N"] == s["total_ios"]
                assert s["clat_ns"]["bins"] and sum(s["clat_ns"]["bins"].values()) == s["total_ios"]


def test_percentiles_come_from_a_real_distribution(doc):
    r = doc["jobs"][1]["read"]["clat_ns"]["percentile"]
    assert "99.000000" in r and "1.000000" in r and r["1.000000"] < r["50.000000"]   # the queue filling up
    mixed = doc["jobs"][3]
    for d in ("read", "write"):
        p = mixed[d]["clat_ns"]["percentile"]
        assert list(p) == ["50.000000", "99.000000", "99.900000"]
        # 4k and 16k reads and writes queue behind each other for the media: a spread, not one value
        assert p["99.000000"] > p["50.000000"], p


def test_command_line_options_override_the_file_and_normal_output_reads_like_fio(tmp_path):
    (tmp_path / "j.fio").write_text("[j]\nioengine=libaio\ndirect=1\nrw=randread\niodepth=4\nsize=64m\nruntime=1s\ntime_based\n")
    r = devlend("fio", str(tmp_path / "j.fio"), "--topology", TOPO, "--host", "lender", "--device", "nvme0",
                "--runtime=300us", "--iodepth=2", "--output-format=json", "-q")
    j = json.loads(r.stdout)["jobs"][0]
    assert j["job options"]["iodepth"] == "2" and j["job options"]["runtime"] == "300us"
    assert j["job_runtime"] < 5 and "bins" not in j["read"]["clat_ns"]
    assert r.stderr == ""
    text = devlend("fio", str(tmp_path / "j.fio"), "--topology", TOPO, "--host", "lender", "--device", "nvme0",
                   "--runtime=200us").stdout
    assert "j: (groupid=0, jobs=1)" in text and "  read: IOPS=" in text and "clat percentiles (" in text
    assert "Run status group 0 (all jobs):" in text and "Disk stats (read/write):" in text


def test_an_option_devlend_cannot_model_is_refused_at_its_line(tmp_path):
    (tmp_path / "j.fio").write_text("[j]\nrw=randread\nverify=md5\n")
    r = devlend("fio", str(tmp_path / "j.fio"), "--topology", TOPO, "--host", "lender", "--device", "nvme0", check=False)
    assert r.returncode == 2 and f"{tmp_path / 'j.fio'}:3: option 'verify'" in r.stderr and "Traceback" not in r.stderr
