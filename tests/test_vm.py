"""D4 (000 §7.3): the paper's relations for GPUs passed through to a VM, as tolerance tests.
The experiment module is python/devlend/experiments/vm.py."""

import pytest

from devlend import _core
from devlend.experiments import vm

MiB = 1 << 20


def gbps(name: str, size: int) -> float:
    return size / (vm.transfer_ps(name, size) * 1e-12) / 1e9


def test_ram_bounce_hops_are_7_and_21():
    assert vm.ram_hops("VMLoc-RAM") == 7
    assert vm.ram_hops("VMRem-RAM") == 21
    assert _core.vm_ram_bounce_path(vm._base(), "VMRem") == (21, 3, 2)   # three roots, the NTB twice


@pytest.mark.parametrize("size", [4 * MiB, 16 * MiB])
def test_vm_remote_p2p_matches_local_from_4mb_and_native_is_comparable(size):
    loc, rem, nat = gbps("VMLoc-P2P", size), gbps("VMRem-P2P", size), gbps("NatRem-P2P-IOMMU", size)
    assert rem == pytest.approx(loc, rel=0.05)
    assert nat == pytest.approx(rem, rel=0.10)


def test_ram_bounce_drops_drastically_remote_vm_as_native():
    loc, rem, nat = gbps("VMLoc-RAM", 4 * MiB), gbps("VMRem-RAM", 4 * MiB), gbps("NatRem-RAM-IOMMU", 4 * MiB)
    assert rem < 0.5 * loc
    assert rem == pytest.approx(nat, rel=0.10)


def test_p2p_latency_remote_is_local_and_ram_latency_follows_hops():
    loc, rem, nat = (vm.round_trip_ns(n) for n in ("VMLoc-P2P", "VMRem-P2P", "NatRem-P2P-IOMMU"))
    assert rem == pytest.approx(loc, rel=0.05) and nat == pytest.approx(loc, rel=0.05)
    assert vm.round_trip_ns("VMRem-RAM") > 1.5 * vm.round_trip_ns("VMLoc-RAM")


def test_quick_run_has_every_scenario():
    res = vm.run(quick=True)
    assert {r["scenario"] for r in res.rows} == set(vm.SCENARIOS)
    assert all(r["GBps"] > 0 for r in res.rows)
