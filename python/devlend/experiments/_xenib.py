"""Shared by X1-X4 (004, Xen-IB): the back-to-back testbed as JSON and the Rust measurements.

Server A runs one of four configurations (004 §4.2): ``gen2-native`` (native driver, native Linux),
``gen2-idd`` (native driver in Xen's device domain), ``xenib-basic`` (basic split driver in a guest)
and ``xenib-bypass`` (device-domain-bypass driver in a guest); server B always runs native Linux.
"""

from __future__ import annotations

import functools

from .. import _core, load
from ..errors import XenIbError
from . import topology_path

KiB, MiB = 1 << 10, 1 << 20
CONFIGS = ["gen2-native", "gen2-idd", "xenib-basic", "xenib-bypass"]
LABELS = {"gen2-native": "gen2-native", "gen2-idd": "gen2-IDD", "xenib-basic": "Xen-IB-basic", "xenib-bypass": "Xen-IB-bypass"}


@functools.lru_cache(maxsize=None)
def testbed_json() -> str:
    return load(topology_path("xenib-back-to-back.yaml")).to_json()


def call(fn, *args):
    """A Rust measurement, its failure raised as devlend's XenIbError (kind, message, errno name)."""
    try:
        return fn(*args)
    except _core.XenIbError as e:
        kind, message, status = e.args
        raise XenIbError(message, kind, status) from None


def us(ps: int) -> float:
    return round(ps / 1e6, 2)


def mbps(bytes_per_s: float) -> float:
    return round(bytes_per_s / 1e6, 1)


def rtt_us(config: str, mode: str, sizes: list[int], iters: int = 20, blocking: bool = False) -> dict[int, float]:
    return {s: us(t) for s, t in call(_core.xenib_latency, testbed_json(), config, mode, sizes, iters, blocking)}


def bw_mbps(config: str, mode: str, sizes: list[int], iters: int = 20, depth: int = 100) -> dict[int, float]:
    return {s: mbps(b) for s, b in call(_core.xenib_bandwidth, testbed_json(), config, mode, sizes, iters, depth)}


def reg_us(config: str, pages: list[int], reps: int = 3) -> dict[int, float]:
    return {n: us(t) for n, t in call(_core.xenib_registration, testbed_json(), config, pages, reps)}


def channel_one_way_us() -> float:
    return us(call(_core.xenib_channel_one_way, testbed_json()))


def size_label(s: int) -> str:
    return f"{s // MiB}M" if s >= MiB else f"{s // KiB}K" if s >= KiB else str(s)


def size_of(label: str) -> int:
    """The inverse of size_label: '4K' -> 4096, '1M' -> 1048576, '64' -> 64."""
    return int(label[:-1]) * (1 << 20 if label.endswith("M") else 1 << 10) if label[-1] in "KM" else int(label)


# ----- beyond 004: the same RDMA-write benchmark over four access paths (xcmp) -------------------

ACCESSES = ["native", "basic", "bypass", "vfio", "lending"]
ACCESS_LABELS = {"native": "native Linux", "basic": "Xen split (basic)", "bypass": "Xen bypass",
                 "vfio": "VFIO pass-through", "lending": "Device Lending"}


@functools.lru_cache(maxsize=None)
def cmp_jsons() -> tuple[str, str, str]:
    """The three testbeds of xcmp: local (native, basic, bypass), VFIO, lending."""
    return (testbed_json(), load(topology_path("xenib-vfio.yaml")).to_json(),
            load(topology_path("xenib-lending.yaml")).to_json())


def cmp_rtt_us(access: str, sizes: list[int], iters: int = 10) -> dict[int, float]:
    return {s: us(t) for s, t in call(_core.xenib_cmp_latency, *cmp_jsons(), access, sizes, iters)}


def cmp_bw_mbps(access: str, sizes: list[int], iters: int = 20, depth: int = 100) -> dict[int, float]:
    return {s: mbps(b) for s, b in call(_core.xenib_cmp_bandwidth, *cmp_jsons(), access, sizes, iters, depth)}


def cmp_costs(access: str) -> dict[str, int]:
    return dict(call(_core.xenib_cmp_costs, *cmp_jsons(), access))
