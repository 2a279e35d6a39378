"""SR-IOV virtual functions: routing IDs past the PF's bus, VF BARs, reachability both ways."""

import pytest

import devlend

TOPO = """
name: sriov
hosts:
  - {name: h, cpu: amd-epyc, ram: 16 GiB, iommu: false, root_ports: 2}
switches:
  - {name: sw, downstream_ports: 2}
devices:
  - name: nic0
    kind: nic
    functions:
      - bars: [{index: 0, size: 8 MiB, bits: 64, pref: true}]
        msix_vectors: 64
        sriov:
          num_vfs: 255
          total_vfs: 255
          vf_bars: [{index: 0, size: 64 KiB, bits: 64, pref: true}]
      - bars: [{index: 0, size: 8 MiB, bits: 64, pref: true}]
  - {name: nvme0, profile: optane-900p}
links:
  - {a: h.rp0, b: sw, gen: 4, width: 16}
  - {a: sw.d0, b: nic0, gen: 4, width: 16}
  - {a: sw.d1, b: nvme0, gen: 3, width: 4}
"""


def test_vfs_take_routing_ids_past_the_pfs_bus_and_stay_reachable():
    f = devlend.loads(TOPO, "sriov.yaml").build()
    pf = f.bdf("nic0")
    assert pf.endswith(":00.0") and f.bdf("nic0.f1").endswith(":00.1")
    bus = int(pf[:2], 16)
    # ARI: VF i has routing ID (bus, 2 + i): VF253 is the last on the PF's bus, VF254 spills over.
    assert f.bdf("nic0.vf0") == f"{bus:02x}:00.2"
    assert f.bdf("nic0.vf253") == f"{bus:02x}:1f.7"
    assert f.bdf("nic0.vf254") == f"{bus + 1:02x}:00.0"
    # The NVMe drive's bus comes after the buses the VFs reserved.
    assert int(f.bdf("nvme0")[:2], 16) == bus + 2
    # Each VF's BAR is its own 64 KiB slice of the VF BAR region, reachable from the CPU...
    a = f.resolve("nic0.vf7.bar0")
    b = f.resolve("nic0.vf8.bar0")
    assert b - a == 64 * 1024 or a - b == 64 * 1024
    f.write("h:cpu", "nic0.vf254.bar0+0x20", b"vf")
    assert f.route("h:cpu", "nic0.vf254.bar0+0x20").target["function"] == "nic0.vf254"
    # ...and a VF's DMA read completes back to it on the extra bus.
    f.set_bus_master("nic0.vf254", True)
    r = f.route("nic0.vf254", "h.ram+0x1000", write=False)
    assert r.completion.target == {"kind": "function", "function": "nic0.vf254"}


@pytest.mark.parametrize("old,new,field,needle", [
    ("num_vfs: 255", "num_vfs: 300", "devices[0].functions[0].sriov.num_vfs", "less than or equal to 255"),
    ("total_vfs: 255", "total_vfs: 100", "devices[0].functions[0].sriov", "supports 100"),
])
def test_more_vfs_than_the_device_supports_is_an_error(old, new, field, needle):
    with pytest.raises(devlend.TopologyError) as e:
        devlend.loads(TOPO.replace(old, new), "sriov.yaml").build()
    assert e.value.field == field and needle in e.value.message
