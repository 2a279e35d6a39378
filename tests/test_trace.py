"""HyperTRIO traces (002 §IV-A/B/C): the .dlt format, the trace constructor, replay, `devlend trace`."""

import json
import os

import pytest

from devlend import _core
from devlend.cli_trace import SAMPLE_LOG
from devlend.traces.sample_log import lines

import clirun
from conftest import ROOT


def cli(*args):
    return clirun.run("trace", *args, cwd=ROOT)


def build(inputs, out, tenants=None, order="RR1", seed=1):
    return json.loads(_core.hypertrio_trace_build(inputs, str(out), tenants, order, seed))


def replay(inputs, config="hypertrio", tenants=None, order=None, seed=1):
    return json.loads(_core.hypertrio_trace_replay([str(i) for i in inputs], config, None, tenants, order, seed))


def test_shipped_sample_log_is_what_its_script_makes():
    with open(SAMPLE_LOG, encoding="utf-8") as fh:
        assert fh.read() == "\n".join(lines()) + "\n"
    s = json.loads(_core.hypertrio_read_qemu_log(SAMPLE_LOG))
    assert s["sids"] == [0x100, 0x108, 0x110] and s["slpte_fetches"] > 0 and s["requests"] % 3 == 0


def test_build_and_info_round_trip_with_reuse_and_stop_rule(tmp_path):
    t = tmp_path / "t.dlt"
    s = build([SAMPLE_LOG], t, tenants=10, order="RR4")
    assert (s["tenants"], s["sources"]) == (10, 3)
    per_source = s["inputs"][0]["requests"] // 3 // 3  # 3 tenants with equal counts in the sample
    # RR4: full bursts until the first tenant runs out mid-burst; then the trace stops there
    rounds, rest = divmod(per_source, 4)
    assert s["packets"] == rounds * 4 * 10 + rest
    i = json.loads(_core.hypertrio_trace_info(str(t)))
    assert (i["tenants"], i["packets"], i["translations"]) == (10, s["packets"], 3 * s["packets"])
    assert i["packets_per_tenant_max"] == per_source and i["packets_per_tenant_min"] == rounds * 4
    assert i["meta"]["order"] == "RR4" and i["bytes"] == os.path.getsize(t)


def test_same_seed_same_bytes_other_seed_other_random_order(tmp_path):
    a, b, c = (tmp_path / n for n in ("a.dlt", "b.dlt", "c.dlt"))
    build([SAMPLE_LOG], a, tenants=32, order="RAND1", seed=5)
    build([SAMPLE_LOG], b, tenants=32, order="RAND1", seed=5)
    build([SAMPLE_LOG], c, tenants=32, order="RAND1", seed=6)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()


@pytest.mark.parametrize("order", ["RR1", "RR4", "RAND1"])
def test_replay_of_a_log_equals_replay_of_its_trace(tmp_path, order):
    t = tmp_path / "t.dlt"
    build([SAMPLE_LOG, SAMPLE_LOG], t, tenants=48, order=order, seed=3)
    direct = replay([SAMPLE_LOG, SAMPLE_LOG], tenants=48, order=order, seed=3)
    assert direct == replay([t])
    assert direct["packets"] > 0 and 0 < direct["gbps"] <= 200


def test_synthetic_trace_replays_like_the_generator(tmp_path):
    t = tmp_path / "m.dlt"
    n = _core.hypertrio_trace_synth(str(t), "websearch", 24, "RR4", 200, 2)
    assert n == 24 * 200
    want = json.loads(_core.hypertrio_simulate("base", "websearch", 24, "RR4", 200, None, 2))
    assert replay([t], config="base") == want


def test_traces_from_traces_and_logs_mix(tmp_path):
    t = tmp_path / "t.dlt"
    build([SAMPLE_LOG], t)
    s = build([str(t), SAMPLE_LOG], tmp_path / "u.dlt")
    assert s["sources"] == 6 and [i["kind"] for i in s["inputs"]] == ["trace", "qemu-log"]


def test_corrupt_traces_and_logs_are_one_line_errors(tmp_path):
    good = tmp_path / "g.dlt"
    build([SAMPLE_LOG], good)
    data = good.read_bytes()
    cases = {
        "magic.dlt": (b"XXXX" + data[4:], "bad magic"),
        "version.dlt": (data[:8] + b"\x07\x00" + data[10:], "version 7"),
        "cut.dlt": (data[:-10], "truncated"),
        "flip.dlt": (data[:-30] + bytes([data[-30] ^ 0x10]) + data[-29:], "corrupt"),
    }
    for name, (content, words) in cases.items():
        p = tmp_path / name
        p.write_bytes(content)
        with pytest.raises(_core.HyperTrioError, match=words) as e:
            _core.hypertrio_trace_info(str(p))
        assert str(p) in str(e.value)
        r = cli("replay", str(p))
        assert r.returncode == 2 and r.stderr.startswith(f"devlend: error: {p}") and "Traceback" not in r.stderr
    log = tmp_path / "bad.log"
    log.write_text(open(SAMPLE_LOG).read().replace("iova 0xf0000000 slpte", "iova 0xZZ slpte", 1))
    r = cli("build", str(log), "-o", str(tmp_path / "x.dlt"))
    assert r.returncode == 2 and f"{log}:9:" in r.stderr and "iova" in r.stderr
    assert not (tmp_path / "x.dlt").exists() and not (tmp_path / "x.dlt.part").exists()
    for args, words in [(("--tenants", "0"), "'--tenants'"), (("--order", "RR0"), "burst")]:
        r = cli("build", SAMPLE_LOG, "-o", str(tmp_path / "y.dlt"), *args)
        assert r.returncode == 2 and words in r.stderr, r.stderr


def test_cli_build_info_replay(tmp_path):
    t = str(tmp_path / "t.dlt")
    r = cli("build", SAMPLE_LOG, "--tenants", "16", "--order", "RR4", "-o", t)
    assert r.returncode == 0 and "16 tenants from 3 source tenants" in r.stdout
    assert "tenants 16" in cli("info", t).stdout
    st = json.loads(cli("replay", t, "--config", "base", "--json").stdout)
    assert st["tenants"] == 16 and st == replay([t], config="base")


def test_truncated_logs_unknown_events_and_bad_header_counts_name_file_and_place(tmp_path):
    """Issue 5 "bad input": a log cut mid-line or mid-field, a vtd_* event QEMU never prints, and
    .dlt headers whose counts are impossible or cut short: one line naming the file and the line
    (logs) or byte (traces), exit status 2, nothing written."""
    text = open(SAMPLE_LOG, encoding="utf-8").read()
    line9 = text.splitlines()[8]
    assert "vtd_iotlb_page_update" in line9 and " slpte " in line9
    start9 = text.index(line9)
    logs = {
        "cut-field.log": (text[:start9 + line9.index(" slpte ") + 3], ":9: vtd_iotlb_page_update: field 'slpte' missing"),
        "cut-name.log": (text[:start9 + line9.index("vtd_") + 12], ":9: 'vtd_iotlb_pa' is not an intel-iommu trace event"),
        "unknown.log": (text.replace("vtd_slpte_fetch", "vtd_slpte_fetched", 1), ":5: 'vtd_slpte_fetched' is not an intel-iommu trace event"),
    }
    for name, (content, words) in logs.items():
        p = tmp_path / name
        p.write_text(content)
        r = cli("replay", str(p), "-q")
        assert r.returncode == 2 and r.stderr.startswith(f"devlend: error: {p}{words}"), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    good = tmp_path / "g.dlt"
    build([SAMPLE_LOG], good)
    data = good.read_bytes()
    traces = {
        "pages.dlt": (data[:16] + b"\xff\xff\xff\xff" + data[20:], "byte 16: corrupt header: 4294967295 pages"),
        "tenants.dlt": (data[:12] + bytes(4) + data[16:], "byte 12: corrupt header: tenants: 0"),
        "header-cut.dlt": (data[:40], "byte 40: truncated: the file ends inside the page dictionary"),
    }
    for name, (content, words) in traces.items():
        p = tmp_path / name
        p.write_bytes(content)
        with pytest.raises(_core.HyperTrioError, match=words):
            _core.hypertrio_trace_info(str(p))
    r = cli("build", str(tmp_path / "pages.dlt"), "-o", str(tmp_path / "o.dlt"), "-q")
    assert r.returncode == 2 and r.stderr.startswith(f"devlend: error: {tmp_path / 'pages.dlt'}: byte 16: corrupt header")
    assert not (tmp_path / "o.dlt").exists() and not (tmp_path / "o.dlt.part").exists()


@pytest.mark.parametrize("value", ["-5", "0", str(10**12)])
def test_tenant_counts_out_of_range_are_usage_errors_naming_the_option(tmp_path, value):
    """Issue 17 audit: `--tenants -5` or 10^12 ended in an OverflowError traceback."""
    r = cli("build", SAMPLE_LOG, "-o", str(tmp_path / "t.dlt"), f"--tenants={value}")
    assert r.returncode == 2 and "--tenants" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "t.dlt").exists()
    r = cli("build", SAMPLE_LOG, "-o", str(tmp_path / "t.dlt"), "--tenants", "4000000000")  # a u32, over the trace's limit
    assert r.returncode == 2 and "tenants: 4000000000 (expected 1..=65280)" in r.stderr, r.stderr
