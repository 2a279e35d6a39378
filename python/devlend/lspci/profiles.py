"""Known PCI vendor and device IDs and the params/hardware.toml profile each imports as.

IDs are from the PCI ID Repository (pci-ids.ucw.cz, the ``pci.ids`` file lspci names devices by):
8086 Intel, 10de NVIDIA. 8086:2700 is one ID for the first Optane (3D XPoint) NVMe generation; the
subsystem names the product (``900P Series``, ``DC P4800X Series``), so it decides between the two.
A profile replaces what the capture shows of the device (BARs, MSI-X): devlend's device models
(the NVMe controller's media, the GPU's memory behind BAR 1) are parameterised by profile.
"""

from __future__ import annotations

from typing import Optional

from .common import _Fn

# (vendor, device) -> profile; sourced: pci.ids.
KNOWN: dict[tuple[int, int], str] = {
    (0x10de, 0x1024): "tesla-k40c",        # GK110BGL [Tesla K40c]
    (0x10de, 0x20f1): "a100-pcie-40gb",    # GA100 [A100 PCIe 40GB]
    (0x8086, 0x2700): "optane-900p",       # Optane SSD 900P Series (P4800X by subsystem, below)
}


def profile_of(fn: _Fn) -> Optional[str]:
    """The profile of a function whose IDs the capture shows (``lspci -nn``, sysfs), if known."""
    if fn.ids is None:
        return None
    profile = KNOWN.get(fn.ids)
    if profile == "optane-900p" and "p4800x" in fn.subsystem.lower():
        return "optane-p4800x"
    return profile


# kind -> the profile whose model parameters a device of that kind is driven with when its IDs
# are not in KNOWN (devlend-devices' nvme::DEFAULT_PROFILE, a drive's media), so that it can be
# borrowed and do DMA; the import says so as a warning. A GPU needs none: without a profile its
# memory is its BAR 1's size and its timing devlend's global [timing] values.
DEFAULT: dict[str, str] = {"nvme": "optane-900p"}


class ProfileWarning(UserWarning):
    """An imported device got its kind's default profile (its IDs are not known)."""


def warn_default(topology, device: str) -> None:
    """Warn (ProfileWarning) when NVMe drive `device` of `topology` has no profile, so that its
    media is the default profile's (``devlend._core.NVME_DEFAULT_PROFILE``)."""
    import warnings
    from .. import _core
    d = next((d for d in topology.devices if d.name == device), None)
    if d is not None and d.profile is None and d.kind == "nvme":
        warnings.warn(f"{device} has no profile: driven with the default NVMe profile {_core.NVME_DEFAULT_PROFILE}'s media "
                      f"timing and capacity (set devices.{device}.media_* and capacity in params to change them)",
                      ProfileWarning, stacklevel=3)
