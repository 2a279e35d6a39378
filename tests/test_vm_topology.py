"""VMs in the topology description (issue 15): on any topology, with local (VFIO) and remote
(mediated) devices, running workloads through devlend.Scenario and scenario files; bad VM
descriptions are file:line:field errors."""

import textwrap
from pathlib import Path

import pytest

import devlend
from devlend.errors import TopologyError, WorkloadError

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "topologies" / "four-server-cluster.yaml"

VMS = """
vms:
  - name: vm-a
    host: server1
    memory: 256 MiB
    devices: [gpu0, gpu1, {device: gpu2, path: mediated}]
  - name: vm-b
    host: server3
    memory: 256 MiB
    devices: [nvme2, nvme1]
  - {name: vm-c, host: server4, memory: 128 MiB, devices: [gpu6, gpu7]}
"""


def cluster(vms: str = VMS, name: str = "vms.yaml") -> devlend.Topology:
    return devlend.loads(CLUSTER.read_text() + textwrap.dedent(vms), name)


def test_vms_on_the_four_server_cluster_run_gpu_copies_fio_and_a_pingpong():
    s = devlend.Scenario(cluster())
    assert s.vms() == [{"vm": "vm-a", "host": "server1"}, {"vm": "vm-b", "host": "server3"}, {"vm": "vm-c", "host": "server4"}]
    s.gpu_copy("local", "vm-a", "gpu0", "htod", 4 << 20)
    s.gpu_copy("remote", "vm-a", "gpu2", "htod", 4 << 20)
    s.gpu_pingpong("pp", "vm-c", "gpu6", "gpu7", via="peer", rounds=20)
    s.fio("near", "vm-b", "nvme2", "randread", iodepth=4, ios=200)
    s.fio("far", "vm-b", "nvme1", "randread", iodepth=4, ios=200)
    df = s.run().results().set_index("name")
    # The mediated devices were borrowed by the VMs' hosts when their guest drivers enabled bus mastering.
    lent = {(d["device"], d["lender"], d["borrower"]) for d in s.lends()}
    assert lent == {("gpu2", "server2", "server1"), ("nvme1", "server2", "server3")}
    assert df.loc["remote", "GBps"] < df.loc["local", "GBps"], "the copy to the mediated GPU crosses the NTB"
    assert df.loc["far", "lat_mean_us"] > df.loc["near", "lat_mean_us"], "reads from the mediated drive cross the NTB both ways"
    assert df.loc["pp", "rounds"] == 20 and df.loc["pp", "rtt_mean_ns"] > 0


def test_a_vm_drives_only_its_own_devices():
    s = devlend.Scenario(cluster())
    with pytest.raises(WorkloadError, match="VM vm-b has no device gpu4") as e:
        s.gpu_copy("c", "vm-b", "gpu4", "htod", 1 << 20)
    assert e.value.kind == "no-such"
    with pytest.raises(WorkloadError, match="nor a VM: vm-a, vm-b, vm-c"):
        s.gpu_copy("d", "vm-d", "gpu4", "htod", 1 << 20)


def test_vms_from_python_and_the_schema():
    topo = devlend.load(CLUSTER)
    topo.vms = [devlend.topology.Vm(name="g", host="server4", memory="64 MiB", devices=["gpu6", {"device": "nvme3", "path": "vfio"}])]
    assert topo.vms[0].devices[0].device == "gpu6" and topo.vms[0].memory == 64 << 20
    topo.build()
    assert "vms" in devlend.topology.json_schema()["properties"]


def test_a_scenario_file_runs_a_workload_in_a_vm(tmp_path):
    (tmp_path / "topo.yaml").write_text(cluster().to_json())
    (tmp_path / "s.yaml").write_text(textwrap.dedent("""
        name: vm-fio
        topology: topo.yaml
        timeline:
          - {at: 0 ns, action: fio, name: far, runner: vm-b, drive: nvme1, rw: randread, iodepth: 2, ios: 50}
          - {at: 0 ns, action: fio, name: bad, runner: vm-b, drive: nvme0, rw: randread, iodepth: 2, ios: 50}
        """))
    from devlend.scenario_file import load as load_scenario
    with pytest.raises(TopologyError, match="VM vm-b has no device nvme0") as e:
        load_scenario(tmp_path / "s.yaml").run()
    assert (e.value.line, e.value.field) == (6, "timeline[1].drive")


@pytest.mark.parametrize("vms, field, says", [
    ("vms: [{name: v, host: server9, memory: 64 MiB}]", "vms[0].host", "no host 'server9'"),
    ("vms: [{name: v, host: server1, memory: 65 MiB}]", "vms[0].memory", "multiple of 2 MiB"),
    ("vms: [{name: server2, host: server1, memory: 64 MiB}]", "vms[0].name", "is a host's name"),
    ("vms: [{name: v, host: server1, memory: 64 MiB, devices: [gpu9]}]", "vms[0].devices[0].device", "gpu9"),
    ("vms: [{name: v, host: server1, memory: 64 MiB, devices: [{device: gpu2, path: vfio}]}]", "vms[0].devices[0].path", "sits in server2"),
    ("vms: [{name: v, host: server1, memory: 64 MiB, devices: [{device: gpu0, path: mediated}]}]", "vms[0].devices[0].path", "path mediated"),
    ("vms: [{name: v, host: server1, memory: 64 MiB, devices: [ntb-1-2]}]", "vms[0].devices[0].device", "NTB adapter"),
    ("vms: [{name: v, host: server1, memory: 64 MiB, devices: [gpu0]}, {name: w, host: server1, memory: 64 MiB, devices: [gpu0]}]",
     "vms[1].devices[0].device", "already passed through to VM v"),
    ("vms: [{name: v, host: server1, memory: 64 MiB, devices: [{device: gpu0, pth: vfio}]}]", "vms[0].devices[0].pth", "expected one of device, path"),
    ("vms: [{name: v, host: server1, memory: 64 MiB, devices: [{device: gpu0, path: sriov}]}]", "vms[0].devices[0].path", "vfio"),
    ("vms: [{name: v, host: server1}]", "vms[0].memory", "required"),
])
def test_bad_vm_descriptions_name_file_line_and_field(vms, field, says):
    with pytest.raises(TopologyError) as e:
        cluster(vms).build()
    assert e.value.field == field and says in str(e.value), str(e.value)
    assert e.value.file == "vms.yaml" and e.value.line == CLUSTER.read_text().count("\n") + 1
