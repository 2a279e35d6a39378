"""Imports say what a hypervisor's functions are: virtio and other paravirtual or emulated
functions are named as such, never as chipset or uncore devices."""

import os

from devlend.lspci import parse_lspci

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "lspci")

BLK_TREE = "           +-05.0  Red Hat, Inc. Virtio block device [1af4:1001]\n" \
           "           +-06.0  Red Hat, Inc. Virtio 1.0 balloon [1af4:1045]\n"
BLK_VVV = """00:05.0 SCSI storage controller: Red Hat, Inc. Virtio block device
	Subsystem: Red Hat, Inc. Device 0002
	Region 0: I/O ports at c080 [size=64]
	Region 1: Memory at febf2000 (32-bit, non-prefetchable) [size=4K]
	Region 4: Memory at fe004000 (64-bit, prefetchable) [size=16K]
	Kernel driver in use: virtio-pci

00:06.0 Unclassified device [00ff]: Red Hat, Inc. Virtio 1.0 balloon (rev 01)
	Subsystem: Red Hat, Inc. Device 1100
	Region 4: Memory at fe008000 (64-bit, prefetchable) [size=16K]
	Kernel driver in use: virtio-pci

"""


def vm_with_virtio_blk():
    tree = open(os.path.join(FIX, "qemu-vm-optane.tree.txt"), encoding="utf-8").read().splitlines(keepends=True)
    # insert before the last entry (the one drawn with '\-')
    tree = "".join(tree[:-1]) + BLK_TREE + tree[-1]
    vvv = open(os.path.join(FIX, "qemu-vm-optane.vvv.txt"), encoding="utf-8").read()
    return parse_lspci(tree, BLK_VVV + vvv, host_name="guest", tree_file="t", verbose_file="v")


def test_virtio_functions_on_a_vms_root_bus_are_named_paravirtual_not_chipset():
    r = vm_with_virtio_blk()
    reasons = {s.bdf: s.reason for s in r.skipped}
    assert "paravirtual function (virtio-blk)" in reasons["0000:00:05.0"], reasons["0000:00:05.0"]
    assert "paravirtual function (virtio-balloon)" in reasons["0000:00:06.0"], reasons["0000:00:06.0"]
    assert not any("chipset" in reasons[b] for b in ("0000:00:05.0", "0000:00:06.0"))
    assert "chipset" in reasons["0000:00:01.0"], "the PIIX3 ISA bridge is the VM's chipset"


def test_imported_paravirtual_devices_are_noted_as_such():
    notes = "\n".join(vm_with_virtio_blk().notes)
    assert "nic-00-03: 0000:00:03.0 is a paravirtual function (virtio-net)" in notes
    assert "gpu-00-02: 0000:00:02.0 is a paravirtual function (QEMU standard VGA)" in notes


HOST = """name: {name}
hosts:
  - {{name: {name}, cpu: intel-xeon-e5, ram: 64 GiB, iommu: true, root_ports: 2}}
devices:
  - name: dev0
    functions:
      - bars:
          - {{index: 0, size: 16 MiB, bits: 64, pref: true}}
links:
  - {{a: {name}.rp0, b: dev0, gen: 3, width: 8}}
"""


def test_merged_files_keep_sizes_as_the_user_wrote_them(tmp_path):
    from devlend.lspci.merge import main_merge
    files = []
    for name in ("alpha", "beta"):
        p = tmp_path / f"{name}.yaml"
        p.write_text(HOST.format(name=name))
        files.append(str(p))
    text = main_merge(files, "lab", "pxh830", None)
    assert "ram: 64 GiB" in text and "size: 16 MiB" in text, text
    assert str(64 << 30) not in text and str(16 << 20) not in text
