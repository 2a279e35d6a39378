"""Bad input: every case gets one clear error naming the file, line and field, and nothing panics."""

import os
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import devlend
from devlend import TopologyError

BASE = """\
name: t
hosts:
  - name: a
    cpu: intel-xeon-e5
    ram: 8 GiB
    root_ports: 2
  - name: b
    cpu: intel-xeon-e5
    ram: 8 GiB
    root_ports: 2
switches:
  - name: sw
    downstream_ports: 2
devices:
  - name: gpu0
    profile: quadro-k420
ntbs:
  - {name: na, profile: pxh830}
  - {name: nb, profile: pxh830}
links:
  - {a: a.rp0, b: sw, gen: 3, width: 16}
  - {a: sw.d0, b: gpu0, gen: 2, width: 16}
  - {a: a.rp1, b: na, gen: 3, width: 8}
  - {a: b.rp0, b: nb, gen: 3, width: 8}
  - {a: na.cable, b: nb.cable, gen: 3, width: 8}
"""


def build_err(text: str) -> TopologyError:
    with pytest.raises(TopologyError) as e:
        devlend.loads(textwrap.dedent(text), "t.yaml").build()
    return e.value


def test_base_builds():
    devlend.loads(BASE, "t.yaml").build()


def test_unknown_key_names_line_field_and_the_keys_expected():
    e = build_err(BASE.replace("    ram: 8 GiB\n    root_ports: 2\n  - name: b", "    ramm: 8 GiB\n    root_ports: 2\n  - name: b", 1))
    assert (e.file, e.line, e.field) == ("t.yaml", 5, "hosts[0].ramm")
    assert "unknown key 'ramm'" in e.message and "root_ports" in e.message
    assert str(e).startswith("t.yaml:5:")


def test_wrong_type():
    e = build_err(BASE.replace("root_ports: 2", "root_ports: three", 1))
    assert (e.line, e.field) == (6, "hosts[0].root_ports") and "integer" in e.message


def test_bad_size_string():
    e = build_err(BASE.replace("ram: 8 GiB", "ram: 8 gigs", 1))
    assert (e.line, e.field) == (5, "hosts[0].ram") and "not a size" in e.message


def test_missing_required_field():
    e = build_err(BASE.replace("    cpu: intel-xeon-e5\n", "", 1))
    assert e.field == "hosts[0].cpu" and "missing" in e.message and e.line == 3


def test_overlapping_windows_in_the_memory_map():
    text = BASE.replace("    root_ports: 2\n  - name: b", "    root_ports: 2\n    memory_map: {mmio64_base: 0x100000000}\n  - name: b", 1)
    e = build_err(text)
    assert e.field == "hosts[0].memory_map.mmio64_base" and e.line == 7
    assert "overlaps high RAM" in e.message


def test_bar_that_cannot_be_placed_names_device_bar_and_sizes():
    text = BASE.replace("  - name: gpu0\n    profile: quadro-k420\n",
                        "  - name: gpu0\n    functions:\n      - bars:\n          - {index: 0, size: 2 GiB}\n", 1)
    e = build_err(text)
    assert e.field == "devices[0].functions[0].bars[0].size" and e.line == 18
    assert "BAR 0 of gpu0 (2 GiB, 32-bit non-prefetchable) cannot be placed" in e.message
    assert "1004 MiB" in e.message


def test_link_to_missing_port():
    e = build_err(BASE.replace("{a: sw.d0, b: gpu0", "{a: sw.d7, b: gpu0", 1))
    assert e.field == "links[1].a" and e.line == 22 and "d0 to d1" in e.message
    e = build_err(BASE.replace("b: gpu0,", "b: gpu9,", 1))
    assert e.field == "links[1].b" and "no host, switch, device or NTB named 'gpu9'" in e.message


def test_port_used_twice():
    e = build_err(BASE.replace("{a: a.rp1, b: na", "{a: a.rp0, b: na", 1))
    assert e.field == "links[2].a" and "already used by link 0" in e.message


def test_cycle_of_switches():
    text = BASE.replace("switches:\n", "switches:\n  - {name: s1, downstream_ports: 1}\n  - {name: s2, downstream_ports: 1}\n", 1)
    text += "  - {a: s1.d0, b: s2, gen: 3, width: 8}\n  - {a: s2.d0, b: s1, gen: 3, width: 8}\n"
    e = build_err(text)
    assert "cycle" in e.message and e.field.startswith("links[")


def test_unconnected_component():
    text = BASE.replace("devices:\n", "devices:\n  - {name: lonely, profile: optane-900p}\n", 1)
    e = build_err(text)
    assert e.field == "devices[0]" and "not connected to any host" in e.message


def test_ntb_window_past_the_peers_address_space():
    text = BASE + "setup:\n  - {op: ntb_mw_set_trans, ntb: nb, window: 1, addr: 0x3ffff0000000, size: 512 MiB}\n"
    e = build_err(text)
    assert e.field == "setup[0]" and e.line == 27
    assert "past the end of host b's 46-bit physical address space" in e.message


def test_ntb_cable_in_one_host():
    text = BASE.replace("{a: b.rp0, b: nb", "{a: a.rp0, b: nb", 1).replace("{a: a.rp0, b: sw", "{a: b.rp0, b: sw", 1)
    e = build_err(text)
    assert "same host" in e.message and e.field == "links[4]"


def test_duplicate_names_and_keys():
    e = build_err(BASE.replace("name: gpu0", "name: sw", 1))
    assert e.field == "devices[0].name" and "already used" in e.message
    e = build_err(BASE.replace("    ram: 8 GiB\n", "    ram: 8 GiB\n    ram: 4 GiB\n", 1))
    assert e.line == 6 and "duplicate key 'ram'" in e.message


def test_unknown_profile_lists_known_ones():
    e = build_err(BASE.replace("profile: quadro-k420", "profile: rtx-9090", 1))
    assert e.field == "devices[0].profile" and "quadro-k420" in e.message


@pytest.mark.parametrize("text,needle", [
    ("name: t\nhosts: [\n", "malformed YAML"),
    ("", "empty"),
    ("- just\n- a list\n", "expected a mapping"),
    ("name: t\nhosts:\n  - name: a\n\tcpu: x\n", "malformed YAML"),
    ("a: &x [*x]\n", "too large or too deeply nested"),
    ("[" * 100_000 + "]" * 100_000, "too large or too deeply nested"),  # libyaml's own composer would crash
    ("a: *nowhere\n", "found undefined alias 'nowhere'"),
    ("a: &x 1\nb: &x 2\n", "malformed YAML"),
    ("name: t\n---\nname: u\n", "found another document"),
    (" {iommu_map,r}", "unknown key 'iommu_map'"),  # a key spelled like a setup op (found by fuzzing)
])
def test_malformed_yaml(text, needle):
    with pytest.raises(TopologyError) as e:
        devlend.loads(text, "bad.yaml").build()
    assert needle in str(e.value) and str(e.value).startswith("bad.yaml")


def test_libyaml_nesting_limit_reads_as_ours(monkeypatch):
    """PyYAML 6.0.4's libyaml refuses deep flow nesting in its scanner, before devlend's composer counts
    depth; whichever stops first, the user reads the same error (checked here whatever PyYAML is installed)."""
    import yaml
    from devlend import yamlpos

    def scanner_stops(text, file):
        mark = yaml.Mark(file, 0, 2, 1000, None, None)
        raise yaml.scanner.ScannerError("while increasing flow level", mark, "exceeded maximum nesting depth", mark)

    monkeypatch.setattr(yamlpos, "compose", scanner_stops)
    with pytest.raises(TopologyError) as e:
        devlend.loads("[" * 2000, "bad.yaml").build()
    assert str(e.value).startswith("bad.yaml") and "too large or too deeply nested" in str(e.value)
    assert e.value.line == 3


def test_composer_gives_pyyaml_nodes_for_every_shipped_file():
    """devlend's iterative composer (on libyaml's events) gives the nodes PyYAML's own composer gives:
    tags, values and marks of every node of every shipped topology and scenario."""
    import glob
    import os

    import yaml

    from devlend import yamlpos

    def same(a, b):
        if (type(a), a.tag, a.start_mark.line, a.start_mark.column) != (type(b), b.tag, b.start_mark.line,
                                                                          b.start_mark.column):
            return False
        if isinstance(a, yaml.ScalarNode):
            return a.value == b.value
        if isinstance(a, yaml.SequenceNode):
            return len(a.value) == len(b.value) and all(map(same, a.value, b.value))
        return len(a.value) == len(b.value) and all(same(k, l) and same(v, w)
                                                    for (k, v), (l, w) in zip(a.value, b.value))

    root = os.path.join(os.path.dirname(devlend.__file__))
    files = glob.glob(os.path.join(root, "topologies", "*.yaml")) + glob.glob(os.path.join(root, "scenarios", "*.yaml"))
    assert len(files) >= 15
    for f in files:
        with open(f) as fh:
            text = fh.read()
        assert same(yaml.compose(text, Loader=yaml.SafeLoader), yamlpos.compose(text, f)), f


def test_address_that_routes_nowhere_is_an_unsupported_request_not_a_crash():
    f = devlend.loads(BASE, "t.yaml").build()
    r = f.route("a:cpu", 0xF000_0000)
    assert not r.delivered and r.failure["kind"] == "unsupported-request"
    assert "no RAM or device at this address" in r.failure["message"]
    with pytest.raises(devlend.FabricError, match="no host named 'c'"):
        f.route("c:cpu", 0)
    with pytest.raises(devlend.FabricError, match="gpu0 sits in host a, not b"):
        f.route("b:gpu0", 0)
    with pytest.raises(devlend.FabricError, match="has no BAR 2"):
        f.route("a:cpu", "gpu0.bar2")


def test_missing_file():
    with pytest.raises(TopologyError, match="no such file"):
        devlend.load("/nonexistent/topo.yaml")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_mutated_descriptions_never_crash(data):
    """Mutations of a valid file (deleted lines, swapped characters, truncation, random values)
    give a built fabric or a TopologyError, never another exception."""
    lines = BASE.splitlines(keepends=True)
    op = data.draw(st.sampled_from(["drop", "truncate", "flip", "insert", "replace_value"]))
    if op == "drop":
        i = data.draw(st.integers(0, len(lines) - 1))
        text = "".join(lines[:i] + lines[i + 1:])
    elif op == "truncate":
        text = BASE[: data.draw(st.integers(0, len(BASE)))]
    elif op == "flip":
        i = data.draw(st.integers(0, len(BASE) - 1))
        text = BASE[:i] + data.draw(st.characters()) + BASE[i + 1:]
    elif op == "insert":
        i = data.draw(st.integers(0, len(BASE)))
        text = BASE[:i] + data.draw(st.text(max_size=20)) + BASE[i:]
    else:
        vals = ["0", "-1", "0x0", "[]", "{}", "null", "99999999999999999999", "'x'", "1e9", "true", "9 TiB", "rp9"]
        i = data.draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        if ":" in line:
            line = line.split(":", 1)[0] + ": " + data.draw(st.sampled_from(vals)) + "\n"
        text = "".join(lines[:i] + [line] + lines[i + 1:])
    try:
        devlend.loads(text, "fuzz.yaml").build()
    except TopologyError as e:
        assert str(e).startswith("fuzz.yaml")


def _fabric():
    return devlend.load(os.path.join(os.path.dirname(devlend.__file__), "topologies", "pxh830-two-host.yaml")).build()


@pytest.mark.parametrize("call, words", [
    (lambda f: f.write("lender", -1, b"x"), "write: addr=-1: expected an integer from 0 to 2^64-1"),
    (lambda f: f.read("lender", 0, 2**70), "read: length=1180591620717411303424: expected an integer"),
    (lambda f: f.dma("lender", 0, -5), "dma: nbytes=-5: expected an integer"),
    (lambda f: f.config_read("gpu0", -1), "config_read: offset=-1"),
    (lambda f: f.iommu_map("lender", "d", 0, 0, 2**64), "iommu_map: size=18446744073709551616"),
    (lambda f: f.write("lender", 0, None), "write: data=None: expected bytes"),
    (lambda f: f.resolve(2**65), "resolve: addr=36893488147419103232"),
    (lambda f: f.spad_write("x", -1, 1), "spad_write: idx=-1"),
    (lambda f: f.machine().stream("s", "lender", 0, 2**70), "bytes must be from 0 to 2^64-1"),
])
def test_out_of_range_or_wrong_type_arguments_are_devlend_errors(call, words):
    """Issue 17 audit: negative or over-64-bit integers raised raw OverflowError/TypeError."""
    with pytest.raises(devlend.errors.DevlendError) as e:
        call(_fabric())
    assert words in str(e.value)


def test_an_address_in_another_host_is_an_error_not_the_requesters_own():
    """Issue 15: `lender:cpu` writing `borrower.ram+0x1000` wrote the lender's own RAM at 0x1000."""
    fab = _fabric()
    before = fab.memory_digest()
    with pytest.raises(devlend.errors.FabricError, match="borrower.ram.* is in host borrower, but the requester is in host lender"):
        fab.write("lender:cpu", "borrower.ram+0x1000", b"x")
    with pytest.raises(devlend.errors.FabricError, match="is in host lender"):
        fab.route("borrower:cpu", "gpu0.bar1")
    assert fab.memory_digest() == before
    assert fab.write("lender:cpu", "lender.ram+0x1000", b"x") == 1
