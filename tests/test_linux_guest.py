"""Real Linux on devlend (issue 28): a User-Mode Linux guest whose unmodified nvme driver, nvme-cli
and fio run against devlend's NVMe model, borrowed through Device Lending across the modelled NTB.

These boot the kernel `devlend linux build` makes (scripts/linux-deps builds it once and caches
it); one guest boot runs all the commands the happy-path tests check."""

import os

import pytest

import devlend
from conftest import topo_path
from devlend.linux import build as lbuild
from devlend.linux.guest import LinuxGuestError, run

FIO = ("fio --name={name} --filename=/dev/nvme0n1 --direct=1 --thread --clocksource=clock_gettime "
       "--bs=4k --size=2m --output-format=normal")
COMMANDS = [
    "lspci -nn",
    "nvme id-ctrl /dev/nvme0",
    FIO.format(name="rr") + " --rw=randread --ioengine=libaio --iodepth=1 --io_size=256k",
    FIO.format(name="wv") + " --rw=randwrite --ioengine=io_uring --iodepth=4 --verify=crc32c --do_verify=1",
    "cat /proc/interrupts",
]


@pytest.fixture(scope="module")
def guest(tmp_path_factory):
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    return run(topo, "borrower", COMMANDS, device="nvme0", outdir=tmp_path_factory.mktemp("guest"), timeout_s=300)


def test_the_guest_enumerates_the_borrowed_drive(guest):
    assert guest.returncodes[0] == 0, guest.outputs[0]
    assert "Non-Volatile memory controller [0108]" in guest.outputs[0], guest.outputs[0]
    assert guest.device["cfg_reads"] > 0


def test_nvme_id_ctrl_reads_the_modelled_identity(guest):
    assert guest.returncodes[1] == 0, guest.outputs[1]
    assert "devlnd modelled NVMe" in guest.outputs[1], guest.outputs[1]
    assert "nn        : 1" in guest.outputs[1], guest.outputs[1]
    # nvme-cli's buffer is not page-aligned: the structure's second part goes to PRP2, so the
    # fields past the page boundary read as the model wrote them (zeros), not as stale memory.
    assert "ioccsz    : 0\n" in guest.outputs[1] and "mp:0.00W" in guest.outputs[1], guest.outputs[1]


def test_fio_randread_completes_on_the_borrowed_drive(guest):
    out = guest.outputs[2]
    assert guest.returncodes[2] == 0, out
    assert "err= 0" in out and "read: IOPS=" in out, out
    # 64 reads of 4 KiB, each an NVMe command the model executed, its interrupts from the model.
    assert guest.device["commands"] >= 64
    assert guest.device["msis"] >= 64
    assert guest.device["simulated_ps"] > 0


def test_fio_write_then_verify_passes(guest):
    out = guest.outputs[3]
    assert guest.returncodes[3] == 0, out
    assert "err= 0" in out and "verify" in out.lower(), out


def test_the_guest_cannot_write_a_host_file(tmp_path):
    probe = tmp_path / "host-file"
    probe.write_text("host")
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    r = run(topo, "borrower", [f"echo guest > {probe}"], outdir=tmp_path / "g", timeout_s=120)
    assert r.returncodes[0] != 0
    assert probe.read_text() == "host"


def test_a_guest_that_never_powers_off_is_ended_with_its_console(tmp_path):
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    with pytest.raises(LinuxGuestError) as e:
        run(topo, "borrower", ["sleep 100000"], outdir=tmp_path, timeout_s=8)
    assert e.value.kind == "timeout"
    assert "Linux version" in e.value.console_tail or e.value.console_tail
    assert os.path.exists(tmp_path / "console.log")


def test_no_kernel_source_is_one_clear_error(tmp_path):
    with pytest.raises(lbuild.LinuxBuildError) as e:
        lbuild.build(source=str(tmp_path))
    assert e.value.kind == "source"
    assert "not a Linux source tree" in str(e.value)


def test_the_cache_key_follows_the_config_fragment(monkeypatch, tmp_path):
    a = lbuild.kernel_key("src", (6, 12, 1))
    frag = tmp_path / "uml.config"
    frag.write_text(lbuild.FRAGMENT.read_text() + "CONFIG_NTB_PERF=n\n")
    monkeypatch.setattr(lbuild, "FRAGMENT", frag)
    assert lbuild.kernel_key("src", (6, 12, 1)) != a


def test_the_device_server_gives_up_when_no_guest_connects(tmp_path):
    from devlend import _core
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    with pytest.raises(_core.UmlError, match="no guest connected"):
        _core.uml_serve(topo.to_json(), "borrower", "nvme0", str(tmp_path / "s.sock"), str(tmp_path / "t.sock"), 1024, 0.2)


def test_the_device_server_names_an_unknown_drive(tmp_path):
    from devlend import _core
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    with pytest.raises(_core.UmlError, match="nvme9"):
        _core.uml_serve(topo.to_json(), "borrower", "nvme9", str(tmp_path / "s.sock"), str(tmp_path / "t.sock"), 1024, 0.2)
