"""devlend import-lspci's engine (devlend.lspci): real captures in, buildable topologies out, and every
bad input a TopologyError that names the file and line."""

import os
import re
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devlend.errors import TopologyError
from devlend.lspci import decode_text, main_import, parse_lspci, parse_sysfs
from devlend.topology import from_dict, loads

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures", "lspci")
TREE_PATH = os.path.join(FIX, "xeon-gpu-nvme.tree.txt")
VVV_PATH = os.path.join(FIX, "xeon-gpu-nvme.vvv.txt")
SYSFS = os.path.join(HERE, "fixtures", "sysfs")
TREE = open(TREE_PATH, encoding="utf-8").read()
VVV = open(VVV_PATH, encoding="utf-8").read()

MiB, KiB = 1 << 20, 1 << 10
CHIPSET = ["0000:00:00.0", "0000:00:05.0", "0000:00:05.4", "0000:00:14.0", "0000:00:1f.0", "0000:00:1f.2",
           "0000:00:1f.3", "0000:ff:0b.0", "0000:ff:0b.1", "0000:ff:1e.0"]


def line_of(text: str, needle: str, after: int = 0) -> int:
    """1-based number of the first line at or after line `after` that contains `needle`."""
    for n, line in enumerate(text.split("\n"), 1):
        if n >= after and needle in line:
            return n
    raise AssertionError(f"{needle!r} not in the text")


def imp(tree=TREE, vvv=VVV, **kw):
    return parse_lspci(tree, vvv, tree_file="tree.txt", verbose_file="vvv.txt", **kw)


def err(tree=TREE, vvv=VVV) -> TopologyError:
    with pytest.raises(TopologyError) as e:
        imp(tree, vvv)
    return e.value


def by_name(items, name):
    return next(i for i in items if i["name"] == name)


# ---------------------------------------------------------------------------------------------
# The fixture: a Xeon E5 v3 server with a PEX 8747 switch (GPU, Optane, X710 with SR-IOV), a
# Dolphin NTB on a second root port, chipset devices on bus 00 and uncore devices on bus ff.

@pytest.fixture(scope="module")
def result():
    return imp(ram=64 << 30)


def test_fixture_builds_and_enumerates_like_the_captured_machine(result):
    fab = from_dict(result.description).build()
    tree = fab.inventory()["hosts"][0]["tree"]
    assert tree["kind"] == "root_complex"
    rp0, rp1 = tree["children"]
    assert [rp0["port"], rp1["port"]] == ["rp0", "rp1"]
    (sw,) = rp0["children"]
    assert (sw["kind"], sw["component"]) == ("switch_up", "sw-02-00")
    downs = sw["children"]
    assert [d["port"] for d in downs] == ["d0", "d1", "d2", "d3"]
    below = [[c["component"] for c in d["children"]] for d in downs]
    assert below == [["gpu-04-00"], ["nvme-05-00"], ["nic-06-00"], []]
    (ntb,) = rp1["children"]
    assert (ntb["kind"], ntb["component"]) == ("ntb", "ntb-08-00")
    assert fab.bdf("gpu-04-00.f1").endswith(".1")
    assert fab.bdf("nic-06-00.vf3")  # the 4 VFs exist in the model, as VFs of the PF


def test_fixture_facts(result):
    d = result.description
    host = d["hosts"][0]
    assert host == {"name": "imported", "cpu": "intel-xeon-e5", "ram": 64 << 30, "iommu": True, "root_ports": 2}
    assert d["switches"] == [{"name": "sw-02-00", "downstream_ports": 4}]
    assert [x["name"] for x in d["devices"]] == ["gpu-04-00", "nvme-05-00", "nic-06-00"]
    assert [x.get("kind", x.get("profile")) for x in d["devices"]] == ["gpu", "optane-900p", "nic"]

    gpu = by_name(d["devices"], "gpu-04-00")
    assert len(gpu["functions"]) == 2
    assert gpu["functions"][0]["bars"] == [
        {"index": 0, "size": 16 * MiB, "bits": 32, "pref": False},
        {"index": 1, "size": 256 * MiB, "bits": 64, "pref": True},
        {"index": 3, "size": 32 * MiB, "bits": 64, "pref": True},
    ]  # the I/O region 5 and the expansion ROM are left out
    assert gpu["functions"][1]["bars"] == [{"index": 0, "size": 16 * KiB, "bits": 32, "pref": False}]
    assert "msix_vectors" not in gpu["functions"][0]  # NVIDIA GPUs use MSI, not MSI-X

    # A known vendor/device ID ([8086:2700]) imports as its profile, which the NVMe driver's model needs.
    assert by_name(d["devices"], "nvme-05-00") == {"name": "nvme-05-00", "profile": "optane-900p"}

    nic = by_name(d["devices"], "nic-06-00")
    pf0, pf1 = nic["functions"]
    assert pf0["msix_vectors"] == 129
    assert pf0["sriov"] == {"num_vfs": 4, "total_vfs": 64,
                            "vf_bars": [{"index": 0, "size": 64 * KiB, "bits": 64, "pref": True},
                                        {"index": 3, "size": 16 * KiB, "bits": 64, "pref": True}]}
    assert pf1["sriov"]["num_vfs"] == 0 and pf1["sriov"]["total_vfs"] == 64
    # the VFs (06:02.0-3) are not devices of their own
    assert not any(x["name"].startswith("nic-06-02") for x in d["devices"])

    (ntb,) = d["ntbs"]
    assert ntb["name"] == "ntb-08-00" and ntb["profile"] == "pxh830"
    # BAR4 is '<unassigned> ... [disabled] [size=512M]' in the capture: still a 512 MiB window
    assert [w["size"] for w in ntb["windows"]] == [512 * MiB, 512 * MiB]

    assert d["links"] == [
        {"a": "imported.rp0", "b": "sw-02-00", "gen": 3, "width": 16},
        {"a": "sw-02-00.d0", "b": "gpu-04-00", "gen": 1, "width": 16},   # LnkSta: Speed 2.5GT/s (downgraded)
        {"a": "sw-02-00.d1", "b": "nvme-05-00", "gen": 3, "width": 4},
        {"a": "sw-02-00.d2", "b": "nic-06-00", "gen": 3, "width": 8},
        {"a": "imported.rp1", "b": "ntb-08-00", "gen": 3, "width": 8},
    ]


def test_chipset_and_uncore_devices_are_skipped_with_reasons(result):
    assert [s.bdf for s in result.skipped] == CHIPSET
    host_bridge = result.skipped[0]
    # the DMI2 host bridge carries a PCIe "Root Port" capability but has no bus numbers: not a root port
    assert "Host bridge" in host_bridge.what and "root bus 00" in host_bridge.reason
    assert host_bridge.file == "vvv.txt" and host_bridge.line == 1
    assert all("not below a root port" in s.reason for s in result.skipped)
    assert not any("06:02" in s.bdf for s in result.skipped)  # VFs are folded into sriov, not skipped


def test_notes_say_what_was_assumed(result):
    text = "\n".join(result.notes)
    assert "Gen1 x16" in text and "below what both ends support" in text
    assert "4 SR-IOV VF(s) of 0000:06:00.0" in text
    assert "sibling PF" in text
    assert "profile 'pxh830'" in text and "no cable peer" in text
    assert "IOMMU" in text
    assert "RAM size" not in text  # given


def test_default_ram_is_noted():
    r = imp()
    assert r.description["hosts"][0]["ram"] == 16 << 30
    assert any("RAM size is not in the capture" in n for n in r.notes)


def test_vvvnn_output_gives_the_same_description(result):
    """'lspci -vvvnn' adds class codes and [vendor:device] to each record's first line."""
    codes = {"Host bridge": "0600", "PCI bridge": "0604", "System peripheral": "0880", "PIC": "0800",
             "USB controller": "0c03", "ISA bridge": "0601", "SATA controller": "0106", "SMBus": "0c05",
             "VGA compatible controller": "0300", "Audio device": "0403", "Non-Volatile memory controller": "0108",
             "Ethernet controller": "0200", "Bridge": "0680", "Performance counters": "1101"}
    ids_by_bdf = _ids_by_bdf(TREE)
    assert set(re.findall(r"^([0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) ", VVV, re.M)) == set(ids_by_bdf)

    def nn(m):
        bdf, cls, rest = m.groups()
        name, tail = re.match(r"^(.*?)((?: \(rev [0-9a-f]{2}\))?(?: \(prog-if .*\))?)$", rest).groups()
        name = re.sub(r" Device [0-9a-f]{4}$", " Device", name)
        return f"{bdf} {cls} [{codes[cls]}]: {name} [{ids_by_bdf[bdf]}]{tail}"

    vvvnn = re.sub(r"^([0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) ([^:\[]+): (.*)$", nn, VVV, flags=re.M)
    assert "VGA compatible controller [0300]: NVIDIA Corporation GP104GL [Quadro P4000] [10de:1bb1] (rev a1)" in vvvnn
    assert "Bridge [0680]: PLX Technology, Inc. Device [10b5:87b0] (rev ca)" in vvvnn
    assert imp(vvv=vvvnn, ram=64 << 30).description == result.description


def _ids_by_bdf(tree: str) -> dict:
    """[vendor:device] of every function in the tree fixture, keyed by bus:dev.fn (bridges have none)."""
    from devlend.lspci import _TreeParser
    t = _TreeParser(tree, "tree.txt").parse()
    known = {k: d.ids for k, d in t.devs.items()}
    bridges = {(0, 0, 2, 0): (0x8086, 0x2f04), (0, 0, 3, 0): (0x8086, 0x2f08)}
    for k in known:
        if known[k] is None:
            known[k] = bridges.get(k, (0x10b5, 0x8747))
    return {f"{k[1]:02x}:{k[2]:02x}.{k[3]}": f"{v[0]:04x}:{v[1]:04x}" for k, v in known.items()}


def test_main_import_writes_yaml_with_a_header_that_loads_and_builds(tmp_path):
    out = tmp_path / "imported.yaml"
    text = main_import(TREE_PATH, VVV_PATH, None, "lab1", "intel-xeon-e5", "64 GiB", str(out))
    assert out.read_text(encoding="utf-8") == text
    head = [l for l in text.split("\n") if l.startswith("#")]
    assert head[0] == "# Imported by devlend import-lspci from:"
    assert any(TREE_PATH in l for l in head) and any(VVV_PATH in l for l in head)
    assert any("gpu-04-00" in l and "0000:04:00.0" in l for l in head)
    assert any("0000:00:1f.2" in l for l in head)  # the skipped list
    topo = loads(text, str(out))
    assert topo.hosts[0].name == "lab1" and topo.hosts[0].ram == 64 << 30
    fab = topo.build()
    assert fab.inventory()["hosts"][0]["name"] == "lab1"
    assert "size: 256 MiB" in text  # sizes are written the way people read them
    assert main_import(TREE_PATH, VVV_PATH, None, "lab1", "intel-xeon-e5", "64 GiB", None) == text


def test_main_import_errors(tmp_path):
    with pytest.raises(TopologyError, match="no such file"):
        main_import(str(tmp_path / "nope.txt"), VVV_PATH, None, "h", "intel-xeon-e5", None, None)
    with pytest.raises(TopologyError, match="lspci -vvv"):
        main_import(TREE_PATH, None, None, "h", "intel-xeon-e5", None, None)
    with pytest.raises(TopologyError) as e:
        main_import(TREE_PATH, VVV_PATH, None, "h", "intel-xeon-e5", "lots", None)
    assert e.value.field == "hosts[0].ram"
    with pytest.raises(TopologyError) as e:
        main_import(TREE_PATH, VVV_PATH, None, "1host", "intel-xeon-e5", None, None)
    assert e.value.field == "hosts[0].name"
    with pytest.raises(TopologyError, match="unknown CPU profile 'pentium'"):
        main_import(TREE_PATH, VVV_PATH, None, "h", "pentium", None, None)
    binary = tmp_path / "tree.bin"
    binary.write_bytes(TREE.encode()[:200] + b"\xff\xfe\x00junk")
    with pytest.raises(TopologyError) as e:
        main_import(str(binary), VVV_PATH, None, "h", "intel-xeon-e5", None, None)
    head = TREE.encode()[:200]
    assert (e.value.file, e.value.line) == (str(binary), head.count(b"\n") + 1)
    assert e.value.column == len(head) - head.rfind(b"\n") and "not UTF-8" in e.value.message


def test_build_errors_point_at_the_capture_line():
    vvv = VVV.replace("Region 1: Memory at 383fe0000000 (64-bit, prefetchable) [size=256M]",
                      "Region 1: Memory at 383fe0000000 (64-bit, prefetchable) [size=16T]")
    r = imp(vvv=vvv)
    with pytest.raises(TopologyError) as e:
        r.build()
    assert e.value.file == "vvv.txt" and e.value.line == line_of(vvv, "[size=16T]")
    assert e.value.field == "devices[0].functions[0].bars[1].size" and "cannot be placed" in e.value.message


# ---------------------------------------------------------------------------------------------
# Bad input: each names the file and the 1-based line (and for the tree, the column)

def test_empty_inputs():
    e = err(tree="")
    assert (e.file, e.line) == ("tree.txt", 1) and "empty" in e.message
    e = err(vvv="\n\n")
    assert (e.file, e.line) == ("vvv.txt", 1) and "empty" in e.message


def test_truncated_tree_names_the_last_line():
    lines = TREE.split("\n")
    e = err(tree="\n".join(lines[:9]))  # cut inside the list of bus 06 and the lists around it
    assert e.file == "tree.txt" and e.line == 9
    assert "the tree ends inside the list opened at line 4, column 14" in e.message and "truncated" in e.message


def test_deleted_tree_line_leaves_a_list_unclosed():
    lines = TREE.split("\n")
    assert lines[5].lstrip(" |").startswith("\\-00.1")  # line 6: the GPU's audio function closes bus 04's list
    del lines[5]
    e = err(tree="\n".join(lines))
    assert (e.file, e.line, e.column) == ("tree.txt", 6, 46)
    assert "the list opened at line 5, column 59 was never closed" in e.message


def test_tree_with_a_misplaced_branch():
    lines = TREE.split("\n")
    lines[2] = " " + lines[2]  # line 3 shifted by one column
    e = err(tree="\n".join(lines))
    assert (e.line, e.column) == (3, 2) and "expected '|' here" in e.message


def test_tree_that_is_not_lspci_output():
    e = err(tree="Hello, world\n")
    assert (e.file, e.line, e.column) == ("tree.txt", 1, 1) and "lspci -tvnn" in e.message


def test_tree_device_missing_from_the_verbose_output():
    start = line_of(VVV, "00:14.0 USB controller")
    end = line_of(VVV, "00:1f.0 ISA bridge")
    lines = VVV.split("\n")
    vvv = "\n".join(lines[:start - 1] + lines[end - 1:])
    e = err(vvv=vvv)
    assert (e.file, e.line) == ("tree.txt", line_of(TREE, "14.0  Intel"))
    assert "0000:00:14.0 is in the tree but vvv.txt has no record" in e.message


def test_verbose_record_missing_from_the_tree():
    lines = TREE.split("\n")
    n = line_of(TREE, "+-05.4")
    del lines[n - 1]
    e = err(tree="\n".join(lines))
    assert (e.file, e.line) == ("vvv.txt", line_of(VVV, "00:05.4 PIC"))
    assert "not in the tree tree.txt" in e.message


def test_tree_and_verbose_from_different_machines():
    tree = TREE.replace("GP104GL [Quadro P4000] [10de:1bb1]", "GP104 [GeForce GTX 1080] [10de:1b80]")
    e = err(tree=tree)
    assert (e.file, e.line) == ("vvv.txt", line_of(VVV, "04:00.0 VGA"))
    assert "GeForce GTX 1080" in e.message and "disagree" in e.message


def test_bridge_bus_numbers_that_disagree_with_the_tree():
    n = line_of(VVV, "Bus: primary=03, secondary=04")
    lines = VVV.split("\n")
    lines[n - 1] = lines[n - 1].replace("secondary=04, subordinate=04", "secondary=04, subordinate=05")
    e = err(vvv="\n".join(lines))
    assert (e.file, e.line) == ("vvv.txt", n) and "bridges buses [04-05] here but [04-04] in the tree" in e.message


def test_bad_region_lines():
    n = line_of(VVV, "Region 0: Memory at fa000000")
    for bad, msg in ((" [size=16M]", " [size=3M]"), ("(32-bit, non-prefetchable)", "(32-bit)")):
        lines = VVV.split("\n")
        lines[n - 1] = lines[n - 1].replace(*((bad, msg)))
        e = err(vvv="\n".join(lines))
        assert (e.file, e.line) == ("vvv.txt", n)
    lines = VVV.split("\n")
    lines[n - 1] = lines[n - 1].replace("[size=16M]", "[size=4G]")
    e = err(vvv="\n".join(lines))
    assert e.line == n and "a 32-bit BAR is at most 2 GiB" in e.message
    lines = VVV.split("\n")
    lines[n] = lines[n].replace("Region 1:", "Region 0:")
    e = err(vvv="\n".join(lines))
    assert e.line == n + 1 and "overlaps a BAR listed before it" in e.message


def test_lspci_v_instead_of_vvv():
    vvv = re.sub(r"\tRegion \d: ", "\t", VVV)
    e = err(vvv=vvv)
    assert e.line == line_of(VVV, "Region 0: Memory at fbc0e000") and "lspci -v" in e.message


def test_tabs_converted_to_spaces():
    e = err(vvv=VVV.replace("\t", "        "))
    assert e.line == 2 and "tabs" in e.message


def test_sriov_and_msix_values_out_of_range():
    n = line_of(VVV, "Number of VFs: 4")
    e = err(vvv=VVV.replace("Number of VFs: 4,", "Number of VFs: 65,"))
    assert (e.line, e.file) == (n, "vvv.txt") and "more than Total VFs: 64" in e.message
    n = line_of(VVV, "MSI-X: Enable+ Count=32")
    e = err(vvv=VVV.replace("MSI-X: Enable+ Count=32 ", "MSI-X: Enable+ Count=4096 "))
    assert e.line == n and "1 to 2048" in e.message


def test_sriov_capability_cut_short():
    n = line_of(VVV, "Single Root I/O Virtualization")
    lines = VVV.split("\n")
    lines[n + 3] = "\t\tInitial VFs: garbage"
    e = err(vvv="\n".join(lines))
    assert e.line == n + 4 and "Initial VFs: N" in e.message
    del lines[n + 3]
    e = err(vvv="\n".join(lines))
    assert e.line == n and "lacks its 'Initial VFs" in e.message


def test_binary_junk():
    e = err(tree=TREE[:300] + "\x00\x01\x02binary")
    assert e.file == "tree.txt" and e.line == TREE[:300].count("\n") + 1 and "control character U+0000" in e.message
    with pytest.raises(TopologyError) as ex:
        decode_text(b"line one\nline two\n\x89PNG\r\n", "x.txt")
    assert (ex.value.file, ex.value.line, ex.value.column) == ("x.txt", 3, 1)


# ---------------------------------------------------------------------------------------------
# sysfs

def test_sysfs_fixture_imports_and_builds():
    r = parse_sysfs(SYSFS, ram=32 << 30)
    d = r.description
    assert d["hosts"][0]["root_ports"] == 1 and d["hosts"][0]["iommu"] is True
    assert d["switches"] == [{"name": "sw-02-00", "downstream_ports": 3}]  # port types from config space
    gpu, nvme, nic = d["devices"]
    assert gpu["name"] == "gpu-04-00" and [b["size"] for b in gpu["functions"][0]["bars"]] == [16 * MiB, 256 * MiB, 32 * MiB]
    assert len(gpu["functions"]) == 2
    assert nvme == {"name": "nvme-05-00", "profile": "optane-900p"}  # [8086:2700]: its profile
    assert nic["functions"][0]["sriov"] == {"num_vfs": 2, "total_vfs": 64,
                                            "vf_bars": [{"index": 0, "size": 64 * KiB, "bits": 64, "pref": True},
                                                        {"index": 3, "size": 16 * KiB, "bits": 64, "pref": True}]}
    assert [(l["b"], l["gen"], l["width"]) for l in d["links"]] == [
        ("sw-02-00", 3, 16), ("gpu-04-00", 1, 16), ("nvme-05-00", 3, 4), ("nic-06-00", 3, 8)]
    assert [s.bdf for s in r.skipped] == ["0000:00:00.0", "0000:00:1f.2"]
    r.build()


def test_sysfs_parents_from_a_tree_capture(tmp_path):
    root = tmp_path / "devices"
    shutil.copytree(SYSFS, root)
    for entry in root.iterdir():
        if (entry / "parent").exists():
            (entry / "parent").unlink()
    with_parents = parse_sysfs(SYSFS).description
    assert parse_sysfs(str(root), tree_text=TREE).description == with_parents
    # without parent files or a tree everything sits on a root bus, as in a VM: the GPU (with its
    # audio function), the drive and the NIC get a root port each
    flat = parse_sysfs(str(root))
    assert [(x["name"], len(x.get("functions", [0]))) for x in flat.description["devices"]] == [
        ("gpu-04-00", 2), ("nvme-05-00", 1), ("nic-06-00", 1)]
    flat.build()


def test_sysfs_msix_from_config_of_a_drive_without_a_profile(tmp_path):
    root = _sysfs_copy(tmp_path)
    (root / "0000:05:00.0" / "device").write_text("0x0953\n")  # an ID devlend has no profile for
    nvme = parse_sysfs(str(root)).description["devices"][1]
    assert nvme["kind"] == "nvme" and nvme["functions"][0]["msix_vectors"] == 32  # from the MSI-X capability in config


def test_sysfs_vf_bar_sizes_from_the_pf_alone(tmp_path):
    root = tmp_path / "devices"
    shutil.copytree(SYSFS, root)
    for vf in ("0000:06:02.0", "0000:06:02.1"):
        shutil.rmtree(root / vf)
    (root / "0000:06:00.0" / "sriov_numvfs").write_text("0\n")
    sr = parse_sysfs(str(root)).description["devices"][2]["functions"][0]["sriov"]
    assert sr["num_vfs"] == 0 and [b["size"] for b in sr["vf_bars"]] == [64 * KiB, 16 * KiB]  # 4 MiB / 64 VFs


def test_sysfs_bad_inputs(tmp_path):
    root = tmp_path / "devices"
    shutil.copytree(SYSFS, root)
    res = root / "0000:04:00.0" / "resource"
    good = res.read_text()
    lines = good.split("\n")
    lines[3] = "0x0000383ff0000000 0x0000383ff1ffffff"
    res.write_text("\n".join(lines))
    with pytest.raises(TopologyError) as e:
        parse_sysfs(str(root))
    assert (e.value.file, e.value.line) == (str(res), 4) and "START END FLAGS" in e.value.message
    lines[3] = "0x0000383ff0000000 0x0000383ff1fffffe 0x000000000014220c"  # not a power of two
    res.write_text("\n".join(lines))
    with pytest.raises(TopologyError) as e:
        parse_sysfs(str(root))
    assert e.value.line == 4 and "power of two" in e.value.message
    res.write_text(good)

    parent = root / "0000:05:00.0" / "parent"
    parent.write_text("0000:04:00.0\n")
    with pytest.raises(TopologyError) as e:
        parse_sysfs(str(root))
    assert (e.value.file, e.value.line) == (str(parent), 1) and "not a bridge" in e.value.message
    (root / "0000:02:00.0" / "parent").write_text("0000:03:08.0\n")
    parent.write_text("0000:03:09.0\n")
    with pytest.raises(TopologyError, match="form a cycle"):
        parse_sysfs(str(root))
    (root / "0000:02:00.0" / "parent").write_text("0000:00:02.0\n")

    (root / "0000:04:00.1" / "class").write_bytes(b"\x7fELF\x02\x01")
    with pytest.raises(TopologyError) as e:
        parse_sysfs(str(root))
    assert e.value.file == str(root / "0000:04:00.1" / "class") and e.value.line == 1
    (root / "0000:04:00.1" / "class").unlink()
    with pytest.raises(TopologyError, match="missing"):
        parse_sysfs(str(root))
    with pytest.raises(TopologyError, match="not a directory"):
        parse_sysfs(str(tmp_path / "nothing"))


def test_main_import_from_sysfs():
    text = main_import(None, None, SYSFS, "h", "intel-xeon-e5", "8 GiB", None)
    assert "# Imported by devlend import-lspci from:" in text and SYSFS in text
    loads(text, "sysfs.yaml").build()


# ---------------------------------------------------------------------------------------------
# Fuzzing: mutated captures and random text give a result or a TopologyError, never a traceback

def _mutate(data: bytes, ops: list) -> bytes:
    for op, a, b, extra in ops:
        lines = data.split(b"\n")
        if op == "truncate" and data:
            data = data[:a % len(data)]
        elif op == "delete_line" and len(lines) > 1:
            del lines[a % len(lines)]
            data = b"\n".join(lines)
        elif op == "flip" and data:
            i = a % len(data)
            data = data[:i] + bytes([data[i] ^ (1 << (b % 8))]) + data[i + 1:]
        elif op == "insert":
            i = a % (len(data) + 1)
            data = data[:i] + extra.encode("utf-8", "surrogatepass") + data[i:]
        elif op == "duplicate_line" and lines:
            lines.insert(b % (len(lines) + 1), lines[a % len(lines)])
            data = b"\n".join(lines)
        elif op == "swap_lines" and len(lines) > 1:
            i, j = a % len(lines), b % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
            data = b"\n".join(lines)
        elif op == "number":
            nums = list(re.finditer(rb"\d+", data))
            if nums:
                m = nums[a % len(nums)]
                data = data[:m.start()] + str(b).encode() + data[m.end():]
    return data


_OPS = st.lists(st.tuples(st.sampled_from(["truncate", "delete_line", "flip", "insert", "duplicate_line",
                                           "swap_lines", "number"]),
                          st.integers(0, 1 << 20), st.sampled_from([0, 1, 3, 7, 16, 255, 256, 65536, 1 << 40]),
                          st.text(max_size=8)),
                min_size=1, max_size=4)


def _check(tree: bytes, vvv: bytes) -> None:
    try:
        r = parse_lspci(decode_text(tree, "tree.txt"), decode_text(vvv, "vvv.txt"),
                        tree_file="tree.txt", verbose_file="vvv.txt")
    except TopologyError as e:
        assert e.file in ("tree.txt", "vvv.txt") and e.line is not None and e.line >= 1, str(e)
        return
    from_dict(r.description)
    loads(r.to_yaml(), "out.yaml")
    try:
        r.build()
    except TopologyError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(["tree", "vvv", "both"]), ops=_OPS, ops2=_OPS)
def test_fuzz_mutated_captures(which, ops, ops2):
    tree, vvv = TREE.encode(), VVV.encode()
    if which in ("tree", "both"):
        tree = _mutate(tree, ops)
    if which in ("vvv", "both"):
        vvv = _mutate(vvv, ops2)
    _check(tree, vvv)


@settings(max_examples=100, deadline=None)
@given(tree=st.one_of(st.text(max_size=300), st.just(TREE)), vvv=st.one_of(st.text(max_size=300), st.just(VVV)),
       junk=st.binary(max_size=64))
def test_fuzz_random_text(tree, vvv, junk):
    _check(tree.encode("utf-8", "surrogatepass"), vvv.encode("utf-8", "surrogatepass"))
    _check(junk, VVV.encode())


def _sysfs_copy(tmp_path):
    root = tmp_path / "devices"
    shutil.copytree(SYSFS, root)
    return root


def test_sysfs_attribute_that_is_a_fifo_or_a_directory(tmp_path):
    """Issue 17 audit: a FIFO attribute hung the importer, and a directory named `device` raised an
    uncaught TypeError; both are errors naming the file."""
    root = _sysfs_copy(tmp_path)
    vendor = root / "0000:05:00.0" / "vendor"
    vendor.unlink()
    os.mkfifo(vendor)
    with pytest.raises(TopologyError, match="a FIFO: expected a sysfs attribute") as e:
        parse_sysfs(str(root))
    assert e.value.file == str(vendor)
    vendor.unlink()
    vendor.write_text("0x8086\n")
    device = root / "0000:05:00.0" / "device"
    device.unlink()
    device.mkdir()
    with pytest.raises(TopologyError, match="a directory: expected a sysfs attribute") as e:
        parse_sysfs(str(root))
    assert e.value.file == str(device)


def test_sysfs_duplicate_addresses_are_refused(tmp_path):
    """Issue 17 audit: `00000000:05:00.0` beside `0000:05:00.0` was merged silently."""
    root = _sysfs_copy(tmp_path)
    shutil.copytree(root / "0000:05:00.0", root / "00000000:05:00.0")
    with pytest.raises(TopologyError, match="the same PCI address as") as e:
        parse_sysfs(str(root))
    assert e.value.file in (str(root / "0000:05:00.0"), str(root / "00000000:05:00.0"))


def test_sysfs_bus_outside_the_parent_bridges_range_is_refused(tmp_path):
    """Issue 17 audit: a function on bus 09 behind a bridge whose config space says secondary 05,
    subordinate 05 was accepted."""
    root = _sysfs_copy(tmp_path)
    (root / "0000:05:00.0").rename(root / "0000:09:00.0")
    with pytest.raises(TopologyError, match="outside bridge 0000:03:09.0's bus range 05-05") as e:
        parse_sysfs(str(root))
    assert (e.value.file, e.value.line) == (str(root / "0000:09:00.0" / "parent"), 1)
    (root / "0000:09:00.0" / "parent").write_text("0001:03:09.0\n")
    shutil.copytree(root / "0000:03:09.0", root / "0001:03:09.0")
    (root / "0001:03:09.0" / "parent").write_text("0000:02:00.0\n")  # a bridge of domain 1 under domain 0
    with pytest.raises(TopologyError, match="in another PCI domain"):
        parse_sysfs(str(root))


def test_sysfs_second_pci_domain_is_imported(tmp_path):
    """Issue 17 audit: functions of a second PCI domain must not be dropped silently."""
    root = _sysfs_copy(tmp_path)
    for bdf in ("0000:00:02.0", "0000:02:00.0", "0000:03:09.0", "0000:05:00.0"):
        dst = root / ("0001" + bdf[4:])
        shutil.copytree(root / bdf, dst)
        parent = (dst / "parent").read_text().strip()
        if parent.lower() not in ("", "none", "root"):
            (dst / "parent").write_text("0001" + parent[4:] + "\n")
    r = parse_sysfs(str(root))
    names = [d["name"] for d in r.description["devices"]]
    assert "nvme-05-00" in names and "nvme-0001-05-00" in names, names
    assert not any(s.bdf.startswith("0001:") for s in r.skipped)
    r.build()
