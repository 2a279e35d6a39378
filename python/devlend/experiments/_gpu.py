"""Running the GPU workloads as software on the simulated hosts (devlend-devices' GPU model,
devlend-drivers' unmodified driver, devlend-host's Device Lending): topology JSON without a `setup` section, with
the lenders' IOMMUs set per scenario."""

from __future__ import annotations

import functools

from .. import _core
from ..errors import DeviceError
from . import overrides_key, shipped


def device_call(fn, *args):
    """`fn(*args)` for a `_core` device run; its error becomes devlend's DeviceError."""
    try:
        return fn(*args)
    except _core.DeviceError as e:
        raise DeviceError(*e.args) from None


def topology_json(name: str, iommu: tuple[tuple[str, bool], ...] = ()) -> str:
    """The shipped topology `name` as JSON, its setup dropped, with `iommu` overrides per host and
    the current hardware-constant overrides (experiments.overrides)."""
    return _topology_json(name, iommu, overrides_key())


@functools.lru_cache(maxsize=256)
def _topology_json(name: str, iommu: tuple[tuple[str, bool], ...], _params: str) -> str:
    topo = shipped(name)
    topo.setup = []
    for host in topo.hosts:
        for h, on in iommu:
            if host.name == h:
                host.iommu = on
    return topo.to_json()


def memcpy_ps(json: str, runner: str, device: str, dtoh: bool, size: int) -> int:
    return device_call(_core.gpu_memcpy, json, runner, device, dtoh, size)[0]


def gpu_to_gpu_ps(json: str, runner: str, src: str, dst: str, peer: bool, size: int) -> int:
    return device_call(_core.gpu_to_gpu, json, runner, src, dst, peer, size)[0]


def pingpong_ps(json: str, runner: str, a: str, b: str, peer: bool) -> int:
    return device_call(_core.gpu_pingpong, json, runner, a, b, peer)
