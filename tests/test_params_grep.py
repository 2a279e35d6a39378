"""`devlend params --grep PATTERN`: only matching constants, each under its table."""

import clirun
from conftest import ROOT


def _params(*args):
    return clirun.run("params", *args, cwd=ROOT)


def test_grep_shows_matching_constants_under_their_tables():
    r = _params("--grep", "MEDIA_READ_latency")
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and "[device.optane-900p]" in lines
    consts = [l for l in lines if not l.startswith("[")]
    # each drive profile's constant, the drive kind's setting that declares it ([device_kind.nvme]),
    # and (under [settable]) the --set key that overrides it
    assert consts and all(l.lstrip().startswith(("media_read_latency_ps", '{ key = "media_read_latency_ps"', '"devices.NAME.media_read_latency_ps"'))
                          for l in consts)
    assert "[device_kind.nvme]" in lines
    assert lines[lines.index("[settable]") + 1].startswith('"devices.NAME.media_read_latency_ps"')
    assert lines[lines.index("[device.optane-900p]") + 1].startswith("media_read_latency_ps = 10000000")


def test_grep_without_a_match_or_with_a_bad_pattern_says_so():
    r = _params("--grep", "no-such-constant-anywhere")
    assert r.returncode == 1 and r.stdout == "" and "no constant matches" in r.stderr
    r = _params("--grep", "([")
    assert r.returncode == 2 and "not a regular expression" in r.stderr


def test_schema_o_says_what_it_wrote(tmp_path):
    out = tmp_path / "s.json"
    r = clirun.run("schema", "-o", str(out), cwd=ROOT)
    assert r.returncode == 0 and f"wrote {out}" in r.stderr and out.read_text().startswith("{")


def test_export_draws_the_cluster_switch_and_the_vms(tmp_path):
    run = lambda topo, out: clirun.run("export", f"topologies/{topo}", "-o", str(out), cwd=ROOT, check=True)
    run("four-servers-mxs824.yaml", tmp_path / "m.dot")
    dot = (tmp_path / "m.dot").read_text()
    assert '"mxs824" [shape=box3d' in dot and "NTB cluster switch" in dot
    run("compose-three-host.yaml", tmp_path / "c.dot")
    dot = (tmp_path / "c.dot").read_text()
    assert '[shape=component' in dot and "VM on " in dot and "mediated" in dot
