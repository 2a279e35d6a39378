"""Paravirtual and emulated functions a hypervisor presents on a VM's PCI bus, by vendor and
device ID, so that an import says what they are (a virtio block device is no chipset function).

IDs are from the PCI ID Repository (pci-ids.ucw.cz, ``pci.ids``) and, for virtio, the virtio
specification 1.2 §4.1.2 (vendor 1af4; transitional devices 1000-103f, modern devices 1040 plus
the virtio device ID).
"""

from __future__ import annotations

from typing import Optional

from .common import _Fn

# virtio device IDs (virtio 1.2 §5): the modern PCI device ID is 0x1040 + this.
_VIRTIO = {1: "virtio-net", 2: "virtio-blk", 3: "virtio-console", 4: "virtio-rng", 5: "virtio-balloon", 8: "virtio-scsi",
           9: "virtio-9p", 16: "virtio-gpu", 18: "virtio-input", 19: "virtio-vsock", 20: "virtio-crypto", 26: "virtio-fs",
           27: "virtio-pmem", 29: "virtio-mem"}
# Transitional virtio device IDs (virtio 1.2 §4.1.2.1).
_VIRTIO_TRANSITIONAL = {0x1000: "virtio-net", 0x1001: "virtio-blk", 0x1002: "virtio-balloon", 0x1003: "virtio-console",
                        0x1004: "virtio-scsi", 0x1005: "virtio-rng", 0x1009: "virtio-9p"}
# Other hypervisors' paravirtual or emulated functions (pci.ids).
_OTHER = {
    (0x1b36, 0x0001): "QEMU PCI-PCI bridge", (0x1b36, 0x0002): "QEMU PCI 16550A serial", (0x1b36, 0x000c): "QEMU PCIe root port",
    (0x1b36, 0x000d): "QEMU XHCI host controller", (0x1b36, 0x0010): "QEMU NVM Express controller",
    (0x1234, 0x1111): "QEMU standard VGA",
    (0x15ad, 0x07b0): "VMware vmxnet3", (0x15ad, 0x07c0): "VMware PVSCSI", (0x15ad, 0x0405): "VMware SVGA II",
    (0x15ad, 0x0740): "VMware VMCI",
    (0x5853, 0x0001): "Xen platform device",
    (0x1414, 0x5353): "Hyper-V virtual VGA",
    (0x80ee, 0xcafe): "VirtualBox guest service", (0x80ee, 0xbeef): "VirtualBox graphics adapter",
}
_VENDOR = {0x1af4: "virtio", 0x1b36: "QEMU", 0x15ad: "VMware", 0x5853: "Xen", 0x1414: "Hyper-V", 0x80ee: "VirtualBox"}


def paravirtual(fn: _Fn) -> Optional[str]:
    """What a hypervisor's function is ("virtio-blk", "VMware vmxnet3"...), or None for others."""
    if fn.ids is None:
        return None
    vendor, device = fn.ids
    if vendor == 0x1af4:
        name = _VIRTIO_TRANSITIONAL.get(device) or (_VIRTIO.get(device - 0x1040) if device >= 0x1040 else None)
        return name or f"virtio device {device:04x}"
    if (vendor, device) in _OTHER:
        return _OTHER[(vendor, device)]
    return f"a {_VENDOR[vendor]} function" if vendor in _VENDOR else None
