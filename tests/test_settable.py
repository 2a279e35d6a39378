"""--set where users asked for it: link generation and width (per link, or every link with
``links.*``), IOMMU settings (IOTLB and page-walk cache entries, the page-walk read cost, interrupt
remapping per host), an NVMe drive's media (read/write latency, parallelism, bandwidth, capacity)
and the simulated-memory budget; each listed by `devlend params` with its unit and default, each
moving the result the way the hardware would, each refused with its key named when bad, and
recorded in a result's provenance."""

import json
import tomllib

import pytest

import devlend
from devlend.errors import DevlendError
from devlend.topology import load

from conftest import topo_path
from test_cli import cli

PXH = topo_path("pxh830-two-host.yaml")
B2B = topo_path("nvme-back-to-back.yaml")


def stream_gbps(sets: dict, nbytes: int = 4 << 20) -> float:
    """A saturating stream of writes from the lender's GPU through the NTB into the borrower's IOMMU window."""
    topo = load(PXH).with_params(sets, "--set") if sets else PXH
    s = devlend.Scenario(topo)
    s.stream("w", "gpu0", "ntb-l.mw1", nbytes)
    return float(s.run().results().set_index("name").loc["w", "GBps"])


def test_a_narrower_link_halves_a_saturating_stream():
    x8 = stream_gbps({})
    x4 = stream_gbps({"links.ntb-b.cable.width": 4})      # the NTB cable, Gen3 x8 -> Gen3 x4
    assert 0.4 < x4 / x8 < 0.6, (x8, x4)


def test_an_older_generation_on_every_link_halves_it():
    gen3 = stream_gbps({})
    gen2 = stream_gbps({"links.*.gen": 2})                 # 8 GT/s 128b/130b -> 5 GT/s 8b/10b
    assert 0.4 < gen2 / gen3 < 0.65, (gen3, gen2)


def test_the_iommu_walk_cost_and_caches_are_settable_and_slow_the_stream_down():
    base = stream_gbps({})
    no_caches = {"timing.iotlb_entries": 0, "timing.pwc_entries": 0}
    cheap = stream_gbps({**no_caches, "timing.iommu_walk_read_ps": "80 ns"})
    dear = stream_gbps({**no_caches, "timing.iommu_walk_read_ps": "1 us"})
    assert dear < cheap < base, (base, cheap, dear)


def test_interrupt_remapping_is_set_per_host():
    assert load(PXH).build().interrupt_remapping("borrower")
    off = load(PXH).with_params({"hosts.borrower.interrupt_remapping": False}, "--set").build()
    assert not off.interrupt_remapping("borrower")
    with pytest.raises(DevlendError, match=r"hosts\.lender\.interrupt_remapping=True.*no IOMMU"):
        load(PXH).with_params({"hosts.lender.interrupt_remapping": True}, "--set").build()


def fio_row(sets: dict, iodepth: int = 1, ios: int = 100):
    topo = load(B2B).with_params(sets, "--set") if sets else B2B
    s = devlend.Scenario(topo)
    s.fio("f", "borrower", "nvme0", "randread", iodepth=iodepth, ios=ios)
    return s.run().results().set_index("name").loc["f"]


def test_a_slower_media_read_raises_fios_mean_latency_by_the_difference():
    base = fio_row({})
    slow = fio_row({"devices.nvme0.media_read_latency_ps": "40 us"})   # the 900P's is 10 us
    assert 29 < slow.lat_mean_us - base.lat_mean_us < 31, (base.lat_mean_us, slow.lat_mean_us)


def test_less_media_parallelism_lowers_a_deep_queues_iops():
    base = fio_row({}, iodepth=16, ios=400)
    one = fio_row({"devices.nvme0.media_parallelism": 1}, iodepth=16, ios=400)
    assert one.iops < base.iops / 3, (base.iops, one.iops)


@pytest.mark.parametrize("key,value,expected", [
    ("links.*.width", "3", "x3: a link is x1, x2, x4, x8, x12 or x16"),
    ("links.*.gen", "6", "Gen6: a PCIe generation is 1 to 5"),
    ("links.nowhere.gen", "3", "no link has an end 'nowhere'"),
    ("devices.gpu0.media_read_latency_ps", "1us", "gpu0 is of kind gpu, not kind nvme"),
    ("devices.nvme0.media_parallelism", "0", "0 commands at once: 1 to 1024"),
    ("devices.nvme0.capacity", "100", "100 bytes: at least one 512-byte block"),
    ("devices.nvme0.media_bandwidth", "fast", "'fast' is not a whole number"),
    ("timing.iommu_walk_read_ps", "2 GiB", "unit 'GiB' does not fit"),
    ("limits.memory_bytes", "-1", "expected a whole number"),
    ("hosts.borrower.interrupt_remapping", "maybe", "expected true or false"),
])
def test_a_bad_value_is_refused_naming_the_key(key, value, expected):
    topo = B2B if ("nvme0" in key or "borrower" in key) else PXH
    res = cli("run-workloads", topo, "--stream", "s:borrower:cpu:borrower.ram:4KiB", "--set", f"{key}={value}", check=False)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"--set {key}=" in res.stderr and expected.lower() in res.stderr.lower(), res.stderr


def test_devlend_params_lists_every_settable_key_with_its_unit_and_default():
    text = cli("params").stdout
    settable = tomllib.loads(text)["settable"]
    for key, unit in [("links.END.gen", "PCIe generation"), ("links.END.width", "lanes"), ("timing.iotlb_entries", "entries"),
                      ("timing.pwc_entries", "entries"), ("timing.iommu_walk_read_ps", "ps"),
                      ("hosts.NAME.interrupt_remapping", "true/false"), ("devices.NAME.media_read_latency_ps", "ps"),
                      ("devices.NAME.media_write_latency_ps", "ps"), ("devices.NAME.media_parallelism", "commands"),
                      ("devices.NAME.media_bandwidth", "bytes/s"), ("devices.NAME.capacity", "bytes"),
                      ("limits.memory_bytes", "bytes")]:
        assert settable[key].startswith(f"{unit}; default: "), (key, settable.get(key))
    grep = cli("params", "--grep", "media_parallelism").stdout
    assert "[settable]" in grep and "[device.optane-900p]" in grep


def test_a_set_is_recorded_in_the_fio_results_provenance(tmp_path):
    job = tmp_path / "j.fio"
    job.write_text("[r]\nrw=randread\nioengine=libaio\niodepth=1\nnumber_ios=50\ndirect=1\n")
    out = tmp_path / "r.json"
    res = cli("fio", str(job), "--topology", B2B, "--host", "borrower", "--device", "nvme0", "-q",
              "--set", "devices.nvme0.media_read_latency_ps=40us", "--output-format=json", "--output", str(out))
    doc = json.loads(out.read_text())
    assert doc["devlend provenance"]["set"] == ["devices.nvme0.media_read_latency_ps=40us"]
    assert doc["jobs"][0]["read"]["lat_ns"]["mean"] > 40_000, doc["jobs"][0]["read"]["lat_ns"]
    assert "media_read_latency_ps=40us" in cli("provenance", str(out)).stdout, res.stderr
