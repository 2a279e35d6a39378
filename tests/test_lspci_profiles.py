"""The profile an imported function gets is derived from params/hardware.toml's device profiles
(devlend.lspci.profiles): a profile's own IDs, its import_ids (with a subsystem: only when the
capture's subsystem name contains it, before the same IDs without one), never a variant_of or an
import_by_ids = false profile, and two profiles picked by the same IDs are refused."""

import os

import pytest

from devlend.experiments import hardware_params
from devlend.lspci import parse_lspci
from devlend.lspci.profiles import known, known_from

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "lspci")
TREE = open(os.path.join(FIX, "qemu-vm-optane.tree.txt"), encoding="utf-8").read()
VVV = open(os.path.join(FIX, "qemu-vm-optane.vvv.txt"), encoding="utf-8").read()
DRIVE = "nvme-00-04"


def drive(tree=TREE, vvv=VVV) -> dict:
    d = parse_lspci(tree, vvv).description
    return next(x for x in d["devices"] if x["name"] == DRIVE)


def test_every_profile_with_ids_is_known_unless_a_variant_or_kept_out():
    devices = hardware_params()["device"]
    k = known()
    picked = {p for entries in k.values() for _, p in entries}
    for name, p in devices.items():
        out = "variant_of" in p or p.get("import_by_ids") is False
        assert (name in picked) != out, name
        if not out:
            assert (None, name) in k[(p["vendor"], p["device"])], name
    # the mismatches the hand-written map had: the K420, the P5800X and the generic devices are
    # picked by their IDs now; the K40c's large-BAR1 mode and the two NICs are not
    assert k[(0x10de, 0x0ff3)] == [(None, "quadro-k420")] and k[(0x8086, 0x4140)] == [(None, "optane-p5800x")]
    assert k[(0x10de, 0x1024)] == [(None, "tesla-k40c")]
    assert (0x8086, 0x1572) not in k and (0x15b3, 0x101b) not in k
    assert k[(0x8086, 0x2700)] == [("P4800X", "optane-p4800x"), (None, "optane-900p")]


def test_the_subsystem_decides_between_the_optanes():
    assert drive() == {"name": DRIVE, "profile": "optane-900p"}  # Subsystem: ... 900P Series [Add-in Card]
    p4800x = VVV.replace("900P Series [Add-in Card]", "DC P4800X Series [Add-in Card]")
    assert drive(vvv=p4800x) == {"name": DRIVE, "profile": "optane-p4800x"}
    # the P4800X's own device ID picks it too, whatever the subsystem
    assert drive(TREE.replace("8086:2700", "8086:2701"), VVV.replace("8086:2700", "8086:2701")) == {"name": DRIVE, "profile": "optane-p4800x"}
    # IDs no profile has: the capture's functions
    assert "profile" not in drive(TREE.replace("8086:2700", "8086:27ff"), VVV.replace("8086:2700", "8086:27ff"))


def _profile(vendor, device, **kw):
    return {"kind": "nvme", "vendor": vendor, "device": device, **kw}


def test_a_file_that_picks_one_id_twice_is_refused():
    base = {"a": _profile(1, 2)}
    with pytest.raises(ValueError, match=r"\[device.b\] and \[device.a\] are both picked by 0001:0002"):
        known_from({**base, "b": _profile(1, 2)})
    with pytest.raises(ValueError, match=r"subsystem 'X'"):
        known_from({**base, "b": _profile(1, 3, import_ids=[{"vendor": 1, "device": 2, "subsystem": "X"}]),
                    "c": _profile(1, 4, import_ids=[{"vendor": 1, "device": 2, "subsystem": "X"}])})
    with pytest.raises(ValueError, match=r"variant_of = 'a': expected a profile with the same vendor and device IDs"):
        known_from({**base, "b": _profile(1, 3, variant_of="a")})
    assert known_from({**base, "b": _profile(1, 2, variant_of="a"), "c": _profile(1, 2, import_by_ids=False)}) == {(1, 2): [(None, "a")]}


CLASSES = [(0x0300, "gpu"), (0x0302, "gpu"), (0x0380, "gpu"), (0x0108, "nvme"), (0x0106, "generic"), (0x0200, "nic"),
           (0x0207, "nic"), (0x0280, "nic"), (0x0c03, "generic")]
NAMES = [("VGA compatible controller", "gpu"), ("3D controller", "gpu"), ("Non-Volatile memory controller", "nvme"),
         ("SATA controller", "generic"), ("Ethernet controller", "nic"), ("Infiniband controller", "nic")]


def test_a_functions_kind_is_the_device_kind_whose_import_classes_hold_its_class():
    """params/hardware.toml's [device_kind.KIND] import_classes (code prefixes) and import_class_names
    (lspci's names without codes) give the same kinds the hand-written rules gave."""
    from devlend.lspci.assemble import _kind
    from devlend.lspci.common import Loc, _Fn
    loc = Loc("f", 1)
    assert [_kind(_Fn((0, 1, 0, 0), loc, class_code=c)) for c, _ in CLASSES] == [k for _, k in CLASSES]
    assert [_kind(_Fn((0, 1, 0, 0), loc, class_text=t)) for t, _ in NAMES] == [k for _, k in NAMES]
    # not a device kind's class: an NTB adapter by its class (other bridge, not a PCI bridge) or name
    assert _kind(_Fn((0, 1, 0, 0), loc, class_code=0x0680)) == "ntb"
    assert _kind(_Fn((0, 1, 0, 0), loc, class_code=0x0680, is_bridge=True)) == "generic"
    kinds = hardware_params()["device_kind"]
    assert {k for k, v in kinds.items() if v.get("import_classes")} == {"gpu", "nic", "nvme"}
