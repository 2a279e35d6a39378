"""Real Linux on devlend (issue 28), apart from the one shared guest of test_linux_guest.py: faults
injected under direct reads in a guest (link down, surprise removal, the lender's revoke), the guest's
limits (bad faults refused, no host file written, a guest that never powers off) and `devlend
linux run`. Each test boots its own guest; a module of their own, so that pytest-xdist can run
them beside test_linux_guest.py's guest on the other worker."""

import os
import re
import signal
import threading
import time
import tomllib
from pathlib import Path

import pytest

import devlend
from conftest import topo_path
from devlend.linux.guest import LinuxGuestError, run

# The hot-plug steps' times (params/hardware.toml [timing], ps): a port's hot-plug interrupt after
# its link goes down, pciehp's remove after it, Device Lending's notice to a borrower.
with open(Path(__file__).parent.parent / "params" / "hardware.toml", "rb") as fh:
    TIMING = tomllib.load(fh)["timing"]
HOTPLUG_DETECT_NS, HOTPLUG_REMOVE_NS, DL_NOTICE_NS = (TIMING[k] // 1000 for k in ("hotplug_detect_ps", "hotplug_remove_ps", "dl_notice_ps"))

# Direct 4 KiB reads one at a time (dd) from the guest's first millisecond, the faults at 20 ms
# simulated (~1,200 reads in): a fio would cost ~4-7 s of the machine's CPU before its first I/O in
# a guest (it calibrates its clock by reading it ~255,000 times, each read a ptrace round trip in
# UML; BENCHMARKS.md, issue 33), dd none. A command that never completes times out in the nvme
# driver alike whoever sent it, and a hot-unplug fails the read blocked on the drive at the
# unplug's time: devlend-uml's controller has the waiting guest take an interrupt then
# (crates/devlend-uml/src/conn.rs `hot_unplug`).
DIRECT_READS = "dd if=/dev/nvme0n1 of=/dev/null bs=4k count=262144 iflag=direct"
FAULT_AT_NS = 20_000_000
# The PCI bus a little after the failed read: nvme's remove fails the I/O in flight before the
# kernel deletes the PCI device, and the woken dd, echo and ls can run in between.
BUS_AFTER = "sleep 0.01; ls /sys/bus/pci/devices/"


def failed_mid_read(out: str) -> bool:
    """dd read some blocks, then one failed: the fault struck under I/O, not before it began."""
    done = re.search(r"^(\d+)\+0 records in$", out, re.M)
    return "error reading '/dev/nvme0n1': Input/output error" in out and done is not None and int(done[1]) > 0


def dd_seconds(out: str) -> float:
    """dd's own running time (its clock is the guest's, simulated) up to its end."""
    return float(re.search(r"copied, ([0-9.e-]+) s,", out)[1])


def test_a_link_down_under_direct_io_reaches_the_real_driver(tmp_path):
    # Injected on the engine at 20 ms simulated, while dd reads (~1,200 reads after the guest's
    # ~0.6 ms boot): no completion comes, Linux's nvme driver times the command out (30 s,
    # simulated), finds the controller reading all ones, fails to reset it and disables it; dd
    # ends with an I/O error. The lend stays across a pulled cable
    # (devlend_host::fault), so no hot-plug event: the config space the driver reads through
    # Device Lending's relay reads all ones too (PCI_STATUS). Never a hang: the guest powers off.
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    r = run(topo, "borrower", [DIRECT_READS, "echo after"], device="nvme0", outdir=tmp_path, timeout_s=400,
            faults=[("link-down", "ntb-b", FAULT_AT_NS)])
    assert r.device["faults_struck"] == [("link-down", "ntb-b", False)]
    assert r.returncodes == [1, 0] and failed_mid_read(r.outputs[0]), r.outputs[0][-800:]
    lines = "\n".join(r.driver_lines)
    assert "controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff" in lines, lines
    assert "Disabling device after reset failure" in lines, lines
    assert r.device["read_faults"] > 0 and r.device["unplugged_ns"] is None
    assert r.device["guest_ns"] > 30_000_000_000  # the driver's I/O timeout, on the simulated clock


def hot_unplugged(r, unplugged_ns: int) -> None:
    """What a hot-unplug under dd does in the guest: the unplug at `unplugged_ns` fails the read
    blocked on the drive there (dd read some blocks, then failed; its running time ends at the
    unplug, less the guest's sub-millisecond boot before dd began), the guest goes on (its next
    command runs) and its PCI bus is empty 10 ms later."""
    assert r.device["unplugged_ns"] == unplugged_ns
    assert r.returncodes == [1, 0, 0] and failed_mid_read(r.outputs[0]), r.outputs[0][-800:]
    ended_ns = dd_seconds(r.outputs[0]) * 1e9
    assert unplugged_ns - 1_000_000 < ended_ns <= unplugged_ns, (ended_ns, unplugged_ns)
    assert r.outputs[1] == "after\n" and r.outputs[2].strip() == "", r.outputs[1:]
    assert r.device["guest_ns"] < 1_000_000_000


def test_a_surprise_removal_during_direct_reads_is_hot_unplugged_in_the_guest(tmp_path):
    # The drive is pulled at 20 ms simulated: its reads stop completing. The lender's port finds
    # its link down (24 ms), pciehp removes it, Device Lending tells the borrower (000 §4): at that
    # step the guest gets its hot-unplug (virtio_uml's device connection breaks), the kernel
    # removes the PCI device and nvme's remove fails the I/O in flight at once (no 30 s timeout).
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    r = run(topo, "borrower", [DIRECT_READS, "echo after", BUS_AFTER], device="nvme0",
            outdir=tmp_path, timeout_s=400, faults=[("surprise-removal", "nvme0", FAULT_AT_NS)])
    assert r.device["faults_struck"] == [("surprise-removal", "nvme0", False)]
    hot_unplugged(r, FAULT_AT_NS + HOTPLUG_DETECT_NS + HOTPLUG_REMOVE_NS + DL_NOTICE_NS)
    lines = "\n".join(r.driver_lines)
    assert "controller is down" not in lines and "WARNING" not in r.console.read_text(), lines


def test_the_lender_revoking_the_drive_hot_unplugs_it_in_the_guest(tmp_path):
    # The lender takes its drive back mid-read (a forced return: the lend's mappings and
    # interrupts go at once); Device Lending's notice reaches the borrower 20 us later
    # (timing.dl_notice_ps) and the guest hot-unplugs the drive there.
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    r = run(topo, "borrower", [DIRECT_READS, "echo after", BUS_AFTER], device="nvme0",
            outdir=tmp_path, timeout_s=400, faults=[("revoke", "nvme0", FAULT_AT_NS)])
    assert r.device["faults_struck"] == [("revoke", "nvme0", False)]
    hot_unplugged(r, FAULT_AT_NS + DL_NOTICE_NS)


def test_bad_faults_are_refused_before_the_guest_boots(tmp_path):
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    with pytest.raises(LinuxGuestError, match="at_ns"):
        run(topo, "borrower", ["true"], device="nvme0", outdir=tmp_path, faults=[("link-down", "ntb-b", -5)])
    with pytest.raises(LinuxGuestError, match="no-such-ntb"):
        run(topo, "borrower", ["true"], device="nvme0", outdir=tmp_path, faults=[("link-down", "no-such-ntb", 5)], timeout_s=60)


def test_the_guest_cannot_write_a_host_file(tmp_path):
    probe = tmp_path / "host-file"
    probe.write_text("host")
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    r = run(topo, "borrower", [f"echo guest > {probe}"], outdir=tmp_path / "g", timeout_s=120)
    assert r.returncodes[0] != 0
    assert probe.read_text() == "host"


def test_a_guest_that_never_powers_off_is_ended_with_its_console(tmp_path):
    # A guest without a device runs on the wall clock: the guard ends it 2 s in, its boot (~0.5 s
    # of wall clock, its console's first lines within milliseconds) long done.
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    with pytest.raises(LinuxGuestError) as e:
        run(topo, "borrower", ["sleep 100000"], outdir=tmp_path, timeout_s=2)
    assert e.value.kind == "timeout"
    assert "Linux version" in e.value.console_tail or e.value.console_tail
    assert os.path.exists(tmp_path / "console.log")


def test_a_guest_interrupted_by_ctrl_c_is_ended_not_left_running(tmp_path):
    """Ctrl-C while a guest runs (pytest without xdist, or a script calling `run`): the guest, in a
    session of its own, is killed with the run, not left behind. Python's KeyboardInterrupt handler
    is put back for the test: pytest-xdist's workers ignore SIGINT."""
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    init = str(tmp_path / "init").encode()

    def interrupt_once_booted():
        deadline = time.monotonic() + 60
        while b"devlend-test-sleeping" not in _read(tmp_path / "console.log") and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_once_booted, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run(topo, "borrower", ["echo devlend-test-sleeping > /dev/console; sleep 100000"], outdir=tmp_path, timeout_s=120)
    finally:
        signal.signal(signal.SIGINT, before)
    assert b"devlend-test-sleeping" in _read(tmp_path / "console.log")
    # Its processes (one per guest address space besides the kernel's) were sent SIGKILL; those
    # that the run does not reap finish dying a moment later.
    deadline = time.monotonic() + 10
    while (left := _processes_with(init)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == []


def _processes_with(arg: bytes) -> list[str]:
    return [pid for pid in os.listdir("/proc") if pid.isdigit() and arg in _read(Path("/proc", pid, "cmdline"))]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def test_devlend_linux_run_runs_commands_in_a_guest(tmp_path):
    import subprocess
    import sys
    args = [sys.executable, "-m", "devlend.cli", "linux", "run", "--topology", topo_path("nvme-back-to-back.yaml"),
            "--host", "borrower", "--device", "nvme0", "--out", str(tmp_path), "--timeout", "120", "--",
            "nvme list", "exit 3"]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 3, r.stderr
    assert "devlnd modelled NVMe" in r.stdout and "$ exit 3   (exit 3)" in r.stdout, r.stdout
    assert (tmp_path / "console.log").exists()
    r = subprocess.run(args[: args.index("--")], capture_output=True, text=True)
    assert r.returncode == 2 and "no commands" in r.stderr, r.stderr
