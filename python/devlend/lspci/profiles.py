"""The params/hardware.toml profile each captured vendor:device ID imports as, derived from the
profiles themselves (their ``vendor``, ``device`` and import fields), so a new profile is picked by
its IDs with no edit here.

The rules (also in the comment above the device profiles in params/hardware.toml):

* a profile is picked by its own ``vendor``:``device``, and by each entry of ``import_ids``;
* an ``import_ids`` entry with a ``subsystem`` is picked only when the capture's subsystem name
  contains it (case-insensitive), and before a profile picked by the same IDs without one: 8086:2700
  is one ID for the first Optane (3D XPoint) NVMe generation, the subsystem (``900P Series``,
  ``DC P4800X Series``) names the product (PCI ID Repository, the ``pci.ids`` file lspci names
  devices by);
* a profile with ``variant_of`` (a mode of another profile's card, e.g. the K40c's large BAR1) or
  ``import_by_ids = false`` is never picked by IDs;
* two profiles picked by the same IDs and subsystem are an error in the file.

A profile replaces what the capture shows of the device (BARs, MSI-X): devlend's device models
(the NVMe controller's media, the GPU's memory behind BAR 1) are parameterised by profile.
"""

from __future__ import annotations

import functools
from typing import Optional

from .common import _Fn

# (vendor, device) -> [(subsystem text or None, profile)], entries with a subsystem first.
Known = dict[tuple[int, int], list[tuple[Optional[str], str]]]


def known_from(devices: dict[str, dict]) -> Known:
    """The IDs each profile of ``devices`` (params/hardware.toml's ``[device.*]``) is picked by."""
    out: Known = {}
    for name, p in devices.items():
        base = p.get("variant_of")
        if base is not None and (base not in devices or (devices[base].get("vendor"), devices[base].get("device")) != (p.get("vendor"), p.get("device"))):
            raise ValueError(f"[device.{name}] variant_of = {base!r}: expected a profile with the same vendor and device IDs")
        if base is not None or not p.get("import_by_ids", True) or p.get("vendor") is None:
            continue
        own = [{"vendor": p["vendor"], "device": p["device"]}]
        for e in own + list(p.get("import_ids", [])):
            entries = out.setdefault((e["vendor"], e["device"]), [])
            sub = e.get("subsystem")
            clash = next((other for s, other in entries if s == sub), None)
            if clash is not None:
                raise ValueError(f"[device.{name}] and [device.{clash}] are both picked by {e['vendor']:04x}:{e['device']:04x}"
                                 + (f" subsystem {sub!r}" if sub else "") + ": give one variant_of or import_by_ids = false")
            entries.append((sub, name))
            entries.sort(key=lambda x: x[0] is None)
    return out


@functools.cache
def hardware() -> dict:
    """The hardware parameter file the core runs on (params/hardware.toml as compiled in)."""
    import tomllib

    from .. import _core
    return tomllib.loads(_core.params_toml())


@functools.cache
def known() -> Known:
    """The IDs each profile of the hardware parameter file the core runs on is picked by."""
    return known_from(hardware()["device"])


def profile_of(fn: _Fn) -> Optional[str]:
    """The profile of a function whose IDs the capture shows (``lspci -nn``, sysfs), if known."""
    if fn.ids is None:
        return None
    subsystem = fn.subsystem.lower()
    return next((p for s, p in known().get(fn.ids, []) if s is None or s.lower() in subsystem), None)


def unprofiled(kind: str, device: str) -> Optional[str]:
    """How a device ``device`` of kind ``kind`` that has no profile (its IDs pick none) is driven,
    so that it can be borrowed and do DMA: its kind's ``unprofiled`` in params/hardware.toml's
    ``[device_kind.KIND]`` (with the kind's ``default_profile``, whose model parameters it gets);
    ``None`` for a kind whose table says nothing (no warning)."""
    k = hardware()["device_kind"].get(kind, {})
    text = k.get("unprofiled")
    return None if text is None else text.format(device=device, default_profile=k.get("default_profile"))


class ProfileWarning(UserWarning):
    """An imported device got its kind's default profile (its IDs are not known)."""


def warn_default(topology, device: str) -> None:
    """Warn (ProfileWarning) when ``device`` of ``topology`` has no profile and its kind has a
    default profile (``[device_kind.KIND] default_profile``), so that it is driven with that
    profile's model parameters."""
    import warnings
    d = next((d for d in topology.devices if d.name == device), None)
    if d is not None and d.profile is None and hardware()["device_kind"].get(d.kind, {}).get("default_profile") is not None:
        warnings.warn(f"{device} has no profile: driven with {unprofiled(d.kind, device)}", ProfileWarning, stacklevel=3)
