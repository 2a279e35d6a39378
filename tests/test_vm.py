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


# --- the attack suite (devlend_vm::attacks) and interrupts (000 §5, §8) ---------------------

ATTACKS = [name for name, _ in _core.vm_attack_cases()]


def test_the_attack_suite_names_every_case_of_the_issue():
    for word in ("outside_guest_memory", "another_vm", "stale_after_hot_remove", "bar_relocation", "msix_table_redirection", "bus_master_of_another_function"):
        assert any(word in n for n in ATTACKS), word


@pytest.mark.parametrize("name", ATTACKS)
def test_attack_is_blocked_recorded_and_changes_no_memory(name):
    out = _core.vm_attack(vm._base(), name)   # raises if not blocked, not recorded, or memory changed
    assert out["case"] == name
    assert out["blocked_by"] == ("IOMMU" if name.startswith("dma_") else "interrupt remapping" if name.startswith("msi_") else "mediated parent")
    assert out["record"]


def test_unknown_attack_is_a_clear_error():
    with pytest.raises(_core.FabricError, match="no attack case 'nope'"):
        _core.vm_attack(vm._base(), "nope")


def test_interrupt_forwarding_through_the_lender_costs_time_and_intx_reaches_a_vm():
    loc, loc_steps = _core.vm_irq_latency(vm._base(), "VMLoc", False)
    rem, rem_steps = _core.vm_irq_latency(vm._base(), "VMRem", False)
    assert rem > loc
    assert "notification through the NTB" in dict(rem_steps) and "notification through the NTB" not in dict(loc_steps)
    intx, steps = _core.vm_irq_latency(vm._base(), "VMRem", True)
    assert steps[0][0] == "Assert_INTx, device to root" and intx == sum(t for _, t in steps)


def test_vmirq_experiment_has_both_paths_and_both_interrupt_kinds():
    res = vm.run_irq(quick=True)
    got = {(r["scenario"], r["interrupt"]): r["latency_us"] for r in res.rows}
    assert set(got) == {(s, k) for s in ("VMLoc", "VMRem") for k in ("MSI-X", "INTx")}
    assert got[("VMRem", "MSI-X")] > got[("VMLoc", "MSI-X")]


def test_vm_nvme_read_is_the_native_one_plus_the_vm_interrupt_path():
    # D5 VMRem on the machine: the MSI lands at the lender, whose handler forwards it through the NTB
    # to the borrower's eventfd and the guest (irq_clock). Its software steps: two host interrupt
    # entries (lender, borrower relay), the lender's handler, eventfd/irqfd, the guest's entry; its
    # notification crosses the NTB: the path is within one NTB crossing of the software steps.
    # Against the bare-metal borrower, whose MSI crosses the NTB to the borrower's interrupt entry
    # (the same entry, timing irq_entry_ps), the VM adds all that but one host entry.
    from devlend.experiments import hardware_params, nvme
    p = hardware_params()["vm"]
    entry = hardware_params()["timing"]["irq_entry_ps"]
    software = 2 * entry + p["lender_forward_ps"] + p["eventfd_irqfd_ps"] + p["guest_irq_entry_ps"]
    vm_total, _, vm_steps = _core.vm_nvme_read(nvme._vm_json(), "borrower", "nvme0", [0], 8)
    nat_total, _, nat_steps = _core.nvme_read(nvme._json(), "borrower", "nvme0", [0], 8)
    ntb_msi = dict(nat_steps)["MSI-X interrupt"]   # the bare-metal borrower's MSI crosses the NTB
    path = dict(vm_steps)["VM interrupt path, first host's handler to the guest's"]
    assert software < path < software + ntb_msi
    assert abs((vm_total - nat_total) - (software - entry)) < ntb_msi
