"""Parameters as data (issue 15): a topology's ``params`` section, ``Topology.with_params`` and
``--set`` override hardware constants with no rebuild. Relations the model must keep:

- MPS 128 gives a lower write bandwidth than 256, by the ratio of payload to payload plus framing;
- a per-link MPS limits the whole path (the path minimum), a link off the path changes nothing;
- restating the defaults gives a bit-identical run;
- bad overrides are one file:line:field error;
- results carry the effective parameters;
- every constant of params/hardware.toml says where it comes from (sourced, assumed, or fitted to a
  named calibration set on a date), the fitted ones are exactly those params/measurements.yaml
  fits, and the core runs on the file as it is written (rebuilt after `devlend calibrate --write`).
"""


import pytest
import clirun
from conftest import topo_path

import devlend
from devlend.errors import TopologyError
from devlend.experiments import hardware_params

MiB = 1 << 20
TOPO = "pxh830-two-host.yaml"


# The links bound these streams: the borrower root's intake of writes to RAM is off here (its own
# test: test_the_root_intake_holds_writes_to_ram_not_reads).
LINKS_ONLY = {"cpus.intel-xeon-e5.ram_write_line_ps": 0}


def gpu_writes(overrides=None, nbytes=8 * MiB, write=True, links_only=True):
    """gpu0's stream into the borrower's RAM through the NTB pair: (GB/s, analytic GB/s, the run)."""
    topo = devlend.load(topo_path(TOPO))
    overrides = {**(LINKS_ONLY if links_only else {}), **(overrides or {})}
    fab = (topo.with_params(overrides) if overrides else topo).build()
    base = fab.resolve("ntb-l.mw1")
    run = fab.machine()
    run.stream("w", "gpu0", base, nbytes, write=write)
    run.run()
    return float(run.results().GBps[0]), run.analytic("gpu0", base, write=write)["stream_Bps"] / 1e9, run


def framing_efficiency(mps: int) -> float:
    t = hardware_params()["timing"]
    # A one-way stream's TLPs carry their framing, and its direction loses the link-layer share
    # (issue 27): SKP ordered sets and, per AckNak period (PCIe Base 3.0 §3.5.3.1), an Ack and an
    # UpdateFC striped over the link's lanes. The testbed's narrowest links are its Gen3 x8 ones
    # (62.2 Gb/s after the share at MPS 256, the K420's Gen2 x16 63.3): AckFactor 2.5,
    # InternalDelay 115 symbols, a SKP block per 375, 8 lanes.
    period = (mps + 28) * 25 // 80 + 115
    share = 1 / 376 + 2 * t["dllp_bytes"] / 8 / period
    return mps / (mps + t["request_overhead_bytes"]) * (1 - share)


def test_mps_128_lowers_write_bandwidth_by_the_framing_ratio():
    bw256, an256, _ = gpu_writes()
    bw128, an128, run = gpu_writes({"timing.max_payload": 128})
    assert bw128 < bw256
    expected = framing_efficiency(128) / framing_efficiency(256)
    assert bw128 / bw256 == pytest.approx(expected, rel=0.01)
    assert an128 / an256 == pytest.approx(expected, rel=1e-6)   # each MPS's rate is rounded to the engine's fixed point
    assert run.params()["max_payload_bytes"] == "128"


def test_a_per_link_mps_is_the_path_minimum():
    global128 = gpu_writes({"timing": {"max_payload": 128}})[0]
    on_path = gpu_writes({"links": {"borrower.rp0": {"max_payload": 128}}})
    # The path's TLPs are 128 bytes either way; a link set alone keeps the others' link-layer
    # share at MPS 256 (the AckNak period follows each link's own MPS, PCIe Base 3.0 §3.5.3.1), so
    # the stream lies between MPS 128 everywhere and the default (re-baselined for issue 27).
    assert global128 < on_path[0] < gpu_writes()[0]
    assert on_path[2].params()["links.borrower.rp0.max_payload"] == "128"
    # gpu0's MPS sets the path's TLPs; the Gen3 x8 links, at their own MPS 256, then bound the
    # stream, at most their share's difference above MPS 128 everywhere (re-baselined for the
    # DLLPs striped over the lanes, issue 27).
    dev128 = gpu_writes({"devices.gpu0.max_payload": 128})[0]
    assert global128 <= dev128 <= global128 * 1.005
    # gpu0's writes turn at lender-sw: the lender's root port is off their path.
    assert gpu_writes({"links.lender.rp0.max_payload": 128})[0] == gpu_writes()[0]



def test_the_root_intake_holds_writes_to_ram_not_reads():
    # The borrower's Xeon E5 takes writes to RAM in one 64-byte line per ram_write_line_ps
    # (issue 27): a stream the links would carry faster is held to 64 B per line time; reads of
    # the same RAM do not pass the intake.
    line_ps = 12000
    free = gpu_writes()[0]
    # its per-TLP part (ram_write_tlp_ps) off, to see the line time alone
    held, analytic, run = gpu_writes({"cpus.intel-xeon-e5.ram_write_line_ps": line_ps, "cpus.intel-xeon-e5.ram_write_tlp_ps": 0})
    bound = 64 / line_ps * 1e3   # GB/s
    assert free > bound * 1.02
    assert bound * 0.97 < held <= bound * 1.001 and analytic == pytest.approx(held, rel=0.03)
    reads = [gpu_writes({"cpus.intel-xeon-e5.ram_write_line_ps": v}, write=False)[0] for v in (0, line_ps)]
    assert reads[0] == reads[1]

def test_restated_defaults_are_bit_identical():
    _, _, r0 = gpu_writes()
    ntb_ns = hardware_params()["timing"]["ntb_latency_ps"] / 1000
    _, _, r1 = gpu_writes({"timing.max_payload": 256, "timing.ntb_latency_ps": f"{ntb_ns:g} ns", "hosts.borrower.read_tags": 32})
    assert r0.results().equals(r1.results()) and r0.link_stats().equals(r1.link_stats())


def test_the_ntb_latency_moves_a_small_write():
    def one_write(ntb):
        run = gpu_writes({"timing.ntb_latency_ps": ntb}, nbytes=4)[2]
        return float(run.results().time_ns[0])
    # The write crosses the NTB pair once; timing.ntb_latency_ps is what the pair adds (000 §7.2).
    assert one_write("1 us") - one_write("350 ns") == pytest.approx(650, rel=1e-6)


BAD = [
    ("timing: {max_payload_size: 128}", "params.timing.max_payload_size", "unknown constant 'max_payload_size'"),
    ("timing: {max_payload: 100}", "params.timing.max_payload", "128, 256, 512"),
    ("timing: {ntb_latency_ps: 350 KiB}", "params.timing.ntb_latency_ps", "unit 'KiB' does not fit"),
    ("hosts: {nobody: {read_tags: 8}}", "params.hosts.nobody", "no host named 'nobody'"),
    ("links: {gpu9: {max_payload: 128}}", "params.links.gpu9", "no link has an end 'gpu9'"),
    ("links: {borrower.rp0: {max_payload: true}}", "params.links.borrower.rp0.max_payload", "expected a whole number"),
    ("devices: {gpu0: {ntb_latency_ps: 1}}", "params.devices.gpu0.ntb_latency_ps", "devices.gpu0 may set endpoint_latency_ps"),
    # a setting of another kind's own ([device_kind.nvme]) names both kinds
    ("devices: {gpu0: {media_bandwidth: 1 GB/s}}", "params.devices.gpu0.media_bandwidth", "gpu0 is of kind gpu, not kind nvme"),
]


@pytest.mark.parametrize("section, field, message", BAD)
def test_bad_overrides_are_file_line_field_errors(tmp_path, section, field, message):
    text = open(topo_path(TOPO)).read() + f"params:\n  {section}\n"
    last = len(text.splitlines())
    p = tmp_path / "t.yaml"
    p.write_text(text)
    with pytest.raises(TopologyError) as e:
        devlend.load(p).build()
    assert (e.value.file, e.value.line, e.value.field) == (str(p), last, field)
    assert message in e.value.message


def test_results_carry_the_effective_parameters():
    run = gpu_writes({"timing.max_payload": 128, "devices.gpu0.endpoint_latency_ps": "200 ns"})[2]
    params = run.results().attrs["params"]
    assert params["max_payload_bytes"] == "128" and params["devices.gpu0.endpoint_latency_ps"] == "200000"
    s = devlend.Scenario(devlend.load(topo_path("three-host-cluster.yaml")).with_params({"timing.max_payload": 512}))
    s.gpu_copy("c", "borrower", "gpu0", "dtoh", MiB).run()
    assert s.params()["max_payload_bytes"] == "512" and "max_payload_bytes=512" in s.header()


def test_a_cpu_profile_setting_reaches_every_host_of_that_profile():
    # the Xeon E5 profile's own (fitted) root latency, reported with the results, and varied per run
    topo = devlend.load(topo_path("three-host-cluster.yaml"))
    own = hardware_params()["cpu"]["intel-xeon-e5"]["root_latency_ps"]
    for overrides, expected in (({}, own), ({"cpus.intel-xeon-e5.root_latency_ps": "150 ns"}, 150_000)):
        s = devlend.Scenario(topo.with_params(overrides) if overrides else topo)
        s.gpu_copy("c", "borrower", "gpu0", "dtoh", MiB).run()
        assert s.params()["cpus.intel-xeon-e5.root_latency_ps"] == str(expected)
    with pytest.raises(TopologyError, match="no CPU profile named 'pentium'"):
        topo.with_params({"cpus.pentium.root_latency_ps": 1}).build()


def cli(*args):
    return clirun.run(*args)


def test_cli_set_overrides_without_editing_the_file(tmp_path):
    r = cli("run-workloads", topo_path("three-host-cluster.yaml"), "--gpu-copy", "c:borrower:gpu0:dtoh:1MiB", "--set", "timing.max_payload=128",
            "--set", "links.borrower.rp0.rx_buffer_tlps=8", "--csv", str(tmp_path / "w.csv"))
    assert r.returncode == 0, r.stderr
    head = (tmp_path / "w.csv").read_text().splitlines()[0]
    assert "max_payload_bytes=128" in head and "links.borrower.rp0.rx_buffer_tlps=8" in head
    bad = cli("run-workloads", topo_path("three-host-cluster.yaml"), "--gpu-copy", "c:borrower:gpu0:dtoh:1MiB", "--set", "timing.max_payload=100")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "command line: --set timing.max_payload=100:" in bad.stderr and "128, 256, 512" in bad.stderr, bad.stderr


def test_an_experiment_override_error_names_its_origin(tmp_path):
    """--set: the command-line argument; the topology file's own params section: file:line:field."""
    bad = cli("experiment", "d1", "--quick", "--set", "timing.max_payload=100")
    assert bad.returncode == 2 and "command line: --set timing.max_payload=100:" in bad.stderr, bad.stderr
    text = open(topo_path(TOPO)).read() + "params:\n  timing: {ntb_latency_ps: 350 KiB}\n"
    p = tmp_path / "t.yaml"
    p.write_text(text)
    bad = cli("experiment", "d1", "--quick", "--topology", str(p), "--set", "timing.max_payload=128")
    want = f"{p}:{len(text.splitlines())}:"
    assert bad.returncode == 2 and want in bad.stderr and "params.timing.ntb_latency_ps" in bad.stderr and "--set" not in bad.stderr, bad.stderr


def test_experiments_on_another_topology_or_refusing_it(tmp_path):
    from devlend import experiments
    from devlend.errors import DevlendError
    # the contention experiment on a copy of its testbed with a longer NTB latency: the same names, a slower probe
    text = open(topo_path(TOPO)).read()
    p = tmp_path / "mine.yaml"
    p.write_text(text + "params:\n  timing: {ntb_latency_ps: 2 us}\n")
    exp = experiments.get("contention")
    ours, base = exp.run(quick=True, topology=p), exp.run(quick=True)
    lat = lambda r: [row["probe_idle_ns"] for row in r.rows]
    assert lat(ours) and all(a > b for a, b in zip(lat(ours), lat(base))), (lat(ours), lat(base))
    p.write_text(text.replace("gpu0", "gpuX"))
    with pytest.raises(DevlendError, match="lacks gpu0"):
        experiments.get("d1").run(quick=True, topology=p)
    with pytest.raises(DevlendError, match="cannot stand in.*these take --topology: contention, d1, fio, linux-fio, linux-ntb, ntb-perf, ntb-pingpong"):
        experiments.get("d2").run(quick=True, topology=topo_path(TOPO))
    assert all(experiments.get(n).takes_params for n in ("d6", "vmirq", "hnic", "contention"))


# ---- provenance (issue 16) -----------------------------------------------------------------------
from devlend import _core, calibration  # noqa: E402
from devlend.calibration.provenance import constants, fitted_keys, problems  # noqa: E402


def hardware_text() -> str:
    with open(calibration.HARDWARE, encoding="utf-8") as fh:
        return fh.read()


def test_every_constant_says_where_it_comes_from():
    text = hardware_text()
    assert len(constants(text)) > 300
    assert problems(text) == []


def test_the_fitted_constants_are_exactly_those_the_calibration_fits():
    assert fitted_keys(hardware_text()) == {c.key for c in calibration.load().fitted}


def test_the_core_runs_on_the_file_as_written():
    assert _core.params_toml() == hardware_text(), "params/hardware.toml changed since the core was built: rebuild it"


def test_the_provenance_check_finds_what_is_missing():
    text = """[t]
a = 1                 # sourced: PCIe Base 3.0 §2.2
b = 2                 # the 2 of somewhere
c = 3
d = 4                 # fitted: calibration
e = 5                 # fitted: calibration (2026-11-24); a note
source = "the table's sources"
bars = [
  { index = 0 },      # assumed: no lspci
  { index = 1 },
]
s = "x # y"           # assumed: the quoted '#' is not the comment
"""
    found = problems(text)
    assert [p.split(":")[0] + ":" + p.split(":")[1] for p in found] == ["line 3: t.b", "line 4: t.c", "line 5: t.d", "line 10: t.bars[1]"]
    assert fitted_keys(text) == {"t.d", "t.e"}
