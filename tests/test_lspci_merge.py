"""Import of real machines (issue 15): a flat root bus (a VM) imports as a host with its devices,
known vendor/device IDs get their profile (an imported Optane is driven by the NVMe driver), and two
captured hosts merge into one cluster with NTB links added (`devlend import-merge`)."""

import os

import pytest
import yaml

import devlend
from devlend.errors import TopologyError
from devlend.lspci import main_import, parse_lspci
from devlend.lspci.merge import main_merge, merge
from devlend.topology import load

from test_cli import cli

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures", "lspci")
VM_TREE, VM_VVV = (os.path.join(FIX, f"qemu-vm-optane.{x}.txt") for x in ("tree", "vvv"))
XEON_TREE, XEON_VVV = (os.path.join(FIX, f"xeon-gpu-nvme.{x}.txt") for x in ("tree", "vvv"))


def read(p):
    return open(p, encoding="utf-8").read()


def test_a_flat_root_bus_imports_as_a_host_with_its_devices():
    r = parse_lspci(read(VM_TREE), read(VM_VVV), host_name="guest", tree_file="t", verbose_file="v")
    d = r.description
    devices = {x["name"]: x for x in d["devices"]}
    assert set(devices) == {"gpu-00-02", "nic-00-03", "nvme-00-04"}
    assert devices["nvme-00-04"] == {"name": "nvme-00-04", "profile": "optane-900p"}
    assert d["hosts"][0]["root_ports"] == 3
    assert {x["a"]: x["b"] for x in d["links"]} == {"guest.rp0": "gpu-00-02", "guest.rp1": "nic-00-03", "guest.rp2": "nvme-00-04"}
    assert {s.bdf for s in r.skipped} == {"0000:00:00.0", "0000:00:01.0", "0000:00:01.1", "0000:00:01.3"}
    assert any("sits on root bus 00" in n for n in r.notes)
    r.build()


def capture(tmp_path, tree, vvv, host):
    out = str(tmp_path / f"{host}.yaml")
    main_import(tree, vvv, None, host, "intel-xeon-e5", "32 GiB", out)
    return out


def test_two_captured_hosts_merge_into_a_cluster_whose_imported_optanes_the_nvme_driver_runs(tmp_path):
    a, b = capture(tmp_path, XEON_TREE, XEON_VVV, "server"), capture(tmp_path, VM_TREE, VM_VVV, "cloudvm")
    res = cli("import-merge", a, b, "--name", "lab", "-o", str(tmp_path / "lab.yaml"))
    assert "wrote" in res.stderr
    topo = load(tmp_path / "lab.yaml")
    assert [h.name for h in topo.hosts] == ["server", "cloudvm"]
    assert {n.name for n in topo.ntbs} >= {"ntb-server-cloudvm", "ntb-cloudvm-server", "server-ntb-08-00"}
    cable = [(x.a, x.b) for x in topo.links if x.kind == "cable"]
    assert cable == [("ntb-server-cloudvm.cable", "ntb-cloudvm-server.cable")]
    assert next(h for h in topo.hosts if h.name == "cloudvm").root_ports == 4
    topo.build()
    s = devlend.Scenario(topo)
    s.fio("local", "server", "server-nvme-05-00", "randread", iodepth=4, ios=100)
    s.fio("lent", "server", "cloudvm-nvme-00-04", "randread", iodepth=4, ios=100)
    df = s.run().results().set_index("name")
    assert (df["ios"] == 100).all()
    assert df.loc["lent", "lat_mean_us"] > df.loc["local", "lat_mean_us"], "the borrowed drive is read across the added NTB"


def test_merge_refuses_one_host_two_hosts_of_one_name_and_an_unknown_adapter(tmp_path):
    a = capture(tmp_path, VM_TREE, VM_VVV, "cloudvm")
    desc = yaml.safe_load(read(a))
    with pytest.raises(TopologyError, match="at least two"):
        merge([(a, desc)])
    with pytest.raises(TopologyError, match="host cloudvm is also in") as e:
        merge([(a, desc), ("b.yaml", desc)])
    assert e.value.file == "b.yaml"
    with pytest.raises(TopologyError, match="unknown NTB adapter profile 'nope'"):
        main_merge([a, a], "lab", "nope", None)
    res = cli("import-merge", a, check=False)
    assert res.returncode != 0 and "at least two" in res.stderr


def test_an_imported_drive_with_no_known_profile_is_borrowed_and_driven_with_a_default_profile_and_a_warning(tmp_path):
    from devlend.lspci.profiles import ProfileWarning
    tree = tmp_path / "vm.tree.txt"
    tree.write_text(read(VM_TREE).replace("[8086:2700]", "[144d:a808]"))   # a Samsung drive devlend has no profile for
    out = str(tmp_path / "cloudvm.yaml")
    with pytest.warns(ProfileWarning, match=r"nvme-00-04: 0000:00:04.0 \[144d:a808\] .* has no known profile: .* the default "
                                            r"NVMe profile optane-900p's media timing and capacity"):
        main_import(str(tree), VM_VVV, None, "cloudvm", "intel-xeon-e5", "32 GiB", out)
    drive = next(d for d in yaml.safe_load(read(out))["devices"] if d["name"] == "nvme-00-04")
    assert drive["kind"] == "nvme" and "profile" not in drive, drive
    res = cli("import-lspci", "--tree", str(tree), "--verbose", VM_VVV, "--host", "cloudvm", "-o", str(tmp_path / "again.yaml"))
    assert "devlend: warning: nvme-00-04:" in res.stderr and "optane-900p" in res.stderr, res.stderr
    a = capture(tmp_path, XEON_TREE, XEON_VVV, "server")
    lab = tmp_path / "lab.yaml"
    lab.write_text(main_merge([a, out], "lab", "pxh830", None))
    s = devlend.Scenario(load(lab))
    s.borrow("server", "cloudvm-nvme-00-04")
    with pytest.warns(ProfileWarning, match="cloudvm-nvme-00-04 has no profile: driven with the default NVMe profile optane-900p"):
        s.fio("lent", "server", "cloudvm-nvme-00-04", "randread", iodepth=4, ios=100)
    row = s.run().results().set_index("name").loc["lent"]
    assert row.ios == 100 and row.lat_mean_us > 10, row       # the 900P's 10 us media read, through the NTB
